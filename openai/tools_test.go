package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

// stubServer is a server whose model is the stub that follows the
// prompt's directives: "call:NAME {args} then: TEXT" calls a tool, and
// answers "Done. TEXT" once it has the result.
func stubServer(t *testing.T, opts ...stubmodel.Option) (*testserver.Server, *stubmodel.Server) {
	t.Helper()
	stub := stubmodel.NewServer(t, stubmodel.Directives, opts...)
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}}
	return testserver.Start(t, testserver.Options{Config: cfg}), stub
}

const weatherPrompt = `call:get_weather {"city":"Paris"} then: sunny`

func weatherTool() responses.ToolUnionParam {
	return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Description: oai.String("The weather in a city"), Strict: oai.Bool(true),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required": []string{"city"}, "additionalProperties": false}}}
}

var weatherToolJSON = []any{map[string]any{"type": "function", "name": "get_weather",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}

// toolMessages are the tool results the stub was sent, by call ID, over
// all its requests.
func toolMessages(t *testing.T, stub *stubmodel.Server) []stubmodel.Message {
	t.Helper()
	var out []stubmodel.Message
	for _, raw := range stub.Requests() {
		var req stubmodel.Request
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatal(err)
		}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
			out = append(out, req.Messages[n-1])
		}
	}
	return out
}

// users counts a session's user messages: one turn's exchange with the
// client's tool adds none.
func users(t *testing.T, url, session string) int {
	t.Helper()
	n := 0
	for _, m := range messages(t, url, session) {
		if m.Info.Role == opencode.User {
			n++
		}
	}
	return n
}

// TestFunctionToolRoundTrip: with openai-go, a function tool's call ends
// the response completed with a function_call item (our tool part's ID,
// the call's ID, the arguments); the next request's function_call_output
// goes to the waiting call, the model is sent it, and the response to
// that request is the same turn going on, named by the assistant message
// that made the call. Non-streaming and streaming.
func TestFunctionToolRoundTrip(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[streaming]
		t.Run(name, func(t *testing.T) {
			srv, stub := stubServer(t, stubmodel.WithChunks(3))
			c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			send := func(p responses.ResponseNewParams) *responses.Response {
				t.Helper()
				if !streaming {
					r, err := c.Responses.New(ctx, p)
					if err != nil {
						t.Fatalf("Responses.New: %v", err)
					}
					checkRequired(t, "response", reflect.ValueOf(*r))
					return r
				}
				return streamSDK(t, ctx, c, p)
			}

			first := send(responses.ResponseNewParams{Tools: []responses.ToolUnionParam{weatherTool()},
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(weatherPrompt)}})
			if first.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(first.ID, "msg_") {
				t.Fatalf("first response %s %s", first.ID, first.Status)
			}
			var call responses.ResponseFunctionToolCall
			for _, it := range first.Output {
				if it.Type == "function_call" {
					call = it.AsFunctionCall()
				}
			}
			if call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || call.CallID == "" || !strings.HasPrefix(call.ID, "prt_") || call.Status != "completed" {
				t.Fatalf("function_call %+v in %s", call, first.RawJSON())
			}
			if len(first.Tools) != 1 || first.Tools[0].Name != "get_weather" || !first.Tools[0].Strict {
				t.Errorf("tools answered back: %+v", first.Tools)
			}
			sid := first.Conversation.ID
			var maker string
			for _, m := range messages(t, srv.URL, sid) {
				for _, p := range m.Parts {
					if p.ID == call.ID && p.CallID == call.CallID && p.Tool == "get_weather" {
						maker = m.Info.ID
					}
				}
			}
			if maker == "" {
				t.Fatalf("the session holds no tool part %s for call %s", call.ID, call.CallID)
			}

			next := send(responses.ResponseNewParams{PreviousResponseID: oai.String(first.ID),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String(call.CallID),
						Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String("22C and sunny")}}}}}})
			if next.ID != maker || next.PreviousResponseID != first.ID || next.Conversation.ID != sid ||
				next.Status != responses.ResponseStatusCompleted || next.OutputText() != "Done. sunny" {
				t.Fatalf("continuation %s after %s in %s: %s %q; want %s after %s", next.ID, next.PreviousResponseID, next.Conversation.ID,
					next.Status, next.OutputText(), maker, first.ID)
			}
			for _, it := range next.Output {
				if it.Type == "function_call" {
					t.Errorf("the continuation repeats the call: %s", next.RawJSON())
				}
			}
			results := toolMessages(t, stub)
			if len(results) != 1 || results[0].Content != "22C and sunny" || results[0].ToolCallID != call.CallID {
				t.Errorf("the model was sent tool results %+v", results)
			}
			if n := users(t, srv.URL, sid); n != 1 {
				t.Errorf("%d user messages: the exchange is not one turn", n)
			}

			// Both responses stay what they were, by their IDs.
			got, err := c.Responses.Get(ctx, first.ID, responses.ResponseGetParams{})
			if err != nil || got.Status != responses.ResponseStatusCompleted || len(got.Output) != len(first.Output) || got.Output[len(got.Output)-1].ID != call.ID {
				t.Errorf("Get(first): %v %s", err, got.RawJSON())
			}
			got, err = c.Responses.Get(ctx, next.ID, responses.ResponseGetParams{})
			if err != nil || got.OutputText() != "Done. sunny" || got.PreviousResponseID != first.ID {
				t.Errorf("Get(continuation): %v %s", err, got.RawJSON())
			}

			// The continuation's input is the call's output.
			items, err := c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
			if err != nil || len(items.Data) != 1 {
				t.Fatalf("InputItems.List(continuation): %v %+v", err, items)
			}
			out := items.Data[0].AsFunctionCallOutput()
			checkRequired(t, "input item", reflect.ValueOf(out))
			if out.Type != "function_call_output" || out.CallID != call.CallID || out.Output.OfString != "22C and sunny" {
				t.Errorf("input item %s", items.Data[0].RawJSON())
			}

			// The conversation goes on from the continuation.
			third := send(responses.ResponseNewParams{PreviousResponseID: oai.String(next.ID),
				Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("thanks")}})
			if third.Conversation.ID != sid || third.OutputText() != "You said: thanks" || third.PreviousResponseID != next.ID {
				t.Errorf("third: %s in %s after %s: %q", third.ID, third.Conversation.ID, third.PreviousResponseID, third.OutputText())
			}
		})
	}
}

// streamSDK streams a response with openai-go and checks its events: the
// SDK's types with their required fields, sequence numbers from 0, a
// function_call item's events in OpenAI's order with arguments deltas
// that add up; it returns the final response.
func streamSDK(t *testing.T, ctx context.Context, c oai.Client, p responses.ResponseNewParams) *responses.Response {
	t.Helper()
	st := c.Responses.NewStreaming(ctx, p)
	var final *responses.Response
	var types []string
	args := map[string]*strings.Builder{} // by item ID
	state := map[string]string{}          // item ID -> last event of it
	n := int64(0)
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		checkRequired(t, ev.Type, reflect.ValueOf(ev))
		if ev.SequenceNumber != n {
			t.Errorf("event %d (%s) has sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		n++
		switch e := ev.AsAny().(type) {
		case responses.ResponseOutputItemAddedEvent:
			if e.Item.Type == "function_call" {
				args[e.Item.ID] = &strings.Builder{}
				state[e.Item.ID] = "added"
			}
		case responses.ResponseFunctionCallArgumentsDeltaEvent:
			if s := state[e.ItemID]; s != "added" && s != "delta" {
				t.Errorf("arguments delta of %s after %q", e.ItemID, s)
			}
			args[e.ItemID].WriteString(e.Delta)
			state[e.ItemID] = "delta"
		case responses.ResponseFunctionCallArgumentsDoneEvent:
			if b := args[e.ItemID]; b == nil || b.String() != e.Arguments || state[e.ItemID] != "delta" {
				t.Errorf("arguments done %q of %s; the deltas say %v (%s)", e.Arguments, e.ItemID, b, state[e.ItemID])
			}
			state[e.ItemID] = "args done"
		case responses.ResponseOutputItemDoneEvent:
			if e.Item.Type == "function_call" {
				if state[e.Item.ID] != "args done" || e.Item.AsFunctionCall().Arguments != args[e.Item.ID].String() || e.Item.Status != "completed" {
					t.Errorf("function_call item done %s after %q", e.Item.RawJSON(), state[e.Item.ID])
				}
				state[e.Item.ID] = "done"
			}
		case responses.ResponseCompletedEvent:
			r := e.Response
			final = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v (after %v)", err, types)
	}
	if final == nil || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	for id, s := range state {
		if s != "done" {
			t.Errorf("function_call %s ended at %q", id, s)
		}
	}
	return final
}

// TestFunctionToolBadInput: function tools and outputs the door cannot
// take are 400s in OpenAI's shape naming the parameter, and hand nothing
// over: the call still waits, and its output then goes through.
func TestFunctionToolBadInput(t *testing.T) {
	srv, stub := stubServer(t)
	first := create(t, srv.URL, map[string]any{"input": weatherPrompt, "tools": weatherToolJSON}, nil)
	var callID string
	var raw map[string]any
	_, body := do(t, http.MethodGet, srv.URL+"/v1/responses/"+first.ID, nil, nil)
	_ = json.Unmarshal(body, &raw)
	for _, it := range raw["output"].([]any) {
		if m := it.(map[string]any); m["type"] == "function_call" {
			callID, _ = m["call_id"].(string)
		}
	}
	if first.Status != "completed" || callID == "" {
		t.Fatalf("first response %s: %s", first.Status, body)
	}
	other := create(t, srv.URL, map[string]any{"input": "no tools here"}, nil)
	output := func(id string) map[string]any {
		return map[string]any{"type": "function_call_output", "call_id": id, "output": "22C"}
	}
	sessionsBefore, calls := sessions(t, srv.URL), len(stub.Requests())
	cases := []struct {
		name  string
		body  map[string]any
		code  int
		param string
	}{
		{"no waiting call", map[string]any{"previous_response_id": first.ID, "input": []any{output("call_never_made")}}, 400, "input[0].call_id"},
		{"another conversation's call", map[string]any{"previous_response_id": other.ID, "input": []any{output(callID)}}, 400, "input[0].call_id"},
		{"no response named", map[string]any{"input": []any{output(callID)}}, 400, "previous_response_id"},
		{"unknown previous", map[string]any{"previous_response_id": "msg_ffffffffffffffffffffffffff", "input": []any{output(callID)}}, 404, "previous_response_id"},
		{"no call_id", map[string]any{"previous_response_id": first.ID, "input": []any{map[string]any{"type": "function_call_output", "output": "x"}}}, 400, "input[0].call_id"},
		{"output an object", map[string]any{"previous_response_id": first.ID, "input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": map[string]any{"a": 1}}}}, 400, "input[0].output"},
		{"answered twice", map[string]any{"previous_response_id": first.ID, "input": []any{output(callID), output(callID)}}, 400, "input[1].call_id"},
		{"with a user message", map[string]any{"previous_response_id": first.ID, "input": []any{output(callID), map[string]any{"role": "user", "content": "and?"}}}, 400, "input[0].call_id"},
		{"hosted tool", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "file_search"}}}, 400, "tools[0].type"},
		{"tool without a name", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "function"}}}, 400, "tools[0].name"},
		{"tool_choice required", map[string]any{"input": "hi", "tools": weatherToolJSON, "tool_choice": "required"}, 400, "tool_choice"},
		{"tool_choice a function", map[string]any{"input": "hi", "tools": weatherToolJSON, "tool_choice": map[string]any{"type": "function", "name": "get_weather"}}, 400, "tool_choice"},
		{"a tool named as a server tool", map[string]any{"conversation": first.Conversation.ID, "input": "hi", "tools": []any{map[string]any{"type": "function", "name": "bash"}}}, 400, "tools"},
		{"a tool named as a server tool, new session", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "function", "name": "bash"}}}, 400, "tools"},
		{"a tool name no model takes", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "function", "name": "no spaces"}}}, 400, "tools"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", c.body, nil)
			checkRefused(t, code, raw, c.code, "invalid_request_error", c.param)
		})
	}
	if n, m := sessions(t, srv.URL), len(stub.Requests()); n != sessionsBefore || m != calls {
		t.Errorf("bad requests: %d sessions (were %d), %d model calls (were %d)", n, sessionsBefore, m, calls)
	}
	if n := users(t, srv.URL, first.Conversation.ID); n != 1 {
		t.Errorf("%d user messages after the bad requests", n)
	}

	// The call still waits: its output goes through, once; the same
	// output again is the same continuation, another a 400.
	next := create(t, srv.URL, map[string]any{"previous_response_id": first.ID, "input": []any{output(callID)}}, nil)
	if next.Status != "completed" || next.text() != "Done. sunny" {
		t.Fatalf("the output after the bad ones: %s %q", next.Status, next.text())
	}
	again := create(t, srv.URL, map[string]any{"previous_response_id": first.ID, "input": []any{output(callID)}}, nil)
	if again.ID != next.ID || again.text() != next.text() {
		t.Errorf("the same output again answered %s %q; want %s", again.ID, again.text(), next.ID)
	}
	// Streamed again, it is read from the log: the same continuation,
	// from its first event.
	r, text := checkStream(t, stream(t, srv.URL, map[string]any{"previous_response_id": first.ID, "input": []any{output(callID)}}, nil))
	if r.ID != next.ID || text != "Done. sunny" || r.text() != text {
		t.Errorf("the same output streamed again: %s %q (%q); want %s", r.ID, text, r.text(), next.ID)
	}
	code, body := do(t, http.MethodPost, srv.URL+"/v1/responses", map[string]any{"previous_response_id": first.ID,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "snow"}}}, nil)
	if code != http.StatusBadRequest {
		t.Errorf("another output for an answered call: %d %s", code, body)
	}
	if results := toolMessages(t, stub); len(results) != 1 || results[0].Content != "22C" {
		t.Errorf("the model was sent tool results %+v", results)
	}
}

// TestToolChoiceNone: tool_choice "none" offers the model no function
// tools: the directive's call is not made, the turn just answers.
func TestToolChoiceNone(t *testing.T) {
	srv, stub := stubServer(t)
	r := create(t, srv.URL, map[string]any{"input": weatherPrompt, "tools": weatherToolJSON, "tool_choice": "none"}, nil)
	if r.Status != "completed" {
		t.Fatalf("response %s %q", r.Status, r.text())
	}
	for _, it := range r.Output {
		if it.Type != "message" {
			t.Errorf("an output item %s of type %s", it.ID, it.Type)
		}
	}
	for _, raw := range stub.Requests() {
		var req stubmodel.Request
		_ = json.Unmarshal(raw, &req)
		for _, tl := range req.Tools {
			if tl.Function.Name == "get_weather" {
				t.Errorf("the model was offered the function tool with tool_choice none")
			}
		}
	}
}

// checkFor polls cond until it holds, failing after timeout.
func checkFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFunctionToolQueuedBehind: a response queued behind a turn that waits
// on the client's calls is not answered by those calls (they are another
// response's): it waits, and runs once the calls are answered and that
// turn ends.
func TestFunctionToolQueuedBehind(t *testing.T) {
	srv, _ := stubServer(t)
	first := create(t, srv.URL, map[string]any{"input": weatherPrompt, "tools": weatherToolJSON}, nil)
	sid := first.Conversation.ID
	var callID string
	_, body := do(t, http.MethodGet, srv.URL+"/v1/responses/"+first.ID, nil, nil)
	var raw struct {
		Output []struct {
			CallID string `json:"call_id"`
		} `json:"output"`
	}
	_ = json.Unmarshal(body, &raw)
	for _, it := range raw.Output {
		if it.CallID != "" {
			callID = it.CallID
		}
	}
	if callID == "" {
		t.Fatalf("no call: %s", body)
	}

	type answer struct {
		code int
		body []byte
		err  error
	}
	queued := make(chan answer, 1)
	go func() {
		// With function tools of its own: it, too, watches for waiting calls.
		j, _ := json.Marshal(map[string]any{"input": "next please", "previous_response_id": first.ID, "tools": weatherToolJSON})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", strings.NewReader(string(j)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			queued <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		queued <- answer{code: resp.StatusCode, body: b}
	}()
	// Admitted behind the waiting turn: it waits in the inbox.
	checkFor(t, 30*time.Second, "the queued response in the inbox", func() bool {
		inbox, err := srv.Manager.Inbox(context.Background(), sid)
		return err == nil && len(inbox) == 1
	})
	// It stays unanswered while the other turn waits: a window of many
	// of its polls for waiting calls (a wrong answer would come within
	// one; a right one never comes, so a slow machine cannot fail this).
	select {
	case a := <-queued:
		t.Fatalf("the queued response was answered while the other turn waits: %d %s %v", a.code, a.body, a.err)
	case <-time.After(500 * time.Millisecond):
	}

	next := create(t, srv.URL, map[string]any{"previous_response_id": first.ID,
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "22C"}}}, nil)
	if next.text() != "Done. sunny" {
		t.Fatalf("continuation %q", next.text())
	}
	a := <-queued
	var r response
	if a.err != nil || a.code != http.StatusOK || json.Unmarshal(a.body, &r) != nil || r.Status != "completed" || r.text() != "You said: next please" {
		t.Fatalf("the queued response: %d %s %v", a.code, a.body, a.err)
	}
}

// TestServerToolCallsNotItems: the agent's own tools' calls (run on the
// server) are not output items, streamed or not, with function tools
// offered or not: the response holds the messages, the session the call.
func TestServerToolCallsNotItems(t *testing.T) {
	srv, _ := stubServer(t)
	prompt := `call:glob {"pattern":"*.txt"} then: listed`
	for _, tools := range [][]any{nil, weatherToolJSON} {
		body := map[string]any{"input": prompt}
		if tools != nil {
			body["tools"] = tools
		}
		r := create(t, srv.URL, body, nil)
		r2, text := checkStream(t, stream(t, srv.URL, map[string]any{"input": prompt, "tools": body["tools"]}, nil))
		for _, resp := range []response{r, r2} {
			if resp.Status != "completed" || resp.text() != "Done. listed" {
				t.Fatalf("response %s %q", resp.Status, resp.text())
			}
			for _, it := range resp.Output {
				if it.Type != "message" {
					t.Errorf("an output item of type %s: %+v", it.Type, it)
				}
			}
			called := false
			for _, m := range messages(t, srv.URL, resp.Conversation.ID) {
				for _, p := range m.Parts {
					called = called || (p.Type == opencode.PartTool && p.Tool == "glob")
				}
			}
			if !called {
				t.Errorf("the session of %s holds no glob call", resp.ID)
			}
		}
		if text != "Done. listed" {
			t.Errorf("streamed %q", text)
		}
	}
}
