package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/anthropicstub"
	"github.com/opencode-server/opencode-server/internal/responsesstub"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// The real ACP agents people use, Claude Code and Codex, pinned with the
// node 22 they need in e2e/agents (installed by .ci/run), as a session's
// external agent on our model stubs.

// agentsProject returns node 22 and the installed e2e/agents project.
func agentsProject(t *testing.T) (node22, dir string) {
	t.Helper()
	_, dir, _ = nodeProject(t, "agents", "node", "@agentclientprotocol/claude-agent-acp", "@agentclientprotocol/codex-acp")
	node22 = filepath.Join(dir, "node_modules", "node", "bin", "node")
	out, err := exec.Command(node22, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "v22.") {
		missing(t, "%s --version = %q (%v): the npm package node@22 did not install its binary (npm ci in e2e/agents)", node22, out, err)
	}
	return node22, dir
}

// The prompts the agents' stub answers: with a tool call, slowly (a
// long answer, or a 6 s one to steer into, queue behind or kill), with
// the word after echoPrompt, or with the answer.
const (
	plainPrompt = "say something please"
	toolPrompt  = "use the tool please"
	slowPrompt  = "take your time please"
	waitPrompt  = "keep going please"
	echoPrompt  = "echo this please"
)

// isPrompt reports whether text holds one of the prompts.
func isPrompt(text string) bool {
	return slices.ContainsFunc([]string{plainPrompt, toolPrompt, slowPrompt, waitPrompt, echoPrompt},
		func(p string) bool { return strings.Contains(text, p) })
}

// agentScript is the model behind an agent: a request with tools is the
// agent's turn (a tool call, then final once its result came back; a slow
// answer; else answer), one without is a side request (a title).
func agentScript(answer, final string, call func(tools []string) stubmodel.ToolCall) stubmodel.Script {
	return func(req stubmodel.Request) stubmodel.Response {
		if len(req.Tools) == 0 {
			return stubmodel.Response{Text: "Stub title"}
		}
		// The turn's prompt: the last user message with one of ours.
		prompt := -1
		for i, m := range req.Messages {
			if m.Role == "user" && isPrompt(m.Content) {
				prompt = i
			}
		}
		if prompt < 0 {
			return stubmodel.Response{Text: answer}
		}
		text := req.Messages[prompt].Content
		switch {
		case strings.Contains(text, toolPrompt) &&
			slices.ContainsFunc(req.Messages[prompt:], func(m stubmodel.Message) bool { return m.Role == "tool" }):
			return stubmodel.Response{Text: final}
		case strings.Contains(text, toolPrompt):
			var names []string
			for _, tl := range req.Tools {
				names = append(names, tl.Function.Name)
			}
			c := call(names)
			c.ID = "call_" + strconv.Itoa(req.N)
			return stubmodel.Response{ToolCalls: []stubmodel.ToolCall{c}}
		case strings.Contains(text, slowPrompt):
			return stubmodel.Response{Text: strings.Repeat("slowly ", 300), Chunks: 300, Delay: 100 * time.Millisecond}
		case strings.Contains(text, waitPrompt):
			return stubmodel.Response{Text: strings.Repeat("waiting ", waitWords), Chunks: waitWords, Delay: 100 * time.Millisecond}
		case strings.Contains(text, echoPrompt):
			// The last one: a history block before it may quote earlier ones.
			after := text[strings.LastIndex(text, echoPrompt)+len(echoPrompt):]
			word := strings.Fields(after + " ?")[0]
			return stubmodel.Response{Text: "echoed " + word}
		}
		return stubmodel.Response{Text: answer}
	}
}

// realAgent is one of the real agents, started on its model stub.
type realAgent struct {
	name string
	// start runs the stub with script and returns the agent's acp block
	// (command, args, env) and the file its tool call makes.
	start func(t *testing.T, node22, dir, project string, script stubmodel.Script) (acp map[string]any, made string)
	// call is the tool call its model asks for, among the tools it offers.
	call func(project string, tools []string) stubmodel.ToolCall
	// asks: its tool call reaches our permission ask.
	asks bool
	// steers: it advertises steering (a steer joins its running turn).
	steers bool
}

var realAgents = []realAgent{
	{name: "claude", asks: true, steers: true,
		start: func(t *testing.T, node22, dir, project string, script stubmodel.Script) (map[string]any, string) {
			stub := anthropicstub.NewServer(t, anthropicstub.FromStubmodel(script), anthropicstub.WithChunks(3),
				anthropicstub.WithDelay(20*time.Millisecond))
			// Its built-in default mode is "auto" (a model decides on each
			// tool call); in "default" a tool call that changes something asks us.
			home, config := agentHome(t, ".claude", "settings.json", `{"permissions":{"defaultMode":"default"}}`)
			return map[string]any{"command": node22,
				"args": []string{filepath.Join(dir, "node_modules", "@agentclientprotocol", "claude-agent-acp", "dist", "index.js")},
				"env": map[string]string{
					"HOME":                                     home,
					"CLAUDE_CONFIG_DIR":                        config,
					"ANTHROPIC_BASE_URL":                       strings.TrimSuffix(stub.URL(), "/v1"), // the SDK adds /v1/messages
					"ANTHROPIC_API_KEY":                        "stub-key",
					"DISABLE_AUTOUPDATER":                      "1",
					"DISABLE_TELEMETRY":                        "1",
					"DISABLE_ERROR_REPORTING":                  "1",
					"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
					// As root, IS_SANDBOX other than "1" (this machine's is "yes")
					// makes the adapter pass the CLI a bypass flag the CLI refuses.
					"IS_SANDBOX": "",
				}}, "made-by-claude.txt"
		},
		call: func(project string, tools []string) stubmodel.ToolCall {
			return stubmodel.ToolCall{Name: "Bash", Arguments: mustMarshal(map[string]string{
				"command": "touch made-by-claude.txt", "description": "Make a file"})}
		},
	},
	codexAgent("codex", false),
	codexAgent("codex-openai", true),
}

// codexAgent is Codex on the Responses stub: as a model provider of its
// own, or (builtin) as its built-in OpenAI provider at another base URL,
// which asks for a login: ACP's authenticate with the API key.
func codexAgent(name string, builtin bool) realAgent {
	return realAgent{name: name, steers: true,
		start: func(t *testing.T, node22, dir, project string, script stubmodel.Script) (map[string]any, string) {
			stub := responsesstub.NewServer(t, responsesstub.FromStubmodel(script), responsesstub.WithChunks(3),
				responsesstub.WithDelay(20*time.Millisecond))
			cfg := mustMarshal(map[string]any{"model": "gpt-stub", "model_provider": "stub",
				"model_providers": map[string]any{"stub": map[string]any{"name": "Stub", "base_url": stub.URL(),
					"wire_api": "responses", "env_key": "OPENAI_API_KEY"}}})
			if builtin {
				cfg = mustMarshal(map[string]any{"model": "gpt-stub", "openai_base_url": stub.URL()})
			}
			home, codexHome := agentHome(t, ".codex", "", "") // Codex refuses a CODEX_HOME that is not there
			return map[string]any{"command": node22,
				"args": []string{filepath.Join(dir, "node_modules", "@agentclientprotocol", "codex-acp", "dist", "index.js")},
				"env": map[string]string{
					"HOME":           home,
					"CODEX_HOME":     codexHome,
					"CODEX_CONFIG":   cfg,
					"OPENAI_API_KEY": "stub-key",
					"NO_BROWSER":     "1",
				}}, "made-by-codex.txt"
		},
		call: func(project string, tools []string) stubmodel.ToolCall {
			cmd := "echo written by the agent > made-by-codex.txt"
			switch {
			case slices.Contains(tools, "exec_command"):
				return stubmodel.ToolCall{Name: "exec_command", Arguments: mustMarshal(map[string]any{"cmd": cmd, "workdir": project})}
			case slices.Contains(tools, "shell_command"):
				return stubmodel.ToolCall{Name: "shell_command", Arguments: mustMarshal(map[string]any{"command": cmd, "workdir": project})}
			}
			return stubmodel.ToolCall{Name: "shell", Arguments: mustMarshal(map[string]any{"command": []string{"bash", "-lc", cmd}, "workdir": project})}
		},
	}
}

// agentHome makes an agent's HOME with its configuration directory sub
// (holding file with content, when file is not ""); it returns both.
func agentHome(t *testing.T, sub, file, content string) (home, config string) {
	t.Helper()
	home = t.TempDir()
	config = filepath.Join(home, sub)
	if err := os.Mkdir(config, 0o755); err != nil {
		t.Fatal(err)
	}
	if file != "" {
		if err := os.WriteFile(filepath.Join(config, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home, config
}

func mustMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// modelCalls records the requests an agent's model stub answered.
type modelCalls struct {
	mu   sync.Mutex
	reqs []stubmodel.Request
}

// record wraps script to record each request it answers.
func (c *modelCalls) record(script stubmodel.Script) stubmodel.Script {
	return func(req stubmodel.Request) stubmodel.Response {
		c.mu.Lock()
		c.reqs = append(c.reqs, req)
		c.mu.Unlock()
		return script(req)
	}
}

// since returns the agent's turn requests (with tools) from the n-th on,
// each as its messages' text, and how many requests there are in all.
func (c *modelCalls) since(n int) (texts []string, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.reqs[min(n, len(c.reqs)):] {
		if len(r.Tools) == 0 {
			continue
		}
		var b strings.Builder
		for _, m := range r.Messages {
			b.WriteString(m.Content + "\n")
		}
		texts = append(texts, b.String())
	}
	return texts, len(c.reqs)
}

// TestExternalRealAgents: Claude Code (claude-agent-acp 0.101.0) on the
// Anthropic stub and Codex (codex-acp 2.6.0) on the Responses stub as a
// session's external agent: a prompt streams the stub's answer through
// GET /session/{id}/message and /event under our msg_ IDs; the model's
// tool call runs in the agent and shows as a tool part (Claude Code's
// permission request is our permission ask, answered over HTTP); abort
// ends a turn as aborted; the agent's process is gone once the server
// stopped. A steer mid-turn joins Claude Code's running turn (its next
// model call has it) and waits for Codex's turn to end, a revoked queued
// input never reaches the model, and the agent's process killed mid-turn
// fails the turn naming the agent, the next prompt starting it again.
func TestExternalRealAgents(t *testing.T) {
	t.Parallel()
	node22, dir := agentsProject(t)
	for _, a := range realAgents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			project := t.TempDir()
			answer, final := "external answer "+randomTag(), "tool done "+randomTag()
			path, calls, made := realAgentConfig(t, a, node22, dir, project, answer, final)
			srv := startServer(t, serverOptions{config: path, dir: project})
			events := watchEvents(t, srv)
			sess := newExternalSession(t, srv)
			prompt := func(text string) { promptAgent(t, srv, sess.ID, a.name, text) }

			// A prompt: the answer streams under our IDs.
			prompt(plainPrompt)
			reply := waitReply(t, srv, sess.ID, answer, nil)
			checkStreamed(t, events, sess.ID, reply.Info.ID, answer)
			checkAgentMessageID(t, srv, sess.ID, reply.Info.ID)

			// A tool call: it shows as a tool part (its permission asked and answered).
			prompt(toolPrompt)
			asked := 0
			waitReply(t, srv, sess.ID, final, func() error {
				var perms []struct {
					ID        string `json:"id"`
					SessionID string `json:"sessionID"`
				}
				if err := srv.getJSON("/permission", &perms); err != nil {
					return err
				}
				for _, p := range perms {
					if p.SessionID != sess.ID {
						continue
					}
					asked++
					if status, body, err := srv.post("/permission/"+p.ID+"/reply", `{"reply":"once"}`); err != nil || status != 200 {
						return fmt.Errorf("reply to %s: %d %s %v", p.ID, status, body, err)
					}
				}
				return nil
			})
			t.Logf("%s asked %d permissions", a.name, asked)
			if a.asks && asked == 0 {
				t.Errorf("%s's tool call was not asked as our permission", a.name)
			}
			if _, err := os.Stat(filepath.Join(project, made)); err != nil {
				t.Errorf("the agent's tool call did not run: %v", err)
			}
			checkToolPart(t, srv, sess.ID)

			checkSteered(t, srv, events, calls, sess.ID, a)
			checkRevoked(t, srv, events, calls, sess.ID, a)
			checkKilled(t, srv, events, sess.ID, a)

			// Abort: the turn ends aborted.
			prompt(slowPrompt)
			// Its text is streaming (GET /message has it only once the part closes).
			checkFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
				for _, e := range events() {
					if e.Type == "message.part.delta" && e.Properties.SessionID == sess.ID && strings.Contains(e.Properties.Delta, "slowly") {
						return nil
					}
				}
				return fmt.Errorf("the slow answer has not started streaming\n%s", serverLog(srv))
			})
			if status, body, err := srv.post("/session/"+sess.ID+"/abort", ""); err != nil || status != 200 {
				t.Fatalf("abort: %d %s %v", status, body, err)
			}
			checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
				ms, err := srv.messages(sess.ID)
				if err != nil {
					return err
				}
				last := ms[len(ms)-1]
				if last.Info.Error == nil || last.Info.Error.Name != "MessageAbortedError" || last.Info.Time.Completed == 0 {
					return fmt.Errorf("the slow turn did not end aborted: %+v\n%s", last.Info, serverLog(srv))
				}
				return nil
			})

			checkAgentStops(t, srv)
		})
	}
}

// realAgentConfig starts a's model stub (agentScript with answer and
// final, its tool call made in project) and writes an opencode.json with
// a as the agent of its name, edits and commands asking; it returns the
// config's path, the stub's requests and the file the tool call makes.
func realAgentConfig(t *testing.T, a realAgent, node22, dir, project, answer, final string) (path string, calls *modelCalls, made string) {
	t.Helper()
	calls = &modelCalls{}
	acp, made := a.start(t, node22, dir, project, calls.record(agentScript(answer, final, func(tools []string) stubmodel.ToolCall {
		return a.call(project, tools)
	})))
	cfg := map[string]any{
		// Edits and commands ask, so the agent's request is a question to us.
		"permission": map[string]any{"edit": "ask", "bash": "ask"},
		"agent":      map[string]any{a.name: map[string]any{"description": a.name + " over ACP", "acp": acp}}}
	return writeConfig(t, cfg), calls, made
}

// newExternalSession makes a session (POST /session).
func newExternalSession(t *testing.T, srv *server) sessionInfo {
	t.Helper()
	status, body, err := srv.post("/session", "{}")
	if err != nil || status != 200 {
		t.Fatalf("POST /session: %d %s %v", status, body, err)
	}
	var sess sessionInfo
	if err := json.Unmarshal(body, &sess); err != nil {
		t.Fatal(err)
	}
	return sess
}

// promptAgent sends text to agent in session (prompt_async).
func promptAgent(t *testing.T, srv *server, session, agent, text string) {
	t.Helper()
	status, body, err := srv.post("/session/"+session+"/prompt_async",
		mustMarshal(map[string]any{"agent": agent, "parts": []any{map[string]string{"type": "text", "text": text}}}))
	if err != nil || status != 204 {
		t.Fatalf("prompt_async: %d %s %v", status, body, err)
	}
}

// waitReply waits for a completed assistant message with want in its
// text (poll runs on each round) and returns it.
func waitReply(t *testing.T, srv *server, session, want string, poll func() error) message {
	t.Helper()
	// Turns that failed before (an abort, a killed agent) are not this one.
	failed := map[string]bool{}
	if ms, err := srv.messages(session); err == nil {
		for _, m := range ms {
			failed[m.Info.ID] = m.Info.Error != nil
		}
	}
	var reply message
	checkFor(t, 3*time.Minute, 250*time.Millisecond, func() error {
		if poll != nil {
			if err := poll(); err != nil {
				return err
			}
		}
		ms, err := srv.messages(session)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Info.Role == "assistant" && m.Info.Error != nil && !failed[m.Info.ID] {
				t.Fatalf("the agent's turn failed: %+v\nserver log:\n%s", m.Info.Error, serverLog(srv))
			}
			if m.Info.Role == "assistant" && m.Info.Time.Completed != 0 && strings.Contains(m.text(), want) {
				reply = m
				return nil
			}
		}
		return fmt.Errorf("no completed assistant message with %q yet: %+v", want, ms)
	})
	if !strings.HasPrefix(reply.Info.ID, "msg_") {
		t.Fatalf("assistant message ID %q is not ours", reply.Info.ID)
	}
	for _, p := range reply.Parts {
		if p.MessageID != reply.Info.ID || !strings.HasPrefix(p.ID, "prt_") {
			t.Errorf("part %s of %s: messageID %s", p.ID, reply.Info.ID, p.MessageID)
		}
	}
	return reply
}

// checkStreamed checks /event streamed want as deltas of our message
// msgID, and that no message event of the session carried another ID.
func checkStreamed(t *testing.T, events func() []busEvent, session, msgID, want string) {
	t.Helper()
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var streamed strings.Builder
		for _, e := range events() {
			if e.Type == "message.part.delta" && e.Properties.MessageID == msgID {
				streamed.WriteString(e.Properties.Delta)
			}
			if strings.HasPrefix(e.Type, "message.") && e.Properties.SessionID == session &&
				e.Properties.MessageID != "" && !strings.HasPrefix(e.Properties.MessageID, "msg_") {
				return fmt.Errorf("event %s carries message ID %q", e.Type, e.Properties.MessageID)
			}
		}
		if !strings.Contains(streamed.String(), want) {
			return fmt.Errorf("/event deltas of %s say %q, want %q", msgID, streamed.String(), want)
		}
		return nil
	})
}

// checkAgentMessageID checks the text of our message msgID keeps the
// agent's own message ID (both agents send one) in its metadata.
func checkAgentMessageID(t *testing.T, srv *server, session, msgID string) {
	t.Helper()
	var ms []struct {
		Info  messageInfo `json:"info"`
		Parts []struct {
			Type     string `json:"type"`
			Metadata struct {
				ACP struct {
					MessageID string `json:"messageId"`
				} `json:"acp"`
			} `json:"metadata"`
		} `json:"parts"`
	}
	if err := srv.getJSON("/session/"+session+"/message", &ms); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, p := range m.Parts {
			if m.Info.ID == msgID && p.Type == "text" {
				if id := p.Metadata.ACP.MessageID; id == "" || id == msgID {
					t.Errorf("the text of %s keeps the agent's message ID %q", msgID, id)
				}
				return
			}
		}
	}
	t.Errorf("%s has no text part", msgID)
}

// checkToolPart checks the session has a completed tool part.
func checkToolPart(t *testing.T, srv *server, session string) {
	t.Helper()
	var ms []struct {
		Parts []struct {
			Type  string `json:"type"`
			Tool  string `json:"tool"`
			State struct {
				Status string `json:"status"`
				Title  string `json:"title"`
			} `json:"state"`
		} `json:"parts"`
	}
	if err := srv.getJSON("/session/"+session+"/message", &ms); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, m := range ms {
		for _, p := range m.Parts {
			if p.Type == "tool" {
				tools = append(tools, p.Tool+":"+p.State.Status+":"+p.State.Title)
				if p.State.Status == "completed" {
					t.Logf("tool parts: %q", tools)
					return
				}
			}
		}
	}
	t.Errorf("no completed tool part; tool parts: %q", tools)
}

// checkAgentStops checks the agent the server logged it started runs,
// and is gone once the server stopped.
func checkAgentStops(t *testing.T, srv *server) {
	t.Helper()
	pid := agentPID(t, srv)
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("agent %d is not running before the server stops", pid)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	// Its whole process group: Codex's app-server and Claude Code's CLI
	// are its children.
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if syscall.Kill(-pid, 0) == nil {
			return fmt.Errorf("agent %d's process group outlived the server", pid)
		}
		return nil
	})
}

// agentPID is the PID of the agent process the server logged it started last.
func agentPID(t *testing.T, srv *server) int {
	t.Helper()
	m := regexp.MustCompile(`msg="external agent started".* pid=(\d+)`).FindAllStringSubmatch(srv.stderr.String(), -1)
	if m == nil {
		t.Fatalf("the server did not log the agent's start:\n%s", srv.stderr.String())
	}
	pid, _ := strconv.Atoi(m[len(m)-1][1])
	return pid
}

// serverLog is the server's log but its request lines.
func serverLog(srv *server) string {
	var out []string
	for l := range strings.Lines(srv.stderr.String()) {
		if !strings.Contains(l, "msg=request ") || strings.Contains(l, "method=POST") {
			out = append(out, l)
		}
	}
	return tail(strings.Join(out, ""), 80)
}
