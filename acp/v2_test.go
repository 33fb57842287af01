package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// v2ResponseDefs names the schema of each v2 method's result: the v2
// schema's, or (the inject methods) testdata/inject.schema.json's.
var v2ResponseDefs = map[string]struct {
	set *schemaSet
	def string
}{
	"initialize":                {v2Schema, "InitializeResponse"},
	"session/new":               {v2Schema, "NewSessionResponse"},
	"session/resume":            {v2Schema, "ResumeSessionResponse"},
	"session/close":             {v2Schema, "CloseSessionResponse"},
	"session/list":              {v2Schema, "ListSessionsResponse"},
	"session/delete":            {v2Schema, "DeleteSessionResponse"},
	"session/set_config_option": {v2Schema, "SetSessionConfigOptionResponse"},
	"session/prompt":            {v2Schema, "PromptResponse"},
	"session/inject":            {injectSchema, "SessionInjectResponse"},
	"session/revoke_inject":     {injectSchema, "SessionRevokeInjectResponse"},
	"session/replace_inject":    {injectSchema, "SessionReplaceInjectResponse"},
}

// v2RequestDefs are the schemas of what the v2 tests send.
var v2RequestDefs = map[string]struct {
	set *schemaSet
	def string
}{
	"initialize":             {v2Schema, "InitializeRequest"},
	"session/new":            {v2Schema, "NewSessionRequest"},
	"session/resume":         {v2Schema, "ResumeSessionRequest"},
	"session/prompt":         {v2Schema, "PromptRequest"},
	"session/cancel":         {v2Schema, "CancelSessionNotification"},
	"session/inject":         {injectSchema, "SessionInjectRequest"},
	"session/revoke_inject":  {injectSchema, "SessionRevokeInjectRequest"},
	"session/replace_inject": {injectSchema, "SessionReplaceInjectRequest"},
}

// checkInjectError validates an inject method's refusal against the
// RFD's shape.
func (c *client) checkInjectError(b []byte, m msg) {
	c.mu.Lock()
	method := c.method[string(m.ID)]
	c.mu.Unlock()
	if !strings.Contains(method, "inject") || (m.Error.Code != -32010 && m.Error.Code != -32002) {
		return
	}
	var full struct {
		Error json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(b, &full)
	if err := validateIn(c.t, injectSchema, "InjectError", full.Error); err != nil {
		c.fail(fmt.Sprintf("%s (InjectError): %v", b, err))
	}
}

// startV2 runs an agent and negotiates v2 with it.
func startV2(t *testing.T, srv *testserver.Server) *client {
	t.Helper()
	c := startClient(t, srv, true)
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	c.call("initialize", map[string]any{"protocolVersion": 2, "info": map[string]any{"name": "test", "version": "1"},
		"capabilities": map[string]any{}}, &init)
	if init.ProtocolVersion != 2 {
		t.Fatalf("initialize answered version %d", init.ProtocolVersion)
	}
	return c
}

// checkRequest checks what a v2 test sends against its schema.
func (c *client) checkRequest(method string, params any) {
	c.t.Helper()
	if d, ok := v2RequestDefs[method]; ok {
		if err := validateIn(c.t, d.set, d.def, mustJSON(params)); err != nil {
			c.t.Fatalf("the test's own %s is not valid (%s): %v", method, d.def, err)
		}
	}
}

func (c *client) newSessionV2(dir string) string {
	c.t.Helper()
	var out struct {
		SessionID string `json:"sessionId"`
	}
	c.call("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}, &out)
	return out.SessionID
}

// ev is one v2 session update as the tests read it.
type ev struct {
	Kind       string
	State      string
	StopReason string
	MessageID  string
	Text       string
	// Reply is set for a reply frame (its request ID) instead.
	Reply string
}

// events is a session's v2 frames in order: its updates and every reply.
func (c *client) events(sid string) []ev {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ev
	for _, m := range c.log {
		switch {
		case m.Method == "session/update":
			var u struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					Kind       string          `json:"sessionUpdate"`
					State      string          `json:"state"`
					StopReason string          `json:"stopReason"`
					MessageID  string          `json:"messageId"`
					Content    json.RawMessage `json:"content"`
				} `json:"update"`
			}
			_ = json.Unmarshal(m.Params, &u)
			if u.SessionID != sid {
				continue
			}
			e := ev{Kind: u.Update.Kind, State: u.Update.State, StopReason: u.Update.StopReason, MessageID: u.Update.MessageID}
			var one struct {
				Text string `json:"text"`
			}
			var many []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(u.Update.Content, &many) == nil {
				for _, b := range many {
					e.Text += b.Text
				}
			} else if json.Unmarshal(u.Update.Content, &one) == nil {
				e.Text = one.Text
			}
			out = append(out, e)
		case m.Method == "" && m.ID != nil:
			out = append(out, ev{Reply: string(m.ID)})
		}
	}
	return out
}

// count is how many of es match f.
func count(es []ev, f func(ev) bool) int {
	n := 0
	for _, e := range es {
		if f(e) {
			n++
		}
	}
	return n
}

func index(es []ev, f func(ev) bool) int { return slices.IndexFunc(es, f) }

func lastIndex(es []ev, f func(ev) bool) int {
	for i := len(es) - 1; i >= 0; i-- {
		if f(es[i]) {
			return i
		}
	}
	return -1
}

func isUser(id string) func(ev) bool {
	return func(e ev) bool { return e.Kind == "user_message" && e.MessageID == id }
}

func isState(s string) func(ev) bool {
	return func(e ev) bool { return e.Kind == "state_update" && e.State == s }
}

func isReply(id string) func(ev) bool { return func(e ev) bool { return e.Reply == id } }

// settled waits until the session's work is over and every update of it
// was written: the core is idle, and the stream's last state is idle, its
// idles one per work (works, e.g. from the stored user messages that
// started one).
func (c *client) settled(srv *testserver.Server, sid string, works func() int) []ev {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Manager.WaitIdle(ctx, sid); err != nil {
		c.t.Fatalf("session %s never idle: %v", sid, err)
	}
	var es []ev
	c.waitFor("the session's last idle", func() bool {
		es = c.events(sid)
		last := lastIndex(es, func(e ev) bool { return e.Kind == "state_update" })
		return count(es, isState("idle")) == works() && (works() == 0 || es[last].State == "idle")
	})
	return es
}

// userMessages is how many user messages the core stored for a session.
func userMessages(srv *testserver.Server, sid string) int {
	msgs, _ := srv.Manager.Messages(context.Background(), sid)
	n := 0
	for _, m := range msgs {
		if m.Info.Role == "user" {
			n++
		}
	}
	return n
}

// TestNegotiation: 1 gets today's v1; 2 gets v2 with info and
// capabilities (session.inject among them); any other version our latest.
func TestNegotiation(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	for _, tc := range []struct{ ask, want int }{{1, 1}, {2, 2}, {3, 2}, {0, 2}, {65535, 2}} {
		c := startClient(t, srv, tc.want == 2)
		var init map[string]json.RawMessage
		if tc.want == 1 {
			c.call("initialize", map[string]any{"protocolVersion": tc.ask, "clientCapabilities": map[string]any{}}, &init)
		} else {
			c.call("initialize", map[string]any{"protocolVersion": tc.ask, "info": map[string]any{"name": "t", "version": "1"}}, &init)
		}
		var v int
		_ = json.Unmarshal(init["protocolVersion"], &v)
		if v != tc.want {
			t.Errorf("asked %d: answered %d, want %d", tc.ask, v, tc.want)
		}
		_, v1 := init["agentCapabilities"]
		_, v2 := init["capabilities"]
		if v1 != (tc.want == 1) || v2 != (tc.want == 2) {
			t.Errorf("asked %d: %v", tc.ask, init)
		}
		if tc.want == 2 {
			var caps struct {
				Session struct {
					Inject json.RawMessage `json:"inject"`
				} `json:"session"`
			}
			_ = json.Unmarshal(init["capabilities"], &caps)
			if err := validateIn(t, injectSchema, "SessionInjectCapabilities", caps.Session.Inject); err != nil {
				t.Errorf("session.inject %s: %v", caps.Session.Inject, err)
			}
			var inj struct {
				Modes   []string `json:"modes"`
				Pending struct {
					Replace bool `json:"replace"`
				} `json:"pending"`
			}
			_ = json.Unmarshal(caps.Session.Inject, &inj)
			if strings.Join(inj.Modes, ",") != "queue,steer" || !inj.Pending.Replace {
				t.Errorf("session.inject %s", caps.Session.Inject)
			}
			// v1's methods are gone in v2.
			_, ch := c.request("session/load", map[string]any{"sessionId": "ses_x", "cwd": srv.Directory})
			if m := c.wait(ch, "load"); m.Error == nil || m.Error.Code != -32601 {
				t.Errorf("v2 session/load: %+v, want -32601", m)
			}
		}
	}
}

// TestV2Prompt: the prompt is answered {} before its user_message, which
// carries the stored user message's ID; the work is running … idle
// end_turn, its text between.
func TestV2Prompt(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 4}})
	c := startV2(t, srv)
	sid := c.newSessionV2(srv.Directory)
	pid, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("hello v2")})
	m := c.wait(ch, "prompt")
	if m.Error != nil {
		t.Fatalf("prompt: %+v", m.Error)
	}
	var res struct {
		Meta struct {
			MessageID string `json:"messageId"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(m.Result, &res)
	id := res.Meta.MessageID
	es := c.settled(srv, sid, func() int { return 1 })
	ri, ui := index(es, isReply(pid)), index(es, isUser(id))
	if ri < 0 || ui < 0 || ri > ui {
		t.Fatalf("the reply (%d) does not come before the user_message of %s (%d): %+v", ri, id, ui, es)
	}
	if es[ui].Text != "hello v2" {
		t.Errorf("user_message content %q", es[ui].Text)
	}
	run, idle := index(es, isState("running")), index(es, isState("idle"))
	if !(ri < run && run < ui && ui < idle) || es[idle].StopReason != "end_turn" {
		t.Errorf("want reply, running, user_message, …, idle end_turn: %+v", es)
	}
	var said string
	for _, e := range es[ui:idle] {
		if e.Kind == "agent_message_chunk" {
			said += e.Text
		}
	}
	if !strings.Contains(said, "hello v2") {
		t.Errorf("agent text %q", said)
	}
	msgs, err := srv.Manager.Messages(context.Background(), sid)
	if err != nil || len(msgs) < 2 || msgs[0].Info.ID != id {
		t.Errorf("stored messages %d %v, want the user message %s first", len(msgs), err, id)
	}
}

// promptV2 sends a v2 prompt and returns its message ID (from the
// reply's _meta).
func (c *client) promptV2(sid, text string) string {
	c.t.Helper()
	var res struct {
		Meta struct {
			MessageID string `json:"messageId"`
		} `json:"_meta"`
	}
	c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt(text)}, &res)
	return res.Meta.MessageID
}

// startWorking starts a server on a scripted model and a v2 client, and
// work (a prompt of text) on a new session; it returns once the work's
// first text was streamed.
func startWorking(t *testing.T, model scripted.Config, text string) (*testserver.Server, *client, string, string) {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Scripted: model})
	c := startV2(t, srv)
	sid, id := c.working(srv, text)
	return srv, c, sid, id
}

// working starts work on a new session and waits for its first text.
func (c *client) working(srv *testserver.Server, text string) (sid, messageID string) {
	c.t.Helper()
	sid = c.newSessionV2(srv.Directory)
	messageID = c.promptV2(sid, text)
	c.waitFor("the first agent chunk", func() bool {
		return count(c.events(sid), func(e ev) bool { return e.Kind == "agent_message_chunk" }) > 0
	})
	return sid, messageID
}

// injectReply is a session/inject answer: a message ID or an error.
type injectReply struct {
	ID     string
	Code   int
	Reason string
}

func (c *client) inject(sid, mode, text string) injectReply {
	c.t.Helper()
	_, ch := c.request("session/inject", map[string]any{"sessionId": sid, "mode": mode, "content": textPrompt(text)})
	return decodeInject(c.t, c.wait(ch, "inject"))
}

// injected is an inject that must be admitted: its message ID.
func (c *client) injected(sid, mode, text string) string {
	c.t.Helper()
	r := c.inject(sid, mode, text)
	if r.ID == "" {
		c.t.Fatalf("%s inject refused: %+v", mode, r)
	}
	return r.ID
}

func decodeInject(t *testing.T, m msg) injectReply {
	t.Helper()
	if m.Error != nil {
		var data struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(m.Error.Data, &data)
		return injectReply{Code: m.Error.Code, Reason: data.Reason}
	}
	var r struct {
		MessageID string `json:"messageId"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || !strings.HasPrefix(r.MessageID, "msg_") {
		t.Fatalf("inject reply %s: %v", m.Result, err)
	}
	return injectReply{ID: r.MessageID}
}

// pendingOp is session/revoke_inject or replace_inject, answered.
func (c *client) pendingOp(method, sid, id string, content string) injectReply {
	c.t.Helper()
	p := map[string]any{"sessionId": sid, "messageId": id}
	if method == "session/replace_inject" {
		p["content"] = textPrompt(content)
	}
	_, ch := c.request(method, p)
	m := c.wait(ch, method)
	if m.Error != nil || method == "session/revoke_inject" {
		if m.Error == nil {
			return injectReply{ID: id}
		}
		return decodeInject(c.t, m)
	}
	return decodeInject(c.t, m)
}

// TestV2QueueInject: a queue inject while work runs is answered at once,
// delivered after that work's idle and started as its own running … idle.
func TestV2QueueInject(t *testing.T) {
	srv, c, sid, pid := startWorking(t, scripted.Config{Chunks: 8, Delay: 20 * time.Millisecond}, "first work")
	q := c.injected(sid, "queue", "after that")
	es := c.settled(srv, sid, func() int { return 2 })
	p, u := index(es, isUser(pid)), index(es, isUser(q))
	firstIdle := index(es, isState("idle"))
	if p < 0 || u < 0 || !(p < firstIdle && firstIdle < u) {
		t.Fatalf("want the prompt's work idle before the queued inject is delivered: %+v", es)
	}
	if es[u-1].Kind != "state_update" || es[u-1].State != "running" {
		t.Errorf("the queued inject does not start its own work (running before its user_message): %+v", es[u-1])
	}
	if es[u].Text != "after that" {
		t.Errorf("delivered %q", es[u].Text)
	}
}

// TestV2Steer: a steer while the model streams is answered at once and
// delivered at the next model call, its user_message before the text it
// caused, inside the same work (one running, one idle).
func TestV2Steer(t *testing.T) {
	srv, c, sid, _ := startWorking(t, scripted.Config{Chunks: 12, Delay: 30 * time.Millisecond}, strings.Repeat("long task ", 5))
	s := c.injected(sid, "steer", "also this")
	es := c.settled(srv, sid, func() int { return 1 })
	u := index(es, isUser(s))
	if u < 0 || es[u].Text != "also this" {
		t.Fatalf("the steer's user_message: %+v", es)
	}
	// The assistant message that answers it starts after it.
	said := map[string]string{}
	caused := ""
	for _, e := range es {
		if e.Kind == "agent_message_chunk" {
			if said[e.MessageID] += e.Text; strings.Contains(said[e.MessageID], "also this") {
				caused = e.MessageID
			}
		}
	}
	first := index(es, func(e ev) bool { return e.Kind == "agent_message_chunk" && e.MessageID == caused })
	if caused == "" || first < u {
		t.Errorf("the steered text (message %q at %d) does not follow its user_message (%d): %+v", caused, first, u, es)
	}
	if count(es, isState("running")) != 1 {
		t.Errorf("the steer started new work: %+v", es)
	}
}

// TestV2SteerIdle: a steer on an idle session is no_running_turn and
// admits nothing; a queue inject on it starts work.
func TestV2SteerIdle(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 2}})
	c := startV2(t, srv)
	sid := c.newSessionV2(srv.Directory)
	if r := c.inject(sid, "steer", "nobody listens"); r.Code != -32010 || r.Reason != "no_running_turn" {
		t.Fatalf("idle steer: %+v", r)
	}
	if in, err := srv.Manager.Inbox(context.Background(), sid); err != nil || len(in) != 0 {
		t.Fatalf("inbox after no_running_turn: %v %v", in, err)
	}
	if n := userMessages(srv, sid); n != 0 {
		t.Fatalf("%d messages after no_running_turn", n)
	}
	q := c.inject(sid, "queue", "start it")
	es := c.settled(srv, sid, func() int { return 1 })
	if u := index(es, isUser(q.ID)); u < 1 || es[u-1].State != "running" {
		t.Errorf("a queue inject on an idle session did not start work: %+v", es)
	}
}

// TestV2Cancel: session/cancel ends the work idle/cancelled; a queued
// prompt then runs as its own work.
func TestV2Cancel(t *testing.T) {
	srv, c, sid, _ := startWorking(t, scripted.Config{Chunks: 40, Delay: 20 * time.Millisecond}, strings.Repeat("long ", 20))
	next := c.promptV2(sid, "queued behind")
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	es := c.settled(srv, sid, func() int { return 2 })
	idle := index(es, isState("idle"))
	if es[idle].StopReason != "cancelled" {
		t.Errorf("the cancelled work's idle: %+v", es[idle])
	}
	if u := index(es, isUser(next)); u < idle {
		t.Errorf("the queued prompt was not delivered after the cancel's idle: %+v", es)
	}
	if last := es[lastIndex(es, isState("idle"))]; last.StopReason != "end_turn" {
		t.Errorf("the queued prompt's work ended %+v", last)
	}
}

// TestV2Permission: while a permission ask waits the work is
// requires_action; answered, it runs again; the ask is v2's (title,
// subject), and the tool call is created by its first tool_call_update.
func TestV2Permission(t *testing.T) {
	srv, file := askingServer(t)
	c := startV2(t, srv)
	var asks int
	c.onAsk = func(p json.RawMessage) any {
		var ask struct {
			Title   string `json:"title"`
			Subject struct {
				Type string `json:"type"`
			} `json:"subject"`
		}
		_ = json.Unmarshal(p, &ask)
		c.mu.Lock()
		asks++
		if ask.Title == "" || ask.Subject.Type != "tool_call" {
			c.invalid = append(c.invalid, "v2 ask without title and tool_call subject: "+string(p))
		}
		c.mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "once"}}
	}
	sid := c.newSessionV2(srv.Directory)
	c.promptV2(sid, `call:edit {"filePath":"`+file+`","oldString":"one","newString":"two"} then: edited`)
	es := c.settled(srv, sid, func() int { return 1 })
	if b, _ := os.ReadFile(file); string(b) != "two\n" {
		t.Errorf("file after the allowed edit: %q", b)
	}
	var states []string
	for _, e := range es {
		if e.Kind == "state_update" {
			states = append(states, e.State)
		}
		if e.Kind == "tool_call" {
			t.Errorf("a v1 tool_call in v2: %+v", e)
		}
	}
	if strings.Join(states, ",") != "running,requires_action,running,idle" || asks != 1 {
		t.Errorf("states %v, %d asks", states, asks)
	}
}

// TestV2InjectSweep: steers swept across the end of a turn (24 or more,
// until both sides were hit): each is answered once, and either it was
// admitted and is delivered exactly once, or it is no_running_turn and
// nothing was admitted.
func TestV2InjectSweep(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3, Delay: 8 * time.Millisecond}})
	c := startV2(t, srv)
	var delivered, refused int
	for i := 0; i < 100 && (i < 24 || delivered < 3 || refused < 3); i++ {
		sid := c.newSessionV2(srv.Directory)
		c.promptV2(sid, fmt.Sprintf("turn %d", i))
		time.Sleep(time.Duration(i%16*3) * time.Millisecond) // the sweep: 3 ms later each round
		text := fmt.Sprintf("steer %d", i)
		rid, ch := c.request("session/inject", map[string]any{"sessionId": sid, "mode": "steer", "content": textPrompt(text)})
		r := decodeInject(t, c.wait(ch, "inject"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := srv.Manager.WaitIdle(ctx, sid)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		var es []ev
		switch {
		case r.ID != "":
			delivered++
			c.waitFor("the steer's user_message and the idle after it", func() bool {
				es = c.events(sid)
				u := index(es, isUser(r.ID))
				return u >= 0 && lastIndex(es, isState("idle")) > u
			})
			if n := count(es, isUser(r.ID)); n != 1 || es[index(es, isUser(r.ID))].Text != text {
				t.Errorf("round %d: the steer delivered %d times: %+v", i, n, es)
			}
		case r.Code == -32010 && r.Reason == "no_running_turn":
			refused++
			if in, _ := srv.Manager.Inbox(context.Background(), sid); len(in) != 0 {
				t.Errorf("round %d: no_running_turn left the inbox %v", i, in)
			}
			msgs, _ := srv.Manager.Messages(context.Background(), sid)
			for _, m := range msgs {
				for _, p := range m.Parts {
					if p.Text == text {
						t.Errorf("round %d: no_running_turn, yet the steer was stored", i)
					}
				}
			}
			es = c.settled(srv, sid, func() int { return 1 })
		default:
			t.Fatalf("round %d: %+v", i, r)
		}
		if n := count(es, isReply(rid)); n != 1 {
			t.Errorf("round %d: the inject answered %d times", i, n)
		}
	}
	t.Logf("%d delivered, %d no_running_turn", delivered, refused)
	if delivered+refused < 24 || delivered < 3 || refused < 3 {
		t.Errorf("the sweep did not cover both sides of the turn's end (%d delivered, %d refused)", delivered, refused)
	}
}

// TestV2RevokeReplaceRace: a queue inject revoked or replaced as the turn
// before it ends, 100 times: revoke either wins (never delivered) or
// answers already_delivered (delivered once); replace either wins (the new
// content delivered) or answers already_delivered (the old one was).
func TestV2RevokeReplaceRace(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 2, Delay: 2 * time.Millisecond}})
	c := startV2(t, srv)
	won, lost := 0, 0
	for i := range 100 {
		sid := c.newSessionV2(srv.Directory)
		c.promptV2(sid, "short")
		oldText, newText := fmt.Sprintf("old %d", i), fmt.Sprintf("new %d", i)
		id := c.injected(sid, "queue", oldText)
		time.Sleep(time.Duration(i%10) * 400 * time.Microsecond) // the sweep across the turn's end
		method := "session/revoke_inject"
		if i%2 == 1 {
			method = "session/replace_inject"
		}
		r := c.pendingOp(method, sid, id, newText)
		es := c.settled(srv, sid, func() int { return userMessages(srv, sid) })
		n := count(es, isUser(id))
		got := ""
		if u := index(es, isUser(id)); u >= 0 {
			got = es[u].Text
		}
		switch {
		case r.Code == -32010 && r.Reason == "already_delivered":
			lost++
			if n != 1 || got != oldText {
				t.Errorf("trial %d (%s): already_delivered, delivered %d times with %q", i, method, n, got)
			}
		case r.Code != 0:
			t.Fatalf("trial %d (%s): %+v", i, method, r)
		case method == "session/revoke_inject":
			won++
			if n != 0 {
				t.Errorf("trial %d: revoked, yet delivered", i)
			}
		default:
			won++
			if n != 1 || got != newText {
				t.Errorf("trial %d: replaced, yet delivered %d times with %q", i, n, got)
			}
		}
	}
	t.Logf("%d won by revoke/replace, %d by delivery", won, lost)
	if won == 0 || lost == 0 {
		t.Errorf("the trials did not race (%d won by revoke/replace, %d by delivery)", won, lost)
	}
}

// TestV2PendingOps: replace keeps a pending message's place and mode;
// revoke is idempotent; unknown IDs are -32002 unknown_message_id; a
// delivered message is already_delivered to both.
func TestV2PendingOps(t *testing.T) {
	srv, c, sid, pid := startWorking(t, scripted.Config{Chunks: 20, Delay: 15 * time.Millisecond}, "long")
	a := c.injected(sid, "queue", "A")
	b := c.injected(sid, "queue", "B")
	s := c.injected(sid, "steer", "S")
	gone := c.injected(sid, "queue", "gone")
	if r := c.pendingOp("session/replace_inject", sid, a, "A2"); r.ID != a {
		t.Fatalf("replace A: %+v", r)
	}
	if r := c.pendingOp("session/replace_inject", sid, s, "S2"); r.ID != s {
		t.Fatalf("replace S: %+v", r)
	}
	for range 2 {
		if r := c.pendingOp("session/revoke_inject", sid, gone, ""); r.Code != 0 {
			t.Fatalf("revoke (twice): %+v", r)
		}
	}
	unknown := "msg_" + strings.Repeat("0", 10) + "neverminted01"
	for _, m := range []string{"session/revoke_inject", "session/replace_inject"} {
		if r := c.pendingOp(m, sid, unknown, "x"); r.Code != -32002 || r.Reason != "unknown_message_id" {
			t.Errorf("%s of an unknown ID: %+v", m, r)
		}
	}
	es := c.settled(srv, sid, func() int { return 3 }) // long (with S2), A2, B
	order := []int{index(es, isUser(pid)), index(es, isUser(s)), index(es, isState("idle")),
		index(es, isUser(a)), index(es, isUser(b))}
	if !slices.IsSorted(order) || order[0] < 0 {
		t.Errorf("want long, S2 (steered into its work), idle, A2, B: %v %+v", order, es)
	}
	if es[order[1]].Text != "S2" || es[order[3]].Text != "A2" || count(es, isUser(gone)) != 0 {
		t.Errorf("delivered %+v", es)
	}
	for _, m := range []string{"session/revoke_inject", "session/replace_inject"} {
		if r := c.pendingOp(m, sid, a, "late"); r.Code != -32010 || r.Reason != "already_delivered" {
			t.Errorf("%s of a delivered message: %+v", m, r)
		}
	}
}

// TestV2CancelKeepsInjects: pending injects of both modes survive
// session/cancel and are delivered once idle, in order (RFD #1261).
func TestV2CancelKeepsInjects(t *testing.T) {
	srv, c, sid, _ := startWorking(t, scripted.Config{Chunks: 40, Delay: 20 * time.Millisecond}, strings.Repeat("long ", 20))
	s := c.injected(sid, "steer", "steered")
	q := c.injected(sid, "queue", "queued")
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	es := c.settled(srv, sid, func() int { return 3 })
	idle := index(es, isState("idle"))
	order := []int{idle, index(es, isUser(s)), index(es, isUser(q))}
	if es[idle].StopReason != "cancelled" || !slices.IsSorted(order) || count(es, isUser(s)) != 1 {
		t.Errorf("want idle cancelled, then the steer, then the queued inject: %v %+v", order, es)
	}
}

// TestV2Resume: session/resume with replayFrom start replays the stored
// conversation with its message IDs (user_message, agent text); without
// replayFrom it attaches with no replay.
func TestV2Resume(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3}})
	c := startV2(t, srv)
	sid := c.newSessionV2(srv.Directory)
	id := c.promptV2(sid, "remember me")
	c.settled(srv, sid, func() int { return 1 })
	for _, replay := range []bool{true, false} {
		c2 := startV2(t, srv)
		p := map[string]any{"sessionId": sid, "cwd": srv.Directory, "mcpServers": []any{}}
		if replay {
			p["replayFrom"] = map[string]any{"type": "start"}
		}
		c2.call("session/resume", p, nil)
		es := c2.events(sid)
		u := index(es, isUser(id))
		text := count(es, func(e ev) bool { return e.Kind == "agent_message_chunk" && strings.Contains(e.Text, "remember me") })
		if replay && (u < 0 || es[u].Text != "remember me" || text == 0) {
			t.Errorf("replayFrom start: %+v", es)
		}
		if !replay && (u >= 0 || text != 0) {
			t.Errorf("resume without replayFrom replayed: %+v", es)
		}
	}
}

// TestV2ResumeAfterRestart: a second server on the same --data (a second
// process) resumes the session with replayFrom start: the conversation
// replays under its stored message IDs, once, and the session continues
// live with no gap; the IDs are the HTTP API's.
func TestV2ResumeAfterRestart(t *testing.T) {
	data := t.TempDir()
	srv1 := testserver.Start(t, testserver.Options{SQLite: true, DataDir: data, Scripted: scripted.Config{Chunks: 3}})
	c1 := startV2(t, srv1)
	sid := c1.newSessionV2(srv1.Directory)
	first := c1.promptV2(sid, "before the restart")
	c1.settled(srv1, sid, func() int { return 1 })
	c1.w.Close()
	<-c1.done
	srv1.Stop()

	srv2 := testserver.Start(t, testserver.Options{SQLite: true, DataDir: data, Directory: srv1.Directory,
		Scripted: scripted.Config{Chunks: 3}})
	c2 := startV2(t, srv2)
	c2.call("session/resume", map[string]any{"sessionId": sid, "cwd": srv1.Directory, "mcpServers": []any{},
		"replayFrom": map[string]any{"type": "start"}}, nil)
	second := c2.promptV2(sid, "after it")
	es := c2.settled(srv2, sid, func() int { return 1 })
	u1, u2 := index(es, isUser(first)), index(es, isUser(second))
	if u1 < 0 || es[u1].Text != "before the restart" || u2 < u1 || count(es, isUser(first)) != 1 {
		t.Errorf("want the replayed message once, then the new work: %+v", es)
	}
	said := ""
	for _, e := range es[:u2] {
		if e.Kind == "agent_message_chunk" {
			said += e.Text
		}
	}
	if !strings.Contains(said, "before the restart") {
		t.Errorf("the replay lacks the stored answer: %q", said)
	}
	resp, err := http.Get(srv2.URL + "/session/" + sid + "/message")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs []struct {
		Info struct {
			ID string `json:"id"`
		} `json:"info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msgs); err != nil || len(msgs) < 4 ||
		msgs[0].Info.ID != first || msgs[2].Info.ID != second {
		t.Errorf("HTTP messages %+v %v, want %s and %s as the user messages", msgs, err, first, second)
	}
}

// TestV2UnknownBlocks: v2 tolerates content blocks of unknown and
// _-prefixed types (left out); a prompt of nothing else is refused.
func TestV2UnknownBlocks(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 2}})
	c := startV2(t, srv)
	sid := c.newSessionV2(srv.Directory)
	odd := map[string]any{"type": "_vendor_widget", "payload": 1}
	var res struct {
		Meta struct {
			MessageID string `json:"messageId"`
		} `json:"_meta"`
	}
	c.call("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{odd, textPrompt("plain")[0]}}, &res)
	es := c.settled(srv, sid, func() int { return 1 })
	if u := index(es, isUser(res.Meta.MessageID)); u < 0 || es[u].Text != "plain" {
		t.Errorf("the known block's prompt: %+v", es)
	}
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{odd}})
	if m := c.wait(ch, "prompt"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("a prompt of unknown blocks only: %+v", m)
	}
}

// TestV2CommandInput: in v2 a command that takes arguments has the typed
// input {type: text}; v1 lists commands without input, as before.
func TestV2CommandInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	takes := map[string]bool{}
	for _, cmd := range command.List(srv.Directory, nil, "") {
		takes[cmd.Name] = len(cmd.Hints) > 0
	}
	for _, v2 := range []bool{false, true} {
		var c *client
		if v2 {
			c = startV2(t, srv)
			c.newSessionV2(srv.Directory)
		} else {
			c = start(t, srv)
			c.handshake()
			c.newSession(srv.Directory)
		}
		c.waitFor("available_commands_update", func() bool { return slices.Contains(c.frames(), "available_commands_update") })
		c.mu.Lock()
		for _, m := range c.log {
			var u struct {
				Update struct {
					Commands []struct {
						Name  string `json:"name"`
						Input *struct {
							Type string `json:"type"`
						} `json:"input"`
					} `json:"availableCommands"`
				} `json:"update"`
			}
			_ = json.Unmarshal(m.Params, &u)
			for _, cmd := range u.Update.Commands {
				want := v2 && takes[cmd.Name]
				if (cmd.Input != nil) != want || (want && cmd.Input.Type != "text") {
					t.Errorf("v2 %v: command %s input %+v, want one: %v", v2, cmd.Name, cmd.Input, want)
				}
			}
		}
		c.mu.Unlock()
	}
}
