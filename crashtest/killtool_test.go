package crashtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestKillDuringToolCall: the server is killed (SIGKILL) while a bash call
// runs; after the restart on the same data the call is an error part in
// OpenCode's interrupted-tool shape ("Tool execution aborted", its input,
// start and what it had printed kept, metadata.interrupted), in the v1 and
// the v2 view, and the log says session.next.tool.failed; the cut-off turn
// is continued. On SQLite and on PostgreSQL (where the restart is a new
// instance that takes the session over once the lease expires).
func TestKillDuringToolCall(t *testing.T) {
	for _, c := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"sqlite", func(*testing.T) []string { return nil }},
		{"postgres", func(t *testing.T) []string {
			pg := pgtest.Need(t)
			return []string{"--store", "postgres", "--postgres-url", pg.URL(pg.FreshDB(t)), "--lease-ttl", clusterTTL.String()}
		}},
	} {
		t.Run(c.name, func(t *testing.T) { killDuringToolCall(t, c.args(t)) })
	}
}

func killDuringToolCall(t *testing.T, storeArgs []string) {
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(2))
	cfg := stubConfig(t, root, stub.URL())
	var logs []string
	start := func() (*server, *client) {
		logPath := filepath.Join(root, fmt.Sprintf("run-%d.log", len(logs)))
		logs = append(logs, logPath)
		srv := startServer(t, dataDir, logPath, append([]string{"--config", cfg}, storeArgs...)...)
		return srv, newClient(srv.url)
	}
	defer func() {
		if t.Failed() {
			for _, l := range logs {
				t.Logf("server log:\n%s", tail(l, 25))
			}
		}
	}()

	srv, cl := start()
	sid := createSession(t, cl)
	// The sleep outlasts a slow poll; the orphaned shell ends by itself.
	input := `{"command":"echo started; sleep 10","description":"waits"}`
	if st, body, err := cl.do("POST", "/session/"+sid+"/prompt_async", mustJSON(map[string]any{"messageID": newID("msg"),
		"parts": []any{map[string]any{"type": "text", "text": "call:bash " + input + " then: after"}}})); err != nil || st != 204 {
		t.Fatalf("prompt: %d %v %s", st, err, clip(body))
	}
	var started int64
	if !poll(20*time.Second, 20*time.Millisecond, func() bool {
		p, ok := bashPart(cl, sid)
		if ok && p.State.Status == "running" && strings.Contains(p.State.Metadata.Output, "started") {
			started = p.State.Time.Start
			return true
		}
		return false
	}) {
		t.Fatal("the bash call did not run (and print) within 20 s")
	}
	srv.kill()
	cl.close()

	srv, cl = start()
	defer func() { srv.kill(); cl.close() }()
	var msgs []toolMessage
	if !poll(clusterTTL+20*time.Second, 50*time.Millisecond, func() bool {
		msgs = nil
		return cl.getJSON("/session/"+sid+"/message", &msgs) == nil && len(msgs) == 3 && msgs[2].Info.Time.Completed != nil && idle(cl, sid)
	}) {
		t.Fatalf("the cut-off turn was not continued after the restart: %d messages", len(msgs))
	}

	// v1
	p, _ := bashPart(cl, sid)
	s := p.State
	if s.Status != "error" || s.Error != "Tool execution aborted" || !s.Metadata.Interrupted || s.Metadata.Output != "started\n" ||
		s.Time.Start != started || s.Time.End == nil || *s.Time.End < started || string(s.Input) != input {
		t.Errorf("v1: the killed call (started %d) is %+v", started, s)
	}
	if msgs[1].Info.Error == nil || msgs[1].Info.Error.Name != "MessageAbortedError" {
		t.Errorf("v1: its message ended with %+v, want MessageAbortedError", msgs[1].Info.Error)
	}

	// v2
	var v2 struct {
		Data []struct {
			Content []struct {
				Type  string `json:"type"`
				ID    string `json:"id"`
				State struct {
					Status string `json:"status"`
					Error  struct {
						Message string `json:"message"`
					} `json:"error"`
				} `json:"state"`
			} `json:"content"`
		} `json:"data"`
	}
	if err := cl.getJSON("/api/session/"+sid+"/message?order=asc", &v2); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range v2.Data {
		for _, ct := range m.Content {
			if ct.Type == "tool" && ct.ID == p.CallID {
				found = true
				if ct.State.Status != "error" || ct.State.Error.Message != "Tool execution aborted" {
					t.Errorf("v2: the killed call is %+v", ct.State)
				}
			}
		}
	}
	if !found {
		t.Errorf("v2: no tool content of call %s", p.CallID)
	}

	// The log (what SSE, replay, ACP and AG-UI read).
	h := &history{}
	if _, err := cl.fetchHistory(sid, h, 100); err != nil {
		t.Fatal(err)
	}
	failed := false
	for i, e := range h.evs {
		var ev struct {
			Data struct {
				CallID string `json:"callID"`
			} `json:"data"`
		}
		if e.Type == "session.next.tool.failed" && json.Unmarshal(h.raw[i], &ev) == nil && ev.Data.CallID == p.CallID {
			failed = true
		}
	}
	if !failed {
		t.Errorf("the log has no session.next.tool.failed of call %s: %s", p.CallID, lastTypes(h, 12))
	}
}

// toolMessage is a v1 message with its tool parts as these tests read them.
type toolMessage struct {
	storedMessage
	Parts []toolPart `json:"parts"` // the outer field wins over the embedded one
}

type toolPart struct {
	Type   string `json:"type"`
	Tool   string `json:"tool"`
	CallID string `json:"callID"`
	State  struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Error    string          `json:"error"`
		Metadata struct {
			Output      string `json:"output"`
			Interrupted bool   `json:"interrupted"`
		} `json:"metadata"`
		Time struct {
			Start int64  `json:"start"`
			End   *int64 `json:"end"`
		} `json:"time"`
	} `json:"state"`
}

// bashPart is the session's bash tool part (v1).
func bashPart(cl *client, sid string) (toolPart, bool) {
	var msgs []toolMessage
	if cl.getJSON("/session/"+sid+"/message", &msgs) != nil {
		return toolPart{}, false
	}
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.Tool == "bash" {
				return p, true
			}
		}
	}
	return toolPart{}, false
}
