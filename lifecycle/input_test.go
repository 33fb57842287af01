package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// slowOrDirectives streams a prompt that says "slow" in pieces a second
// apart (so it can be aborted mid-answer); every other request is run by
// the directives (tool calls).
func slowOrDirectives(req stubmodel.Request) stubmodel.Response {
	if !req.IsTitle() && strings.Contains(req.LastUserText(), "slow") {
		resp := stubmodel.Echo(req)
		resp.Chunks, resp.Delay = 4, time.Second
		return resp
	}
	return stubmodel.Directives(req)
}

// TestInputHistoryAfterRestart: what the user gave and what happened to it
// (an attached file, an aborted answer, a failed tool call) reaches the
// model on later calls the same way whether the server kept the
// conversation in memory or read it back after a restart: one session runs
// straight through, another with a restart before its last prompt, and
// the last model call of both carries the same messages.
func TestInputHistoryAfterRestart(t *testing.T) {
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "README.md"), []byte("# Demo\n\nHello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := "file://" + filepath.Join(project, "README.md")
	run := func(restart bool) []json.RawMessage {
		stub := stubmodel.NewServer(t, slowOrDirectives)
		data := t.TempDir()
		opts := testserver.Options{SQLite: true, DataDir: data, Directory: project, Config: stubConfig(stub.URL(), "")}
		srv := testserver.Start(t, opts)
		sid := newSession(t, srv.URL)
		prompt := func(srv *testserver.Server, path, body string, want int) {
			t.Helper()
			if code, b := post(t, srv.URL+"/session/"+sid+"/"+path, body); code != want {
				t.Fatalf("POST %s: %d %s", path, code, b)
			}
		}
		prompt(srv, "message", `{"parts":[{"type":"text","text":"summarize @README.md"},`+
			`{"type":"file","mime":"text/plain","filename":"README.md","url":"`+readme+`"}]}`, 200)
		prompt(srv, "message", `{"parts":[{"type":"text","text":"call:read {\"filePath\":\"missing.txt\"} then: looked"}]}`, 200)
		prompt(srv, "prompt_async", `{"parts":[{"type":"text","text":"answer slow"}]}`, 204)
		// Abort once the answer has begun: its text part is stored at the
		// first delta.
		checkFor(t, 10*time.Second, "the slow answer to begin", func() bool {
			resp, err := http.Get(srv.URL + "/session/" + sid + "/message")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var msgs []struct {
				Info  struct{ Role string }
				Parts []struct{ Type string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&msgs)
			n := len(msgs)
			return n > 0 && msgs[n-1].Info.Role == "assistant" && len(msgs[n-1].Parts) > 0 &&
				msgs[n-1].Parts[len(msgs[n-1].Parts)-1].Type == "text"
		})
		prompt(srv, "abort", `{}`, 200)
		if restart {
			srv.Stop()
			srv = testserver.Start(t, opts)
		}
		prompt(srv, "message", `{"parts":[{"type":"text","text":"and now?"}]}`, 200)
		reqs := stub.Requests()
		return reqs
	}
	straight, restarted := run(false), run(true)
	if len(straight) != len(restarted) {
		t.Fatalf("%d model calls straight through, %d with a restart", len(straight), len(restarted))
	}
	last := func(raws []json.RawMessage) []string {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raws[len(raws)-1], &req); err != nil {
			t.Fatal(err)
		}
		ids := regexp.MustCompile(`call_\d+_\d+`)
		var out []string
		for _, m := range req.Messages[1:] { // the system prompt aside
			out = append(out, ids.ReplaceAllString(string(m), "call_N"))
		}
		return out
	}
	a, b := last(straight), last(restarted)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the last call differs after a restart:\n straight  %s\n restarted %s", strings.Join(a, "\n           "), strings.Join(b, "\n           "))
	}
	// And it carries each kind of history as OpenCode sends it.
	all := strings.Join(a, "\n")
	for _, want := range []string{
		`Called the Read tool with the following input: {\"filePath\":\"` + filepath.Join(project, "README.md") + `\"}`,
		`1: # Demo`,
		`"role":"tool","content":"File not found: ` + filepath.Join(project, "missing.txt") + `"`,
		`{"role":"user","content":"answer slow"}`,
		`{"role":"assistant","content":"You said:`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the last call lacks %s:\n%s", want, all)
		}
	}
}
