package agui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/agui/aguiproto"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipbjson"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
)

type ev map[string]any

// client keeps no idle connection: none outlives a test's server.
var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func (e ev) s(k string) string { v, _ := e[k].(string); return v }

// run posts one RunAgentInput and reads the whole stream.
func run(t *testing.T, url string, body any) (int, []ev, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url+"/agui", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /agui: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, nil, buf.String()
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var evs []ev
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var raw strings.Builder
	for sc.Scan() {
		line := sc.Text()
		raw.WriteString(line + "\n")
		if strings.Contains(line, "\r") {
			t.Errorf("a CR in the stream: %q", line)
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var e ev
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("frame %q: %v", d, err)
		}
		evs = append(evs, e)
	}
	verify(t, evs)
	return 200, evs, raw.String()
}

// verify checks a stream by the ordering rules of @ag-ui/client's
// verifier: RUN_STARTED first, nothing after RUN_ERROR or RUN_FINISHED,
// text messages, reasoning, tool calls and steps opened before they are
// used and all closed at RUN_FINISHED.
func verify(t *testing.T, evs []ev) {
	t.Helper()
	if len(evs) == 0 || evs[0].s("type") != "RUN_STARTED" {
		t.Fatalf("the stream does not start with RUN_STARTED: %v", evs)
	}
	texts, reasoning, calls, steps := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, e := range evs {
		typ := e.s("type")
		if i > 0 && (evs[i-1].s("type") == "RUN_ERROR" || evs[i-1].s("type") == "RUN_FINISHED") {
			t.Fatalf("event %d (%s) after the run ended", i, typ)
		}
		switch typ {
		case "TEXT_MESSAGE_START":
			if texts[e.s("messageId")] {
				t.Fatalf("text %s started twice", e.s("messageId"))
			}
			texts[e.s("messageId")] = true
		case "TEXT_MESSAGE_CONTENT":
			if !texts[e.s("messageId")] {
				t.Fatalf("content of text %s not started", e.s("messageId"))
			}
		case "TEXT_MESSAGE_END":
			if !texts[e.s("messageId")] {
				t.Fatalf("end of text %s not started", e.s("messageId"))
			}
			delete(texts, e.s("messageId"))
		case "REASONING_MESSAGE_START":
			reasoning[e.s("messageId")] = true
		case "REASONING_MESSAGE_CONTENT":
			if !reasoning[e.s("messageId")] {
				t.Fatalf("reasoning content not started")
			}
		case "REASONING_MESSAGE_END":
			delete(reasoning, e.s("messageId"))
		case "TOOL_CALL_START":
			if calls[e.s("toolCallId")] {
				t.Fatalf("call started twice")
			}
			calls[e.s("toolCallId")] = true
		case "TOOL_CALL_ARGS":
			if !calls[e.s("toolCallId")] {
				t.Fatalf("args of a call not started: %v", e)
			}
		case "TOOL_CALL_END":
			if !calls[e.s("toolCallId")] {
				t.Fatalf("end of a call not started: %v", e)
			}
			delete(calls, e.s("toolCallId"))
		case "STEP_STARTED":
			if steps[e.s("stepName")] {
				t.Fatalf("step %s started twice", e.s("stepName"))
			}
			steps[e.s("stepName")] = true
		case "STEP_FINISHED":
			if !steps[e.s("stepName")] {
				t.Fatalf("step %s finished, not started", e.s("stepName"))
			}
			delete(steps, e.s("stepName"))
		case "RUN_FINISHED":
			if len(texts)+len(reasoning)+len(calls)+len(steps) > 0 {
				t.Fatalf("RUN_FINISHED with open texts %v reasoning %v calls %v steps %v", texts, reasoning, calls, steps)
			}
		}
	}
	last := evs[len(evs)-1].s("type")
	if last != "RUN_FINISHED" && last != "RUN_ERROR" {
		t.Fatalf("the stream ends with %s", last)
	}
}

func types(evs []ev) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.s("type"))
	}
	return out
}

func find(evs []ev, typ string) []ev {
	var out []ev
	for _, e := range evs {
		if e.s("type") == typ {
			out = append(out, e)
		}
	}
	return out
}

func text(evs []ev, role string) string {
	var b strings.Builder
	ids := map[string]bool{}
	for _, e := range evs {
		switch e.s("type") {
		case "TEXT_MESSAGE_START":
			r := e.s("role")
			ids[e.s("messageId")] = r == role || (r == "" && role == "assistant")
		case "TEXT_MESSAGE_CONTENT":
			if ids[e.s("messageId")] {
				b.WriteString(e.s("delta"))
			}
		}
	}
	return b.String()
}

type httpMessage struct {
	Info struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	} `json:"info"`
	Parts []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		CallID string `json:"callID"`
		// Metadata holds the client's ID of a message it sent under its
		// own (AG-UI's clientMessageId).
		Metadata struct {
			AGUI struct {
				ClientMessageID string `json:"clientMessageId"`
			} `json:"agui"`
		} `json:"metadata"`
		State *struct {
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"state"`
	} `json:"parts"`
}

func messages(t *testing.T, url, sid string) []httpMessage {
	t.Helper()
	resp, err := client.Get(url + "/session/" + sid + "/message")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []httpMessage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func user(id, content string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": content}
}

func input(thread, runID string, msgs ...any) map[string]any {
	if msgs == nil {
		msgs = []any{}
	}
	return map[string]any{"threadId": thread, "runId": runID, "messages": msgs, "tools": []any{}, "context": []any{},
		"state": map[string]any{}, "forwardedProps": map[string]any{}}
}

// TestRunNewThread: a run on an unknown thread in our format creates the
// session under that ID; its user message (a client UUID) is admitted under
// a msg_ ID the MESSAGES_SNAPSHOT gives; the reply streams as text with the
// assistant's msg_ ID in a step; the same IDs are read over HTTP. A second
// run with the snapshot's history admits only its new message; the same
// run again admits nothing and replays its turn.
func TestRunNewThread(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	defer srv.Stop()
	thread := identifier.NewSession()
	st, evs, raw := run(t, srv.URL, input(thread, "run-1", user("3f1c6a52-uuid-1", "hello there")))
	if st != 200 {
		t.Fatalf("status %d: %s", st, raw)
	}
	if got := types(evs)[:3]; strings.Join(got, ",") != "RUN_STARTED,MESSAGES_SNAPSHOT,STATE_SNAPSHOT" {
		t.Errorf("stream opens %v", got)
	}
	if evs[0].s("threadId") != thread || evs[0].s("runId") != "run-1" {
		t.Errorf("RUN_STARTED %v", evs[0])
	}
	snap := evs[1]["messages"].([]any)
	if len(snap) != 1 {
		t.Fatalf("snapshot %v", snap)
	}
	userID := snap[0].(map[string]any)["id"].(string)
	if identifier.Check(identifier.Message, userID) != nil {
		t.Errorf("user message ID %q is not ours", userID)
	}
	if got := text(evs, "assistant"); got != "You said: hello there" {
		t.Errorf("streamed text %q", got)
	}
	fin := evs[len(evs)-1]
	if fin.s("type") != "RUN_FINISHED" || fin["outcome"].(map[string]any)["type"] != "success" {
		t.Errorf("last event %v", fin)
	}
	msgs := messages(t, srv.URL, thread)
	if len(msgs) != 2 || msgs[0].Info.ID != userID {
		t.Fatalf("HTTP messages %+v, want the user message %s and its reply", msgs, userID)
	}
	start := find(evs, "TEXT_MESSAGE_START")[0]
	if start.s("messageId") != msgs[1].Info.ID {
		t.Errorf("text message ID %s, the assistant's is %s", start.s("messageId"), msgs[1].Info.ID)
	}
	if steps := find(evs, "STEP_STARTED"); len(steps) != 1 || steps[0].s("stepName") != msgs[1].Info.ID {
		t.Errorf("steps %v", steps)
	}

	// The client re-sends the same run (its answer was lost): nothing new.
	_, again, _ := run(t, srv.URL, input(thread, "run-1", user("3f1c6a52-uuid-1", "hello there")))
	if n := len(messages(t, srv.URL, thread)); n != 2 {
		t.Errorf("%d messages after the repeated run, want 2", n)
	}
	if got := text(again, "assistant"); got != "You said: hello there" {
		t.Errorf("the repeated run replays %q", got)
	}

	// The next run: the history as the snapshot gave it, and a new message.
	hist := []any{snap[0], map[string]any{"id": msgs[1].Info.ID, "role": "assistant", "content": "You said: hello there"},
		user("9a9a-uuid-2", "and again")}
	_, second, _ := run(t, srv.URL, input(thread, "run-2", hist...))
	if got := text(second, "assistant"); got != "You said: and again" {
		t.Errorf("second run text %q: %v", got, second)
	}
	msgs = messages(t, srv.URL, thread)
	if len(msgs) != 4 {
		t.Fatalf("%d messages after the second run, want 4", len(msgs))
	}
	snap2 := second[1]["messages"].([]any)
	if id := snap2[len(snap2)-1].(map[string]any)["id"]; id != msgs[2].Info.ID {
		t.Errorf("second snapshot's last message %v, the session's new user message is %s", id, msgs[2].Info.ID)
	}
	// What the model was sent: the whole conversation, once.
	calls := srv.Model.Calls()
	last := calls[len(calls)-1]
	var users int
	for _, m := range last.Messages {
		if m.Role == "user" {
			users++
		}
	}
	if users != 2 {
		t.Errorf("the model got %d user messages, want 2", users)
	}
}

// TestBadInput: bad input is a 4xx before any event, and nothing is
// admitted (no session is made).
func TestBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	defer srv.Stop()
	thread := identifier.NewSession()
	big := strings.Repeat("x", 1<<20+10)
	for _, tt := range []struct {
		name string
		body any
		want int
	}{
		{"not json", "{", 400},
		{"messages not an array", map[string]any{"threadId": thread, "runId": "r", "messages": "hi"}, 400},
		{"no messages", map[string]any{"threadId": thread, "runId": "r"}, 400},
		{"unknown role", map[string]any{"threadId": thread, "runId": "r", "messages": []any{map[string]any{"id": "a", "role": "robot", "content": "x"}}}, 400},
		{"thread of another format", map[string]any{"threadId": "thread-1", "runId": "r", "messages": []any{}}, 400},
		{"no runId", map[string]any{"threadId": thread, "messages": []any{}}, 400},
		{"huge state", map[string]any{"threadId": thread, "runId": "r", "messages": []any{}, "state": map[string]any{"x": big}}, 413},
		{"bad delivery", map[string]any{"threadId": thread, "runId": "r", "messages": []any{user("u", "x")}, "forwardedProps": map[string]any{"delivery": "now"}}, 400},
		{"user without content", map[string]any{"threadId": thread, "runId": "r", "messages": []any{map[string]any{"id": "u", "role": "user"}}}, 400},
		{"tool without call", map[string]any{"threadId": thread, "runId": "r", "messages": []any{map[string]any{"id": "u", "role": "tool", "content": "x"}}}, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			if s, ok := tt.body.(string); ok {
				b = []byte(s)
			} else {
				b, _ = json.Marshal(tt.body)
			}
			resp, err := client.Post(srv.URL+"/agui", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != tt.want || e.Error.Message == "" {
				t.Errorf("status %d %+v, want %d with a message", resp.StatusCode, e, tt.want)
			}
		})
	}
	resp, err := client.Get(srv.URL + "/session/" + thread)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("bad input made the session: %d", resp.StatusCode)
	}
}

// toolServer is a server on the directive stub (call:NAME {...} then: X)
// whose edits ask permission.
func toolServer(t *testing.T, opts ...stubmodel.Option) (*testserver.Server, *stubmodel.Server) {
	stub := stubmodel.NewServer(t, stubmodel.Directives, opts...)
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}, Permission: json.RawMessage(`{"edit":"ask"}`)}
	return testserver.Start(t, testserver.Options{Config: cfg}), stub
}

// TestToolTurnAndInterrupt: a backend tool's call and result stream as
// TOOL_CALL_* in its step; an edit that asks ends the run with an interrupt
// naming the ask and its call; the next run's resume answers it and streams
// the rest of the turn.
func TestToolTurnAndInterrupt(t *testing.T) {
	srv, _ := toolServer(t)
	defer srv.Stop()
	file := filepath.Join(srv.Directory, "a.txt")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	thread := identifier.NewSession()
	st, evs, raw := run(t, srv.URL, input(thread, "r1", user("u1", `call:glob {"pattern":"*.txt"} then: listed`)))
	if st != 200 {
		t.Fatalf("status %d: %s", st, raw)
	}
	starts := find(evs, "TOOL_CALL_START")
	if len(starts) != 1 || starts[0].s("toolCallName") != "glob" {
		t.Fatalf("tool starts %v\n%s", starts, raw)
	}
	res := find(evs, "TOOL_CALL_RESULT")
	if len(res) != 1 || !strings.Contains(res[0].s("content"), "a.txt") || !strings.HasPrefix(res[0].s("messageId"), "prt_") {
		t.Errorf("tool results %v", res)
	}
	if !strings.HasPrefix(starts[0].s("parentMessageId"), "msg_") {
		t.Errorf("parentMessageId %q", starts[0].s("parentMessageId"))
	}
	if got := text(evs, "assistant"); got != "Done. listed" {
		t.Errorf("text %q", got)
	}
	if n := len(find(evs, "STEP_STARTED")); n != 2 {
		t.Errorf("%d steps, want 2 (the call, the answer)", n)
	}

	prompt := `call:edit {"filePath":"` + file + `","oldString":"one","newString":"two"} then: edited`
	_, evs, raw = run(t, srv.URL, input(thread, "r2", user("u2", prompt)))
	fin := evs[len(evs)-1]
	out, _ := fin["outcome"].(map[string]any)
	if fin.s("type") != "RUN_FINISHED" || out["type"] != "interrupt" {
		t.Fatalf("run ended %v, want an interrupt\n%s", fin, raw)
	}
	ints := out["interrupts"].([]any)
	in0 := ints[0].(map[string]any)
	if in0["reason"] != "permission" || !strings.HasPrefix(in0["id"].(string), "per_") || in0["toolCallId"] == "" {
		t.Errorf("interrupt %v", in0)
	}
	// Other input while it waits is refused, and admits nothing.
	before := len(messages(t, srv.URL, thread))
	_, evs, _ = run(t, srv.URL, input(thread, "r3", user("u3", "something else")))
	if last := evs[len(evs)-1]; last.s("type") != "RUN_ERROR" || last.s("code") != "PENDING_INTERRUPT" {
		t.Errorf("input while an interrupt waits: %v", last)
	}
	if n := len(messages(t, srv.URL, thread)); n != before {
		t.Errorf("refused input admitted: %d messages, were %d", n, before)
	}
	body := input(thread, "r4", user("u2", prompt))
	body["resume"] = []any{map[string]any{"interruptId": in0["id"], "status": "resolved", "payload": map[string]any{"reply": "once"}}}
	_, evs, raw = run(t, srv.URL, body)
	if got := text(evs, "assistant"); got != "Done. edited" {
		t.Errorf("resumed run text %q\n%s", got, raw)
	}
	if b, _ := os.ReadFile(file); string(b) != "two\n" {
		t.Errorf("file %q after the approved edit", b)
	}
}

// TestFrontendTool: a tool from tools[] is offered to the model; its call
// ends the run with the call pending for the client; the client's tool
// message in the next run is the result the model gets, in the same turn.
func TestFrontendTool(t *testing.T) {
	srv, stub := toolServer(t)
	defer srv.Stop()
	thread := identifier.NewSession()
	body := input(thread, "r1", user("u1", `call:confirm_choice {"choice":"blue"} then: confirmed`))
	body["tools"] = []any{map[string]any{"name": "confirm_choice", "description": "Ask the user to confirm a choice",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"choice": map[string]any{"type": "string"}}}}}
	_, evs, raw := run(t, srv.URL, body)
	fin := evs[len(evs)-1]
	out, _ := fin["outcome"].(map[string]any)
	pend, _ := out["pendingToolCallIds"].([]any)
	if out["type"] != "success" || len(pend) != 1 {
		t.Fatalf("run ended %v, want success with the pending call\n%s", fin, raw)
	}
	callID := pend[0].(string)
	if st := find(evs, "TOOL_CALL_START"); len(st) != 1 || st[0].s("toolCallName") != "confirm_choice" || st[0].s("toolCallId") != callID {
		t.Errorf("tool starts %v", st)
	}
	snap := evs[1]["messages"].([]any)
	hist := append(snap, map[string]any{"id": "asst-1", "role": "assistant", "toolCalls": []any{map[string]any{"id": callID, "type": "function",
		"function": map[string]any{"name": "confirm_choice", "arguments": `{"choice":"blue"}`}}}},
		map[string]any{"id": "tool-uuid-1", "role": "tool", "toolCallId": callID, "content": "the user confirmed blue"})
	body2 := input(thread, "r2", hist...)
	body2["tools"] = body["tools"]
	_, evs, raw = run(t, srv.URL, body2)
	if got := text(evs, "assistant"); got != "Done. confirmed" {
		t.Errorf("continued text %q\n%s", got, raw)
	}
	raws := stub.Requests()
	if !strings.Contains(string(raws[len(raws)-1]), "the user confirmed blue") {
		t.Errorf("the model's last request lacks the client's tool result: %s", raws[len(raws)-1])
	}
	var first stubmodel.Request
	_ = json.Unmarshal(raws[0], &first)
	if !strings.Contains(fmt.Sprint(first.Tools), "confirm_choice") {
		t.Errorf("the model was not offered the frontend tool")
	}
	if n := len(messages(t, srv.URL, thread)); n != 3 {
		t.Errorf("%d messages, want 3 (user, the call's step, the answer)", n)
	}
}

// TestProtobufRun: a client that asks for AG-UI's protobuf media type gets
// the same run as length-prefixed frames.
func TestProtobufRun(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	defer srv.Stop()
	thread := identifier.NewSession()
	b, _ := json.Marshal(input(thread, "p1", user("u1", "in binary")))
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/agui", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", aguiproto.MediaType)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != aguiproto.MediaType {
		t.Fatalf("Content-Type %q", ct)
	}
	var evs []ev
	for {
		pe, err := aguipbjson.ReadFrame(resp.Body)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(evs), err)
		}
		m, err := aguipbjson.JSON(pe)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev(m))
	}
	verify(t, evs)
	if got := text(evs, "assistant"); got != "You said: in binary" {
		t.Errorf("text %q over protobuf: %v", got, types(evs))
	}
}

// failing answers every model request with a 400 (no retry).
func failing(req stubmodel.Request) stubmodel.Response {
	if strings.Contains(req.LastUserText(), "fail") {
		return stubmodel.Response{Status: 400, ErrorMessage: "the model refused"}
	}
	return stubmodel.Directives(req)
}

// TestFailureAndAbort: a turn whose model call fails ends the run with
// RUN_ERROR and a code; forwardedProps.abort aborts a running turn, whose
// run ends cancelled; closing a stream aborts nothing.
func TestFailureAndAbort(t *testing.T) {
	stub := stubmodel.NewServer(t, failing, stubmodel.WithChunks(40), stubmodel.WithDelay(50*time.Millisecond))
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}}
	srv := testserver.Start(t, testserver.Options{Config: cfg})
	defer srv.Stop()
	thread := identifier.NewSession()
	_, evs, raw := run(t, srv.URL, input(thread, "f1", user("u1", "please fail")))
	last := evs[len(evs)-1]
	if last.s("type") != "RUN_ERROR" || last.s("code") == "" || last.s("message") == "" {
		t.Fatalf("a failed turn ends %v\n%s", last, raw)
	}

	// A slow reply: the client leaves at once; the turn goes on.
	b, _ := json.Marshal(input(thread, "s1", user("u2", "a long answer please")))
	resp, err := client.Post(srv.URL+"/agui", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Manager.Status()[thread] != "busy" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if srv.Manager.Status()[thread] != "busy" {
		t.Fatal("the turn is not running after its client left")
	}
	abort := input(thread, "a1")
	abort["forwardedProps"] = map[string]any{"abort": true}
	_, evs, raw = run(t, srv.URL, abort)
	last = evs[len(evs)-1]
	out, _ := last["outcome"].(map[string]any)
	if last.s("type") != "RUN_FINISHED" || out["type"] != "cancelled" {
		t.Errorf("the aborting run ends %v, want cancelled\n%s", last, raw)
	}
	if st := srv.Manager.Status()[thread]; st == "busy" {
		t.Errorf("the session is still %s after the abort", st)
	}
}

// TestSteer: a run posted with delivery steer while a turn runs joins it:
// its stream starts with the running run as parentRunId, shows the steer's
// user message where the model got it, and the rest of that one turn.
func TestSteer(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedSlow()})
	defer srv.Stop()
	thread := identifier.NewSession()
	first := make(chan []ev, 1)
	go func() {
		_, evs, _ := run(t, srv.URL, input(thread, "r1", user("u1", "first question")))
		first <- evs
	}()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Manager.Status()[thread] != "busy" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	body := input(thread, "r2", user("u2", "and steer"))
	body["forwardedProps"] = map[string]any{"delivery": "steer"}
	_, evs, raw := run(t, srv.URL, body)
	if p := evs[0].s("parentRunId"); p != "r1" {
		t.Errorf("parentRunId %q, want r1", p)
	}
	snap := evs[1]["messages"].([]any)
	if last := snap[len(snap)-1].(map[string]any); last["content"] != "and steer" {
		t.Errorf("the steer's run's snapshot ends with %v, want the steer (admitted, pending)\n%s", last, raw)
	}
	if got := text(evs, "assistant"); !strings.Contains(got, "and steer") {
		t.Errorf("the answer to the steer %q", got)
	}
	evs1 := <-first
	if got := text(evs1, "user"); got != "and steer" {
		t.Errorf("the running run does not show the steer delivered into it: %q", got)
	}
	msgs := messages(t, srv.URL, thread)
	if len(msgs) != 4 {
		t.Errorf("%d messages, want 4 (one turn: user, reply, steer, reply)", len(msgs))
	}
}

// scriptedSlow streams its echo in 30 chunks 40 ms apart: a turn that
// runs long enough to be steered.
func scriptedSlow() scripted.Config { return scripted.Config{Chunks: 30, Delay: 40 * time.Millisecond} }

// TestQuestionInterrupt: a question the model asks ends the run with an
// interrupt of reason question; resume[] with answers gives the tool its
// answer and the turn goes on.
func TestQuestionInterrupt(t *testing.T) {
	srv, _ := toolServer(t)
	defer srv.Stop()
	thread := identifier.NewSession()
	q := `call:question {"questions":[{"question":"Which color?","header":"Color","options":[{"label":"blue","description":"b"},{"label":"red","description":"r"}]}]} then: asked`
	_, evs, raw := run(t, srv.URL, input(thread, "q1", user("u1", q)))
	fin := evs[len(evs)-1]
	out, _ := fin["outcome"].(map[string]any)
	if out["type"] != "interrupt" {
		t.Fatalf("run ended %v, want an interrupt\n%s", fin, raw)
	}
	in0 := out["interrupts"].([]any)[0].(map[string]any)
	if in0["reason"] != "question" || in0["message"] != "Which color?" || in0["toolCallId"] == "" {
		t.Errorf("interrupt %v", in0)
	}
	body := input(thread, "q2", user("u1", q))
	body["resume"] = []any{map[string]any{"interruptId": in0["id"], "status": "resolved", "payload": map[string]any{"answers": [][]string{{"blue"}}}}}
	_, evs, raw = run(t, srv.URL, body)
	if got := text(evs, "assistant"); got != "Done. asked" {
		t.Errorf("resumed run text %q\n%s", got, raw)
	}
	res := find(evs, "TOOL_CALL_RESULT")
	if len(res) != 1 || !strings.Contains(res[0].s("content"), "blue") {
		t.Errorf("the question's result %v", res)
	}
	// The same run again replays the turn; the answered question is not asked again.
	_, evs, _ = run(t, srv.URL, input(thread, "q3", user("u1", q)))
	if last := evs[len(evs)-1]; last.s("type") != "RUN_FINISHED" {
		t.Errorf("a repeat after the answer: %v", last)
	}
}

// slowLog is a store whose log reads take a while: a run's turn has begun
// streaming by the time the run has read the log.
type slowLog struct{ store.Store }

func (s slowLog) Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	time.Sleep(300 * time.Millisecond) // the slowness under test, not a wait for a condition
	return s.Store.Events(ctx, sessionID, after, limit)
}

// TestStreamsFromTheStart: a run that admitted its message subscribed
// before its turn began, so a text the log already shows started when
// the run reads it still streams delta by delta (every delta is in the
// subscription), not as one piece at its end.
func TestStreamsFromTheStart(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 40 * time.Millisecond},
		WrapStore: func(s store.Store) store.Store { return slowLog{s} }})
	defer srv.Stop()
	thread := identifier.NewSession()
	_, evs, raw := run(t, srv.URL, input(thread, "r1", user("u1", "stream me")))
	if got := text(evs, "assistant"); got != "You said: stream me" {
		t.Fatalf("text %q\n%s", got, raw)
	}
	if n := len(find(evs, "TEXT_MESSAGE_CONTENT")); n < 10 {
		t.Errorf("%d TEXT_MESSAGE_CONTENT events, want the deltas (20 chunks)", n)
	}
}

// TestFrontendToolWithServerTool: a frontend call and a server call in one
// model response: the run hands the frontend call over only once the
// server call has finished, so its result is in the run.
func TestFrontendToolWithServerTool(t *testing.T) {
	srv, _ := toolServer(t)
	defer srv.Stop()
	if err := os.WriteFile(filepath.Join(srv.Directory, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	thread := identifier.NewSession()
	body := input(thread, "r1", user("u1", `call:confirm_choice {"choice":"red"} call:glob {"pattern":"*.txt"} then: both`))
	body["tools"] = []any{map[string]any{"name": "confirm_choice", "description": "Confirm", "parameters": map[string]any{"type": "object"}}}
	_, evs, raw := run(t, srv.URL, body)
	fin := evs[len(evs)-1]
	out, _ := fin["outcome"].(map[string]any)
	pend, _ := out["pendingToolCallIds"].([]any)
	if len(pend) != 1 {
		t.Fatalf("run ended %v, want the frontend call pending\n%s", fin, raw)
	}
	res := find(evs, "TOOL_CALL_RESULT")
	if len(res) != 1 || !strings.Contains(res[0].s("content"), "b.txt") {
		t.Errorf("the server call's result in the run: %v\n%s", res, raw)
	}
}

// TestResultAndNewMessage: a run that brings a frontend call's result and
// a new user message streams the rest of the waiting turn, then the turn
// of its message.
func TestResultAndNewMessage(t *testing.T) {
	srv, _ := toolServer(t)
	defer srv.Stop()
	thread := identifier.NewSession()
	tools := []any{map[string]any{"name": "confirm_choice", "description": "Confirm", "parameters": map[string]any{"type": "object"}}}
	body := input(thread, "r1", user("u1", `call:confirm_choice {"choice":"green"} then: confirmed`))
	body["tools"] = tools
	_, evs, raw := run(t, srv.URL, body)
	out, _ := evs[len(evs)-1]["outcome"].(map[string]any)
	pend, _ := out["pendingToolCallIds"].([]any)
	if len(pend) != 1 {
		t.Fatalf("run ended %v\n%s", evs[len(evs)-1], raw)
	}
	hist := append(evs[1]["messages"].([]any),
		map[string]any{"id": "tool-1", "role": "tool", "toolCallId": pend[0], "content": "green it is"},
		user("u2", "and now this"))
	body2 := input(thread, "r2", hist...)
	body2["tools"] = tools
	_, evs, raw = run(t, srv.URL, body2)
	got := text(evs, "assistant")
	if !strings.Contains(got, "Done. confirmed") || !strings.Contains(got, "You said: and now this") {
		t.Errorf("the run streamed %q, want the waiting turn's end and the new message's answer\n%s", got, raw)
	}
	if last := evs[len(evs)-1]; last.s("type") != "RUN_FINISHED" {
		t.Errorf("ends %v", last)
	}
}

// TestQueuedBehindRunning: a run queued while another run's turn runs
// streams its own turn, which the core starts in the commit that ends the
// other (whose idle comes after the new turn's first events).
func TestQueuedBehindRunning(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 10, Delay: 30 * time.Millisecond}})
	defer srv.Stop()
	thread := identifier.NewSession()
	first := make(chan []ev, 1)
	go func() {
		_, evs, _ := run(t, srv.URL, input(thread, "r1", user("u1", "first one")))
		first <- evs
	}()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Manager.Status()[thread] != "busy" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, evs, raw := run(t, srv.URL, input(thread, "r2", user("u2", "second one")))
	if got := text(evs, "assistant"); got != "You said: second one" {
		t.Errorf("the queued run streamed %q\n%s", got, raw)
	}
	if got := text(<-first, "assistant"); got != "You said: first one" {
		t.Errorf("the first run streamed %q", got)
	}
}
