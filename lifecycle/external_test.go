package lifecycle_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// externalServer is a server whose agent "stub" is the test binary as an
// external ACP agent (acpstub). Registered before the server's own
// cleanup, the check runs after the server stopped: no agent process it
// started is left (by PID).
func externalServer(t *testing.T, perm string) (*testserver.Server, *client) {
	t.Helper()
	return externalServerEnv(t, perm, nil)
}

// externalServerEnv is externalServer with more of the stub's environment.
func externalServerEnv(t *testing.T, perm string, env map[string]string) (*testserver.Server, *client) {
	t.Helper()
	dir := t.TempDir()
	checkStubsGone(t, dir)
	cfg := externalConfig("")
	for k, v := range env {
		cfg.Agent["stub"].ACP.Env[k] = v
	}
	if perm != "" {
		cfg.Permission = json.RawMessage(perm)
	}
	srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: dir})
	return srv, newClient(t, srv)
}

// externalConfig is an opencode.json whose agent "stub" is acpstub, with
// caps (if not "") as the agentCapabilities it advertises.
func externalConfig(caps string) *config.File {
	env := map[string]string{acpstub.Env: "1"}
	if caps != "" {
		env[acpstub.CapsEnv] = caps
	}
	return &config.File{Agent: map[string]config.AgentConfig{"stub": {Description: "The ACP stub",
		ACP: &config.ACPConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: env}}}}
}

// checkStubsGone checks, once the test's servers stopped (registered
// before them), that no agent process started in dir is left (by PID).
func checkStubsGone(t *testing.T, dir string) {
	t.Cleanup(func() {
		for _, pid := range stubPIDs(dir) {
			if alive(pid) {
				t.Errorf("external agent %d outlived the server", pid)
			}
		}
	})
}

// stubPIDs are the PIDs of the agent processes started in dir, in order.
func stubPIDs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, acpstub.PIDFile))
	var out []int
	for _, l := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(l); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// alive reports whether a process with this PID exists (a zombie counts:
// its parent did not reap it).
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func stubPrompts(t *testing.T, dir string) []acpstub.Prompt {
	t.Helper()
	return stubRecords[acpstub.Prompt](t, filepath.Join(dir, acpstub.PromptsFile))
}

// stubRecords reads one of the stub's records, a JSON value a line.
func stubRecords[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// externalPrompt sends a blocking v1 prompt to the stub agent.
func (c *client) externalPrompt(sid, text string) v1Message {
	c.t.Helper()
	var out v1Message
	c.must("POST", "/session/"+sid+"/message", map[string]any{"agent": "stub",
		"parts": []any{map[string]any{"type": "text", "text": text}}}, 200).json(c.t, &out)
	return out
}

// rawParts reads a session's parts with their metadata and tool state.
type rawPart struct {
	ID        string          `json:"id"`
	MessageID string          `json:"messageID"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Tool      string          `json:"tool"`
	Metadata  json.RawMessage `json:"metadata"`
	State     *struct {
		Status string          `json:"status"`
		Title  string          `json:"title"`
		Output string          `json:"output"`
		Input  json.RawMessage `json:"input"`
	} `json:"state"`
}

type rawMessage struct {
	Info struct {
		ID         string    `json:"id"`
		Role       string    `json:"role"`
		Agent      string    `json:"agent"`
		ProviderID string    `json:"providerID"`
		ModelID    string    `json:"modelID"`
		Finish     string    `json:"finish"`
		Error      *namedErr `json:"error"`
	} `json:"info"`
	Parts []rawPart `json:"parts"`
}

func (c *client) rawMessages(sid string) []rawMessage {
	c.t.Helper()
	var out []rawMessage
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(c.t, &out)
	return out
}

func assistants(ms []rawMessage) []rawMessage {
	var out []rawMessage
	for _, m := range ms {
		if m.Info.Role == "assistant" {
			out = append(out, m)
		}
	}
	return out
}

// TestExternalAgentListed: an agent with an acp block is listed by GET
// /agent as a primary agent.
func TestExternalAgentListed(t *testing.T) {
	srv, c := externalServer(t, "")
	_ = srv
	var agents []struct{ Name, Mode, Description string }
	c.must("GET", "/agent", nil, 200).json(t, &agents)
	i := slices.IndexFunc(agents, func(a struct{ Name, Mode, Description string }) bool { return a.Name == "stub" })
	if i < 0 || agents[i].Mode != "primary" || agents[i].Description != "The ACP stub" {
		t.Fatalf("GET /agent: stub missing or not primary: %+v", agents)
	}
}

// TestExternalAgentMessages: the agent's chunks become our assistant
// messages: a thought is reasoning, a change of the agent's messageId
// starts a second assistant message (its ID kept in the parts'
// metadata), every live delta carries one of our msg_ IDs, and the prompt
// the agent got carries our user message's ID.
func TestExternalAgentMessages(t *testing.T) {
	srv, c := externalServer(t, "")
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	last := c.externalPrompt(sid, acpstub.Two)
	if last.Info.Finish != "stop" || last.text() != "second" {
		t.Fatalf("answer: finish %q text %q, want stop/second", last.Info.Finish, last.text())
	}
	ms := c.rawMessages(sid)
	as := assistants(ms)
	if len(as) != 2 {
		t.Fatalf("want 2 assistant messages (messageId m1 then m2), got %d: %+v", len(as), as)
	}
	want := []struct{ text, reasoning, extID string }{{"hello world", "thinking", "m1"}, {"second", "", "m2"}}
	for i, a := range as {
		if !strings.HasPrefix(a.Info.ID, "msg_") || a.Info.Agent != "stub" || a.Info.ProviderID != "acp" || a.Info.Finish != "stop" {
			t.Errorf("assistant %d: %+v", i, a.Info)
		}
		var text, reasoning string
		for _, p := range a.Parts {
			if p.MessageID != a.Info.ID {
				t.Errorf("part %s of %s says message %s", p.ID, a.Info.ID, p.MessageID)
			}
			switch p.Type {
			case "text", "reasoning":
				var md struct {
					ACP struct{ MessageID string } `json:"acp"`
				}
				_ = json.Unmarshal(p.Metadata, &md)
				if md.ACP.MessageID != want[i].extID {
					t.Errorf("assistant %d %s part metadata %s: want the agent's messageId %s", i, p.Type, p.Metadata, want[i].extID)
				}
				if p.Type == "text" {
					text += p.Text
				} else {
					reasoning += p.Text
				}
			}
		}
		if text != want[i].text || reasoning != want[i].reasoning {
			t.Errorf("assistant %d: text %q reasoning %q, want %q %q", i, text, reasoning, want[i].text, want[i].reasoning)
		}
	}
	ours := map[string]bool{as[0].Info.ID: true, as[1].Info.ID: true}
	checkFor(t, 5*time.Second, "the deltas on the bus", func() bool { return live.count("message.part.delta") >= 4 })
	for _, e := range live.events() {
		if e.Type == "message.part.delta" && !ours[e.Data.MessageID] {
			t.Errorf("delta of message %q, not one of ours %v", e.Data.MessageID, ours)
		}
	}
	user := ms[0].Info.ID
	ps := stubPrompts(t, srv.Directory)
	if len(ps) != 1 || ps[0].MessageID != user || !slices.Equal(ps[0].Texts, []string{acpstub.Two}) {
		t.Errorf("the agent got %+v, want one prompt %q with our user message ID %s in _meta", ps, acpstub.Two, user)
	}
}

// TestExternalAgentTool: the agent's tool call is a tool part (title,
// input, output); its permission request is answered by our rules (the
// default allows a read: allow_once; a config rule that denies it:
// reject_once); its fs/read_text_file reads inside the session directory
// only.
func TestExternalAgentTool(t *testing.T) {
	for _, tc := range []struct {
		name, perm, answer string
	}{
		{"allowed", "", "permission=selected/yes"},
		{"denied", `{"read":"deny"}`, "permission=selected/no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := externalServer(t, tc.perm)
			if err := os.WriteFile(filepath.Join(srv.Directory, acpstub.NotesFile), []byte("the notes\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sid := c.newSession()
			last := c.externalPrompt(sid, acpstub.Tool)
			if want := tc.answer + " notes=the notes outside=refused"; last.text() != want {
				t.Fatalf("answer %q, want %q", last.text(), want)
			}
			as := assistants(c.rawMessages(sid))
			if len(as) != 1 {
				t.Fatalf("want one assistant message, got %d", len(as))
			}
			var tool *rawPart
			for i, p := range as[0].Parts {
				if p.Type == "tool" {
					tool = &as[0].Parts[i]
				}
			}
			if tool == nil || tool.Tool != "read" || tool.State == nil || tool.State.Status != "completed" ||
				tool.State.Title != "Read notes" || tool.State.Output != "the notes\n" || !strings.Contains(string(tool.State.Input), acpstub.NotesFile) {
				t.Fatalf("tool part: %+v %+v", tool, tool.State)
			}
		})
	}
}

// TestExternalAgentCrash: the agent dying mid-turn ends the turn with an
// error naming the agent (not a hang); its process is gone; the next
// prompt starts another; deleting the session stops that one.
func TestExternalAgentCrash(t *testing.T) {
	srv, c := externalServer(t, "")
	sid := c.newSession()
	last := c.externalPrompt(sid, acpstub.Crash)
	if last.Info.Error == nil || !strings.Contains(last.Info.Error.Data["message"].(string), "external agent stub") ||
		!strings.Contains(last.Info.Error.Data["message"].(string), "exit status 3") {
		t.Fatalf("crashed turn's error: %+v, want one naming the agent and its exit", last.Info.Error)
	}
	pids := stubPIDs(srv.Directory)
	if len(pids) != 1 {
		t.Fatalf("agent PIDs %v", pids)
	}
	checkFor(t, 5*time.Second, "the crashed agent reaped", func() bool { return !alive(pids[0]) })
	if got := c.externalPrompt(sid, "again"); got.Info.Error != nil || got.text() != "echo: again" {
		t.Fatalf("prompt after the crash: %+v %q", got.Info.Error, got.text())
	}
	pids = stubPIDs(srv.Directory)
	if len(pids) != 2 || !alive(pids[1]) || srv.Manager.ExternalPID(sid) != pids[1] {
		t.Fatalf("after the crash a new agent should run: PIDs %v, running %d", pids, srv.Manager.ExternalPID(sid))
	}
	c.must("DELETE", "/session/"+sid, nil, 200)
	checkFor(t, 10*time.Second, "the deleted session's agent stopped", func() bool { return !alive(pids[1]) })
}

// TestExternalAgentAbort: abort sends session/cancel to the agent and the
// turn ends aborted; the session takes the next prompt.
func TestExternalAgentAbort(t *testing.T) {
	srv, c := externalServer(t, "")
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	c.must("POST", "/session/"+sid+"/prompt_async", map[string]any{"agent": "stub",
		"parts": []any{map[string]any{"type": "text", "text": acpstub.Wait}}}, 204)
	checkFor(t, 10*time.Second, "the agent's first words", func() bool { return live.count("message.part.delta") >= 1 })
	c.must("POST", "/session/"+sid+"/abort", nil, 200)
	c.waitIdle(sid)
	checkFor(t, 5*time.Second, "session/cancel at the agent", func() bool {
		_, err := os.Stat(filepath.Join(srv.Directory, acpstub.CancelledFile))
		return err == nil
	})
	as := assistants(c.rawMessages(sid))
	if len(as) != 1 || as[0].Info.Error == nil || as[0].Info.Error.Name != "MessageAbortedError" {
		t.Fatalf("aborted turn: %+v", as)
	}
	if got := c.externalPrompt(sid, "after"); got.Info.Error != nil || got.text() != "echo: after" {
		t.Fatalf("prompt after the abort: %+v %q", got.Info.Error, got.text())
	}
}

// TestExternalAgentWontStart: an agent whose command cannot run, or that
// fails initialize, ends the turn at once with an error naming the agent;
// the session stays usable.
func TestExternalAgentWontStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		acp  config.ACPConfig
		says string
	}{
		{"missing command", config.ACPConfig{Command: "opencode-server-no-such-agent"}, "could not start"},
		// The test binary without the stub's variable runs no test and
		// exits: initialize gets no answer.
		{"initialize fails", config.ACPConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}}, "initialize failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acp := tc.acp
			srv := testserver.Start(t, testserver.Options{Config: &config.File{Agent: map[string]config.AgentConfig{
				"stub": {ACP: &acp}}}})
			c := newClient(t, srv)
			sid := c.newSession()
			for range 2 { // and again: the next prompt tries anew
				last := c.externalPrompt(sid, "hello")
				if last.Info.Error == nil {
					t.Fatalf("the turn did not fail: %q", last.text())
				}
				msg, _ := last.Info.Error.Data["message"].(string)
				if !strings.Contains(msg, "external agent stub") || !strings.Contains(msg, tc.says) {
					t.Fatalf("turn error %+v, want one naming the agent and saying %q", last.Info.Error, tc.says)
				}
			}
			if pid := srv.Manager.ExternalPID(sid); pid != 0 {
				t.Errorf("a failed agent %d is still registered", pid)
			}
		})
	}
}

// TestExternalAgentAuthenticate: an agent whose session/new answers auth
// required is sent authenticate with its API-key method (the key is in
// its environment), and the turn runs; one with only a browser login
// fails the turn naming the agent and saying so.
func TestExternalAgentAuthenticate(t *testing.T) {
	for _, tc := range []struct {
		auth string
		says string // in the turn's error; "" if it answers
	}{
		{acpstub.AuthKey, ""},
		{acpstub.AuthBrowser, "session/new failed: Authentication required"},
	} {
		t.Run(tc.auth, func(t *testing.T) {
			srv := testserver.Start(t, testserver.Options{Config: &config.File{Agent: map[string]config.AgentConfig{
				"stub": {ACP: &config.ACPConfig{Command: os.Args[0], Args: []string{"-test.run=^$"},
					Env: map[string]string{acpstub.Env: "1", acpstub.AuthEnv: tc.auth}}}}}, Directory: t.TempDir()})
			c := newClient(t, srv)
			last := c.externalPrompt(c.newSession(), "hello")
			msg := ""
			if last.Info.Error != nil {
				msg, _ = last.Info.Error.Data["message"].(string)
			}
			switch {
			case tc.says == "" && (last.Info.Error != nil || last.text() != "echo: hello"):
				t.Fatalf("turn %+v %q, want the agent's answer after authenticate", last.Info.Error, last.text())
			case tc.says != "" && (!strings.Contains(msg, "external agent stub") || !strings.Contains(msg, tc.says)):
				t.Fatalf("turn error %q, want one naming the agent and saying %q", msg, tc.says)
			}
		})
	}
}
