package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
)

// showCard is the client tool the tests offer.
var showCard = opencode.ClientTool{Name: "show_card", Description: "Shows a card to the user",
	Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)}

// cardPrompt makes the directive stub call show_card, then answer "Done. shown".
const cardPrompt = `call:show_card {"title":"hi"} then:shown`

// clientToolServer is a server on SQLite whose model follows the prompt's
// directives (stubmodel.Directives).
func clientToolServer(t *testing.T) (*stubmodel.Server, *testserver.Server, testserver.Options) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	opts := testserver.Options{SQLite: true, DataDir: t.TempDir(), Config: stubConfig(stub.URL(), "")}
	return stub, testserver.Start(t, opts), opts
}

func clientInput(sid, text string, delivery opencode.Delivery, tools ...opencode.ClientTool) *opencode.Input {
	return &opencode.Input{ID: identifier.NewMessage(), SessionID: sid, Delivery: delivery,
		Parts:       []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}},
		ClientTools: tools}
}

func admitOK(t *testing.T, m *lifecycle.Manager, in *opencode.Input) {
	t.Helper()
	if _, _, err := m.Admit(context.Background(), in); err != nil {
		t.Fatalf("admit: %v", err)
	}
}

// waitingCall polls until the session has one client call waiting and
// returns its ID.
func waitingCall(t *testing.T, m *lifecycle.Manager, sid string) string {
	t.Helper()
	var ids []string
	checkFor(t, 10*time.Second, "a client tool call to wait", func() bool {
		var err error
		ids, err = m.WaitingClientCalls(context.Background(), sid)
		return err == nil && len(ids) > 0
	})
	if len(ids) != 1 {
		t.Fatalf("waiting client calls %v, want one", ids)
	}
	return ids[0]
}

// toolPartOf is the session's stored tool part of callID.
func toolPartOf(t *testing.T, m *lifecycle.Manager, sid, callID string) opencode.Part {
	t.Helper()
	msgs, err := m.Messages(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range msgs {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartTool && p.CallID == callID {
				return p
			}
		}
	}
	t.Fatalf("no tool part of call %s", callID)
	return opencode.Part{}
}

// modelRequests decodes what the stub model was asked.
func modelRequests(t *testing.T, stub *stubmodel.Server) []stubmodel.Request {
	t.Helper()
	var out []stubmodel.Request
	for _, raw := range stub.Requests() {
		var req stubmodel.Request
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		out = append(out, req)
	}
	return out
}

// offeredTool is the request's tool of that name and how many times it is offered.
func offeredTool(req stubmodel.Request, name string) (stubmodel.Tool, int) {
	var tool stubmodel.Tool
	n := 0
	for _, tl := range req.Tools {
		if tl.Function.Name == name {
			tool, n = tl, n+1
		}
	}
	return tool, n
}

func errCode(err error) opencode.Code {
	var oe *opencode.Error
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

// TestClientToolTurn: the model is offered the input's client tool, calls
// it, and the turn waits (busy, the part running, no goroutine) until
// ToolResult answers; the result, completed or failed, is the model's tool
// result in the next call, and the turn ends. The exchange is one turn.
func TestClientToolTurn(t *testing.T) {
	for _, c := range []struct {
		name   string
		output string
		failed bool
	}{
		{"completed", `{"clicked":true}`, false},
		{"failed", "the user closed the card", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			stub, srv, _ := clientToolServer(t)
			m := srv.Manager
			ctx := context.Background()
			sid := newSession(t, srv.URL)
			in := clientInput(sid, cardPrompt, opencode.Queue, showCard)
			admitOK(t, m, in)
			callID := waitingCall(t, m, sid)

			reqs := modelRequests(t, stub)
			if len(reqs) != 1 {
				t.Fatalf("%d model calls while the client call waits, want 1", len(reqs))
			}
			tool, n := offeredTool(reqs[0], "show_card")
			if n != 1 || tool.Function.Description != showCard.Description || !jsonEqual(tool.Function.Parameters, showCard.Parameters) {
				t.Fatalf("the model was offered show_card %d times as %+v", n, tool.Function)
			}
			if _, n := offeredTool(reqs[0], "bash"); n != 1 {
				t.Error("the agent's tools were not offered beside the client tool")
			}
			if m.Status()[sid] != "busy" {
				t.Error("the session is not busy while the client call waits")
			}
			if p := toolPartOf(t, m, sid, callID); p.Tool != "show_card" || p.State.Status != "running" ||
				string(p.State.Input) != `{"title":"hi"}` {
				t.Fatalf("the waiting call's part: tool %s, state %+v", p.Tool, p.State)
			}

			if err := m.ToolResult(ctx, sid, callID, c.output, c.failed); err != nil {
				t.Fatalf("ToolResult: %v", err)
			}
			res, err := m.Wait(ctx, sid, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(res.Message.Parts); got != "Done. shown" {
				t.Errorf("the turn's answer %q, want %q", got, "Done. shown")
			}
			reqs = modelRequests(t, stub)
			if len(reqs) != 2 {
				t.Fatalf("%d model calls, want 2", len(reqs))
			}
			last := reqs[1].LastMessage()
			if last.Role != "tool" || last.ToolCallID != callID || last.Content != c.output {
				t.Errorf("the second model call's last message %+v, want the tool result %q of %s", last, c.output, callID)
			}
			if _, n := offeredTool(reqs[1], "show_card"); n != 1 {
				t.Error("the turn's second model call was not offered the client tool")
			}
			p := toolPartOf(t, m, sid, callID)
			want, wantEvent := "completed", opencode.EvToolSuccess
			if c.failed {
				want, wantEvent = "error", opencode.EvToolFailed
			}
			if p.State.Status != want || p.State.Time == nil || p.State.Time.End == nil ||
				!c.failed && (p.State.Output == nil || *p.State.Output != c.output) || c.failed && p.State.Error != c.output {
				t.Errorf("the answered part's state %+v, want %s with %q", p.State, want, c.output)
			}
			evs, err := m.Events(ctx, sid, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var seq []string
			for _, e := range evs {
				if strings.HasPrefix(e.Type, "session.next.tool.") && e.Type != opencode.EvToolInputDelta &&
					strings.Contains(string(e.Data), callID) {
					seq = append(seq, e.Type)
				}
			}
			if w := []string{opencode.EvToolInputStarted, opencode.EvToolInputEnded, opencode.EvToolCalled, wantEvent}; !slices.Equal(seq, w) {
				t.Errorf("the call's events %v, want %v", seq, w)
			}
			// One turn: one user message, two assistant messages.
			msgs, _ := m.Messages(ctx, sid)
			if len(msgs) != 3 {
				t.Errorf("%d messages, want the user's and two model calls'", len(msgs))
			}
			if ids, _ := m.WaitingClientCalls(ctx, sid); len(ids) != 0 {
				t.Errorf("waiting calls after the turn: %v", ids)
			}
		})
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

func textOf(parts []opencode.Part) string {
	var out []string
	for _, p := range parts {
		if p.Type == opencode.PartText {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "")
}

// TestClientToolResultErrors: ToolResult answers only a call that waits in
// that session; a retry of the same result is done, another result is a
// conflict.
func TestClientToolResultErrors(t *testing.T) {
	_, srv, _ := clientToolServer(t)
	m := srv.Manager
	ctx := context.Background()
	sid, other := newSession(t, srv.URL), newSession(t, srv.URL)
	in := clientInput(sid, cardPrompt, opencode.Queue, showCard)
	admitOK(t, m, in)
	callID := waitingCall(t, m, sid)
	check := func(what string, err error, want opencode.Code) {
		t.Helper()
		if errCode(err) != want || (err == nil) != (want == "") {
			t.Errorf("%s: %v, want code %q", what, err, want)
		}
	}
	check("an unknown call", m.ToolResult(ctx, sid, "call_nope", "x", false), opencode.ENotFound)
	check("the call in another session", m.ToolResult(ctx, other, callID, "x", false), opencode.ENotFound)
	if err := m.ToolResult(ctx, sid, "call_nope", "x", false); err == nil || !strings.Contains(err.Error(), "call_nope is not waiting for a result") {
		t.Errorf("the unknown call's message: %v", err)
	}
	check("the result", m.ToolResult(ctx, sid, callID, "ok", false), "")
	if _, err := m.Wait(ctx, sid, in.ID); err != nil {
		t.Fatal(err)
	}
	check("the same result again", m.ToolResult(ctx, sid, callID, "ok", false), "")
	check("another output", m.ToolResult(ctx, sid, callID, "other", false), opencode.EConflict)
	check("the same output as a failure", m.ToolResult(ctx, sid, callID, "ok", true), opencode.EConflict)
	if p := toolPartOf(t, m, sid, callID); p.State.Output == nil || *p.State.Output != "ok" {
		t.Errorf("a retry changed the answered part: %+v", p.State)
	}
}

// TestClientToolAbort: an abort fails a waiting client call like any
// running tool; it is not waiting afterwards.
func TestClientToolAbort(t *testing.T) {
	_, srv, _ := clientToolServer(t)
	m := srv.Manager
	ctx := context.Background()
	sid := newSession(t, srv.URL)
	in := clientInput(sid, cardPrompt, opencode.Queue, showCard)
	admitOK(t, m, in)
	callID := waitingCall(t, m, sid)
	if err := m.Abort(ctx, sid); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, sid, in.ID); err != nil {
		t.Fatal(err)
	}
	if p := toolPartOf(t, m, sid, callID); p.State.Status != "error" || p.State.Error != "Tool execution aborted" {
		t.Errorf("the aborted call's state %+v", p.State)
	}
	if ids, _ := m.WaitingClientCalls(ctx, sid); len(ids) != 0 {
		t.Errorf("waiting calls after the abort: %v", ids)
	}
	if err := m.ToolResult(ctx, sid, callID, "late", false); errCode(err) != opencode.ENotFound {
		t.Errorf("a result after the abort: %v, want ENotFound", err)
	}
	if m.Status()[sid] == "busy" {
		t.Error("the session is busy after the abort")
	}
}

// TestClientToolSteerReplaces: a steer delivered into the turn brings its
// client tools to the turn's next model call; one of the same name
// replaces the earlier one.
func TestClientToolSteerReplaces(t *testing.T) {
	stub, srv, _ := clientToolServer(t)
	m := srv.Manager
	ctx := context.Background()
	sid := newSession(t, srv.URL)
	in := clientInput(sid, cardPrompt, opencode.Queue, showCard)
	admitOK(t, m, in)
	callID := waitingCall(t, m, sid)
	v2 := showCard
	v2.Description = "Shows a card, v2"
	pick := opencode.ClientTool{Name: "pick"}
	admitOK(t, m, clientInput(sid, "and one more", opencode.Steer, v2, pick))
	if err := m.ToolResult(ctx, sid, callID, "ok", false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, sid, in.ID); err != nil {
		t.Fatal(err)
	}
	reqs := modelRequests(t, stub)
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	if tool, n := offeredTool(reqs[1], "show_card"); n != 1 || tool.Function.Description != v2.Description {
		t.Errorf("the second call offered show_card %d times, as %q", n, tool.Function.Description)
	}
	if tool, n := offeredTool(reqs[1], "pick"); n != 1 || !jsonEqual(tool.Function.Parameters, json.RawMessage(`{"type":"object","properties":{}}`)) {
		t.Errorf("the steer's tool without parameters: offered %d times as %+v", n, tool.Function)
	}
}

// TestClientToolRestart: a shutdown while a client call waits aborts it as
// any running call; the continued turn offers the client tools again, and
// the old call is not waiting (ENotFound).
func TestClientToolRestart(t *testing.T) {
	stub, srv, opts := clientToolServer(t)
	sid := newSession(t, srv.URL)
	in := clientInput(sid, cardPrompt, opencode.Queue, showCard)
	admitOK(t, srv.Manager, in)
	callID := waitingCall(t, srv.Manager, sid)
	srv.Stop()
	srv = testserver.Start(t, opts)
	m := srv.Manager
	ctx := context.Background()
	checkFor(t, 10*time.Second, "the cut-off turn to be continued", func() bool { return len(stub.Requests()) >= 2 })
	if err := m.WaitIdle(ctx, sid); err != nil {
		t.Fatal(err)
	}
	reqs := modelRequests(t, stub)
	if _, n := offeredTool(reqs[1], "show_card"); n != 1 {
		t.Error("the continued turn was not offered the input's client tool")
	}
	if p := toolPartOf(t, m, sid, callID); p.State.Status != "error" {
		t.Errorf("the call cut off by the shutdown: %+v", p.State)
	}
	if err := m.ToolResult(ctx, sid, callID, "late", false); errCode(err) != opencode.ENotFound {
		t.Errorf("a result after the restart: %v, want ENotFound", err)
	}
}

// TestClientToolAdmission: client tools are checked before anything is
// admitted; they are part of what makes two admissions the same; they are
// stored with the input.
func TestClientToolAdmission(t *testing.T) {
	_, srv, _ := clientToolServer(t)
	m := srv.Manager
	ctx := context.Background()
	sid := newSession(t, srv.URL)
	many := make([]opencode.ClientTool, 129)
	for i := range many {
		many[i] = opencode.ClientTool{Name: fmt.Sprintf("t%d", i)}
	}
	for _, c := range []struct {
		name  string
		tools []opencode.ClientTool
		want  string // in the message
	}{
		{"empty name", []opencode.ClientTool{{Name: ""}}, "is invalid"},
		{"a space", []opencode.ClientTool{{Name: "show card"}}, "is invalid"},
		{"a dot", []opencode.ClientTool{{Name: "show.card"}}, "is invalid"},
		{"65 characters", []opencode.ClientTool{{Name: strings.Repeat("a", 65)}}, "is invalid"},
		{"a built-in's name", []opencode.ClientTool{{Name: "bash"}}, "tool of the server"},
		{"twice", []opencode.ClientTool{showCard, showCard}, "given twice"},
		{"an array schema", []opencode.ClientTool{{Name: "x", Parameters: json.RawMessage(`[1]`)}}, "JSON Schema object"},
		{"a string schema", []opencode.ClientTool{{Name: "x", Parameters: json.RawMessage(`"s"`)}}, "JSON Schema object"},
		{"a broken schema", []opencode.ClientTool{{Name: "x", Parameters: json.RawMessage(`{"type":`)}}, "JSON Schema object"},
		{"too many", many, "at most 128"},
	} {
		in := clientInput(sid, "hello", opencode.Queue, c.tools...)
		_, _, err := m.Admit(ctx, in)
		var oe *opencode.Error
		if !errors.As(err, &oe) || oe.Code != opencode.EInvalid || !strings.Contains(oe.Message, c.want) {
			t.Errorf("%s: %v, want EInvalid saying %q", c.name, err, c.want)
		}
		if _, err := srv.Store.GetInput(ctx, in.ID); err == nil {
			t.Errorf("%s: the input was admitted", c.name)
		}
	}
	if msgs, _ := m.Messages(ctx, sid); len(msgs) != 0 {
		t.Errorf("refused admissions left %d messages", len(msgs))
	}
	if m.Status()[sid] == "busy" {
		t.Error("a refused admission started a turn")
	}

	// 128 tools and a null schema are fine.
	ok := clientInput(sid, "hello", opencode.Queue, append(many[:127:127], opencode.ClientTool{Name: "n", Parameters: json.RawMessage(`null`)})...)
	admitOK(t, m, ok)
	if _, err := m.Wait(ctx, sid, ok.ID); err != nil {
		t.Fatal(err)
	}
	// The retry is the same admission only with the same tools.
	again := *ok
	if _, existed, err := m.Admit(ctx, &again); err != nil || !existed {
		t.Errorf("the same retry: existed %v, %v", existed, err)
	}
	other := *ok
	other.ClientTools = []opencode.ClientTool{showCard}
	if _, _, err := m.Admit(ctx, &other); errCode(err) != opencode.EConflict {
		t.Errorf("a retry with other client tools: %v, want EConflict", err)
	}
	// Stored with the input (SQLite), as admitted.
	stored, err := srv.Store.GetInput(ctx, ok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.ClientTools) != 128 || stored.ClientTools[0].Name != "t0" || stored.ClientTools[127].Name != "n" {
		t.Errorf("stored client tools: %d, %+v", len(stored.ClientTools), stored.ClientTools[:1])
	}
}
