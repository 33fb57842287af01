package lifecycle_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// logEvent is one frame of /api/session/{id}/event.
type logEvent struct {
	Type string                     `json:"type"`
	Data map[string]json.RawMessage `json:"data"`
}

// readLog reads a session's durable log from an SSE body until stop says so.
func readLog(t *testing.T, sc *bufio.Scanner, stop func(logEvent) bool) []logEvent {
	t.Helper()
	var out []logEvent
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e logEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("frame %q: %v", line, err)
		}
		out = append(out, e)
		if stop(e) {
			return out
		}
	}
	t.Fatalf("log ended early: %v", sc.Err())
	return nil
}

// referenceLog reads a recorded /api/session/{id}/event of the real server.
func referenceLog(t *testing.T, name string) []logEvent {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "reference", "tools", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var out []logEvent
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e logEvent
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
	}
	return out
}

func dataKeys(e logEvent) string {
	ks := make([]string, 0, len(e.Data))
	for k := range e.Data {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// TestToolWireMatchesReference runs the v2-glob scenario of
// testdata/reference/tools (recorded from opencode serve 1.18.33 with the
// same stub script) and compares the durable log: the same event types in
// the same order, each with the same data keys, and the tool events'
// provider, content and structured values.
func TestToolWireMatchesReference(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(3))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# Demo\nhello\n"), 0o644)
	// A git project, as the reference's: steps carry snapshots.
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: dir})
	sid := newSession(t, srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/session/"+sid+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)

	body := `{"prompt":{"text":"call:glob {\"pattern\":\"*.md\"}\nthen: listed"}}`
	if code, b := post(t, srv.URL+"/api/session/"+sid+"/prompt", body); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	steps := 0
	got := readLog(t, sc, func(e logEvent) bool {
		if e.Type == "session.next.step.ended" {
			steps++
		}
		return steps == 2
	})
	want := referenceLog(t, "v2-glob.session-event.sse")
	// Our inbox events are an extension the README lists; OpenCode has none.
	got = slices.DeleteFunc(got, func(e logEvent) bool { return strings.HasPrefix(e.Type, "session.inbox.") })

	types := func(es []logEvent) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Type)
		}
		return out
	}
	if !slices.Equal(types(got), types(want)) {
		t.Fatalf("event types\n got %v\nwant %v", types(got), types(want))
	}
	for i := range got {
		if g, w := dataKeys(got[i]), dataKeys(want[i]); g != w {
			t.Errorf("%s data keys\n got %s\nwant %s", got[i].Type, g, w)
		}
		if strings.HasPrefix(got[i].Type, "session.next.tool.") {
			for _, k := range []string{"provider", "outputPaths", "text", "input", "name", "tool"} {
				if g, w := string(got[i].Data[k]), string(want[i].Data[k]); g != w {
					t.Errorf("%s %s = %s, want %s", got[i].Type, k, g, w)
				}
			}
		}
	}
	// content: the same text items, with the session directory in place of
	// the reference's.
	for i, e := range got {
		if e.Type != "session.next.tool.success" {
			continue
		}
		g := strings.ReplaceAll(string(e.Data["content"]), dir, "DIR")
		w := strings.ReplaceAll(string(want[i].Data["content"]), "/tmp/refcap-tools/project", "DIR")
		if g != w {
			t.Errorf("tool.success content = %s, want %s", g, w)
		}
	}
}
