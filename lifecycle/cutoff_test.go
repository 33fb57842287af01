package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestCutOffToolCall: a tool call that a crash or a failed write cut off
// (nothing closed it: the store still says running) is closed by the
// recovery of the next runner as an abort closes it, OpenCode's
// interrupted-tool shape: status error, "Tool execution aborted", its
// input, start and metadata (what bash had printed) marked interrupted. The
// v2 view shows the same, the log has session.next.tool.failed, and the
// continued turn sends the model what the call had printed.
func TestCutOffToolCall(t *testing.T) {
	for _, c := range []struct {
		name   string
		sqlite bool
		prompt string
		// arm, if set, readies the store before the prompt.
		arm func(st *storetest.Failing)
		// cut cuts the call off once it runs; it returns the server the
		// session runs on afterwards.
		cut       func(t *testing.T, srv *testserver.Server, st *storetest.Failing, opts testserver.Options, sid string) *testserver.Server
		input     string // the call's input
		output    string // metadata.output, "" for none
		modelSees string // the tool result of the continued turn
	}{
		{
			// A write of the running call's progress fails: the runner
			// stops and is rebuilt from what is stored (as after a
			// PostgreSQL restart).
			name:   "bash, failed write (memory)",
			prompt: `call:bash {"command":"echo started; sleep 1; echo more; sleep 3","description":"waits"} then: after`,
			arm: func(st *storetest.Failing) {
				st.FailNext(func(_ string, b *store.Batch) bool {
					for _, p := range b.Parts {
						if p.Type == opencode.PartTool && p.State != nil && p.State.Status == "running" && bytes.Contains(p.State.Metadata, []byte("more")) {
							return true
						}
					}
					return false
				})
			},
			cut: func(t *testing.T, srv *testserver.Server, st *storetest.Failing, _ testserver.Options, sid string) *testserver.Server {
				checkFor(t, 10*time.Second, "the progress write to fail", func() bool { return st.Failed() == 1 })
				return srv
			},
			input:     `{"command":"echo started; sleep 1; echo more; sleep 3","description":"waits"}`,
			output:    "started\n",
			modelSees: "started\n",
		},
		{
			// A client tool waits for its client when the server dies:
			// the store fails every write from then on, so nothing the
			// shutdown does reaches it (as a SIGKILL); the restart on the
			// same data directory recovers.
			name:   "client tool, crash (sqlite)",
			sqlite: true,
			prompt: cardPrompt,
			cut: func(t *testing.T, srv *testserver.Server, st *storetest.Failing, opts testserver.Options, sid string) *testserver.Server {
				waitingCall(t, srv.Manager, sid)
				st.SetDown(true)
				srv.Stop()
				opts.WrapStore = nil
				return testserver.Start(t, opts)
			},
			input:     `{"title":"hi"}`,
			modelSees: "Tool execution aborted",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.Directives)
			st := &storetest.Failing{}
			opts := testserver.Options{SQLite: c.sqlite, Config: stubConfig(stub.URL(), `{"bash":"allow"}`),
				WrapStore: func(s store.Store) store.Store { st.Store = s; return st }}
			if c.sqlite {
				opts.DataDir = t.TempDir()
			}
			srv := testserver.Start(t, opts)
			cl := newClient(t, srv)
			sid := cl.newSession()
			if c.arm != nil {
				c.arm(st)
			}
			in := clientInput(sid, c.prompt, opencode.Queue, showCard)
			admitOK(t, srv.Manager, in)
			var started int64
			checkFor(t, 10*time.Second, "the call to run", func() bool {
				p, ok := storedTool(t, srv, sid)
				if ok && p.State.Status == "running" && (c.output == "" || bytes.Contains(p.State.Metadata, []byte("started"))) {
					started = p.State.Time.Start
					return true
				}
				return false
			})
			srv = c.cut(t, srv, st, opts, sid)
			cl = newClient(t, srv)
			checkFor(t, 15*time.Second, "the cut-off turn to be continued and end", func() bool {
				msgs, err := srv.Manager.Messages(context.Background(), sid)
				return err == nil && len(msgs) == 3 && msgs[2].Info.Time.Completed != nil
			})

			p, _ := storedTool(t, srv, sid)
			s := p.State
			var md map[string]any
			_ = json.Unmarshal(s.Metadata, &md)
			if s.Status != "error" || s.Error != "Tool execution aborted" || !jsonEqual(s.Input, json.RawMessage(c.input)) ||
				md["interrupted"] != true || s.Time == nil || s.Time.Start != started || s.Time.End == nil || *s.Time.End < started {
				t.Errorf("the cut-off call (started %d): %+v, metadata %s", started, s, s.Metadata)
			}
			if out, _ := md["output"].(string); out != c.output {
				t.Errorf("its metadata.output %q, want %q (what it had printed)", out, c.output)
			}

			// The v2 view.
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
			cl.must("GET", "/api/session/"+sid+"/message?order=asc", nil, 200).json(t, &v2)
			found := false
			for _, m := range v2.Data {
				for _, ct := range m.Content {
					if ct.Type == "tool" && ct.ID == p.CallID {
						found = true
						if ct.State.Status != "error" || ct.State.Error.Message != "Tool execution aborted" {
							t.Errorf("v2: the cut-off call is %+v", ct.State)
						}
					}
				}
			}
			if !found {
				t.Errorf("v2: no tool content of call %s", p.CallID)
			}

			// The log: the call failed, then its step.
			evs := cl.history(sid, 100)
			failed := false
			for _, e := range eventsOf(evs, opencode.EvToolFailed) {
				var d struct {
					CallID string `json:"callID"`
				}
				_ = json.Unmarshal(e.Data, &d)
				if d.CallID == p.CallID && e.d.AssistantMessageID == p.MessageID && e.d.Error != nil && e.d.Error.Message == "Tool execution aborted" {
					failed = true
				}
			}
			if !failed {
				t.Errorf("the log has no session.next.tool.failed of call %s: %v", p.CallID, eventTypes(evs))
			}

			// The continued turn's model call got the call's result.
			reqs := modelRequests(t, stub)
			last := reqs[len(reqs)-1]
			got := ""
			for _, m := range last.Messages {
				if m.Role == "tool" && m.ToolCallID == p.CallID {
					got = m.Content
				}
			}
			if got != c.modelSees {
				t.Errorf("the continued turn sent the model %q as the call's result, want %q", got, c.modelSees)
			}
		})
	}
}

// storedTool is the session's one tool part as stored.
func storedTool(t *testing.T, srv *testserver.Server, sid string) (opencode.Part, bool) {
	t.Helper()
	msgs, err := srv.Store.ListMessages(context.Background(), sid)
	if err != nil {
		return opencode.Part{}, false
	}
	for _, mp := range msgs {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartTool && p.State != nil {
				return p, true
			}
		}
	}
	return opencode.Part{}, false
}
