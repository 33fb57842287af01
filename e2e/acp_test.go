package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// acpDir is the Node project (relative to this package) that drives
// `opencode-server acp` over stdio with the official ACP client library,
// @agentclientprotocol/sdk, pinned to one exact version in its package.json
// and package-lock.json: e2e/acp/client.mjs.
const acpDir = "acp"

// acpScriptedChunks is --scripted-chunks for the agent: a reply streams in
// that many agent_message_chunk updates (fewer when it is short).
const acpScriptedChunks = 20

// acpReport is what e2e/acp/client.mjs prints: its observations of two
// agent processes on the same --data, one after the other.
type acpReport struct {
	SDKVersion      string `json:"sdkVersion"`
	ProtocolVersion int    `json:"protocolVersion"`
	Initialize      struct {
		ProtocolVersion   int   `json:"protocolVersion"`
		LoadSession       *bool `json:"loadSession"`
		SteeringSupported *bool `json:"steeringSupported"`
	} `json:"initialize"`
	SessionID string `json:"sessionId"`
	Port      int    `json:"port"`
	Prompt    struct {
		Text              string    `json:"text"`
		StopReason        string    `json:"stopReason"`
		MessageID         string    `json:"messageId"`
		UserEchoes        []acpEcho `json:"userEchoes"`
		AgentChunks       int       `json:"agentChunks"`
		AgentMessageIDs   []string  `json:"agentMessageIds"`
		AgentText         string    `json:"agentText"`
		UpdatesAfterReply int       `json:"updatesAfterReply"`
	} `json:"prompt"`
	Steer struct {
		PromptText         string     `json:"promptText"`
		Text               string     `json:"text"`
		Outcome            string     `json:"outcome"`
		MessageID          string     `json:"messageId"`
		PromptMessageID    string     `json:"promptMessageId"`
		PromptStopReason   string     `json:"promptStopReason"`
		UserEchoes         []acpEcho  `json:"userEchoes"`
		AgentTextAfterEcho string     `json:"agentTextAfterEcho"`
		UpdatesAfterReply  int        `json:"updatesAfterReply"`
		HTTP               []acpHTTPM `json:"http"`
	} `json:"steer"`
	IdleSteer struct {
		Text           string         `json:"text"`
		Reply          map[string]any `json:"reply"`
		UpdatesAfter   int            `json:"updatesAfter"`
		MessagesBefore int            `json:"messagesBefore"`
		MessagesAfter  int            `json:"messagesAfter"`
		TextInHistory  bool           `json:"textInHistory"`
	} `json:"idleSteer"`
	Cancel struct {
		Text              string    `json:"text"`
		StopReason        string    `json:"stopReason"`
		MessageID         string    `json:"messageId"`
		ReplyMs           int       `json:"replyMs"`
		AgentChunks       int       `json:"agentChunks"`
		UserEchoes        []acpEcho `json:"userEchoes"`
		UpdatesAfterReply int       `json:"updatesAfterReply"`
	} `json:"cancel"`
	Run1 struct {
		HTTP            []acpHTTPM        `json:"http"`
		UserMessageIDs  []string          `json:"userMessageIds"`
		AgentMessageIDs []string          `json:"agentMessageIds"`
		AgentTexts      map[string]string `json:"agentTexts"`
		UpdateKinds     []string          `json:"updateKinds"`
		PermissionAsks  int               `json:"permissionAsks"`
		Exit            acpExit           `json:"exit"`
	} `json:"run1"`
	Load struct {
		ReplayedBeforeReply int               `json:"replayedBeforeReply"`
		UpdatesAfterReply   int               `json:"updatesAfterReply"`
		UserMessageIDs      []string          `json:"userMessageIds"`
		UserTexts           []string          `json:"userTexts"`
		AgentMessageIDs     []string          `json:"agentMessageIds"`
		AgentTexts          map[string]string `json:"agentTexts"`
		SDKUserMessageIDs   []string          `json:"sdkUserMessageIds"`
		Exit                acpExit           `json:"exit"`
	} `json:"load"`
	SDKErrors []string `json:"sdkErrors"`
}

type acpEcho struct {
	MessageID string `json:"messageId"`
	Text      string `json:"text"`
}

// acpHTTPM is a message of GET /api/session/{id}/message (v2 shape).
type acpHTTPM struct {
	ID   string  `json:"id"`
	Type string  `json:"type"`
	Text *string `json:"text"`
}

type acpExit struct {
	Code   *int    `json:"code"`
	Signal *string `json:"signal"`
}

func (e acpExit) ok() bool { return e.Code != nil && *e.Code == 0 && e.Signal == nil }

// TestACP drives `opencode-server acp` over stdio with the official ACP
// TypeScript client library (@agentclientprotocol/sdk, the version pinned in
// e2e/acp/package-lock.json): the handshake advertises steering; a prompt
// streams agent_message_chunk updates and ends with end_turn; a steer sent
// mid-turn is injected, echoed as a user_message_chunk under the message ID
// its reply names, and stored under that ID (GET /api/session/{id}/message
// on the same process's HTTP API); a steer with no running turn admits
// nothing (promptRequired); session/cancel ends a running prompt with
// cancelled; and a second process on the same --data replays the session on
// session/load with the same message IDs, before its reply.
func TestACP(t *testing.T) {
	t.Parallel()
	node, dir, want := acpNode(t)
	bin, _ := binaries(t)

	project, data, home := t.TempDir(), t.TempDir(), t.TempDir()
	trace := filepath.Join(t.TempDir(), "frames.ndjson")
	args, _ := json.Marshal([]string{"acp", "--hostname", "127.0.0.1", "--port", "0", "--store", "sqlite",
		"--data", data, "--directory", project, "--log-level", "warn",
		"--scripted-chunks", fmt.Sprint(acpScriptedChunks), "--scripted-delay", "40ms"})
	env := acpEnv(home, bin, args, project, trace)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("node client.mjs (@agentclientprotocol/sdk %s): %v", want, time.Since(start).Round(time.Millisecond))
	frames := func() string {
		raw, _ := os.ReadFile(trace)
		return tail(string(raw), 80)
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after 2m: %w", err)
	}
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstderr:\n%s\nstdout:\n%s\nlast frames (in: agent→client, out: client→agent):\n%s",
			err, stderr.String(), stdout.String(), frames())
	}
	var r acpReport
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		t.Fatalf("client.mjs printed no JSON report: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	defer func() {
		if t.Failed() {
			pretty, _ := json.MarshalIndent(r, "", "  ")
			t.Logf("report:\n%s\nclient stderr:\n%s\nlast frames (in: agent→client, out: client→agent):\n%s",
				pretty, stderr.String(), frames())
		}
	}()
	checkACP(t, r, want)
}

// acpNode makes e2e/acp ready (nodeProject): Node, the project's
// directory and the pinned SDK version.
func acpNode(t *testing.T) (node, dir, want string) {
	t.Helper()
	node, dir, pinned := nodeProject(t, acpDir, "@agentclientprotocol/sdk")
	return node, dir, pinned["@agentclientprotocol/sdk"]
}

// acpEnv is the environment of a client script: ours less the server's,
// HOME's, XDG's and ACP's variables, and the script's ACP_ ones.
func acpEnv(home, bin string, args []byte, project, trace string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENCODE_SERVER_") && !strings.HasPrefix(kv, "HOME=") &&
			!strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "ACP_") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "ACP_SERVER="+bin, "ACP_ARGS="+string(args), "ACP_CWD="+project, "ACP_TRACE="+trace)
}

// checkACP asserts what the issue requires of the report.
func checkACP(t *testing.T, r acpReport, sdkVersion string) {
	t.Helper()
	isMsg := func(id string) bool { return strings.HasPrefix(id, "msg_") && len(id) > len("msg_") }
	if r.SDKVersion != sdkVersion {
		t.Errorf("the script ran @agentclientprotocol/sdk %q, package-lock.json pins %q", r.SDKVersion, sdkVersion)
	}
	if len(r.SDKErrors) > 0 {
		t.Errorf("the SDK reported errors (frames it rejected or could not handle):\n%s", strings.Join(r.SDKErrors, "\n"))
	}

	// 1. handshake
	in := r.Initialize
	if in.ProtocolVersion != 1 || in.ProtocolVersion != r.ProtocolVersion {
		t.Errorf("initialize: protocolVersion %d, want 1 (the SDK's %d)", in.ProtocolVersion, r.ProtocolVersion)
	}
	if in.LoadSession == nil || !*in.LoadSession {
		t.Errorf("initialize: agentCapabilities.loadSession = %v, want true", in.LoadSession)
	}
	if in.SteeringSupported == nil || !*in.SteeringSupported {
		t.Errorf("initialize: _meta.steering.supported = %v, want true", in.SteeringSupported)
	}
	if !strings.HasPrefix(r.SessionID, "ses_") {
		t.Errorf("session/new: sessionId %q, want ses_…", r.SessionID)
	}

	// 2. a streamed prompt
	p := r.Prompt
	if p.StopReason != "end_turn" {
		t.Errorf("prompt: stopReason %q, want end_turn", p.StopReason)
	}
	if !isMsg(p.MessageID) {
		t.Errorf("prompt: reply _meta.messageId %q, want msg_…", p.MessageID)
	}
	if len(p.UserEchoes) != 1 || p.UserEchoes[0] != (acpEcho{MessageID: p.MessageID, Text: p.Text}) {
		t.Errorf("prompt: user_message_chunk updates %+v, want one echo of %q under %s", p.UserEchoes, p.Text, p.MessageID)
	}
	if p.AgentChunks < 5 {
		t.Errorf("prompt: %d agent_message_chunk updates, want several (--scripted-chunks %d)", p.AgentChunks, acpScriptedChunks)
	}
	if !strings.Contains(p.AgentText, p.Text) {
		t.Errorf("prompt: streamed agent text %q does not quote the prompt %q", p.AgentText, p.Text)
	}
	if len(p.AgentMessageIDs) != 1 || !isMsg(p.AgentMessageIDs[0]) || p.AgentMessageIDs[0] == p.MessageID {
		t.Errorf("prompt: agent_message_chunk messageIds %q, want one assistant msg_ ID", p.AgentMessageIDs)
	}
	if p.UpdatesAfterReply != 0 {
		t.Errorf("prompt: %d session/update frames after the prompt's reply, want its turn's updates all before it", p.UpdatesAfterReply)
	}

	// 3. a steer mid-turn
	s := r.Steer
	if s.Outcome != "injected" {
		t.Errorf("mid-turn _session/steering: outcome %q, want injected", s.Outcome)
	}
	if !isMsg(s.MessageID) || s.MessageID == s.PromptMessageID {
		t.Errorf("mid-turn _session/steering: _meta.messageId %q, want a msg_ ID of its own (the prompt's is %q)", s.MessageID, s.PromptMessageID)
	}
	if s.PromptStopReason != "end_turn" {
		t.Errorf("steered prompt: stopReason %q, want end_turn", s.PromptStopReason)
	}
	wantEchoes := []acpEcho{{MessageID: s.PromptMessageID, Text: s.PromptText},
		{MessageID: s.MessageID, Text: s.Text}}
	if !slices.Equal(s.UserEchoes, wantEchoes) {
		t.Errorf("steered turn: user_message_chunk updates %+v, want %+v (the prompt, then the steer under its reply's messageId)", s.UserEchoes, wantEchoes)
	}
	if !strings.Contains(s.AgentTextAfterEcho, s.Text) {
		t.Errorf("steered turn: agent text after the steer's echo %q does not answer the steer %q", s.AgentTextAfterEcho, s.Text)
	}
	if s.UpdatesAfterReply != 0 {
		t.Errorf("steered prompt: %d session/update frames after its reply, want the steer's updates before it", s.UpdatesAfterReply)
	}
	if i := slices.IndexFunc(s.HTTP, func(m acpHTTPM) bool { return m.ID == s.MessageID }); i < 0 {
		t.Errorf("GET /api/session/%s/message: no message %s (the steer); messages: %+v", r.SessionID, s.MessageID, s.HTTP)
	} else if m := s.HTTP[i]; m.Type != "user" || m.Text == nil || *m.Text != s.Text {
		t.Errorf("GET /api/session/%s/message: the steer %s is %s %v, want a user message %q", r.SessionID, s.MessageID, m.Type, m.Text, s.Text)
	}

	// 4. a steer with no running turn
	id := r.IdleSteer
	if id.Reply["outcome"] != "promptRequired" || id.Reply["reason"] != "noRunningTurn" {
		t.Errorf("idle _session/steering: reply %v, want outcome promptRequired, reason noRunningTurn", id.Reply)
	}
	if meta, _ := id.Reply["_meta"].(map[string]any); meta["messageId"] != nil {
		t.Errorf("idle _session/steering: reply names message %v, but it admits nothing", meta["messageId"])
	}
	if id.UpdatesAfter != 0 || id.MessagesAfter != id.MessagesBefore || id.TextInHistory {
		t.Errorf("idle _session/steering admitted something: %d updates after it, messages %d → %d, text in history: %v",
			id.UpdatesAfter, id.MessagesBefore, id.MessagesAfter, id.TextInHistory)
	}

	// 5. cancel
	c := r.Cancel
	if c.StopReason != "cancelled" {
		t.Errorf("cancelled prompt: stopReason %q, want cancelled", c.StopReason)
	}
	if !isMsg(c.MessageID) || len(c.UserEchoes) != 1 || c.UserEchoes[0].MessageID != c.MessageID {
		t.Errorf("cancelled prompt: reply messageId %q, echoes %+v: want its echo under the reply's msg_ ID", c.MessageID, c.UserEchoes)
	}
	if c.AgentChunks < 1 || c.AgentChunks >= acpScriptedChunks {
		t.Errorf("cancelled prompt: %d agent_message_chunk updates, want some but not all %d", c.AgentChunks, acpScriptedChunks)
	}
	if c.UpdatesAfterReply != 0 {
		t.Errorf("cancelled prompt: %d session/update frames after its reply", c.UpdatesAfterReply)
	}

	// The first run as a whole: every prompt and the steer, in order, in
	// the updates and over HTTP.
	r1 := r.Run1
	wantUsers := []string{p.MessageID, s.PromptMessageID, s.MessageID, c.MessageID}
	if !slices.Equal(r1.UserMessageIDs, wantUsers) {
		t.Errorf("run 1: user_message_chunk messageIds %q, want %q", r1.UserMessageIDs, wantUsers)
	}
	var httpUsers []string
	for _, m := range r1.HTTP {
		if m.Type == "user" {
			httpUsers = append(httpUsers, m.ID)
		}
	}
	if !slices.Equal(httpUsers, wantUsers) {
		t.Errorf("run 1: GET /api/session/%s/message user messages %q, want %q", r.SessionID, httpUsers, wantUsers)
	}
	if len(r1.AgentMessageIDs) != 4 {
		t.Errorf("run 1: agent_message_chunk messageIds %q, want 4 (prompt, steered prompt, steer, cancelled)", r1.AgentMessageIDs)
	}
	if !r1.Exit.ok() {
		t.Errorf("run 1: the agent process exited %+v after stdin closed, want code 0", r1.Exit)
	}

	// 6. session/load in a second process replays the same IDs.
	l := r.Load
	if !slices.Equal(l.UserMessageIDs, r1.UserMessageIDs) {
		t.Errorf("session/load: replayed user_message_chunk messageIds %q, want run 1's %q", l.UserMessageIDs, r1.UserMessageIDs)
	}
	if !slices.Equal(l.SDKUserMessageIDs, l.UserMessageIDs) {
		t.Errorf("session/load: the SDK handed over user_message_chunk messageIds %q, the wire had %q", l.SDKUserMessageIDs, l.UserMessageIDs)
	}
	if wantTexts := []string{p.Text, s.PromptText, s.Text, c.Text}; !slices.Equal(l.UserTexts, wantTexts) {
		t.Errorf("session/load: replayed user texts %q, want %q", l.UserTexts, wantTexts)
	}
	if !slices.Equal(l.AgentMessageIDs, r1.AgentMessageIDs) {
		t.Errorf("session/load: replayed agent_message_chunk messageIds %q, want run 1's %q", l.AgentMessageIDs, r1.AgentMessageIDs)
	}
	for mid, text := range r1.AgentTexts {
		if l.AgentTexts[mid] != text {
			t.Errorf("session/load: replayed agent text of %s %q, run 1 streamed %q", mid, l.AgentTexts[mid], text)
		}
	}
	if l.UpdatesAfterReply != 0 {
		t.Errorf("session/load: %d updates after its reply (nothing ran), want the replay before it", l.UpdatesAfterReply)
	}
	if !l.Exit.ok() {
		t.Errorf("run 2: the agent process exited %+v after stdin closed, want code 0", l.Exit)
	}
}
