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
	"sync"

	"github.com/opencode-server/opencode-server/acpclient"
)

// Env is the variable that makes a test binary the agent.
const Env = "OPENCODE_SERVER_ACP_STUB"

// CapsEnv, if set, is the agentCapabilities initialize answers (JSON);
// the default advertises loadSession and no prompt capabilities.
const CapsEnv = "OPENCODE_SERVER_ACP_STUB_CAPS"

// Replayed is what the stub replays of a session it loads (as a
// user_message_chunk and an agent_message_chunk): a client shows none of it.
const Replayed = "replayed history"

// Files the stub writes in its working directory.
const (
	PIDFile       = "acpstub.pids"
	PromptsFile   = "acpstub.prompts"
	CancelledFile = "acpstub.cancelled"
	// LoadsFile gets the session ID of each session/load.
	LoadsFile = "acpstub.loads"
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
	// WaitTool starts an execute tool call (call-w, in progress), then
	// waits as Wait does.
	WaitTool = "waittool"
	// Plan sends a plan of PlanEntries, then says "planned".
	Plan = "plan"
	// Usage says a word, then reports UsageUsed tokens in context of
	// 200000 and a session cost of UsageCost USD.
	Usage = "usage"
	// Title sets the session's title to TitleText.
	Title = "title"
)

// What the Plan, Usage and Title scripts send.
var PlanEntries = []acpclient.PlanEntry{{Content: "read the code", Priority: "high", Status: "completed"},
	{Content: "write the test", Priority: "medium", Status: "in_progress"}}

const (
	// Command is the command the stub lists (available_commands_update)
	// once its session is open.
	Command   = "stubcmd"
	UsageUsed = 1234
	UsageCost = 0.25
	TitleText = "Named by the stub"
)

// Prompt is one recorded session/prompt: its session, the texts, and
// every block as sent.
type Prompt struct {
	SessionID string                   `json:"sessionId"`
	MessageID string                   `json:"messageId"`
	Texts     []string                 `json:"texts"`
	Blocks    []acpclient.ContentBlock `json:"blocks"`
}

// MaybeServe serves ACP on stdio and exits, if Env is set.
func MaybeServe() {
	if os.Getenv(Env) != "1" {
		return
	}
	appendLine(PIDFile, fmt.Sprint(os.Getpid()))
	a := &stub{cancel: make(chan struct{}, 1), ready: make(chan struct{}), session: fmt.Sprint("stub-", os.Getpid())}
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
	close(a.ready)
	<-a.conn.Done()
	os.Exit(0)
}

type stub struct {
	conn   *acpclient.Conn
	cancel chan struct{}
	// ready: conn is set (requests are served from its reading goroutine).
	ready   chan struct{}
	mu      sync.Mutex
	session string
}

func (a *stub) sessionID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.session
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
	<-a.ready
	switch method {
	case acpclient.MethodInitialize:
		caps := json.RawMessage(`{"loadSession":true}`)
		if c := os.Getenv(CapsEnv); c != "" {
			caps = json.RawMessage(c)
		}
		return map[string]any{"protocolVersion": 1, "agentCapabilities": caps, "authMethods": []any{}}, nil
	case acpclient.MethodSessionNew:
		a.update(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{
			map[string]any{"name": Command, "description": "The stub's command", "input": map[string]any{"hint": "words"}}}})
		return map[string]any{"sessionId": a.sessionID()}, nil
	case acpclient.MethodSessionLoad:
		var req acpclient.LoadSessionRequest
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, err
		}
		appendLine(LoadsFile, req.SessionID)
		a.mu.Lock()
		a.session = req.SessionID
		a.mu.Unlock()
		a.say("user_message_chunk", Replayed, "")
		a.say("agent_message_chunk", Replayed, "")
		return map[string]any{}, nil
	case acpclient.MethodSessionPrompt:
		var req struct {
			SessionID string                   `json:"sessionId"`
			Prompt    []acpclient.ContentBlock `json:"prompt"`
			Meta      struct {
				MessageID string `json:"messageId"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, err
		}
		p := Prompt{SessionID: req.SessionID, MessageID: req.Meta.MessageID, Blocks: req.Prompt}
		for _, b := range req.Prompt {
			if b.Type == "text" {
				p.Texts = append(p.Texts, b.Text)
			}
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
	_ = a.conn.Notify(acpclient.MethodSessionUpdate, map[string]any{"sessionId": a.sessionID(), "update": u})
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
		err := a.conn.Call(ctx, acpclient.MethodRequestPermission, map[string]any{"sessionId": a.sessionID(),
			"toolCall": map[string]any{"toolCallId": "call-1"},
			"options": []any{map[string]any{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
				map[string]any{"optionId": "no", "name": "Reject", "kind": "reject_once"}}}, &perm)
		if err != nil {
			return nil, err
		}
		var read acpclient.ReadTextFileResponse
		if err := a.conn.Call(ctx, acpclient.MethodReadTextFile, map[string]any{"sessionId": a.sessionID(), "path": notes}, &read); err != nil {
			return nil, err
		}
		outside := "read"
		if err := a.conn.Call(ctx, acpclient.MethodReadTextFile, map[string]any{"sessionId": a.sessionID(),
			"path": filepath.Join(filepath.Dir(cwd), "elsewhere.txt")}, nil); err != nil {
			outside = "refused"
		}
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": read.Content}}}})
		a.say("agent_message_chunk", fmt.Sprintf("permission=%s/%s notes=%s outside=%s", perm.Outcome.Outcome,
			perm.Outcome.OptionID, strings.TrimSpace(read.Content), outside), "")
		return endTurn()
	case Plan:
		a.update(map[string]any{"sessionUpdate": "plan", "entries": PlanEntries})
		a.say("agent_message_chunk", "planned", "")
		return endTurn()
	case Usage:
		a.say("agent_message_chunk", "counted", "")
		a.update(map[string]any{"sessionUpdate": "usage_update", "used": UsageUsed, "size": 200000,
			"cost": map[string]any{"amount": UsageCost, "currency": "USD"}})
		return endTurn()
	case Title:
		a.update(map[string]any{"sessionUpdate": "session_info_update", "title": TitleText})
		a.say("agent_message_chunk", "titled", "")
		return endTurn()
	case Crash:
		a.say("agent_message_chunk", "about to crash", "")
		os.Exit(3)
	case Wait, WaitTool:
		if script == WaitTool {
			a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-w", "title": "Run it",
				"kind": "execute", "status": "in_progress", "rawInput": map[string]any{"command": "sleep 100"}})
		}
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
