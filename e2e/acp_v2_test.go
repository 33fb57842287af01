package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// acpV2Report is what e2e/acp/client_v2.mjs prints.
type acpV2Report struct {
	SDKVersion string `json:"sdkVersion"`
	Initialize struct {
		ProtocolVersion int `json:"protocolVersion"`
	} `json:"initialize"`
	SessionID string `json:"sessionId"`
	Prompt    struct {
		Text  string `json:"text"`
		Reply struct {
			MessageID string `json:"messageId"`
		} `json:"reply"`
		AgentText string `json:"agentText"`
	} `json:"prompt"`
	List      []string `json:"list"`
	Exit      acpExit  `json:"exit"`
	SDKErrors []string `json:"sdkErrors"`
}

// TestACPV2 drives `opencode-server acp` over stdio in protocol v2 with
// the official client library's v2 entry point
// (@agentclientprotocol/sdk/experimental/v2, the version pinned in
// e2e/acp/package-lock.json): initialize negotiates 2, the SDK's session
// builder makes a session, a prompt answers with its msg_ message ID (as
// the SDK's draft requires), the SDK reads the streamed reply until the
// idle state_update, session/list lists the session, and the agent exits
// cleanly when its stdin closes; the SDK refuses no frame.
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
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	frames := func() string { raw, _ := os.ReadFile(trace); return tail(string(raw), 60) }
	if err != nil {
		t.Fatalf("node client_v2.mjs (@agentclientprotocol/sdk %s): %v\nstderr:\n%s\nframes:\n%s", want, err, stderr.String(), frames())
	}
	var r acpV2Report
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		t.Fatalf("client_v2.mjs printed no JSON report: %v\nstdout:\n%s", err, stdout.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("report: %s\nframes:\n%s", stdout.String(), frames())
		}
	}()
	if r.SDKVersion != want {
		t.Errorf("SDK %s ran, %s is pinned", r.SDKVersion, want)
	}
	if r.Initialize.ProtocolVersion != 2 {
		t.Errorf("initialize answered protocol version %d, want 2", r.Initialize.ProtocolVersion)
	}
	if !strings.HasPrefix(r.Prompt.Reply.MessageID, "msg_") {
		t.Errorf("prompt reply message ID %q", r.Prompt.Reply.MessageID)
	}
	if !strings.Contains(r.Prompt.AgentText, r.Prompt.Text) {
		t.Errorf("reply read until idle %q, want the scripted quote of %q", r.Prompt.AgentText, r.Prompt.Text)
	}
	if r.SessionID == "" || !slices.Contains(r.List, r.SessionID) {
		t.Errorf("session/list %v lacks the session %q", r.List, r.SessionID)
	}
	if !r.Exit.ok() {
		t.Errorf("agent exit %+v, want 0 when its stdin closes", r.Exit)
	}
	if len(r.SDKErrors) > 0 {
		t.Errorf("the SDK logged errors: %v", r.SDKErrors)
	}
}
