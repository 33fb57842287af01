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
	"slices"
	"strings"
	"testing"
	"time"
)

// acpV2Report is the first line e2e/acp/client_v2.mjs prints, once the
// prompt and the inject reached idle (the agent still runs).
type acpV2Report struct {
	SDKVersion string `json:"sdkVersion"`
	Initialize struct {
		ProtocolVersion int `json:"protocolVersion"`
	} `json:"initialize"`
	SessionID string     `json:"sessionId"`
	Prompt    acpV2Input `json:"prompt"`
	Inject    acpV2Input `json:"inject"`
	// the user_message and agent_message_chunk updates the SDK handed over
	// (chunks joined by messageId, in order)
	UserMessages  []acpEcho `json:"userMessages"`
	AgentMessages []acpEcho `json:"agentMessages"`
	Port          int       `json:"port"`
	HTTPV1        []struct {
		ID   string `json:"id"`
		Role string `json:"role"`
		Text string `json:"text"`
	} `json:"httpV1"`
	HTTPV2 []acpHTTPM `json:"httpV2"`
	List   []string   `json:"list"`
}

// acpV2Input is a prompt or an inject: its text, its reply and the agent
// text read until idle after it.
type acpV2Input struct {
	Text  string `json:"text"`
	Reply struct {
		MessageID string `json:"messageId"`
	} `json:"reply"`
	AgentText string `json:"agentText"`
}

// acpV2End is the script's second line, after the agent exited.
type acpV2End struct {
	Exit      acpExit  `json:"exit"`
	SDKErrors []string `json:"sdkErrors"`
}

// TestACPV2 drives `opencode-server acp` over stdio in protocol v2 with
// the official client library's v2 entry point
// (@agentclientprotocol/sdk/experimental/v2, the version pinned in
// e2e/acp/package-lock.json): initialize negotiates 2, the SDK's session
// builder makes a session, a prompt answers with its msg_ message ID (as
// the SDK's draft requires), the SDK reads the streamed reply until the
// idle state_update, a session/inject sent through the SDK (queue, on the
// idle session) answers its own ID and runs, session/list lists the
// session, and the agent exits cleanly when its stdin closes; the SDK
// refuses no frame. Each input's ID is the same in its reply, its
// user_message update and both HTTP views of the session on the agent's
// own port (GET /session/{id}/message, /api/session/{id}/message), and
// each reply's agent_message_chunk ID is its assistant message's there;
// the real OpenCode TUI attached to that port shows the session's inputs
// and replies (it loads them from the same API).
func TestACPV2(t *testing.T) {
	t.Parallel()
	node, dir, want := acpNode(t)
	bin, _ := binaries(t)
	project, data, home := t.TempDir(), t.TempDir(), t.TempDir()
	trace := filepath.Join(t.TempDir(), "frames.ndjson")
	args, _ := json.Marshal([]string{"acp", "--hostname", "127.0.0.1", "--port", "0", "--store", "sqlite",
		"--data", data, "--directory", project, "--log-level", "warn", "--scripted-chunks", "5"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client_v2.mjs")
	cmd.Dir, cmd.Env = dir, acpEnv(home, bin, args, project, trace)
	cmd.WaitDelay = 5 * time.Second
	// The script keeps the agent running until its stdin closes.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdout := bufio.NewReader(stdoutPipe)
	var rest []byte
	var waitErr error
	waited := false
	// finish closes the script's stdin, reads what else it prints and waits
	// for it (once; deferred too, so a failed check leaves nothing running).
	finish := func() error {
		if !waited {
			waited = true
			_ = stdin.Close()
			rest, _ = io.ReadAll(stdout)
			waitErr = cmd.Wait()
		}
		return waitErr
	}
	defer finish()
	frames := func() string { raw, _ := os.ReadFile(trace); return tail(string(raw), 60) }
	first, err := stdout.ReadBytes('\n')
	if err != nil {
		err := finish()
		t.Fatalf("node client_v2.mjs (@agentclientprotocol/sdk %s): %v\nstdout:\n%s%s\nstderr:\n%s\nframes:\n%s", want, err, first, rest, stderr.String(), frames())
	}
	var r acpV2Report
	if err := json.Unmarshal(bytes.TrimSpace(first), &r); err != nil {
		t.Fatalf("client_v2.mjs printed no JSON report: %v\nstdout:\n%s", err, first)
	}
	defer func() {
		if t.Failed() {
			t.Logf("report: %s\nframes:\n%s", first, frames())
		}
	}()
	if r.SDKVersion != want {
		t.Errorf("SDK %s ran, %s is pinned", r.SDKVersion, want)
	}
	if r.Initialize.ProtocolVersion != 2 {
		t.Errorf("initialize answered protocol version %d, want 2", r.Initialize.ProtocolVersion)
	}
	if r.SessionID == "" || !slices.Contains(r.List, r.SessionID) {
		t.Errorf("session/list %v lacks the session %q", r.List, r.SessionID)
	}
	checkACPV2IDs(t, r)

	// The TUI on the agent's HTTP port, while the agent still runs.
	oc := newClient(t, project)
	x := newTmux(t, oc.Env)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env(1) not found: %v", err)
	}
	x.start(project, append(append([]string{envBin, "-i"}, oc.Env...),
		oc.bin, "attach", fmt.Sprintf("http://127.0.0.1:%d", r.Port), "--session", r.SessionID)...)
	checkFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		s := x.screen()
		for _, in := range []acpV2Input{r.Prompt, r.Inject} {
			reply := "You said: " + in.Text
			// The user's text in the bar the TUI draws a user message in,
			// not only in the reply that quotes it or in the session's
			// title (the first prompt's, in the sidebar).
			own := slices.ContainsFunc(strings.Split(s, "\n"), func(l string) bool {
				return strings.HasPrefix(strings.TrimSpace(l), "┃  "+in.Text)
			})
			if !own || !strings.Contains(s, reply) {
				return fmt.Errorf("the TUI does not show %q and its reply %q; screen:\n%s", in.Text, reply, s)
			}
		}
		return nil
	})

	checkACPV2End(t, finish, &rest, stderr.String, frames)
}

// checkACPV2End waits for client_v2.mjs to end once its stdin closed
// (finish, which reads the rest of its stdout into *rest) and checks its
// closing line: our ACP process exited 0 and the SDK logged no errors.
func checkACPV2End(t *testing.T, finish func() error, rest *[]byte, stderr, frames func() string) {
	t.Helper()
	if err := finish(); err != nil {
		t.Fatalf("node client_v2.mjs after stdin closed: %v\nstdout:\n%s\nstderr:\n%s\nframes:\n%s", err, *rest, stderr(), frames())
	}
	var end acpV2End
	if err := json.Unmarshal(bytes.TrimSpace(*rest), &end); err != nil {
		t.Fatalf("client_v2.mjs printed no closing JSON line: %v\nstdout:\n%s", err, *rest)
	}
	if !end.Exit.ok() {
		t.Errorf("our ACP process exit %+v, want 0 when its stdin closes", end.Exit)
	}
	if len(end.SDKErrors) > 0 {
		t.Errorf("the SDK logged errors: %v", end.SDKErrors)
	}
}

// checkACPV2IDs asserts that the prompt and the inject, and their replies,
// carry one message ID each over ACP and over both HTTP views.
func checkACPV2IDs(t *testing.T, r acpV2Report) {
	t.Helper()
	ins := []acpV2Input{r.Prompt, r.Inject}
	for i, in := range ins {
		what := [...]string{"prompt", "session/inject"}[i]
		id := in.Reply.MessageID
		if !strings.HasPrefix(id, "msg_") {
			t.Errorf("%s reply message ID %q, want msg_…", what, id)
		}
		if !strings.Contains(in.AgentText, in.Text) {
			t.Errorf("%s: reply read until idle %q, want the scripted quote of %q", what, in.AgentText, in.Text)
		}
		if i >= len(r.UserMessages) || r.UserMessages[i] != (acpEcho{MessageID: id, Text: in.Text}) {
			t.Errorf("%s: user_message updates %+v, want #%d to be %q under %s", what, r.UserMessages, i, in.Text, id)
		}
	}
	if len(r.AgentMessages) != len(ins) {
		t.Fatalf("agent_message_chunk updates under %d message IDs (%+v), want one a reply", len(r.AgentMessages), r.AgentMessages)
	}
	for i, a := range r.AgentMessages {
		if !strings.HasPrefix(a.MessageID, "msg_") || a.Text != ins[i].AgentText {
			t.Errorf("agent_message_chunk updates of reply %d: %+v, want a msg_ ID and the text read until idle %q", i, a, ins[i].AgentText)
		}
	}
	// Over HTTP: user, assistant, user, assistant under the same IDs.
	var want []string
	for i, in := range ins {
		want = append(want, in.Reply.MessageID, r.AgentMessages[i].MessageID)
	}
	var v1, v2 []string
	for i, m := range r.HTTPV1 {
		v1 = append(v1, m.ID)
		if role := [...]string{"user", "assistant"}[i%2]; m.Role != role {
			t.Errorf("GET /session/%s/message: message %d (%s) is %s, want %s", r.SessionID, i, m.ID, m.Role, role)
		}
	}
	for i, m := range r.HTTPV2 {
		v2 = append(v2, m.ID)
		if typ := [...]string{"user", "assistant"}[i%2]; m.Type != typ {
			t.Errorf("GET /api/session/%s/message: message %d (%s) is %s, want %s", r.SessionID, i, m.ID, m.Type, typ)
		}
	}
	if !slices.Equal(v1, want) {
		t.Errorf("GET /session/%s/message: message IDs %q, want %q (the inputs' and the replies' over ACP)", r.SessionID, v1, want)
	}
	if !slices.Equal(v2, want) {
		t.Errorf("GET /api/session/%s/message: message IDs %q, want %q (the inputs' and the replies' over ACP)", r.SessionID, v2, want)
	}
}
