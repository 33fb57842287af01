package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestExternalOpencodeACPDoors: the real `opencode acp` (no steering)
// behind our other doors, on one session of our `opencode-server acp`
// (ACP v2, the official SDK's client): a session/prompt whose answer
// streams slowly and a session/inject (steer) sent meanwhile, which an
// agent without steering gets as the next prompt, queued: the answer is
// not cut short, the turn ends (idle) and the steer runs as a turn of
// its own, whose model call has the first turn before it. Then an
// AG-UI run on the same session picks the agent and streams its answer
// under our IDs; our ACP process started again resumes the session and
// the agent answers in its loaded session.
func TestExternalOpencodeACPDoors(t *testing.T) {
	t.Parallel()
	_, opencodeBin := binaries(t)
	aguiNodeBin, aguiProject, _ := aguiNode(t)
	project, data := t.TempDir(), t.TempDir()
	calls := &modelCalls{}
	stub := stubmodel.NewServer(t, calls.record(agentScript("doors answer "+randomTag(), "unused", nil)),
		stubmodel.WithChunks(3), stubmodel.WithDelay(20*time.Millisecond))
	path := writeConfig(t, map[string]any{"agent": map[string]any{"oc": map[string]any{
		"description": "OpenCode over ACP", "acp": opencodeACP(t, opencodeBin, stub.URL())}}})

	steerTag := randomTag()
	first, closeACP := acpAgentScript(t, path, data, project, "ACP_AGENT=oc",
		"ACP_PROMPT="+waitPrompt, "ACP_STREAMING=waiting", "ACP_INJECT="+echoPrompt+" "+steerTag)
	var r acpAgentReport
	if err := json.Unmarshal(first, &r); err != nil {
		t.Fatalf("client_v2.mjs printed no JSON report: %v\nstdout:\n%s", err, first)
	}
	prompt, inject := r.Prompt.Reply.MessageID, r.Inject.Reply.MessageID
	if !isID("msg_", prompt) || !isID("msg_", inject) || prompt == inject {
		t.Errorf("the prompt's and the inject's message IDs %q and %q, want two msg_ IDs", prompt, inject)
	}
	said := r.Prompt.AgentText + r.Inject.AgentText
	t.Logf("states %q; said %d words waiting, then %q", r.States, strings.Count(said, "waiting"), tail(said, 3))
	if n := strings.Count(said, "waiting"); n != waitWords {
		t.Errorf("the prompt's answer said %d of its %d words: an agent without steering is not cut short", n, waitWords)
	}
	if strings.Contains(said, "echoed "+steerTag) {
		t.Errorf("the steer was answered in the prompt's turn: %q (an agent without steering gets it next)", tail(said, 3))
	}
	if idles := slices.DeleteFunc(slices.Clone(r.States), func(s string) bool { return s != "idle" }); len(idles) != 1 {
		t.Errorf("state_update states %q: want the prompt's turn's idle", r.States)
	}

	// An AG-UI run on the same session, on the ACP process's port.
	aguiTag := randomTag()
	report := runAGUIAgent(t, aguiNodeBin, aguiProject, r.Port, "AGUI_TAG="+aguiTag, "AGUI_THREAD="+r.SessionID,
		"AGUI_AGENT=oc", "AGUI_PROMPT="+echoPrompt+" "+aguiTag)

	// The held steer ran before the AG-UI run's turn (its model call has
	// the steer), as a turn of its own after the prompt's.
	checkAGUIAgentRun(t, report, r.SessionID, calls, aguiTag, steerTag)
	texts, _ := calls.since(0)
	at := slices.IndexFunc(texts, func(s string) bool { return strings.Contains(s, steerTag) })
	if at < 0 || !strings.Contains(texts[at], waitPrompt) || !strings.Contains(texts[at], "waiting waiting") {
		t.Errorf("the model call with the steer (at %d of %d) lacks the first turn before it", at, len(texts))
	}
	closeACP()

	// Our ACP process again on the same data: session/resume, and a
	// prompt the agent answers in its loaded session; the held steer was
	// answered after it came.
	again := resumed(t, path, data, project, r.SessionID, calls, "opencode acp", echoPrompt+" "+steerTag, echoPrompt+" "+aguiTag)
	steered := false
	for _, m := range again.HTTPV1 {
		steered = steered || m.ID == inject && m.Role == "user"
		if steered && m.Role == "assistant" {
			if !strings.Contains(m.Text, "echoed "+steerTag) {
				t.Errorf("the message after the steer %s says %q, want its answer", inject, m.Text)
			}
			break
		}
	}
	if !steered {
		t.Errorf("GET /session/%s/message has no steer %s: %+v", r.SessionID, inject, again.HTTPV1)
	}
}
