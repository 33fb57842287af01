package acp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/acp"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

func TestMain(m *testing.M) {
	acpstub.MaybeServe() // the test binary doubles as an external ACP agent
	goleak.VerifyTestMain(m)
}

// ---- the official schema -------------------------------------------------------

// schemaSet is one JSON Schema document, compiled once, its definitions
// on demand.
type schemaSet struct {
	file, url string
	once      sync.Once
	compiler  *jsonschema.Compiler
	err       error
	mu        sync.Mutex
	defs      map[string]*jsonschema.Schema
}

var (
	// v1Schema is the official ACP v1 schema (testdata/schema.json,
	// agentclientprotocol/agent-client-protocol schema/v1 at b7f00054).
	v1Schema = &schemaSet{file: "testdata/schema.json", url: "https://agentclientprotocol.com/schema.json"}
	// v2Schema is its v2 schema (schema/v2 2.0.0-alpha.3, the same commit).
	v2Schema = &schemaSet{file: "testdata/v2-schema.json", url: "https://agentclientprotocol.com/v2/schema.json"}
	// injectSchema is RFD #1261's methods written down as JSON Schema
	// (testdata/inject.schema.json), over the v2 schema's ContentBlock.
	injectSchema = &schemaSet{file: "testdata/inject.schema.json", url: "https://agentclientprotocol.com/v2/inject.schema.json"}
)

func (ss *schemaSet) get(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	ss.once.Do(func() {
		ss.compiler = jsonschema.NewCompiler()
		load := []*schemaSet{ss}
		if ss == injectSchema {
			load = append(load, v2Schema) // its ContentBlock and SessionId
		}
		for _, set := range load {
			f, err := os.Open(set.file)
			if err != nil {
				ss.err = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				ss.err = err
				return
			}
			if ss.err = ss.compiler.AddResource(set.url, doc); ss.err != nil {
				return
			}
		}
		ss.defs = map[string]*jsonschema.Schema{}
	})
	if ss.err != nil {
		t.Fatalf("schema %s: %v", ss.file, ss.err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.defs[def]; s != nil {
		return s
	}
	s, err := ss.compiler.Compile(ss.url + "#/$defs/" + def)
	if err != nil {
		t.Fatalf("compile %s: %v", def, err)
	}
	ss.defs[def] = s
	return s
}

// schemaFor compiles one definition of the official ACP v1 schema.
func schemaFor(t testing.TB, def string) *jsonschema.Schema { return v1Schema.get(t, def) }

// responseDefs names the schema of each method's result.
var responseDefs = map[string]string{
	"initialize":                "InitializeResponse",
	"session/new":               "NewSessionResponse",
	"session/load":              "LoadSessionResponse",
	"session/resume":            "ResumeSessionResponse",
	"session/close":             "CloseSessionResponse",
	"session/list":              "ListSessionsResponse",
	"session/delete":            "DeleteSessionResponse",
	"session/set_mode":          "SetSessionModeResponse",
	"session/set_config_option": "SetSessionConfigOptionResponse",
	"session/prompt":            "PromptResponse",
}

func validate(t testing.TB, def string, raw json.RawMessage) error {
	return validateIn(t, v1Schema, def, raw)
}

func validateIn(t testing.TB, ss *schemaSet, def string, raw json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return err
	}
	return ss.get(t, def).Validate(inst)
}

// ---- a test client over pipes ------------------------------------------------------

type msg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	} `json:"error,omitempty"`
}

type update struct {
	SessionID string `json:"sessionId"`
	Update    struct {
		Kind      string          `json:"sessionUpdate"`
		MessageID string          `json:"messageId"`
		Content   json.RawMessage `json:"content"`
		ToolID    string          `json:"toolCallId"`
		Status    string          `json:"status"`
	} `json:"update"`
}

func (u update) text() string {
	var c struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(u.Update.Content, &c)
	return c.Text
}

type client struct {
	t *testing.T
	w io.WriteCloser
	// wmu serialises writes; mu is never held while writing (the agent
	// may be blocked writing to us, and the reader needs mu).
	wmu    sync.Mutex
	mu     sync.Mutex
	next   int
	waits  map[string]chan msg
	method map[string]string
	// log is every frame the agent sent, in order (updates and replies).
	log []msg
	// onAsk answers session/request_permission (default: reject).
	onAsk   func(params json.RawMessage) any
	invalid []string
	done    chan struct{}
	// v2: the agent's frames are checked against the v2 schema (and the
	// inject methods against testdata/inject.schema.json).
	v2 bool
}

// start runs an ACP agent on srv's core and returns a client for it. When
// the test ends the agent is closed and nothing it started may still run
// (acp.NoneLeft); what it made the server start is testserver's to check.
func start(t *testing.T, srv *testserver.Server) *client {
	t.Helper()
	return startClient(t, srv, false)
}

func startClient(t *testing.T, srv *testserver.Server, v2 bool) *client {
	t.Helper()
	before := acp.Goroutines()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{t: t, w: inW, waits: map[string]chan msg{}, method: map[string]string{}, done: make(chan struct{}), v2: v2}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = acp.Serve(context.Background(), inR, outW, acp.Options{Core: srv.Manager, Directory: srv.Directory,
			Version: "test", Sent: c.check, Catalog: srv.Catalog})
		outW.Close()
	}()
	go c.read(outR)
	t.Cleanup(func() {
		inW.Close()
		<-served
		<-c.done
		acp.NoneLeft(t, before)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range c.invalid {
			t.Errorf("frame not valid against the ACP schema: %s", s)
		}
	})
	return c
}

// check validates every frame the agent writes against the official
// schema of the connection's version (v2: and the inject methods against
// testdata/inject.schema.json).
func (c *client) check(b []byte) {
	var m msg
	if err := json.Unmarshal(b, &m); err != nil {
		c.fail(fmt.Sprintf("%s: not JSON: %v", b, err))
		return
	}
	set, update := v1Schema, "SessionNotification"
	if c.v2 {
		set, update = v2Schema, "UpdateSessionNotification"
	}
	var def string
	var raw json.RawMessage
	switch {
	case m.Method == "session/update":
		def, raw = update, m.Params
	case m.Method == "session/request_permission":
		def, raw = "RequestPermissionRequest", m.Params
	case m.Method == "$/cancel_request":
		def, raw = "CancelRequestNotification", m.Params
	case m.Method != "":
		c.fail(fmt.Sprintf("%s: unexpected method from the agent", b))
		return
	case m.Error != nil:
		def, raw = "Error", mustJSON(m.Error)
		if c.v2 {
			c.checkInjectError(b, m)
		}
	default:
		c.mu.Lock()
		method := c.method[string(m.ID)]
		c.mu.Unlock()
		if !c.v2 {
			if def = responseDefs[method]; def == "" {
				return // extension methods have no schema
			}
		} else if d, ok := v2ResponseDefs[method]; ok {
			set, def = d.set, d.def
		} else {
			c.fail(fmt.Sprintf("%s: a result of %q, which has no v2 schema", b, method))
			return
		}
		raw = m.Result
	}
	if err := validateIn(c.t, set, def, raw); err != nil {
		c.fail(fmt.Sprintf("%s (%s): %v", b, def, err))
	}
}

func (c *client) fail(s string) {
	c.mu.Lock()
	c.invalid = append(c.invalid, s)
	c.mu.Unlock()
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func (c *client) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var m msg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		c.mu.Lock()
		c.log = append(c.log, m)
		ch := c.waits[string(m.ID)]
		ask := c.onAsk
		c.mu.Unlock()
		switch {
		case m.Method == "session/request_permission":
			var res any = map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "reject"}}
			if ask != nil {
				res = ask(m.Params)
			}
			if res != nil { // nil: the test leaves the ask unanswered
				c.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res})
			}
		case m.Method == "" && ch != nil:
			ch <- m
		}
	}
}

func (c *client) send(v any) {
	b, _ := json.Marshal(v)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.w.Write(append(b, '\n'))
}

// request sends a request and returns a channel for its reply.
func (c *client) request(method string, params any) (string, chan msg) {
	if c.v2 {
		c.checkRequest(method, params)
	}
	c.mu.Lock()
	c.next++
	id := strconv.Itoa(c.next)
	ch := make(chan msg, 1)
	c.waits[id] = ch
	c.method[id] = method
	c.mu.Unlock()
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	return id, ch
}

func (c *client) wait(ch chan msg, what string) msg {
	c.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatalf("no reply to %s within 30s", what)
	}
	return msg{}
}

// call sends a request and fails the test on an error reply.
func (c *client) call(method string, params any, out any) {
	c.t.Helper()
	_, ch := c.request(method, params)
	m := c.wait(ch, method)
	if m.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", method, m.Result, err)
		}
	}
}

func (c *client) notify(method string, params any) {
	if c.v2 {
		c.checkRequest(method, params)
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// updates returns the session/update notifications received so far.
func (c *client) updates() []update {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []update
	for _, m := range c.log {
		if m.Method == "session/update" {
			var u update
			_ = json.Unmarshal(m.Params, &u)
			out = append(out, u)
		}
	}
	return out
}

// frames is the kinds of frames so far in order: an update's kind, or
// "reply:ID".
func (c *client) frames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.log {
		switch {
		case m.Method == "session/update":
			var u update
			_ = json.Unmarshal(m.Params, &u)
			out = append(out, u.Update.Kind)
		case m.Method == "" && m.ID != nil:
			out = append(out, "reply:"+string(m.ID))
		}
	}
	return out
}

func (c *client) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s; frames: %v", what, c.frames())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func textPrompt(s string) []map[string]any {
	return []map[string]any{{"type": "text", "text": s}}
}

func (c *client) handshake() {
	c.t.Helper()
	var init struct {
		ProtocolVersion int `json:"protocolVersion"`
		Meta            struct {
			Steering struct {
				Supported bool `json:"supported"`
			} `json:"steering"`
		} `json:"_meta"`
		AgentCapabilities struct {
			LoadSession bool `json:"loadSession"`
		} `json:"agentCapabilities"`
	}
	c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &init)
	if init.ProtocolVersion != 1 || !init.Meta.Steering.Supported || !init.AgentCapabilities.LoadSession {
		c.t.Fatalf("initialize: %+v", init)
	}
}

func (c *client) newSession(dir string) string {
	c.t.Helper()
	var out struct {
		SessionID string `json:"sessionId"`
	}
	c.call("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}, &out)
	return out.SessionID
}

// steerReply is a `_session/steering` answer.
type steerReply struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason"`
	Meta    struct {
		MessageID string `json:"messageId"`
	} `json:"_meta"`
}

// steerParams is a `_session/steering` request; promptRequired asks for
// nothing to be admitted on an idle session.
func steerParams(sid, text string, promptRequired bool) map[string]any {
	p := map[string]any{"sessionId": sid, "prompt": textPrompt(text)}
	if promptRequired {
		p["_meta"] = map[string]any{"steering": map[string]any{"idleBehavior": "promptRequired"}}
	}
	return p
}

type promptReply struct {
	StopReason string `json:"stopReason"`
	Meta       struct {
		MessageID string `json:"messageId"`
	} `json:"_meta"`
}

func decodeReply(t *testing.T, m msg) promptReply {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("prompt: error %d %s", m.Error.Code, m.Error.Message)
	}
	var r promptReply
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// agentText is what the agent said in the updates of one assistant reply
// (or all, with id "").
func agentText(us []update) string {
	var b strings.Builder
	for _, u := range us {
		if u.Update.Kind == "agent_message_chunk" {
			b.WriteString(u.text())
		}
	}
	return b.String()
}

func userChunks(us []update) map[string]string {
	out := map[string]string{}
	for _, u := range us {
		if u.Update.Kind == "user_message_chunk" {
			out[u.Update.MessageID] += u.text()
		}
	}
	return out
}

// ---- tests ---------------------------------------------------------------------------

// TestPrompt: handshake, a streamed prompt, its echo under the message ID
// the reply names, and stopReason end_turn after every update.
func TestPrompt(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 4}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	id, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("hello acp")})
	r := decodeReply(t, c.wait(ch, "prompt"))
	if r.StopReason != "end_turn" || !strings.HasPrefix(r.Meta.MessageID, "msg_") {
		t.Fatalf("prompt reply %+v", r)
	}
	us := c.updates()
	if got := userChunks(us)[r.Meta.MessageID]; got != "hello acp" {
		t.Errorf("user_message_chunk of %s = %q (chunks %v)", r.Meta.MessageID, got, userChunks(us))
	}
	if got := agentText(us); !strings.Contains(got, "hello acp") {
		t.Errorf("agent text %q", got)
	}
	fr := c.frames()
	if fr[len(fr)-1] != "reply:"+id {
		t.Errorf("the prompt's reply is not the last frame: %v", fr)
	}
	// The same ID over the core (what HTTP and the TUI show).
	msgs, err := srv.Manager.Messages(context.Background(), sid)
	if err != nil || len(msgs) < 2 || msgs[0].Info.ID != r.Meta.MessageID {
		t.Errorf("stored messages %v %v, want the user message %s first", len(msgs), err, r.Meta.MessageID)
	}
}

// TestConcurrentPrompts: two prompts at once both run, in order.
func TestConcurrentPrompts(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3, Delay: 20 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch1 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("first")})
	_, ch2 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("second")})
	r1, r2 := decodeReply(t, c.wait(ch1, "first")), decodeReply(t, c.wait(ch2, "second"))
	if r1.StopReason != "end_turn" || r2.StopReason != "end_turn" {
		t.Fatalf("replies %+v %+v", r1, r2)
	}
	var order []string
	for _, u := range c.updates() {
		if u.Update.Kind == "user_message_chunk" {
			order = append(order, u.text())
		}
	}
	if strings.Join(order, ",") != "first,second" {
		t.Errorf("delivered %v, want first then second", order)
	}
}

// TestSteer: a steer into a running turn is injected: its echo carries
// the ID the steering reply named, the prompt replies once, after the
// steered output, and the ID is the stored user message's.
func TestSteer(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 12, Delay: 30 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	pid, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("long task")})
	c.waitFor("the first agent chunk", func() bool { return agentText(c.updates()) != "" })
	var sr steerReply
	c.call("_session/steering", steerParams(sid, "also this", true), &sr)
	if sr.Outcome != "injected" || !strings.HasPrefix(sr.Meta.MessageID, "msg_") {
		t.Fatalf("steer reply %+v", sr)
	}
	r := decodeReply(t, c.wait(ch, "prompt"))
	if r.StopReason != "end_turn" {
		t.Fatalf("prompt reply %+v", r)
	}
	us := c.updates()
	if got := userChunks(us)[sr.Meta.MessageID]; got != "also this" {
		t.Errorf("echo of the steer %s = %q", sr.Meta.MessageID, got)
	}
	// The steered output (the model's answer to it) came before the reply.
	fr := c.frames()
	if fr[len(fr)-1] != "reply:"+pid {
		t.Errorf("prompt reply is not last: %v", fr)
	}
	if !strings.Contains(agentText(us), "also this") {
		t.Errorf("no steered output before the reply: %q", agentText(us))
	}
	msgs, err := srv.Manager.Messages(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range msgs {
		found = found || (m.Info.ID == sr.Meta.MessageID && m.Info.Role == "user")
	}
	if !found {
		t.Errorf("no stored user message %s", sr.Meta.MessageID)
	}
}

// TestSteerIdle: on an idle session promptRequired admits nothing;
// without it the steer starts a turn.
func TestSteerIdle(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 2}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	var sr steerReply
	c.call("_session/steering", steerParams(sid, "late", true), &sr)
	if sr.Outcome != "promptRequired" || sr.Reason != "noRunningTurn" {
		t.Fatalf("idle steer: %+v", sr)
	}
	if in, err := srv.Manager.Inbox(context.Background(), sid); err != nil || len(in) != 0 {
		t.Fatalf("inbox after promptRequired: %v %v", in, err)
	}
	if msgs, _ := srv.Manager.Messages(context.Background(), sid); len(msgs) != 0 {
		t.Fatalf("messages after promptRequired: %d", len(msgs))
	}
	c.call("_session/steering", steerParams(sid, "go", false), &sr)
	if sr.Outcome != "startedNewTurn" || sr.Meta.MessageID == "" {
		t.Fatalf("idle steer without promptRequired: %+v", sr)
	}
	c.waitFor("the new turn's echo", func() bool { return userChunks(c.updates())[sr.Meta.MessageID] == "go" })
}

// TestCancel: session/cancel stops the turn and revokes its pending steer;
// the prompt replies cancelled; a queued prompt stays and runs.
func TestCancel(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 40, Delay: 30 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("long")})
	c.waitFor("the first agent chunk", func() bool { return agentText(c.updates()) != "" })
	var sr steerReply
	c.call("_session/steering", steerParams(sid, "steer me", false), &sr)
	if sr.Outcome != "injected" {
		t.Fatalf("steer: %+v", sr)
	}
	_, ch2 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("queued after")})
	c.waitFor("the queued prompt's admission", func() bool {
		in, _ := srv.Manager.Inbox(context.Background(), sid)
		return len(in) == 2
	})
	c.notify("session/cancel", map[string]any{"sessionId": sid})
	if r := decodeReply(t, c.wait(ch, "prompt")); r.StopReason != "cancelled" {
		t.Fatalf("cancelled prompt replied %+v", r)
	}
	in, err := srv.Manager.Input(context.Background(), sid, sr.Meta.MessageID)
	if err != nil || in.State != opencode.InputRevoked {
		t.Errorf("the steer after cancel: %+v %v, want revoked", in, err)
	}
	if r := decodeReply(t, c.wait(ch2, "queued prompt")); r.StopReason != "end_turn" {
		t.Errorf("queued prompt replied %+v", r)
	}
	if _, ok := userChunks(c.updates())[sr.Meta.MessageID]; ok {
		t.Errorf("the revoked steer was echoed as delivered")
	}
}

// TestCancelThenSteer: a steer sent right after session/cancel never joins
// the cancelled prompt's reply: the prompt answers cancelled, every time
// (swept 50 times), and the steer joins the turn of the prompt queued
// behind it, which the cancel let start.
func TestCancelThenSteer(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 10 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	for i := range 50 {
		sid := c.newSession(srv.Directory)
		_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("long")})
		c.waitFor("the first agent chunk", func() bool {
			in, _ := srv.Manager.Inbox(context.Background(), sid)
			msgs, _ := srv.Manager.Messages(context.Background(), sid)
			return len(in) == 0 && len(msgs) >= 2
		})
		// A queued prompt: the cancel ends the first turn and its turn
		// starts, so the steer finds a turn running.
		_, ch2 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("queued")})
		c.waitFor("the queued prompt's admission", func() bool {
			in, _ := srv.Manager.Inbox(context.Background(), sid)
			return len(in) == 1
		})
		c.notify("session/cancel", map[string]any{"sessionId": sid})
		_, sch := c.request("_session/steering", steerParams(sid, "right after", false))
		if r := decodeReply(t, c.wait(ch, "prompt")); r.StopReason != "cancelled" {
			t.Fatalf("try %d: the cancelled prompt replied %+v", i, r)
		}
		c.wait(sch, "steer")
		if r := decodeReply(t, c.wait(ch2, "queued prompt")); r.StopReason != "end_turn" {
			t.Fatalf("try %d: the queued prompt replied %+v", i, r)
		}
	}
}

// TestCancelRequest: `$/cancel_request` on a prompt still queued revokes it
// and it answers -32800.
func TestCancelRequest(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 30 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch1 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("running")})
	id2, ch2 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("pending")})
	c.waitFor("two admitted", func() bool {
		in, _ := srv.Manager.Inbox(context.Background(), sid)
		return len(in) == 1
	})
	c.notify("$/cancel_request", map[string]any{"requestId": json.RawMessage(id2)})
	m := c.wait(ch2, "cancelled prompt")
	if m.Error == nil || m.Error.Code != -32800 {
		t.Fatalf("cancelled pending prompt: %+v", m)
	}
	decodeReply(t, c.wait(ch1, "running prompt"))
	for id, text := range userChunks(c.updates()) {
		if text == "pending" {
			t.Errorf("the revoked prompt %s was delivered", id)
		}
	}
}

// TestLoad: session/load on a new connection replays the conversation
// with the stored message IDs, then continues live without duplicates.
func TestLoad(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("remember me")})
	r := decodeReply(t, c.wait(ch, "prompt"))
	first := agentText(c.updates())

	c2 := start(t, srv)
	c2.handshake()
	c2.call("session/load", map[string]any{"sessionId": sid, "cwd": srv.Directory, "mcpServers": []any{}}, nil)
	us := c2.updates()
	if got := userChunks(us)[r.Meta.MessageID]; got != "remember me" {
		t.Errorf("replayed user chunk of %s = %q (%v)", r.Meta.MessageID, got, userChunks(us))
	}
	if got := agentText(us); got != first {
		t.Errorf("replayed agent text %q, live was %q", got, first)
	}
	n := len(us)
	_, ch = c2.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("and now")})
	decodeReply(t, c2.wait(ch, "prompt after load"))
	after := c2.updates()[n:]
	if got := userChunks(after); len(got) != 1 {
		t.Errorf("after load, user chunks %v, want just the new prompt", got)
	}
	if strings.Contains(agentText(after), "remember me") {
		t.Errorf("live updates after load repeat the replayed turn: %q", agentText(after))
	}
}

// TestBadInput: bad requests get JSON-RPC errors, not a dead connection.
func TestBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := start(t, srv)
	c.handshake()
	for _, tc := range []struct {
		method string
		params any
		code   int
	}{
		{"session/prompt", map[string]any{"sessionId": "ses_nope", "prompt": textPrompt("x")}, -32002},
		{"session/prompt", map[string]any{"sessionId": "ses_nope"}, -32602},
		{"session/new", map[string]any{"cwd": "relative", "mcpServers": []any{}}, -32602},
		{"no/such", map[string]any{}, -32601},
	} {
		_, ch := c.request(tc.method, tc.params)
		m := c.wait(ch, tc.method)
		if m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("%s %v: %+v, want error %d", tc.method, tc.params, m, tc.code)
		}
	}
	c.handshake() // still alive
}

// TestSteerAtTurnEnd: steers sent at every moment around a turn's end get
// one reply each; an injected one is echoed and answered before the
// prompt's single reply; a promptRequired one admits nothing.
func TestSteerAtTurnEnd(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3, Delay: 8 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	// The sweep widens until both sides of the turn's end were hit a few
	// times, however fast or slow the machine runs the turn.
	var injected, required int
	for i := 0; i < 80 && (injected < 3 || required < 3); i++ {
		sid := c.newSession(srv.Directory)
		pid, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt(fmt.Sprintf("turn %d", i))})
		time.Sleep(time.Duration(i*3) * time.Millisecond) // the sweep: the steer 3 ms later each round
		steerText := fmt.Sprintf("steer %d", i)
		sidReq, sch := c.request("_session/steering", steerParams(sid, steerText, true))
		sm := c.wait(sch, "steer")
		var sr steerReply
		if sm.Error != nil || json.Unmarshal(sm.Result, &sr) != nil {
			t.Fatalf("steer %d: %+v", i, sm)
		}
		r := decodeReply(t, c.wait(ch, "prompt"))
		if r.StopReason != "end_turn" {
			t.Errorf("turn %d: stopReason %s", i, r.StopReason)
		}
		// The session's updates and the order of the two replies.
		var mine []update
		for _, u := range c.updates() {
			if u.SessionID == sid {
				mine = append(mine, u)
			}
		}
		fr := c.frames()
		replies := map[string]int{}
		for _, f := range fr {
			if f == "reply:"+pid || f == "reply:"+sidReq {
				replies[f]++
			}
		}
		if replies["reply:"+pid] != 1 || replies["reply:"+sidReq] != 1 {
			t.Errorf("turn %d: replies %v, want one each", i, replies)
		}
		switch sr.Outcome {
		case "injected":
			injected++
			if userChunks(mine)[sr.Meta.MessageID] != steerText {
				t.Errorf("turn %d: injected steer %s never echoed: %v", i, sr.Meta.MessageID, userChunks(mine))
			}
			if !strings.Contains(agentText(mine), steerText) {
				t.Errorf("turn %d: the prompt replied before the steered output: %q", i, agentText(mine))
			}
		case "promptRequired":
			required++
			in, _ := srv.Manager.Inbox(context.Background(), sid)
			msgs, _ := srv.Manager.Messages(context.Background(), sid)
			for _, m := range msgs {
				for _, p := range m.Parts {
					if p.Text == steerText {
						t.Errorf("turn %d: promptRequired, yet the steer was stored", i)
					}
				}
			}
			if len(in) != 0 {
				t.Errorf("turn %d: promptRequired left the inbox %v", i, in)
			}
		default:
			t.Errorf("turn %d: outcome %q", i, sr.Outcome)
		}
	}
	t.Logf("%d injected, %d promptRequired", injected, required)
	if injected < 3 || required < 3 {
		t.Errorf("the sweep did not cover both sides of the turn's end (%d injected, %d promptRequired)", injected, required)
	}
}

// TestRevokeReplace: a queued prompt named by the client's message ID is
// replaced, then revoked through the extension; its request answers
// -32800 and it never runs.
func TestRevokeReplace(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 30 * time.Millisecond}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch1 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("running")})
	queued := "msg_" + strings.Repeat("0", 10) + "clientchosen01"
	_, ch2 := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("queued"),
		"_meta": map[string]any{"messageId": queued}})
	c.waitFor("the queued prompt", func() bool {
		in, _ := srv.Manager.Inbox(context.Background(), sid)
		return len(in) == 1 && in[0].ID == queued
	})
	var rep struct {
		MessageID string `json:"messageId"`
	}
	c.call("_opencode-server/replace", map[string]any{"sessionId": sid, "messageId": queued, "prompt": textPrompt("changed")}, &rep)
	if rep.MessageID != queued {
		t.Fatalf("replace: %+v", rep)
	}
	in, err := srv.Manager.Input(context.Background(), sid, queued)
	if err != nil || in.Prompt().Text != "changed" {
		t.Fatalf("after replace: %+v %v", in, err)
	}
	var rv struct {
		Revoked bool `json:"revoked"`
	}
	c.call("_opencode-server/revoke", map[string]any{"sessionId": sid, "messageId": queued}, &rv)
	if !rv.Revoked {
		t.Fatalf("revoke: %+v", rv)
	}
	if m := c.wait(ch2, "revoked prompt"); m.Error == nil || m.Error.Code != -32800 {
		t.Errorf("the revoked prompt's request: %+v, want -32800", m)
	}
	decodeReply(t, c.wait(ch1, "running prompt"))
	if _, ok := userChunks(c.updates())[queued]; ok {
		t.Errorf("the revoked prompt was delivered")
	}
}

// TestSlashCommands: a new session announces its commands; a prompt
// starting with /NAME runs that command's template.
func TestSlashCommands(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 2}})
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	// After the reply that tells the client the session (as opencode acp
	// sends it): an update about an unknown session could be dropped.
	c.waitFor("available_commands_update", func() bool {
		return slices.Contains(c.frames(), "available_commands_update")
	})
	fr := c.frames()
	if i := slices.Index(fr, "available_commands_update"); i < slices.IndexFunc(fr, func(f string) bool { return strings.HasPrefix(f, "reply:") && f != "reply:1" }) {
		t.Errorf("available_commands_update before the session/new reply: %v", fr)
	}
	c.mu.Lock()
	var names []string
	for _, m := range c.log {
		if m.Method != "session/update" {
			continue
		}
		var u struct {
			Update struct {
				Kind     string `json:"sessionUpdate"`
				Commands []struct {
					Name string `json:"name"`
				} `json:"availableCommands"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &u)
		if u.Update.Kind == "available_commands_update" {
			for _, cmd := range u.Update.Commands {
				names = append(names, cmd.Name)
			}
		}
	}
	c.mu.Unlock()
	if !strings.Contains(strings.Join(names, ","), "init") {
		t.Fatalf("available commands %v, want init among them", names)
	}
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt("/init keep it short")})
	decodeReply(t, c.wait(ch, "command prompt"))
	var asked string
	for _, r := range srv.Model.Calls() {
		if r.SessionID == sid {
			for _, m := range r.Messages {
				if m.Role == "user" {
					asked = m.Content
				}
			}
		}
	}
	if !strings.Contains(asked, "AGENTS.md") || !strings.Contains(asked, "keep it short") {
		t.Errorf("the model was asked %q, want the /init template with its arguments", asked)
	}
}

// TestConfigOptions: mode and model are config options; setting the mode
// switches the session's agent.
func TestConfigOptions(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	c := start(t, srv)
	c.handshake()
	var ns struct {
		SessionID     string `json:"sessionId"`
		ConfigOptions []struct {
			ID           string `json:"id"`
			CurrentValue string `json:"currentValue"`
		} `json:"configOptions"`
	}
	c.call("session/new", map[string]any{"cwd": srv.Directory, "mcpServers": []any{}}, &ns)
	got := map[string]string{}
	for _, o := range ns.ConfigOptions {
		got[o.ID] = o.CurrentValue
	}
	if got["mode"] != "build" || got["model"] != scripted.ProviderID+"/"+scripted.ModelID {
		t.Fatalf("config options %v", got)
	}
	c.call("session/set_config_option", map[string]any{"sessionId": ns.SessionID, "configId": "mode", "value": "plan"}, nil)
	if s, err := srv.Manager.GetSession(context.Background(), ns.SessionID); err != nil || s.Agent != "plan" {
		t.Errorf("after set_config_option mode=plan: agent %q %v", s.Agent, err)
	}
	c.call("session/set_mode", map[string]any{"sessionId": ns.SessionID, "modeId": "build"}, nil)
	if s, _ := srv.Manager.GetSession(context.Background(), ns.SessionID); s.Agent != "build" {
		t.Errorf("after set_mode build: agent %q", s.Agent)
	}
	_, ch := c.request("session/set_config_option", map[string]any{"sessionId": ns.SessionID, "configId": "model", "value": "nope/nope"})
	if m := c.wait(ch, "bad model"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("unknown model: %+v", m)
	}
}
