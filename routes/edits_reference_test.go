package routes_test

// Conversation edits, reverts and permission replies against the real
// server's answers (testdata/reference/edits: record.py drove one opencode
// serve 1.18.33 through part edits and deletes on an idle session and on one
// whose turn streams, reverts of a tool's turn, a tool's asks replied and
// rejected over v1, and a v2 session's asks over the v2 routes). The same
// steps go to ours in the same order: each request is a template whose
// {NAME}s are what an earlier step bound from its answer (ours from ours),
// and each answer, and the /event frames of the types the step watches,
// is compared with the recorded one after both are normalised (bound
// values to their names, other IDs, snapshots and times to placeholders).
// editsOurs are the answers that differ on purpose, editsLeft the fields
// that still differ (see the report in NOTES.md).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

type editsStep struct {
	Name     string            `json:"name"`
	Do       string            `json:"do"` // http, wait, idle
	Method   string            `json:"method"`
	Path     string            `json:"path"`
	Body     *string           `json:"body"`
	Status   int               `json:"status"`
	Response json.RawMessage   `json:"response"`
	Compare  string            `json:"compare"`
	Watch    []string          `json:"watch"`
	Session  string            `json:"session"`
	Bind     map[string]string `json:"bind"`
	Events   []editsFrame      `json:"events"`
	File     map[string]string `json:"file"`
	Type     string            `json:"type"`  // wait: the event type
	Event    editsFrame        `json:"event"` // wait: the frame it bound from
}

type editsFrame struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

type editsRecording struct {
	Dir   string      `json:"dir"`
	Steps []editsStep `json:"steps"`
}

// editsOur is an answer of ours that differs on purpose: its status, and
// why (README's differences).
type editsOur struct {
	status int
	why    string
}

var editsOurs = map[string]editsOur{
	"patch_other_id":            {400, "OpenCode answers a bare {\"_tag\":\"BadRequest\"}; ours says which IDs must be the path's"},
	"patch_other_message":       {400, "the same"},
	"patch_unknown_message":     {404, "OpenCode stores the part under a message that does not exist (200); ours: MessageNotFoundError"},
	"busy_patch_user_text":      {409, "a part is not edited while its session's turn runs (OpenCode takes it, and the turn writes its own part over the edit)"},
	"busy_patch_streaming_text": {409, "the same"},
	"busy_delete_part":          {409, "the same (OpenCode deletes it, and a streaming part comes back with the next update)"},
	"revert_unknown_message":    {404, "a revert to a message that does not exist is a 404 (OpenCode answers the session unchanged)"},
	"v2_list_of_v1_ask":         {200, "one world: a tool's ask of a v1 turn is listed by the v2 routes too (OpenCode: [])"},
	"v1_list_of_v2_ask":         {200, "one world: a tool's ask of a v2 turn is listed by GET /permission too (OpenCode: [])"},
	"v1_list_of_own_ask":        {200, "one world: a client's own v2 ask is listed by GET /permission too (OpenCode: [])"},
}

// editsOurEvents are the event types ours publishes instead of OpenCode's,
// by step: a v2 turn's tool ask is a permission.asked here (one world: the
// tool asks as in every turn), where OpenCode's v2 runner publishes
// permission.v2.asked.
var editsOurEvents = map[string]map[string]string{
	"v2_asked":      {"permission.v2.asked": "permission.asked"},
	"v2_reply_once": {"permission.v2.replied": "permission.replied"},
}

// editsLeft are fields that still differ and are left out of the
// comparison until they are fixed (not intended; see NOTES.md).
var editsLeft = map[string]string{
	"project": "a v2 location's project is OpenCode's project of the directory; ours always global",
}

func loadEditsRecording(t *testing.T) editsRecording {
	var rec editsRecording
	loadReference(t, "edits/answers.json", &rec)
	return rec
}

// loadReference reads testdata/reference/name (JSON) into v.
func loadReference(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile("../testdata/reference/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

// editsScript is the recording's stub model: stubmodel.Directives, and a
// prompt with "slow:" streams its reply for ten seconds (long enough for
// the steps made while it streams; the turn is aborted after them).
func editsScript(req stubmodel.Request) stubmodel.Response {
	r := stubmodel.Directives(req)
	if strings.Contains(req.LastUserText(), "slow:") && !req.IsTitle() {
		r.Chunks, r.Delay = 200, 50*time.Millisecond
	}
	return r
}

func TestEditsReference(t *testing.T) {
	rec := loadEditsRecording(t)
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sqlite"}[sqlite], func(t *testing.T) { editsReplay(t, rec, sqlite) })
	}
}

func editsReplay(t *testing.T, rec editsRecording, sqlite bool) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	runGit(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "a.txt"), "hello\n")
	runGit(t, dir, "add", "a.txt")
	runGit(t, dir, "commit", "-qm", "init")
	stub := stubmodel.NewServer(t, editsScript, stubmodel.WithChunks(2))
	cfg := replayStubConfig(stub.URL())
	cfg.Permission = json.RawMessage(`{"edit":"ask"}`)
	c := biStart(t, testserver.Options{Config: cfg, Directory: dir, SQLite: sqlite})
	ev := editsListen(t, c.ts.URL)
	run := &editsRun{t: t, c: c, ev: ev, dir: dir, rec: rec,
		ours: map[string]string{"DIR": dir}, theirs: map[string]string{"DIR": rec.Dir}}
	run.mark = c.newSession()
	for _, st := range rec.Steps {
		switch st.Do {
		case "http":
			run.http(st)
		case "wait":
			run.wait(st)
		case "idle":
			waitFor(t, st.Name+": the session idle", func() bool {
				var status map[string]any
				r := c.must("GET", "/session/status", "", nil)
				_ = json.Unmarshal(r.body, &status)
				_, busy := status[run.subst(st.Session)]
				return !busy
			})
		default:
			t.Fatalf("%s: step %q", st.Name, st.Do)
		}
	}
}

type editsRun struct {
	t      *testing.T
	c      *biClient
	ev     *editsEvents
	dir    string
	rec    editsRecording
	mark   string
	marks  int
	since  int               // the events from the last request on (a wait's)
	ours   map[string]string // bound names: ours
	theirs map[string]string // and the recording's
}

var editsName = regexp.MustCompile(`\{([A-Z][A-Z0-9]*)\}`)

func (e *editsRun) subst(s string) string {
	return editsName.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := e.ours[m[1:len(m)-1]]
		if !ok {
			e.t.Fatalf("%s: nothing bound yet", m)
		}
		return v
	})
}

func (e *editsRun) http(st editsStep) {
	t := e.t
	path := e.subst(st.Path)
	var body []byte
	if st.Body != nil {
		b := e.subst(*st.Body)
		if st.Name == "v2_prompt" {
			// Our tools take the v1 arguments in a v2 turn too.
			b = strings.ReplaceAll(b, `{\"path\":`, `{\"filePath\":`)
		}
		body = []byte(b)
	}
	e.since = e.ev.len()
	r, err := e.c.send(st.Method, path, "application/json", body, nil)
	if err != nil {
		t.Fatalf("%s: %v", st.Name, err)
	}
	var got any
	if len(r.body) > 0 {
		got = decodeAny(t, st.Name, r.body)
	}
	var want any
	if len(st.Response) > 0 && string(st.Response) != "null" {
		want = decodeAny(t, st.Name+" (recorded)", st.Response)
	}
	var frames []editsFrame
	if len(st.Watch) > 0 {
		frames = e.stepEvents(st)
	}
	if r.status == st.Status || editsOurs[st.Name].status == r.status {
		// Bind first: a later step needs the names even when this one
		// differs.
		for name, expr := range st.Bind {
			v, err := editsDig(got, expr)
			if err != nil {
				t.Fatalf("%s: bind %s = %s: %v in %s", st.Name, name, expr, err, biClip(r.body))
			}
			e.ours[name] = fmt.Sprint(v)
			w, _ := editsDig(want, expr)
			e.theirs[name] = fmt.Sprint(w)
		}
	}
	if o, ok := editsOurs[st.Name]; ok {
		if r.status != o.status {
			t.Errorf("%s: %s %s = %d %s, want %d (%s)", st.Name, st.Method, path, r.status, biClip(r.body), o.status, o.why)
		}
		if o.status >= 400 && len(frames) > 0 {
			t.Errorf("%s: refused (%d) but published %v", st.Name, r.status, frames)
		}
		e.checkFile(st)
		return
	}
	if r.status != st.Status {
		t.Errorf("%s: %s %s = %d %s, OpenCode %d %s", st.Name, st.Method, path, r.status, biClip(r.body), st.Status, biClip(st.Response))
		return
	}
	g, w := e.norm(got, e.ours), e.norm(want, e.theirs)
	switch st.Compare {
	case "none":
		g, w = nil, nil
	case "error":
		g, w = editsErrorName(g), editsErrorName(w)
	case "messages":
		g, w = editsMessages(g), editsMessages(w)
	case "session":
		g, w = editsSession(g), editsSession(w)
	case "asks":
		g, w = editsAsks(g), editsAsks(w)
	case "exact":
	default:
		t.Fatalf("%s: compare %q", st.Name, st.Compare)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %s %s\n ours:     %s\n OpenCode: %s", st.Name, st.Method, path, mustJSON(g), mustJSON(w))
	}
	if len(st.Watch) > 0 {
		var gf, wf []any
		for _, f := range frames {
			gf = append(gf, e.frame(f, e.ours))
		}
		for _, f := range st.Events {
			if alias, ok := editsOurEvents[st.Name][f.Type]; ok {
				f.Type = alias
			}
			wf = append(wf, e.frame(f, e.theirs))
		}
		if !reflect.DeepEqual(gf, wf) {
			t.Errorf("%s: events\n ours:     %s\n OpenCode: %s", st.Name, mustJSON(gf), mustJSON(wf))
		}
	}
	e.checkFile(st)
}

func (e *editsRun) checkFile(st editsStep) {
	for name, want := range st.File {
		b, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil || string(b) != want {
			e.t.Errorf("%s: %s is %q (%v), OpenCode's %q", st.Name, name, b, err, want)
		}
	}
}

// stepEvents are the frames of the step's watched types of its session,
// published up to a marker: a title change of another session, which the
// bus delivers after everything the step published.
func (e *editsRun) stepEvents(st editsStep) []editsFrame {
	e.marks++
	title := "mark " + strconv.Itoa(e.marks)
	e.c.json("PATCH", "/session/"+e.mark, `{"title":"`+title+`"}`, http.StatusOK, nil)
	end := e.ev.waitFor(e.t, e.since, title, func(f editsFrame) bool {
		var p struct {
			Info struct{ ID, Title string }
		}
		return f.Type == "session.updated" && json.Unmarshal(f.Properties, &p) == nil && p.Info.ID == e.mark && p.Info.Title == title
	})
	watch := map[string]bool{}
	for _, w := range st.Watch {
		watch[w] = true
	}
	sid := e.subst(st.Session)
	var out []editsFrame
	for _, f := range e.ev.slice(e.since, end) {
		if watch[f.Type] && (sid == "" || editsFrameSession(f) == sid) {
			out = append(out, f)
		}
	}
	return out
}

func (e *editsRun) wait(st editsStep) {
	typ := st.Type
	if alias, ok := editsOurEvents[st.Name][typ]; ok {
		typ = alias
	}
	sid := e.subst(st.Session)
	i := e.ev.waitFor(e.t, e.since, st.Name+": "+typ, func(f editsFrame) bool {
		return f.Type == typ && editsFrameSession(f) == sid
	})
	f := e.ev.slice(i, i+1)[0]
	e.since = i + 1
	var got, want any
	_ = json.Unmarshal(mustJSONBytes(f), &got)
	_ = json.Unmarshal(mustJSONBytes(st.Event), &want)
	for name, expr := range st.Bind {
		v, err := editsDig(got, expr)
		if err != nil {
			e.t.Fatalf("%s: bind %s = %s: %v", st.Name, name, expr, err)
		}
		e.ours[name] = fmt.Sprint(v)
		w, _ := editsDig(want, expr)
		e.theirs[name] = fmt.Sprint(w)
	}
	if typ != st.Type {
		return // another event than OpenCode's (editsOurEvents)
	}
	if g, w := e.frame(f, e.ours), e.frame(st.Event, e.theirs); st.Type != "message.part.delta" && !reflect.DeepEqual(g, w) {
		e.t.Errorf("%s: %s\n ours:     %s\n OpenCode: %s", st.Name, st.Type, mustJSON(g), mustJSON(w))
	}
}

func mustJSONBytes(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// frame is an event as compared: its type and its normalised properties,
// a session as editsSession shows it, a diff by file and counts.
func (e *editsRun) frame(f editsFrame, vars map[string]string) any {
	var p any
	_ = json.Unmarshal(f.Properties, &p)
	p = e.norm(p, vars)
	m, _ := p.(map[string]any)
	switch f.Type {
	case "session.updated":
		return map[string]any{"type": f.Type, "info": editsSession(m["info"])}
	case "session.diff":
		return map[string]any{"type": f.Type, "diff": editsDiff(m["diff"])}
	case "permission.asked", "permission.v2.asked":
		return map[string]any{"type": f.Type, "properties": editsAsks(p)}
	}
	return map[string]any{"type": f.Type, "properties": p}
}

var (
	editsID   = regexp.MustCompile(`\b(ses|msg|prt|per|que|evt|call)_[0-9A-Za-z_]+`)
	editsSHA  = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
	editsTime = map[string]bool{"created": true, "updated": true, "completed": true, "start": true, "end": true, "time": true, "timeCreated": true}
)

// norm replaces the bound values by their names, other IDs by their
// prefix, snapshot hashes and times by placeholders.
func (e *editsRun) norm(v any, vars map[string]string) any {
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	// The longest value first: a directory before the paths under it.
	sort.Slice(names, func(i, j int) bool { return len(vars[names[i]]) > len(vars[names[j]]) })
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, y := range x {
				out[k] = walk(k, y)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, y := range x {
				out[i] = walk(key, y)
			}
			return out
		case string:
			for _, n := range names {
				if vars[n] != "" {
					x = strings.ReplaceAll(x, vars[n], "{"+n+"}")
				}
			}
			x = editsID.ReplaceAllString(x, "${1}_*")
			return editsSHA.ReplaceAllString(x, "<sha>")
		case float64:
			if editsTime[key] {
				return 0.0
			}
		}
		return v
	}
	return walk("", v)
}

// editsErrorName is what an error is compared by where the words are ours:
// its name or tag and its kind.
func editsErrorName(v any) any {
	m, _ := v.(map[string]any)
	out := map[string]any{"name": m["name"], "_tag": m["_tag"], "kind": m["kind"]}
	if d, ok := m["data"].(map[string]any); ok {
		out["kind"] = d["kind"]
	}
	return out
}

// editsMessages is a message list by what the edits change: each
// message's role, finish and parts (type, text, a tool's status and
// error).
func editsMessages(v any) any {
	list, _ := v.([]any)
	var out []any
	for _, x := range list {
		m, _ := x.(map[string]any)
		info, _ := m["info"].(map[string]any)
		var parts []any
		ps, _ := m["parts"].([]any)
		for _, y := range ps {
			p, _ := y.(map[string]any)
			q := map[string]any{"type": p["type"], "messageID": p["messageID"]}
			if p["type"] == "text" {
				q["text"] = p["text"]
			}
			if s, ok := p["state"].(map[string]any); ok {
				q["status"], q["error"] = s["status"], s["error"]
			}
			parts = append(parts, q)
		}
		out = append(out, map[string]any{"role": info["role"], "id": info["id"], "finish": info["finish"], "parts": parts})
	}
	return out
}

// editsSession is a session by what a revert changes: its revert (the
// snapshot and the diff by whether they are there) and its summary.
func editsSession(v any) any {
	m, _ := v.(map[string]any)
	out := map[string]any{"id": m["id"], "summary": m["summary"]}
	if r, ok := m["revert"].(map[string]any); ok {
		out["revert"] = map[string]any{"messageID": r["messageID"], "partID": r["partID"],
			"snapshot": r["snapshot"] != nil, "diff": r["diff"] != nil && r["diff"] != ""}
	}
	return out
}

// editsDiff is a session diff by file: its counts and status (ours'
// patches are git's, OpenCode's jsdiff's).
func editsDiff(v any) any {
	list, _ := v.([]any)
	out := []any{}
	for _, x := range list {
		d, _ := x.(map[string]any)
		out = append(out, map[string]any{"file": d["file"], "additions": d["additions"], "deletions": d["deletions"], "status": d["status"]})
	}
	return out
}

// editsAsks drops editsLeft's fields from an answer about asks.
func editsAsks(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, y := range x {
			if _, left := editsLeft[k]; !left {
				out[k] = editsAsks(y)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = editsAsks(y)
		}
		return out
	}
	return v
}

// editsDig follows a.b[2].c, or [key=value] for the first item with that
// value, as record.py's dig does.
func editsDig(v any, expr string) (any, error) {
	for _, tok := range regexp.MustCompile(`[^.\[\]]+|\[[^\]]*\]`).FindAllString(expr, -1) {
		if strings.HasPrefix(tok, "[") {
			inner := tok[1 : len(tok)-1]
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("%s: not a list", tok)
			}
			if k, want, ok := strings.Cut(inner, "="); ok {
				v = nil
				for _, x := range list {
					if y, err := editsDig(x, k); err == nil && fmt.Sprint(y) == want {
						v = x
						break
					}
				}
				if v == nil {
					return nil, fmt.Errorf("%s: no such item", tok)
				}
				continue
			}
			i, err := strconv.Atoi(inner)
			if err != nil || i >= len(list) {
				return nil, fmt.Errorf("%s: no such item", tok)
			}
			v = list[i]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok || m[tok] == nil {
			return nil, fmt.Errorf("%s: no such key", tok)
		}
		v = m[tok]
	}
	return v, nil
}

func editsFrameSession(f editsFrame) string {
	var p struct {
		SessionID string `json:"sessionID"`
		Info      struct {
			SessionID string `json:"sessionID"`
		} `json:"info"`
		Part struct {
			SessionID string `json:"sessionID"`
		} `json:"part"`
	}
	_ = json.Unmarshal(f.Properties, &p)
	for _, s := range []string{p.SessionID, p.Info.SessionID, p.Part.SessionID} {
		if s != "" {
			return s
		}
	}
	return ""
}

// editsEvents is our /event stream as it arrives.
type editsEvents struct {
	mu      sync.Mutex
	frames  []editsFrame
	changed chan struct{}
}

func editsListen(t *testing.T, url string) *editsEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ev := &editsEvents{changed: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			var f editsFrame
			if !ok || json.Unmarshal([]byte(line), &f) != nil {
				continue
			}
			ev.mu.Lock()
			ev.frames = append(ev.frames, f)
			ev.mu.Unlock()
			select {
			case ev.changed <- struct{}{}:
			default:
			}
		}
	}()
	// Registered after the server's: ends the stream before the server
	// stops and checks for leaks.
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ev
}

func (ev *editsEvents) len() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.frames)
}

func (ev *editsEvents) slice(from, to int) []editsFrame {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]editsFrame(nil), ev.frames[from:to]...)
}

// waitFor is the index of the first frame from from on that pred holds
// for, once it has arrived (30 s at most).
func (ev *editsEvents) waitFor(t *testing.T, from int, what string, pred func(editsFrame) bool) int {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		ev.mu.Lock()
		for i := from; i < len(ev.frames); i++ {
			if pred(ev.frames[i]) {
				ev.mu.Unlock()
				return i
			}
		}
		from = len(ev.frames)
		ev.mu.Unlock()
		select {
		case <-ev.changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
