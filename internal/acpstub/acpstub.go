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

// Files the stub writes in its working directory.
const (
	PIDFile       = "acpstub.pids"
	PromptsFile   = "acpstub.prompts"
	CancelledFile = "acpstub.cancelled"
	SteersFile    = "acpstub.steers"
	// ReleaseFile, once it exists, ends a Steered prompt that got no steer.
	ReleaseFile = "acpstub.release"
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
)

// Steer is one recorded `_session/steering`.
type Steer struct {
	MessageID    string   `json:"messageId"`
	Texts        []string `json:"texts"`
	IdleBehavior string   `json:"idleBehavior"`
	Outcome      string   `json:"outcome"`
}

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
	a := &stub{cancel: make(chan struct{}, 1), steered: make(chan string, 1), steering: os.Getenv(SteeringEnv) == "1",
		ready: make(chan struct{}), ended: make(chan struct{}, 1)}
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
	// ended: a prompt has answered (Late waits for it).
	ended chan struct{}
	// ready: conn is set (a request may come before NewConn returns).
	ready chan struct{}
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
	<-a.ready
	switch method {
	case acpclient.MethodInitialize:
		caps := map[string]any{}
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

// waitSteer waits for a steer (its text, or "" for Later), ReleaseFile
// or a cancel (false).
func (a *stub) waitSteer(ctx context.Context) (string, bool) {
	select {
	case <-a.ended: // an earlier prompt's
	default:
	}
	select {
	case <-a.steered: // one a cancel left behind
	default:
	}
	a.waiting.Store(true)
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
	case Steered:
		a.say("agent_message_chunk", "before.", "")
		text, ok := a.waitSteer(ctx)
		switch {
		case !ok:
			return map[string]any{"stopReason": acpclient.StopCancelled}, nil
		case text == "":
			a.say("agent_message_chunk", " ended", "")
		default:
			a.say("agent_message_chunk", "after: "+text, "")
		}
		return endTurn()
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
