package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real agents (realAgents) behind our other doors: our server
// restarted on the same data, our ACP v2 door and our AG-UI door.

// TestExternalRealAgentsRestart: with each real agent, a prompt, then our
// server stopped (the agent's process with it) and started again on the
// same data, then a prompt: the new agent process continues the agent's
// session (session/load of the stored agent session, logged loaded=true),
// and the agent's model call for the second prompt carries the first turn
// once (the agent remembered it; our history block would have been a
// second copy). Then our server stopped while the agent's answer streams:
// the turn ends aborted, and after the next start the agent's model call
// carries the cut prompt once.
func TestExternalRealAgentsRestart(t *testing.T) {
	t.Parallel()
	node22, dir := agentsProject(t)
	for _, a := range realAgents {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			project := t.TempDir()
			path, calls, _ := realAgentConfig(t, a, node22, dir, project, "restart answer "+randomTag(), "unused")
			opts := serverOptions{config: path, data: t.TempDir(), dir: project, extra: []string{"--shutdown-grace", "1s"}}
			srv := startServer(t, opts)
			sess := newExternalSession(t, srv)
			firstTag := randomTag()
			first, firstAnswer := echoPrompt+" "+firstTag, "echoed "+firstTag
			promptAgent(t, srv, sess.ID, a.name, first)
			waitReply(t, srv, sess.ID, firstAnswer, nil)
			m := regexp.MustCompile(`msg="external agent started".* agentSession=(\S+)`).FindStringSubmatch(srv.stderr.String())
			if m == nil {
				t.Fatalf("the server did not log the agent's session:\n%s", serverLog(srv))
			}
			agentSession := m[1]
			checkAgentStops(t, srv)

			srv = startServer(t, opts)
			_, before := calls.since(0)
			tag := randomTag()
			promptAgent(t, srv, sess.ID, a.name, echoPrompt+" "+tag)
			waitReply(t, srv, sess.ID, "echoed "+tag, nil)
			if !strings.Contains(srv.stderr.String(), "agentSession="+agentSession+" loaded=true") {
				t.Errorf("after the restart %s did not load its session %s:\n%s", a.name, agentSession, serverLog(srv))
			}
			texts, _ := calls.since(before)
			i := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, tag) })
			if i < 0 {
				t.Fatalf("no model call of %s for the second prompt (%d calls since the restart)", a.name, len(texts))
			}
			for _, s := range []string{first, firstAnswer} {
				if n := strings.Count(texts[i], s); n != 1 {
					t.Errorf("%s's model call for the second prompt carries %q %d times, want once:\n%s", a.name, s, n, texts[i])
				}
			}
			if strings.Contains(texts[i], "<conversation-so-far>") {
				t.Errorf("%s loaded its session, yet was sent our history block:\n%s", a.name, texts[i])
			}

			// Stopped mid-turn (a grace of 1 s: the turn is cut, not waited
			// for): the turn ends aborted, and after the next start the
			// agent's session goes on with the cut prompt in it, once.
			events := watchEvents(t, srv)
			promptAgent(t, srv, sess.ID, a.name, slowPrompt)
			checkFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
				for _, e := range events() {
					if e.Type == "message.part.delta" && e.Properties.SessionID == sess.ID && strings.Contains(e.Properties.Delta, "slowly") {
						return nil
					}
				}
				return fmt.Errorf("the slow answer has not started streaming\n%s", serverLog(srv))
			})
			if err := srv.stop(); err != nil {
				t.Fatal(err)
			}
			srv = startServer(t, opts)
			ms, err := srv.messages(sess.ID)
			if err != nil {
				t.Fatal(err)
			}
			if last := ms[len(ms)-1].Info; last.Role != "assistant" || last.Error == nil || last.Error.Name != "MessageAbortedError" || last.Time.Completed == 0 {
				t.Errorf("the turn cut by the shutdown: %+v, want it ended aborted", last)
			}
			_, before = calls.since(0)
			third := randomTag()
			promptAgent(t, srv, sess.ID, a.name, echoPrompt+" "+third)
			waitReply(t, srv, sess.ID, "echoed "+third, nil)
			texts, _ = calls.since(before)
			i = slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, third) })
			if i < 0 {
				t.Fatalf("no model call of %s for the prompt after the second restart", a.name)
			}
			for _, s := range []string{first, slowPrompt} {
				if n := strings.Count(texts[i], s); n != 1 {
					t.Errorf("%s's model call after the second restart carries %q %d times, want once:\n%s", a.name, s, n, texts[i])
				}
			}
		})
	}
}

// acpAgentReport is the first line e2e/acp/client_v2.mjs prints with
// ACP_AGENT: the prompt, the steer injected while it ran, and the session.
type acpAgentReport struct {
	acpV2Report
	States []string `json:"states"`
}

// TestExternalRealAgentsDoors: with each real agent, one session of our
// `opencode-server acp` (ACP v2, driven by the official SDK's v2 client,
// e2e/acp/client_v2.mjs) whose mode is the agent: a session/prompt whose
// answer streams slowly, and a session/inject (steer) sent while it
// streams is delivered into the agent's running turn: the turn's text,
// read until its one idle, ends with the answer to the steer, cut short
// for it, and the agent's model call that has the steer follows the
// prompt's in the same conversation. Then an AG-UI run (@ag-ui/client,
// e2e/agui/client.mjs) on the same session, on the same process's HTTP
// port, picks the agent with forwardedProps.agent: its answer streams
// under our IDs, and the agent's model call has the steer (the same
// agent session, continued); an AG-UI steer (forwardedProps.delivery
// steer) posted while the next answer streams joins that turn. Then our
// ACP process started again on the same data: session/resume, and a
// prompt the agent answers in its loaded session.
func TestExternalRealAgentsDoors(t *testing.T) {
	t.Parallel()
	node22, dir := agentsProject(t)
	aguiNodeBin, aguiProject, _ := aguiNode(t)
	for _, a := range realAgents {
		if a.name == "codex-openai" {
			continue // codex again; only its provider differs
		}
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			project, data := t.TempDir(), t.TempDir()
			path, calls, _ := realAgentConfig(t, a, node22, dir, project, "doors answer "+randomTag(), "unused")
			steerTag := randomTag()
			first, closeACP := acpAgentScript(t, path, data, project, "ACP_AGENT="+a.name,
				"ACP_PROMPT="+waitPrompt, "ACP_STREAMING=waiting", "ACP_INJECT="+echoPrompt+" "+steerTag)
			var r acpAgentReport
			if err := json.Unmarshal(first, &r); err != nil {
				t.Fatalf("client_v2.mjs printed no JSON report: %v\nstdout:\n%s", err, first)
			}
			checkACPSteered(t, r, calls, a, steerTag)

			// An AG-UI run on the same session, on the ACP process's port.
			aguiTag, aguiSteerTag := randomTag(), randomTag()
			report := runAGUIAgent(t, aguiNodeBin, aguiProject, r.Port, "AGUI_TAG="+aguiTag,
				"AGUI_THREAD="+r.SessionID, "AGUI_AGENT="+a.name, "AGUI_PROMPT="+echoPrompt+" "+aguiTag,
				"AGUI_SLOW="+waitPrompt, "AGUI_STREAMING=waiting", "AGUI_STEER="+echoPrompt+" "+aguiSteerTag)
			checkAGUIAgentRun(t, report, r.SessionID, calls, aguiTag, steerTag)
			checkAGUIAgentSteer(t, report, r.SessionID, calls, a, aguiSteerTag)
			closeACP()

			// Our ACP process again on the same data: session/resume, and a
			// prompt the agent answers in its loaded session (its model
			// call has the earlier turns once).
			resumed(t, path, data, project, r.SessionID, calls, a.name,
				echoPrompt+" "+steerTag, echoPrompt+" "+aguiTag, echoPrompt+" "+aguiSteerTag)
		})
	}
}

// resumed runs client_v2.mjs again on the same data: it resumes session
// (session/resume) and prompts it once; the agent answers in its loaded
// session: its model call for the prompt carries each of once, exactly
// once, and no history block of ours. It returns the client's report.
func resumed(t *testing.T, path, data, project, session string, calls *modelCalls, agent string, once ...string) acpAgentReport {
	t.Helper()
	_, before := calls.since(0)
	tag := randomTag()
	first, closeACP := acpAgentScript(t, path, data, project, "ACP_RESUME="+session, "ACP_PROMPT="+echoPrompt+" "+tag)
	defer closeACP()
	var again acpAgentReport
	if err := json.Unmarshal(first, &again); err != nil {
		t.Fatalf("client_v2.mjs printed no JSON report: %v\nstdout:\n%s", err, first)
	}
	if !strings.Contains(again.Prompt.AgentText, "echoed "+tag) {
		t.Errorf("the resumed session's prompt read until idle %q, want %q", again.Prompt.AgentText, "echoed "+tag)
	}
	texts, _ := calls.since(before)
	i := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, tag) })
	if i < 0 {
		t.Fatalf("no model call of %s for the resumed session's prompt", agent)
	}
	for _, s := range once {
		if n := strings.Count(texts[i], s); n != 1 {
			t.Errorf("%s's model call after our ACP process restarted carries %q %d times, want once:\n%s", agent, s, n, texts[i])
		}
	}
	if strings.Contains(texts[i], "<conversation-so-far>") {
		t.Errorf("%s was sent our history block: it did not load its session:\n%s", agent, texts[i])
	}
	return again
}

// acpAgentScript runs e2e/acp/client_v2.mjs (env: its ACP_ variables)
// over our `opencode-server acp` on config, data and project, and returns
// the report it prints first. close closes its stdin and checks our ACP
// process exited 0, the SDK logged no errors and the external agent's
// process group ended with it (once; it runs when the test ends too).
func acpAgentScript(t *testing.T, config, data, project string, env ...string) (report []byte, close func()) {
	t.Helper()
	node, acpDir, _ := acpNode(t)
	bin, _ := binaries(t)
	trace := filepath.Join(t.TempDir(), "frames.ndjson")
	args, _ := json.Marshal([]string{"acp", "--hostname", "127.0.0.1", "--port", "0", "--store", "sqlite",
		"--data", data, "--directory", project, "--log-level", "info", "--config", config})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	cmd := exec.CommandContext(ctx, node, "client_v2.mjs")
	cmd.Dir = acpDir
	cmd.Env = append(append(acpEnv(t.TempDir(), bin, args, project, trace), env...), "ACP_TIMEOUT_MS=120000")
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout := bufio.NewReader(stdoutPipe)
	frames := func() string { raw, _ := os.ReadFile(trace); return tail(string(raw), 80) }
	var rest []byte
	var waitErr error
	waited := false
	finish := func() error {
		if !waited {
			waited = true
			_ = stdin.Close()
			rest, _ = io.ReadAll(stdout)
			waitErr = cmd.Wait()
			cancel()
		}
		return waitErr
	}
	t.Cleanup(func() { _ = finish() })
	first, err := stdout.ReadBytes('\n')
	if err != nil {
		err := finish()
		t.Fatalf("node client_v2.mjs: %v\nstdout:\n%s%s\nstderr:\n%s\nframes:\n%s", err, first, rest, stderr.String(), frames())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client_v2.mjs report: %s\nframes:\n%s", first, frames())
		}
	})
	return bytes.TrimSpace(first), func() {
		t.Helper()
		if waited {
			return
		}
		checkACPV2End(t, finish, &rest, stderr.String, frames)
		// The agent's process group ended with our ACP process.
		raw, _ := os.ReadFile(trace)
		m := regexp.MustCompile(`msg=\\"external agent started\\".* pid=(\d+)`).FindAllStringSubmatch(string(raw), -1)
		if m == nil {
			t.Fatalf("our ACP process did not log the agent's start; frames:\n%s", frames())
		}
		pid, _ := strconv.Atoi(m[len(m)-1][1])
		checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			if syscall.Kill(-pid, 0) == nil {
				return fmt.Errorf("agent %d's process group outlived our ACP process", pid)
			}
			return nil
		})
	}
}

// checkACPSteered asserts the ACP v2 run of client_v2.mjs with ACP_AGENT:
// the steer (inject) joined the agent's running turn.
func checkACPSteered(t *testing.T, r acpAgentReport, calls *modelCalls, a realAgent, steerTag string) {
	t.Helper()
	if r.Initialize.ProtocolVersion != 2 {
		t.Errorf("initialize answered protocol version %d, want 2", r.Initialize.ProtocolVersion)
	}
	prompt, inject := r.Prompt.Reply.MessageID, r.Inject.Reply.MessageID
	if !isID("msg_", prompt) || !isID("msg_", inject) || prompt == inject {
		t.Errorf("the prompt's and the inject's message IDs %q and %q, want two msg_ IDs", prompt, inject)
	}
	want := []acpEcho{{MessageID: prompt, Text: r.Prompt.Text}, {MessageID: inject, Text: r.Inject.Text}}
	if !slices.Equal(r.UserMessages, want) {
		t.Errorf("user_message updates %+v, want %+v", r.UserMessages, want)
	}
	// One turn: it went idle once, with the steer answered before.
	if idles := slices.DeleteFunc(slices.Clone(r.States), func(s string) bool { return s != "idle" }); len(idles) != 1 {
		t.Errorf("state_update states %q: want the one turn's idle", r.States)
	}
	said := r.Prompt.AgentText + r.Inject.AgentText
	t.Logf("%s: states %q, the turn said %d words waiting, then %q", a.name, r.States, strings.Count(said, "waiting"), tail(said, 1))
	if !strings.HasSuffix(strings.TrimSpace(said), "echoed "+steerTag) {
		t.Errorf("the turn read until idle says %q, want it to end with the answer to the steer %q", tail(said, 3), "echoed "+steerTag)
	}
	if n := strings.Count(said, "waiting"); n == 0 || n >= waitWords {
		t.Errorf("%s: the prompt's answer said %d of its %d words, want the steer delivered while it streamed", a.name, n, waitWords)
	}
	texts, _ := calls.since(0)
	at := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, steerTag) })
	prior := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, waitPrompt) })
	if at < 0 || prior < 0 || prior >= at || !strings.Contains(texts[at], waitPrompt) {
		t.Errorf("%s's model calls (%d): the prompt's at %d, the steer's at %d, want the steer in a later call of the prompt's conversation",
			a.name, len(texts), prior, at)
	}
	// Over HTTP: the steer's user message, then the answer to it.
	steered, answered := false, false
	for _, m := range r.HTTPV1 {
		steered = steered || m.ID == inject && m.Role == "user"
		answered = answered || steered && m.Role == "assistant" && strings.Contains(m.Text, "echoed "+steerTag)
	}
	if !answered {
		t.Errorf("GET /session/%s/message: %+v, want the steer %s followed by its answer", r.SessionID, r.HTTPV1, inject)
	}
}

// checkAGUIAgentRun asserts the AG-UI run of client.mjs with AGUI_AGENT:
// the agent's answer streamed under our IDs, and its model call had the
// session's earlier turn (the steer tagged steerTag).
func checkAGUIAgentRun(t *testing.T, r aguiReport, session string, calls *modelCalls, tag, steerTag string) {
	t.Helper()
	if r.Fatal != "" {
		t.Fatalf("agui/client.mjs stopped: %s", r.Fatal)
	}
	run, ok := r.Runs["agent"]
	if !ok {
		t.Fatalf("no run in the AG-UI report")
	}
	checkAGUIStream(t, "agent", run, session)
	aguiSuccess(t, "agent", run)
	texts, ids := aguiText(run)
	var streamed strings.Builder
	for _, id := range ids {
		streamed.WriteString(texts[id])
	}
	if !strings.Contains(streamed.String(), "echoed "+tag) {
		t.Errorf("the AG-UI run streamed %q, want the agent's %q", streamed.String(), "echoed "+tag)
	}
	t.Logf("AG-UI run: %d events, streamed %q", len(run.Events), streamed.String())
	all, _ := calls.since(0)
	i := slices.IndexFunc(all, func(s string) bool { return strings.Contains(s, tag) })
	if i < 0 || !strings.Contains(all[i], steerTag) {
		t.Errorf("the agent's model call for the AG-UI prompt (at %d of %d) lacks the session's earlier steer %s", i, len(all), steerTag)
	}
}

// checkAGUIAgentSteer asserts the AG-UI steer of client.mjs with
// AGUI_SLOW: posted while the agent's slow answer streamed, it joined the
// running turn: the slow run streams the answer cut short and then the
// steer's, the steer's run is the slow one's child, and the agent's model
// call with the steer follows the slow prompt's in its conversation.
func checkAGUIAgentSteer(t *testing.T, r aguiReport, session string, calls *modelCalls, a realAgent, steerTag string) {
	t.Helper()
	if r.SteerWaitError != "" {
		t.Errorf("AG-UI steer: %s", r.SteerWaitError)
	}
	slow, steer := r.Runs["slow"], r.Runs["steer"]
	checkAGUIStream(t, "slow", slow, session)
	checkAGUIStream(t, "steer", steer, session)
	aguiSuccess(t, "slow", slow)
	aguiSuccess(t, "steer", steer)
	if len(steer.Events) == 0 || steer.Events[0].ParentRunID != slow.Request.Body.RunID {
		t.Errorf("AG-UI steer: not a child of the running run %s: %+v", slow.Request.Body.RunID, steer.Events)
	}
	answer := "echoed " + steerTag
	said := aguiAllText(slow)
	t.Logf("AG-UI steer: the slow run said %d words waiting, then %q", strings.Count(said, "waiting"), tail(said, 1))
	if n := strings.Count(said, "waiting"); n == 0 || n >= waitWords || !strings.Contains(said, answer) {
		t.Errorf("%s: the slow run streamed %d of the %d words waiting and %q, want the answer cut short for the steer and then %q",
			a.name, n, waitWords, tail(said, 1), answer)
	}
	if !strings.Contains(aguiAllText(steer), answer) {
		t.Errorf("the steer's run streamed %q, want %q", aguiAllText(steer), answer)
	}
	texts, _ := calls.since(0)
	at := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, steerTag) })
	if at < 0 || strings.Count(texts[at], waitPrompt) < 2 {
		t.Errorf("%s's model call with the AG-UI steer (at %d of %d) does not follow the slow prompt's in its conversation", a.name, at, len(texts))
	}
}

// runAGUIAgent runs e2e/agui/client.mjs (env: its AGUI_ variables) against
// our server on port and returns its report.
func runAGUIAgent(t *testing.T, nodeBin, project string, port int, env ...string) aguiReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	acmd := exec.CommandContext(ctx, nodeBin, "client.mjs")
	acmd.Dir = project
	acmd.Env = append(append(os.Environ(), fmt.Sprintf("AGUI_URL=http://127.0.0.1:%d", port), "AGUI_TIMEOUT_MS=120000"), env...)
	acmd.WaitDelay = 5 * time.Second
	var aguiErr syncBuffer
	acmd.Stderr = &aguiErr
	out, err := acmd.Output()
	if err != nil {
		t.Fatalf("node agui/client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, aguiErr.String())
	}
	var line struct {
		Report aguiReport `json:"report"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &line); err != nil {
		t.Fatalf("agui/client.mjs report: %v\n%s", err, out)
	}
	return line.Report
}
