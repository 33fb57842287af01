package lifecycle_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// storedAgentSession is the agent's session ID kept in our session's
// metadata (acp.<agent>.sessionId).
func (c *client) storedAgentSession(sid string) string {
	c.t.Helper()
	var s struct {
		Metadata struct {
			ACP map[string]struct {
				SessionID string `json:"sessionId"`
			} `json:"acp"`
		} `json:"metadata"`
	}
	c.must("GET", "/session/"+sid, nil, 200).json(c.t, &s)
	return s.Metadata.ACP["stub"].SessionID
}

func stubLoads(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, acpstub.LoadsFile))
	return strings.Fields(string(b))
}

// restartable is a SQLite server with the stub agent whose data survives
// a restart (start it again with the same options).
func restartable(t *testing.T, caps string) testserver.Options {
	dir := t.TempDir()
	checkStubsGone(t, dir)
	return testserver.Options{SQLite: true, DataDir: t.TempDir(), Directory: dir, Config: externalConfig(caps)}
}

// TestExternalAgentRestart: the agent's session ID is stored with ours;
// after our restart the next prompt's process loads it (session/load with
// that ID, the history it replays shown nowhere) when the agent can load
// sessions, else opens a new one, which is stored instead and whose first
// prompt carries our conversation so far.
func TestExternalAgentRestart(t *testing.T) {
	for _, tc := range []struct {
		name, caps string
		loads      bool
	}{
		{"loadSession", "", true},
		{"no loadSession", `{}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := restartable(t, tc.caps)
			srv := testserver.Start(t, opts)
			c := newClient(t, srv)
			sid := c.newSession()
			if got := c.externalPrompt(sid, "first"); got.text() != "echo: first" {
				t.Fatalf("first answer %q", got.text())
			}
			first := c.storedAgentSession(sid)
			if pids := stubPIDs(opts.Directory); len(pids) != 1 || first != "stub-"+strconv.Itoa(pids[0]) {
				t.Fatalf("stored agent session %q, want the one the agent opened (agent PIDs %v)", first, pids)
			}
			srv.Stop()

			srv = testserver.Start(t, opts)
			c = newClient(t, srv)
			if got := c.externalPrompt(sid, "again"); got.Info.Error != nil || got.text() != "echo: again" {
				t.Fatalf("answer after the restart: %+v %q", got.Info.Error, got.text())
			}
			ps := stubPrompts(t, opts.Directory)
			pids := stubPIDs(opts.Directory)
			if len(ps) != 2 || len(pids) != 2 {
				t.Fatalf("prompts %+v, agent PIDs %v: want two of each", ps, pids)
			}
			want := first // continued
			if !tc.loads {
				want = "stub-" + strconv.Itoa(pids[1])
			}
			if ps[1].SessionID != want || c.storedAgentSession(sid) != want {
				t.Errorf("after the restart the prompt went to agent session %q, %q stored; want %q", ps[1].SessionID, c.storedAgentSession(sid), want)
			}
			// A new agent session is sent our conversation so far; a loaded one has it.
			if h := ps[1].History; tc.loads != (h == "") || !tc.loads && !strings.Contains(h, "[Assistant]: echo: first") {
				t.Errorf("after the restart the prompt carried history %q (loaded: %v)", h, tc.loads)
			}
			if loads := stubLoads(opts.Directory); tc.loads != slices.Equal(loads, []string{first}) || (!tc.loads && len(loads) > 0) {
				t.Errorf("session/load calls %v (the stored session %s, loadSession %v)", loads, first, tc.loads)
			}
			for _, m := range c.rawMessages(sid) {
				for _, p := range m.Parts {
					if strings.Contains(p.Text, acpstub.Replayed) {
						t.Errorf("the history replayed by session/load shows in message %s: %q", m.Info.ID, p.Text)
					}
				}
			}
		})
	}
}

// TestExternalAgentRestartMidTurn: our server stopped (or crashed: its
// store down, nothing the shutdown writes is kept) while the agent answers
// closes the turn as interrupted, the agent's running tool call as an
// aborted one; after the restart the turn is not sent to the agent again
// (its session holds what it did) and the session is idle, taking the
// next prompt.
func TestExternalAgentRestartMidTurn(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		crash        bool
	}{
		{"shutdown", acpstub.Wait, false},
		{"crash with a tool call running", acpstub.WaitTool, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := restartable(t, "")
			st := &storetest.Failing{}
			opts.WrapStore = func(s store.Store) store.Store { st.Store = s; return st }
			srv := testserver.Start(t, opts)
			c := newClient(t, srv)
			sid := c.newSession()
			live := recordLive(t, srv, sid)
			c.must("POST", "/session/"+sid+"/prompt_async", map[string]any{"agent": "stub",
				"parts": []any{map[string]any{"type": "text", "text": tc.script}}}, 204)
			checkFor(t, 10*time.Second, "the agent's first words stored", func() bool {
				return live.count("message.part.delta") >= 1 && (!tc.crash || storedRunning(t, srv, sid))
			})
			st.SetDown(tc.crash)
			srv.Stop()

			opts.WrapStore = nil
			srv = testserver.Start(t, opts)
			c = newClient(t, srv)
			c.waitIdle(sid)
			as := assistants(c.rawMessages(sid))
			if len(as) != 1 || as[0].Info.Error == nil || as[0].Info.Error.Name != "MessageAbortedError" ||
				!strings.HasPrefix(as[0].Info.Error.Data["message"].(string), "Interrupted by server") {
				t.Fatalf("the cut-off turn: %+v, want one assistant message interrupted by the server", as)
			}
			if tc.crash {
				i := slices.IndexFunc(as[0].Parts, func(p rawPart) bool { return p.Type == "tool" })
				if i < 0 || as[0].Parts[i].Tool != "execute" || as[0].Parts[i].State.Status != "error" {
					t.Errorf("the agent's running call after the crash: %+v, want an error", as[0].Parts)
				}
			}
			if got := c.externalPrompt(sid, "after"); got.Info.Error != nil || got.text() != "echo: after" {
				t.Fatalf("prompt after the restart: %+v %q", got.Info.Error, got.text())
			}
			var texts []string
			for _, p := range stubPrompts(t, opts.Directory) {
				texts = append(texts, p.Texts...)
			}
			if !slices.Equal(texts, []string{tc.script, "after"}) {
				t.Errorf("the agent got prompts %q, want the cut-off one once, then the next", texts)
			}
		})
	}
}

// storedRunning reports whether the session's stored tool call runs.
func storedRunning(t *testing.T, srv *testserver.Server, sid string) bool {
	p, ok := storedTool(t, srv, sid)
	return ok && p.State.Status == "running"
}

// TestExternalAgentUpdates: the agent's plan is the session's todos (a
// completed todowrite call, todo.updated, GET /todo), its usage_update
// the assistant message's tokens and cost, its session_info_update the
// session's title.
func TestExternalAgentUpdates(t *testing.T) {
	for _, tc := range []struct {
		script string
		check  func(t *testing.T, c *client, sid string, live *liveRecorder, last rawMessage)
	}{
		{acpstub.Plan, func(t *testing.T, c *client, sid string, live *liveRecorder, last rawMessage) {
			var todos []struct{ Content, Status, Priority string }
			c.must("GET", "/session/"+sid+"/todo", nil, 200).json(t, &todos)
			if len(todos) != 2 || todos[0].Content != "read the code" || todos[1].Status != "in_progress" || todos[1].Priority != "medium" {
				t.Errorf("GET /todo: %+v, want the agent's plan", todos)
			}
			i := slices.IndexFunc(last.Parts, func(p rawPart) bool { return p.Type == "tool" })
			if i < 0 || last.Parts[i].Tool != "todowrite" || last.Parts[i].State.Status != "completed" ||
				last.Parts[i].State.Title != "1 todos" || !strings.Contains(string(last.Parts[i].State.Input), "write the test") {
				t.Errorf("the plan's part: %+v", last.Parts)
			}
			checkFor(t, 5*time.Second, "todo.updated", func() bool { return live.count("todo.updated") == 1 })
		}},
		{acpstub.Usage, func(t *testing.T, c *client, sid string, live *liveRecorder, last rawMessage) {
			var m struct {
				Info struct {
					Cost   float64
					Tokens struct{ Input, Output int64 }
				} `json:"info"`
			}
			c.must("GET", "/session/"+sid+"/message/"+last.Info.ID, nil, 200).json(t, &m)
			// The context the agent reported, its output estimated from
			// the text ("counted": 2 tokens).
			if tk := m.Info.Tokens; tk.Input != acpstub.UsageUsed-2 || tk.Output != 2 || m.Info.Cost != acpstub.UsageCost {
				t.Errorf("assistant tokens %+v cost %v, want the agent's %d in context (output 2) and %v", tk, m.Info.Cost, acpstub.UsageUsed, acpstub.UsageCost)
			}
		}},
		{acpstub.Title, func(t *testing.T, c *client, sid string, live *liveRecorder, last rawMessage) {
			var s struct{ Title string }
			c.must("GET", "/session/"+sid, nil, 200).json(t, &s)
			if s.Title != acpstub.TitleText {
				t.Errorf("session title %q, want the agent's %q", s.Title, acpstub.TitleText)
			}
		}},
	} {
		t.Run(tc.script, func(t *testing.T) {
			srv, c := externalServer(t, "")
			sid := c.newSession()
			live := recordLive(t, srv, sid)
			if got := c.externalPrompt(sid, tc.script); got.Info.Error != nil {
				t.Fatalf("turn failed: %+v", got.Info.Error)
			}
			as := assistants(c.rawMessages(sid))
			if len(as) != 1 {
				t.Fatalf("want one assistant message, got %d", len(as))
			}
			tc.check(t, c, sid, live, as[0])
		})
	}
}

// TestExternalAgentInput: a user message's @file is a resource link, or
// an embedded resource when the agent takes embedded context; a pasted
// image is an image block when it takes images, else a text saying it was
// left out; our synthetic texts (the file read for our model) are not
// sent.
func TestExternalAgentInput(t *testing.T) {
	for _, tc := range []struct {
		name, caps string
		want       []string // each block: its type, then what identifies it
	}{
		{"links", `{}`, []string{"text files", "resource_link notes.txt", "text [dot.png (image/png) left out: the agent does not take it]"}},
		{"embedded and images", `{"promptCapabilities":{"embeddedContext":true,"image":true}}`,
			[]string{"text files", "resource the notes\n", "image image/png"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			checkStubsGone(t, dir)
			srv := testserver.Start(t, testserver.Options{Config: externalConfig(tc.caps), Directory: dir})
			c := newClient(t, srv)
			notes := filepath.Join(dir, acpstub.NotesFile)
			if err := os.WriteFile(notes, []byte("the notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sid := c.newSession()
			c.must("POST", "/session/"+sid+"/message", map[string]any{"agent": "stub", "parts": []any{
				map[string]any{"type": "text", "text": "files"},
				map[string]any{"type": "file", "mime": "text/plain", "filename": acpstub.NotesFile, "url": "file://" + notes},
				map[string]any{"type": "file", "mime": "image/png", "filename": "dot.png", "url": "data:image/png;base64,iVBORw0KGgo="},
			}}, 200)
			ps := stubPrompts(t, dir)
			if len(ps) != 1 {
				t.Fatalf("prompts %+v", ps)
			}
			var got []string
			for _, b := range ps[0].Blocks {
				switch b.Type {
				case "text":
					got = append(got, "text "+b.Text)
				case "resource_link":
					if b.URI != "file://"+notes {
						t.Errorf("link to %q, want %q", b.URI, "file://"+notes)
					}
					got = append(got, "resource_link "+b.Name)
				case "resource":
					got = append(got, "resource "+b.Resource.Text)
				case "image":
					got = append(got, "image "+b.MimeType)
				default:
					got = append(got, b.Type)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("the agent got blocks %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExternalAgentCommands: the commands the agent lists
// (available_commands_update) are in GET /command for its directory,
// with the agent; running one sends "/name arguments" to that agent.
func TestExternalAgentCommands(t *testing.T) {
	_, c := externalServer(t, "")
	sid := c.newSession()
	c.externalPrompt(sid, "hello") // starts the agent
	var cmds []struct{ Name, Agent, Description string }
	c.must("GET", "/command", nil, 200).json(t, &cmds)
	i := slices.IndexFunc(cmds, func(x struct{ Name, Agent, Description string }) bool { return x.Name == acpstub.Command })
	if i < 0 || cmds[i].Agent != "stub" || cmds[i].Description != "The stub's command" {
		t.Fatalf("GET /command: the agent's %s missing or not its: %+v", acpstub.Command, cmds)
	}
	var out v1Message
	c.must("POST", "/session/"+sid+"/command", map[string]any{"command": acpstub.Command, "arguments": "a b"}, 200).json(t, &out)
	if want := "echo: /" + acpstub.Command + " a b"; out.text() != want {
		t.Errorf("the command's answer %q, want %q", out.text(), want)
	}
}
