package apitest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// integrationRef is testdata/reference/integration: the layout a recording
// ran in (layout.json) and what opencode serve answered (answers.json).
type integrationRef struct {
	Env   map[string]string          `json:"env"`
	Files map[string]json.RawMessage `json:"files"`
	Steps []struct {
		Name, Method, Path string
		Body               *string
		// Remember: the answer's first credential is {cred} from now on.
		Remember bool
	} `json:"steps"`
}

type integrationAnswer struct {
	Name, Method, Path string
	Body               *string
	Status             int
	Response           any
}

// integrationOurs are the steps where our answer is meant to differ
// (README's differences): OpenCode answers 500 for a method or attempt it
// does not have; here it is a 4xx in the v2 shape.
var integrationOurs = map[string]struct {
	status int
	tag    string
}{
	"connect key to an env-only integration": {400, "InvalidRequestError"},
	"connect key to an unknown integration":  {400, "InvalidRequestError"},
	"connect oauth, unknown method":          {400, "InvalidRequestError"},
	"connect oauth, unknown integration":     {400, "InvalidRequestError"},
	"attempt status, unknown":                {404, "NotFoundError"},
	"attempt complete, unknown":              {404, "NotFoundError"},
}

// TestIntegrationReference replays the recorded requests against our
// server in the same layout (catalog, opencode.json files, environment)
// and compares status and body, paths and credential IDs normalised:
// the integrations and their credentials exactly (without what needs
// OpenCode's cloud: OAuth methods and the Console's "opencode"
// integration), the references exactly, the agents and commands by what
// the config says (built-in prompts are in our words), the integration
// events in order. The middleware checks each answer against our document.
func TestIntegrationReference(t *testing.T) {
	refDir := "../../testdata/reference/integration"
	var layout integrationRef
	readJSON(t, filepath.Join(refDir, "layout.json"), &layout)
	var rec struct {
		Answers []integrationAnswer
		Events  []map[string]any
	}
	readJSON(t, filepath.Join(refDir, "answers.json"), &rec)

	root := t.TempDir()
	for rel, raw := range layout.Files {
		b := []byte(raw) // a JSON file as written: its keys' order is the references'
		var text string
		if json.Unmarshal(raw, &text) == nil {
			b = []byte(text)
		}
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home, project := filepath.Join(root, "home"), filepath.Join(root, "project")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
	t.Setenv("OPENCODE_CONFIG", "")
	cfg, err := config.Load(config.Paths(project)...)
	if err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: project,
		ModelsPath: "../../testdata/reference/catalog/api.json",
		AuthPath:   filepath.Join(home, ".local", "share", "opencode", "auth.json"), Env: layout.Env})
	c := newClient(t, srv.URL)
	events := listenIntegrationEvents(t, c, project)

	norm := func(b []byte) any {
		s := strings.ReplaceAll(string(b), root, "<ROOT>")
		s = credRE.ReplaceAllString(s, `"<cred>"`)
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v
	}
	cred := ""
	for i, step := range layout.Steps {
		want := rec.Answers[i]
		if want.Name != step.Name {
			t.Fatalf("answers.json is not of layout.json: step %d is %q, answer %q", i, step.Name, want.Name)
		}
		path := strings.ReplaceAll(step.Path, "{cred}", cred)
		body := ""
		if step.Body != nil {
			body = *step.Body
		}
		req := c.request(step.Method, path, body)
		req.Header.Set("x-opencode-directory", project)
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		status := want.Status
		if o, ok := integrationOurs[step.Name]; ok {
			status = o.status
		}
		if resp.StatusCode != status {
			t.Errorf("%s: %s %s: status %d, want %d: %s", step.Name, step.Method, path, resp.StatusCode, status, b)
			continue
		}
		if len(b) == 0 {
			if want.Response != nil && status < 300 {
				t.Errorf("%s: no body, want %v", step.Name, want.Response)
			}
			continue
		}
		got := norm(b)
		if step.Remember {
			cred = credIDOf(b)
		}
		switch {
		case status >= 400:
			// Our messages are our own (the field is named); the family
			// and tag are OpenCode's.
			tag := dig(want.Response, "_tag")
			if o, ok := integrationOurs[step.Name]; ok {
				tag = o.tag
			}
			if dig(got, "_tag") != tag {
				t.Errorf("%s: %s, want tag %v", step.Name, b, tag)
			}
		case step.Name == "agents v1" || step.Name == "commands v1":
			// Recorded for NOTES.md: what the v1 listing says of the same.
		case step.Name == "agents":
			compareAgents(t, got, want.Response)
		case step.Name == "commands":
			compareCommands(t, got, want.Response)
		default:
			if w := withoutCloud(want.Response); !reflect.DeepEqual(got, w) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(w)
				t.Errorf("%s: %s %s\n got %s\nwant %s", step.Name, step.Method, path, gj, wj)
			}
		}
	}
	got := events.wait(len(rec.Events))
	if !reflect.DeepEqual(got, rec.Events) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(rec.Events)
		t.Errorf("integration events\n got %s\nwant %s", gj, wj)
	}
}

var (
	credRE   = regexp.MustCompile(`"cred_[^"]*"`)
	credIDRE = regexp.MustCompile(`"(cred_[^"]*)"`)
)

func credIDOf(b []byte) string {
	if m := credIDRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return "cred_gone"
}

// withoutCloud is a recorded answer without what needs OpenCode's cloud:
// the OAuth methods and the Console's "opencode" integration.
func withoutCloud(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	strip := func(it any) any {
		im := it.(map[string]any)
		methods := []any{}
		for _, mt := range im["methods"].([]any) {
			if mt.(map[string]any)["type"] != "oauth" {
				methods = append(methods, mt)
			}
		}
		im["methods"] = methods
		return im
	}
	switch data := m["data"].(type) {
	case []any:
		list := []any{}
		for _, it := range data {
			im, ok := it.(map[string]any)
			if !ok || im["methods"] == nil {
				return v // not the integrations
			}
			if im["id"] != "opencode" {
				list = append(list, strip(it))
			}
		}
		m["data"] = list
	case map[string]any:
		if data["methods"] != nil {
			m["data"] = strip(data)
		}
	}
	return m
}

// compareAgents: the same agents (OpenCode's hidden compaction, title and
// summary agents are not listed here), each with the mode, model and
// request options the config gives it; a config agent's description and
// system as written.
func compareAgents(t *testing.T, got, want any) {
	t.Helper()
	compareListed(t, "agent", "id", got, want, func(id string, a map[string]any) map[string]any {
		fields := []string{"mode", "hidden", "model", "request"}
		if id != "build" && id != "plan" && id != "general" && id != "explore" {
			fields = append(fields, "description", "system")
		}
		out := map[string]any{}
		for _, f := range fields {
			out[f] = a[f]
		}
		return out
	})
}

// compareCommands: the same commands, a built-in one with OpenCode's
// description and subtask (its template is in our words), one of the
// config or a command file as it says.
func compareCommands(t *testing.T, got, want any) {
	t.Helper()
	compareListed(t, "command", "name", got, want, func(name string, c map[string]any) map[string]any {
		if name == "init" || name == "review" {
			return without(c, "template")
		}
		return c
	})
}

// compareListed compares two v2 listings item by item (by key), each as
// view shows it.
func compareListed(t *testing.T, what, key string, got, want any, view func(string, map[string]any) map[string]any) {
	t.Helper()
	g, w := listed(got, key), listed(want, key)
	if gk, wk := slices.Sorted(maps.Keys(g)), slices.Sorted(maps.Keys(w)); !slices.Equal(gk, wk) {
		t.Errorf("%ss: %v, want %v", what, gk, wk)
	}
	for name, wi := range w {
		if gi := g[name]; gi != nil {
			if gv, wv := view(name, gi), view(name, wi); !reflect.DeepEqual(gv, wv) {
				t.Errorf("%s %s: %v, want %v", what, name, gv, wv)
			}
		}
	}
}

// listed indexes a v2 listing's items by key, the hidden ones left out.
func listed(v any, key string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, it := range dig(v, "data").([]any) {
		if m := it.(map[string]any); m["hidden"] != true {
			out[m[key].(string)] = m
		}
	}
	return out
}

// without is m without the keys drop.
func without(m map[string]any, drop ...string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	return out
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// integrationEvents collects the integration.* events of /event.
type integrationEvents struct {
	mu   sync.Mutex
	got  []map[string]any
	more chan struct{}
}

func listenIntegrationEvents(t *testing.T, c *client, dir string) *integrationEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := c.request("GET", "/event", "").WithContext(ctx)
	req.Header.Set("x-opencode-directory", dir)
	resp, err := c.hc.Transport.RoundTrip(req) // no client timeout: the stream stays open
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ev := &integrationEvents{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	connected := make(chan struct{})
	wait := connected
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct {
				Type       string         `json:"type"`
				Properties map[string]any `json:"properties"`
			}
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			if e.Type == "server.connected" && connected != nil {
				close(connected)
				connected = nil
			}
			if strings.HasPrefix(e.Type, "integration.") {
				ev.mu.Lock()
				ev.got = append(ev.got, map[string]any{"type": e.Type, "properties": e.Properties})
				ev.mu.Unlock()
				select {
				case ev.more <- struct{}{}:
				default:
				}
			}
		}
	}()
	select {
	case <-wait:
	case <-time.After(10 * time.Second):
		t.Fatal("no server.connected on /event")
	}
	return ev
}

// wait returns the events once there are n of them (or after 10 s, what
// there is).
func (e *integrationEvents) wait(n int) []map[string]any {
	deadline := time.After(10 * time.Second)
	for {
		e.mu.Lock()
		got := slices.Clone(e.got)
		e.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-e.more:
		case <-deadline:
			return got
		}
	}
}
