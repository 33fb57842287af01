package routes_test

// The workspace, sync, control-plane and project-copy routes against the
// real server's answers (testdata/reference/workspace: steps.json sent by
// record.py to opencode serve 1.18.33 on the directories setup.sh builds,
// once as it starts by default and once with
// OPENCODE_EXPERIMENTAL_WORKSPACES=true). The same directories are built
// again, the same steps sent in the same order with the same file changes
// in between, and each answer compared with the recorded one, status and
// body: the work directory is <W>, each value a step captured (IDs,
// directories) its name, times <ts>, random names <name>, other workspace
// and event IDs <wrk> and <evt>. A step's "compare" says how: "error" and
// "name" compare the error's name (and kind), not its words; "ours" is an
// answer we give on purpose instead of OpenCode's (its "why" says why).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

const wsRefDir = "../testdata/reference/workspace"

type wsStep struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Body    *string           `json:"body"`
	Capture map[string]string `json:"capture"`
	Before  [][]string        `json:"before"`
	Compare string            `json:"compare"`
	Fields  []string          `json:"fields"`
	Status  int               `json:"status"`
	Why     string            `json:"why"`
	Ours    *bool             `json:"ours"`
}

type wsRecorded struct {
	Name        string          `json:"name"`
	Status      int             `json:"status"`
	ContentType string          `json:"contentType"`
	Kind        string          `json:"kind"`
	Response    json.RawMessage `json:"response"`
}

var (
	wsTimes  = regexp.MustCompile(`"(created|updated|initialized|completed|timeUsed|timestamp|time)":\s*\d+`)
	wsWrkID  = regexp.MustCompile(`\bwrk_[0-9A-Za-z]{26}\b`)
	wsEvtID  = regexp.MustCompile(`\bevt_[0-9A-Za-z]{26}\b`)
	wsVarRef = regexp.MustCompile(`\{(enc:)?([A-Za-z0-9]+)\}`)
)

type wsRun struct {
	t    *testing.T
	c    *http.Client
	url  string
	w    string
	ours map[string]string // our values of the placeholders
	ref  map[string]string // the recorded ones
}

func (v *wsRun) expand(s string) string {
	return wsVarRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := wsVarRef.FindStringSubmatch(m)
		val, ok := v.ours[sub[2]]
		if !ok {
			v.t.Fatalf("no value for %s", m)
		}
		if sub[1] != "" {
			return url.QueryEscape(val)
		}
		return val
	})
}

// norm puts placeholders for the values of vals (longest first), times,
// random names and uncaptured IDs.
func wsNorm(s string, vals map[string]string) string {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		if vals[k] != "" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return len(vals[keys[i]]) > len(vals[keys[j]]) })
	for _, k := range keys {
		s = strings.ReplaceAll(s, vals[k], "<"+k+">")
	}
	s = wsTimes.ReplaceAllString(s, `"$1":"<ts>"`)
	s = randomName.ReplaceAllString(s, "<name>")
	s = wsWrkID.ReplaceAllString(s, "<wrk>")
	return wsEvtID.ReplaceAllString(s, "<evt>")
}

func (v *wsRun) before(actions [][]string) {
	t := v.t
	for _, a := range actions {
		where := v.expand(a[1])
		if !filepath.IsAbs(where) {
			where = filepath.Join(v.w, where)
		}
		switch a[0] {
		case "write":
			if err := os.MkdirAll(filepath.Dir(where), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(where, []byte(a[2]), 0o644); err != nil {
				t.Fatal(err)
			}
		case "rm":
			if err := os.Remove(where); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unknown action %q", a[0])
		}
	}
}

func (v *wsRun) send(st wsStep) (int, http.Header, []byte) {
	v.t.Helper()
	var rd io.Reader
	if st.Body != nil {
		rd = strings.NewReader(v.expand(*st.Body))
	}
	req, err := http.NewRequest(st.Method, v.url+v.expand(st.Path), rd)
	if err != nil {
		v.t.Fatal(err)
	}
	if st.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := v.c.Do(req)
	if err != nil {
		v.t.Fatalf("%s: %v", st.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func wsDecode(t *testing.T, what string, s string) any {
	t.Helper()
	var x any
	if err := json.Unmarshal([]byte(s), &x); err != nil {
		t.Fatalf("%s: not JSON: %v: %s", what, err, s)
	}
	return x
}

// errorName is an error body's name (or _tag) and kind.
func errorName(x any) (string, string) {
	m, _ := x.(map[string]any)
	if n, ok := m["name"].(string); ok {
		d, _ := m["data"].(map[string]any)
		k, _ := d["kind"].(string)
		return n, k
	}
	n, _ := m["_tag"].(string)
	k, _ := m["kind"].(string)
	return n, k
}

func errorMessage(x any) string {
	m, _ := x.(map[string]any)
	if d, ok := m["data"].(map[string]any); ok {
		s, _ := d["message"].(string)
		return s
	}
	s, _ := m["message"].(string)
	return s
}

func sortedJSON(x any) any {
	l, ok := x.([]any)
	if !ok {
		return x
	}
	keys := make([]string, len(l))
	for i, e := range l {
		b, _ := json.Marshal(e)
		keys[i] = string(b)
	}
	sort.Strings(keys)
	return keys
}

func (v *wsRun) check(st wsStep, rec wsRecorded) {
	t := v.t
	t.Helper()
	v.before(st.Before)
	status, hdr, body := v.send(st)
	for name, key := range st.Capture {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			if s, ok := m[key].(string); ok {
				v.ours[name] = s
			}
		}
	}
	got := wsNorm(string(body), v.ours)
	want := wsNorm(string(rec.Response), v.ref)
	if st.Compare == "ours" {
		if status != st.Status {
			t.Errorf("%s: status %d, want %d (%s): %s", st.Name, status, st.Status, st.Why, body)
		}
		if n, _ := errorName(wsDecode(t, st.Name, string(body))); n == "" || errorMessage(wsDecode(t, st.Name, string(body))) == "" {
			t.Errorf("%s: not an error with a message: %s", st.Name, body)
		}
		return
	}
	if status != rec.Status {
		t.Errorf("%s: status %d, recorded %d: %s (recorded %s)", st.Name, status, rec.Status, body, rec.Response)
		return
	}
	if rec.Kind == "empty" || st.Compare == "status" {
		if rec.Kind == "empty" && len(bytes.TrimSpace(body)) != 0 {
			t.Errorf("%s: body %s, recorded none", st.Name, body)
		}
		return
	}
	if ct := hdr.Get("Content-Type"); !strings.Contains(ct, "json") {
		t.Errorf("%s: Content-Type %q", st.Name, ct)
		return
	}
	g, r := wsDecode(t, st.Name, got), wsDecode(t, st.Name+" (recorded)", want)
	switch st.Compare {
	case "error", "name":
		gn, gk := errorName(g)
		rn, rk := errorName(r)
		if gn != rn || (st.Compare == "error" && gk != rk) {
			t.Errorf("%s: error %s, recorded %s", st.Name, got, want)
		}
		if errorMessage(g) == "" {
			t.Errorf("%s: error without a message: %s", st.Name, got)
		}
		return
	case "fields":
		gm, _ := g.(map[string]any)
		rm, _ := r.(map[string]any)
		for _, f := range st.Fields {
			if !reflect.DeepEqual(gm[f], rm[f]) {
				t.Errorf("%s: %s is %v, recorded %v", st.Name, f, gm[f], rm[f])
			}
		}
		return
	case "sorted":
		g, r = sortedJSON(g), sortedJSON(r)
	case "history":
		v.checkHistory(st, g, r)
		return
	}
	if !reflect.DeepEqual(g, r) {
		t.Errorf("%s: body\n%s\nrecorded\n%s", st.Name, got, want)
	}
}

// checkHistory compares sync events: each one's envelope; a
// session.created.1's session by its ID and directory (the session shape
// is compared by the session routes' tests), the others whole.
func (v *wsRun) checkHistory(st wsStep, g, r any) {
	gl, _ := g.([]any)
	rl, _ := r.([]any)
	if len(gl) != len(rl) {
		v.t.Errorf("%s: %d events, recorded %d: %v", st.Name, len(gl), len(rl), g)
		return
	}
	for i := range gl {
		ge, _ := gl[i].(map[string]any)
		re, _ := rl[i].(map[string]any)
		for _, k := range []string{"aggregate_id", "seq", "type"} {
			if !reflect.DeepEqual(ge[k], re[k]) {
				v.t.Errorf("%s: event %d %s is %v, recorded %v", st.Name, i, k, ge[k], re[k])
			}
		}
		if id, _ := ge["id"].(string); !strings.HasPrefix(id, "evt_") && id != "<evt>" {
			v.t.Errorf("%s: event %d id %q", st.Name, i, id)
		}
		gd, _ := ge["data"].(map[string]any)
		rd, _ := re["data"].(map[string]any)
		if re["type"] != "session.created.1" {
			if !reflect.DeepEqual(gd, rd) {
				v.t.Errorf("%s: event %d data %v, recorded %v", st.Name, i, gd, rd)
			}
			continue
		}
		gi, _ := gd["info"].(map[string]any)
		ri, _ := rd["info"].(map[string]any)
		if gd["sessionID"] != rd["sessionID"] || gi["id"] != ri["id"] || gi["directory"] != ri["directory"] {
			v.t.Errorf("%s: event %d data %v, recorded %v", st.Name, i, gd, rd)
		}
	}
}

func runWorkspaceReference(t *testing.T, run string, env map[string]string) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	var steps map[string][]wsStep
	raw, err := os.ReadFile(filepath.Join(wsRefDir, "steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &steps); err != nil {
		t.Fatal(err)
	}
	var recorded struct {
		Values  map[string]any `json:"values"`
		Entries []wsRecorded   `json:"entries"`
	}
	raw, err = os.ReadFile(filepath.Join(wsRefDir, "answers-"+run+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &recorded); err != nil {
		t.Fatal(err)
	}
	w, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("XDG_DATA_HOME", filepath.Join(w, "home", "data")) // where worktrees go, as the reference's
	if out, err := exec.Command("bash", filepath.Join(wsRefDir, "setup.sh"), w).CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v: %s", err, out)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ts := testserver.Start(t, testserver.Options{Directory: w + "/project", Env: env})
	v := &wsRun{t: t, c: &http.Client{Transport: tr, Timeout: time.Minute}, url: ts.URL, w: w,
		ours: map[string]string{"W": w}, ref: map[string]string{}}
	for k, x := range recorded.Values {
		if s, ok := x.(string); ok {
			v.ref[k] = s
		}
	}
	byName := map[string]wsRecorded{}
	for _, e := range recorded.Entries {
		byName[e.Name] = e
	}
	for _, st := range steps[run] {
		rec, ok := byName[st.Name]
		if !ok {
			t.Fatalf("%s: not recorded", st.Name)
		}
		if st.Ours != nil && !*st.Ours {
			continue // recorded for NOTES.md only
		}
		v.check(st, rec)
	}
}

// TestWorkspaceReference: without OPENCODE_EXPERIMENTAL_WORKSPACES (as
// opencode serve starts by default) the workspace routes answer as the
// real server's do (no workspaces listed; a create makes the worktree and
// answers WorkspaceCreateError), and the sync, move-session and project
// copy routes work.
func TestWorkspaceReference(t *testing.T) {
	runWorkspaceReference(t, "off", nil)
}

// TestWorkspaceReferenceEnabled: with OPENCODE_EXPERIMENTAL_WORKSPACES
// the worktree workspaces are created, listed, connected, warped into
// and out of (with their changes), stolen into, registered from the
// project's worktrees and removed with their sessions.
func TestWorkspaceReferenceEnabled(t *testing.T) {
	runWorkspaceReference(t, "on", map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "true"})
}
