// Package acpstub is a tiny external ACP agent for tests: a test binary
// calls MaybeServe first thing in TestMain, and a test configures that
// binary, with Env=1, as an agent's acp command. What it does is scripted
// by the prompt's first text (see the constants); it keeps a record of
// itself in its working directory (the session's): its PIDs (PIDFile), the
// prompts it got (PromptsFile), the cancels (CancelledFile), the steers
// (SteersFile). With SteeringEnv=1 it advertises `_meta.steering` and takes
// `_session/steering`: injected into a running Steered prompt, else
// promptRequired.
package acpstub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
)

// Env is the variable that makes a test binary the agent; SteeringEnv=1
// makes it a steering one.
const (
	Env         = "OPENCODE_SERVER_ACP_STUB"
	SteeringEnv = "OPENCODE_SERVER_ACP_STUB_STEERING"
)

// AuthEnv, when set, makes session/new answer auth required until an
// authenticate: AuthKey offers a browser login and "api-key" (Codex's
// pair), AuthBrowser the browser login alone.
const (
	AuthEnv     = "OPENCODE_SERVER_ACP_STUB_AUTH"
	AuthKey     = "key"
	AuthBrowser = "browser"
)

// V2Env=1 makes the stub an ACP v2 agent when the client offers v2
// (stubv2.go): session/prompt answers {} and a state_update idle ends the
// work; steers come as session/inject.
const V2Env = "OPENCODE_SERVER_ACP_STUB_V2"

// CapsEnv, if set, is the agentCapabilities initialize answers (JSON);
// the default advertises loadSession and no prompt capabilities.
const CapsEnv = "OPENCODE_SERVER_ACP_STUB_CAPS"

// Replayed is what the stub replays of a session it loads (as a
// user_message_chunk and an agent_message_chunk): a client shows none of it.
const Replayed = "replayed history"

// HistoryMarker starts the text block a client sends a new session with
// the conversation so far.
const HistoryMarker = "<conversation-so-far>"

// Files the stub writes in its working directory.
const (
	PIDFile       = "acpstub.pids"
	PromptsFile   = "acpstub.prompts"
	CancelledFile = "acpstub.cancelled"
	SteersFile    = "acpstub.steers"
	// ReleaseFile, once it exists, ends a Steered prompt that got no steer.
	ReleaseFile = "acpstub.release"
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
	// Steered says "before.", then waits for a steer, ReleaseFile or
	// session/cancel. A steer is injected: it says "after: " and the
	// steer's text and ends; the steer Later is answered promptRequired
	// (as an agent whose turn just ended would) and ends the prompt with
	// " ended"; so does ReleaseFile.
	Steered = "steered"
	Later   = "later"
	// Hold is a steer the stub takes into a waiting Steered prompt at
	// once but answers (injected) only once ReleaseFile exists.
	Hold = "hold"
	// Late is a steer the stub injects but answers only after the prompt
	// it joined has answered.
	Late = "late"
	// Early is a steer the stub injects and answers only once the prompt
	// has said its words after it (an agent streaming its answer to a
	// steer before its reply to `_session/steering`).
	Early = "early"
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

// Steer is one recorded `_session/steering`.
type Steer struct {
	// Method is the request (v2: session/inject or session/revoke_inject);
	// AgentID is the stub's ID of an inject.
	Method       string   `json:"method,omitempty"`
	AgentID      string   `json:"agentId,omitempty"`
	MessageID    string   `json:"messageId"`
	Texts        []string `json:"texts"`
	IdleBehavior string   `json:"idleBehavior"`
	Outcome      string   `json:"outcome"`
}

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
	SessionID string   `json:"sessionId"`
	MessageID string   `json:"messageId"`
	Texts     []string `json:"texts"`
	// History is a text block the client marked as the conversation so
	// far (HistoryMarker); it is not in Texts.
	History string                   `json:"history,omitempty"`
	Blocks  []acpclient.ContentBlock `json:"blocks"`
}

// MaybeServe serves ACP on stdio and exits, if Env is set.
func MaybeServe() {
	if os.Getenv(Env) != "1" {
		return
	}
	appendLine(PIDFile, fmt.Sprint(os.Getpid()))
	a := &stub{cancel: make(chan struct{}, 1), steered: make(chan string, 1), steering: os.Getenv(SteeringEnv) == "1",
		ready: make(chan struct{}), ended: make(chan struct{}, 1), said: make(chan struct{}, 1), session: fmt.Sprint("stub-", os.Getpid())}
	a.authed.Store(os.Getenv(AuthEnv) == "")
	a.injects = map[string]string{}
	a.conn = acpclient.NewConn(os.Stdin, os.Stdout, acpclient.Handlers{
		Notify: func(method string, _ json.RawMessage) {
			if method == acpclient.MethodSessionCancel {
				appendLine(CancelledFile, "cancel")
				if a.v2.Load() {
					// In order with the injects and revokes.
					b, _ := json.Marshal(Steer{Method: method})
					appendLine(SteersFile, string(b))
				}
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
	// steered takes an injected steer's text ("" for Later) to the
	// waiting Steered prompt; waiting says one waits.
	steered  chan string
	waiting  atomic.Bool
	steering bool
	// ended: a prompt has answered (Late waits for it); said: a Steered
	// prompt said its words after a steer (Early waits for it).
	ended chan struct{}
	said  chan struct{}
	// ready: conn is set (a request may come before NewConn returns;
	// requests are served from its reading goroutine).
	ready chan struct{}
	// authed: authenticate succeeded (or AuthEnv asks for none).
	authed  atomic.Bool
	mu      sync.Mutex
	session string
	// v2: the client negotiated v2; injects are the texts of the
	// session/inject steers accepted, by the stub's ID.
	v2      atomic.Bool
	injects map[string]string
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
		if err := strictRefusal(params); err != nil {
			return nil, err
		}
		if res, ok := a.initializeV2(params); ok {
			return res, nil
		}
		caps := map[string]any{"loadSession": true}
		if c := os.Getenv(CapsEnv); c != "" {
			caps = map[string]any{}
			if err := json.Unmarshal([]byte(c), &caps); err != nil {
				return nil, err
			}
		}
		if a.steering {
			caps["_meta"] = map[string]any{"steering": map[string]any{"supported": true}}
		}
		methods := []any{}
		switch os.Getenv(AuthEnv) {
		case AuthKey:
			methods = []any{map[string]any{"id": "browser", "name": "Sign in"}, map[string]any{"id": "api-key", "name": "API key"}}
		case AuthBrowser:
			methods = []any{map[string]any{"id": "browser", "name": "Sign in"}}
		}
		return map[string]any{"protocolVersion": 1, "agentCapabilities": caps, "authMethods": methods}, nil
	case acpclient.MethodSessionSteering:
		return a.steer(params)
	case acpclient.MethodSessionInject:
		return a.inject(params)
	case acpclient.MethodRevokeInject:
		return a.revokeInject(params)
	case acpclient.MethodSessionResume:
		var req acpclient.ResumeSessionRequest
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, err
		}
		appendLine(LoadsFile, req.SessionID)
		a.mu.Lock()
		a.session = req.SessionID
		a.mu.Unlock()
		return map[string]any{}, nil
	case acpclient.MethodAuthenticate:
		var req acpclient.AuthenticateRequest
		if err := json.Unmarshal(params, &req); err != nil || req.MethodID != "api-key" || os.Getenv(AuthEnv) != AuthKey {
			return nil, &acpclient.RPCError{Code: acpclient.CodeAuthRequired, Message: "Sign-in did not complete"}
		}
		a.authed.Store(true)
		return map[string]any{}, nil
	case acpclient.MethodSessionNew:
		recordMCP(method, params)
		if !a.authed.Load() {
			return nil, &acpclient.RPCError{Code: acpclient.CodeAuthRequired, Message: "Authentication required"}
		}
		a.update(map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{
			map[string]any{"name": Command, "description": "The stub's command", "input": map[string]any{"hint": "words"}}}})
		return map[string]any{"sessionId": a.sessionID()}, nil
	case acpclient.MethodSessionLoad:
		var req acpclient.LoadSessionRequest
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, err
		}
		appendLine(LoadsFile, req.SessionID)
		recordMCP(method, params)
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
			switch {
			case b.Type == "text" && strings.HasPrefix(b.Text, HistoryMarker):
				p.History = b.Text
			case b.Type == "text":
				p.Texts = append(p.Texts, b.Text)
			}
		}
		b, _ := json.Marshal(p)
		appendLine(PromptsFile, string(b))
		first := ""
		if len(p.Texts) > 0 {
			first = p.Texts[0]
		}
		if a.v2.Load() {
			go a.runV2(first)
			return map[string]any{}, nil
		}
		defer func() {
			select {
			case a.ended <- struct{}{}:
			default:
			}
		}()
		return a.run(ctx, first)
	}
	return nil, &acpclient.RPCError{Code: acpclient.CodeMethodNotFound, Message: "no " + method}
}

// steer answers `_session/steering`: injected into a waiting Steered
// prompt, else promptRequired (Later also ends that prompt).
func (a *stub) steer(params json.RawMessage) (any, error) {
	if !a.steering {
		return nil, &acpclient.RPCError{Code: acpclient.CodeMethodNotFound, Message: "no steering"}
	}
	var req acpclient.SteeringRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, err
	}
	s := Steer{MessageID: req.Meta.MessageID, IdleBehavior: req.Meta.Steering.IdleBehavior, Outcome: acpclient.SteerPromptRequired}
	for _, b := range req.Prompt {
		s.Texts = append(s.Texts, b.Text)
	}
	text := strings.Join(s.Texts, " ")
	if a.waiting.CompareAndSwap(true, false) {
		if text != Later {
			s.Outcome = acpclient.SteerInjected
		} else {
			text = ""
		}
		if text == Hold {
			waitFile(ReleaseFile)
		}
		a.steered <- text
		if text == Early {
			select {
			case <-a.said:
			case <-time.After(10 * time.Second):
			}
		}
		if text == Late {
			// The prompt's answer goes out first: the client learns the
			// turn ended before it learns the steer was taken.
			<-a.ended
			time.Sleep(200 * time.Millisecond)
		}
	}
	b, _ := json.Marshal(s)
	appendLine(SteersFile, string(b))
	return map[string]any{"outcome": s.Outcome}, nil
}

// armSteer makes the stub take a steer into the Steered prompt about to
// wait: before it says anything, so a steer sent once the client saw its
// first words always finds it waiting.
func (a *stub) armSteer() {
	select {
	case <-a.ended: // an earlier prompt's
	default:
	}
	select {
	case <-a.steered: // one a cancel left behind
	default:
	}
	a.waiting.Store(true)
}

// waitSteer waits (armSteer first) for a steer (its text, or "" for
// Later), ReleaseFile or a cancel (false).
func (a *stub) waitSteer(ctx context.Context) (string, bool) {
	defer a.waiting.Store(false)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case text := <-a.steered:
			return text, true
		case <-a.cancel:
			return "", false
		case <-ctx.Done():
			return "", false
		case <-tick.C:
			if _, err := os.Stat(ReleaseFile); err == nil && a.waiting.CompareAndSwap(true, false) {
				return "", true
			}
		}
	}
}

// waitFile waits for a file the test writes.
func waitFile(name string) {
	for {
		if _, err := os.Stat(name); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
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
	if res, ok, err := a.runCaps(ctx, script); ok {
		return res, err
	}
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
	case Steered:
		a.armSteer()
		a.say("agent_message_chunk", "before.", "")
		text, ok := a.waitSteer(ctx)
		switch {
		case !ok:
			return map[string]any{"stopReason": acpclient.StopCancelled}, nil
		case text == "":
			a.say("agent_message_chunk", " ended", "")
		default:
			a.say("agent_message_chunk", "after: "+text, "")
			select {
			case a.said <- struct{}{}: // an Early steer answers now
			default:
			}
		}
		return endTurn()
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
