// Package acpstub is a tiny external ACP agent for tests: a test binary
// calls MaybeServe first thing in TestMain, and a test configures that
// binary, with Env=1, as an agent's acp command. What it does is scripted
// by the prompt's first text (see the constants); it keeps a record of
// itself in its working directory (the session's): its PIDs (PIDFile), the
// prompts it got (PromptsFile), the cancels (CancelledFile).
package acpstub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/opencode-server/opencode-server/acpclient"
)

// Env is the variable that makes a test binary the agent.
const Env = "OPENCODE_SERVER_ACP_STUB"

// AuthEnv, when set, makes session/new answer auth required until an
// authenticate: AuthKey offers a browser login and "api-key" (Codex's
// pair), AuthBrowser the browser login alone.
const (
	AuthEnv     = "OPENCODE_SERVER_ACP_STUB_AUTH"
	AuthKey     = "key"
	AuthBrowser = "browser"
)

// Files the stub writes in its working directory.
const (
	PIDFile       = "acpstub.pids"
	PromptsFile   = "acpstub.prompts"
	CancelledFile = "acpstub.cancelled"
	// NotesFile is what the Tool script reads through fs/read_text_file.
	NotesFile = "notes.txt"
)

// Scripts: the prompt's first text.
const (
	// Two streams a thought, then "hello world" as agent message m1 and
	// "second" as m2: two messages of one turn.
	Two = "two"
	// Tool makes a read tool call, asks permission for it, reads NotesFile
	// and a file outside the directory, and says what it got.
	Tool = "tool"
	// Crash says a word and exits with status 3 mid-turn.
	Crash = "crash"
	// Wait says a word and waits for session/cancel, then answers cancelled.
	Wait = "wait"
)

// Prompt is one recorded session/prompt.
type Prompt struct {
	MessageID string   `json:"messageId"`
	Texts     []string `json:"texts"`
}

// MaybeServe serves ACP on stdio and exits, if Env is set.
func MaybeServe() {
	if os.Getenv(Env) != "1" {
		return
	}
	appendLine(PIDFile, fmt.Sprint(os.Getpid()))
	a := &stub{cancel: make(chan struct{}, 1)}
	a.authed.Store(os.Getenv(AuthEnv) == "")
	a.conn = acpclient.NewConn(os.Stdin, os.Stdout, acpclient.Handlers{
		Notify: func(method string, _ json.RawMessage) {
			if method == acpclient.MethodSessionCancel {
				appendLine(CancelledFile, "cancel")
				select {
				case a.cancel <- struct{}{}:
				default:
				}
			}
		},
		Request: a.serve,
	})
	<-a.conn.Done()
	os.Exit(0)
}

type stub struct {
	conn   *acpclient.Conn
	cancel chan struct{}
	// authed: authenticate succeeded (or AuthEnv asks for none).
	authed atomic.Bool
}

func appendLine(name, line string) {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func (a *stub) serve(ctx context.Context, method string, params json.RawMessage) (any, error) {
	switch method {
	case acpclient.MethodInitialize:
		methods := []any{}
		switch os.Getenv(AuthEnv) {
		case AuthKey:
			methods = []any{map[string]any{"id": "browser", "name": "Sign in"}, map[string]any{"id": "api-key", "name": "API key"}}
		case AuthBrowser:
			methods = []any{map[string]any{"id": "browser", "name": "Sign in"}}
		}
		return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": methods}, nil
	case acpclient.MethodAuthenticate:
		var req acpclient.AuthenticateRequest
		if err := json.Unmarshal(params, &req); err != nil || req.MethodID != "api-key" || os.Getenv(AuthEnv) != AuthKey {
			return nil, &acpclient.RPCError{Code: acpclient.CodeAuthRequired, Message: "Sign-in did not complete"}
		}
		a.authed.Store(true)
		return map[string]any{}, nil
	case acpclient.MethodSessionNew:
		if !a.authed.Load() {
			return nil, &acpclient.RPCError{Code: acpclient.CodeAuthRequired, Message: "Authentication required"}
		}
		return map[string]any{"sessionId": "stub-session"}, nil
	case acpclient.MethodSessionPrompt:
		var req struct {
			Prompt []acpclient.ContentBlock `json:"prompt"`
			Meta   struct {
				MessageID string `json:"messageId"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, err
		}
		p := Prompt{MessageID: req.Meta.MessageID}
		for _, b := range req.Prompt {
			p.Texts = append(p.Texts, b.Text)
		}
		b, _ := json.Marshal(p)
		appendLine(PromptsFile, string(b))
		first := ""
		if len(p.Texts) > 0 {
			first = p.Texts[0]
		}
		return a.run(ctx, first)
	}
	return nil, &acpclient.RPCError{Code: acpclient.CodeMethodNotFound, Message: "no " + method}
}

func (a *stub) update(u map[string]any) {
	_ = a.conn.Notify(acpclient.MethodSessionUpdate, map[string]any{"sessionId": "stub-session", "update": u})
}

func (a *stub) say(kind, text, messageID string) {
	u := map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": text}}
	if messageID != "" {
		u["messageId"] = messageID
	}
	a.update(u)
}

func endTurn() (any, error) { return map[string]any{"stopReason": acpclient.StopEndTurn}, nil }

func (a *stub) run(ctx context.Context, script string) (any, error) {
	switch script {
	case Two:
		a.say("agent_thought_chunk", "thinking", "m1")
		a.say("agent_message_chunk", "hello ", "m1")
		a.say("agent_message_chunk", "world", "m1")
		a.say("agent_message_chunk", "second", "m2")
		return endTurn()
	case Tool:
		cwd, _ := os.Getwd()
		notes := filepath.Join(cwd, NotesFile)
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "Read notes",
			"kind": "read", "status": "pending", "rawInput": map[string]any{"path": notes},
			"locations": []any{map[string]any{"path": notes}}})
		var perm acpclient.RequestPermissionResponse
		err := a.conn.Call(ctx, acpclient.MethodRequestPermission, map[string]any{"sessionId": "stub-session",
			"toolCall": map[string]any{"toolCallId": "call-1"},
			"options": []any{map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
				map[string]any{"optionId": "no", "name": "Reject", "kind": "reject_once"}}}, &perm)
		if err != nil {
			return nil, err
		}
		var read acpclient.ReadTextFileResponse
		if err := a.conn.Call(ctx, acpclient.MethodReadTextFile, map[string]any{"sessionId": "stub-session", "path": notes}, &read); err != nil {
			return nil, err
		}
		outside := "read"
		if err := a.conn.Call(ctx, acpclient.MethodReadTextFile, map[string]any{"sessionId": "stub-session",
			"path": filepath.Join(filepath.Dir(cwd), "elsewhere.txt")}, nil); err != nil {
			outside = "refused"
		}
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": read.Content}}}})
		a.say("agent_message_chunk", fmt.Sprintf("permission=%s/%s notes=%s outside=%s", perm.Outcome.Outcome,
			perm.Outcome.OptionID, strings.TrimSpace(read.Content), outside), "")
		return endTurn()
	case Crash:
		a.say("agent_message_chunk", "about to crash", "")
		os.Exit(3)
	case Wait:
		a.say("agent_message_chunk", "waiting", "")
		select {
		case <-a.cancel:
			return map[string]any{"stopReason": acpclient.StopCancelled}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.say("agent_message_chunk", "echo: "+script, "")
	return endTurn()
}
