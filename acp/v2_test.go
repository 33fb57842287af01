package acp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	"session/cancel":         {v2Schema, "CancelNotification"},
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

func isUser(id string) func(ev) bool {
	return func(e ev) bool { return e.Kind == "user_message" && e.MessageID == id }
}

func isState(s string) func(ev) bool {
	return func(e ev) bool { return e.Kind == "state_update" && e.State == s }
}

func isReply(id string) func(ev) bool { return func(e ev) bool { return e.Reply == id } }

// settled waits until the session's work is over and every update of it
// was written: the core is idle, and the stream shows as many idles as
// runnings, one per work the core delivered (works, from the stored user
// messages that started one).
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
		r, i := count(es, isState("running")), count(es, isState("idle"))
		return r == i && r == works()
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
