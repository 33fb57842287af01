package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

// lastModelConversation is the stub model's last request as lines: each
// user and assistant message's text (with an assistant's calls), each
// tool result with its call ID; the system prompt left out.
func lastModelConversation(t *testing.T, stub *stubmodel.Server) []string {
	t.Helper()
	reqs := stub.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model call")
	}
	var req stubmodel.Request
	if err := json.Unmarshal(reqs[len(reqs)-1], &req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range req.Messages {
		switch m.Role {
		case "user", "assistant":
			line := m.Role + ": " + m.Content
			for _, c := range m.ToolCalls {
				line += fmt.Sprintf(" [%s %s %s]", c.ID, c.Function.Name, c.Function.Arguments)
			}
			out = append(out, line)
		case "tool":
			out = append(out, "tool "+m.ToolCallID+": "+m.Content)
		}
	}
	return out
}

// sessionItems is what a session holds as lines: each message's role and
// text parts, and its tool parts' calls with their outputs.
func sessionItems(t *testing.T, url, session string) []string {
	t.Helper()
	var out []string
	for _, m := range messages(t, url, session) {
		var texts []string
		for _, p := range m.Parts {
			switch {
			case p.Type == opencode.PartText && !p.Synthetic:
				texts = append(texts, p.Text)
			case p.Type == opencode.PartTool && p.State != nil && p.State.Output != nil:
				texts = append(texts, fmt.Sprintf("[%s %s -> %s]", p.CallID, p.Tool, *p.State.Output))
			case p.Type == opencode.PartTool:
				texts = append(texts, fmt.Sprintf("[%s %s]", p.CallID, p.Tool))
			}
		}
		out = append(out, string(m.Info.Role)+": "+strings.Join(texts, " "))
	}
	return out
}

// sdkErr is an SDK error with the body it was answered.
func sdkErr(err error) string {
	var e *oai.Error
	if errors.As(err, &e) {
		return err.Error() + " " + e.RawJSON()
	}
	return err.Error()
}

// asInput is a response's output as input items, as a stateless client
// appends it to its conversation.
func asInput(r *responses.Response) []responses.ResponseInputItemUnionParam {
	var out []responses.ResponseInputItemUnionParam
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			m := it.AsMessage().ToParam()
			out = append(out, responses.ResponseInputItemUnionParam{OfOutputMessage: &m})
		case "function_call":
			c := it.AsFunctionCall().ToParam()
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &c})
		}
	}
	return out
}

func userItem(s string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(s, responses.EasyInputMessageRoleUser)
}

func assistantItem(id, s string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfOutputMessage([]responses.ResponseOutputMessageContentUnionParam{
		{OfOutputText: &responses.ResponseOutputTextParam{Text: s, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}}},
		id, responses.ResponseOutputMessageStatusCompleted)
}

func callItem(callID, name, args string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfFunctionCall(args, callID, name)
}

func outputItem(callID, output string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String(callID),
		Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String(output)}}}
}

// TestConversationInput: with openai-go, a whole conversation as input
// (user and assistant messages, a function call of elsewhere and its
// output, a reasoning item) and no previous_response_id starts a session
// that holds its earlier part as history, stored once and never run:
// the model is sent it once, in order, the call and its output included,
// and only the last user message runs a turn. The conversation re-sent
// statelessly with the answer and one more user message (the session
// found by our assistant message's ID) runs one turn and stores nothing
// twice; the same again is a retry answered by that turn; with
// conversation it goes on the same way.
func TestConversationInput(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[streaming], func(t *testing.T) {
			srv, stub := stubServer(t, stubmodel.WithChunks(3))
			c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			send := func(p responses.ResponseNewParams) *responses.Response {
				t.Helper()
				if !streaming {
					r, err := c.Responses.New(ctx, p)
					if err != nil {
						t.Fatalf("Responses.New: %s", sdkErr(err))
					}
					checkRequired(t, "response", reflect.ValueOf(*r))
					return r
				}
				return streamSDK(t, ctx, c, p)
			}
			input := []responses.ResponseInputItemUnionParam{
				responses.ResponseInputItemParamOfMessage("be brief", responses.EasyInputMessageRoleSystem),
				userItem("what is the weather in Paris?"),
				assistantItem("msg_elsewhere1", "let me look"),
				callItem("call_elsewhere", "get_weather", `{"city":"Paris"}`),
				outputItem("call_elsewhere", "22C"),
				responses.ResponseInputItemParamOfReasoning("rs_elsewhere", []responses.ResponseReasoningItemSummaryParam{{Text: "it is warm"}}),
				assistantItem("msg_elsewhere2", "It is 22C in Paris."),
				userItem("and tomorrow?"),
			}
			r := send(responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
			sid := r.Conversation.ID
			if r.Status != responses.ResponseStatusCompleted || r.OutputText() != "You said: and tomorrow?" || !strings.HasPrefix(sid, "ses_") {
				t.Fatalf("response %s %s %q in %s", r.ID, r.Status, r.OutputText(), sid)
			}
			if n := len(stub.Requests()); n != 1 {
				t.Fatalf("%d model calls: the history ran as turns", n)
			}
			want := []string{"user: what is the weather in Paris?", "assistant: let me look [call_elsewhere get_weather {\"city\":\"Paris\"}]",
				"tool call_elsewhere: 22C", "assistant: It is 22C in Paris.", "user: and tomorrow?"}
			if got := lastModelConversation(t, stub); !reflect.DeepEqual(got, want) {
				t.Errorf("the model was sent\n%q\nwant\n%q", got, want)
			}
			held := []string{"user: what is the weather in Paris?", "assistant: let me look [call_elsewhere get_weather -> 22C]",
				"assistant: It is 22C in Paris.", "user: and tomorrow?", "assistant: You said: and tomorrow?"}
			if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, held) {
				t.Fatalf("the session holds\n%q\nwant\n%q", got, held)
			}
			if conv := messages(t, srv.URL, sid); conv[3].Info.ID != r.ID {
				t.Errorf("the turn's user message is %s; the response %s", conv[3].Info.ID, r.ID)
			}

			// Stateless, with the answer and one more message: the same
			// session, one more turn, nothing stored twice.
			input = append(append(input, asInput(r)...), userItem("thanks"))
			next := send(responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
			if next.Conversation.ID != sid || next.OutputText() != "You said: thanks" || len(stub.Requests()) != 2 {
				t.Fatalf("re-sent: %s in %s %q after %d model calls", next.ID, next.Conversation.ID, next.OutputText(), len(stub.Requests()))
			}
			want = append(want, "assistant: You said: and tomorrow?", "user: thanks")
			if got := lastModelConversation(t, stub); !reflect.DeepEqual(got, want) {
				t.Errorf("the model was sent\n%q\nwant\n%q", got, want)
			}
			held = append(held, "user: thanks", "assistant: You said: thanks")
			if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, held) {
				t.Fatalf("the session holds\n%q\nwant\n%q", got, held)
			}

			// The same again: a retry, answered by that turn.
			again := send(responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
			if again.ID != next.ID || again.OutputText() != next.OutputText() || len(stub.Requests()) != 2 {
				t.Errorf("the same conversation again: %s %q after %d model calls; want %s", again.ID, again.OutputText(), len(stub.Requests()), next.ID)
			}

			// Naming the conversation, the same.
			input = append(append(input, asInput(next)...), userItem("bye"))
			last := send(responses.ResponseNewParams{Conversation: responses.ResponseNewParamsConversationUnion{OfString: oai.String(sid)},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
			if last.Conversation.ID != sid || last.OutputText() != "You said: bye" || len(stub.Requests()) != 3 {
				t.Fatalf("with conversation: %s in %s %q after %d model calls", last.ID, last.Conversation.ID, last.OutputText(), len(stub.Requests()))
			}
			held = append(held, "user: bye", "assistant: You said: bye")
			if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, held) {
				t.Fatalf("the session holds\n%q\nwant\n%q", got, held)
			}
			if n := sessions(t, srv.URL); n != 1 {
				t.Errorf("%d sessions; want 1", n)
			}
		})
	}
}

// TestConversationToolRoundTrip: a stateless client (the agents SDK's
// default) sends the function call back as a function_call item before
// its output, with the user message: the outputs go to the call waiting
// in the session whose turn made it, and the response is that turn going
// on (one user message); the next conversation, with a new user message,
// is a second turn of the same session. JSON and streamed; the same
// conversation with the outputs again is the same continuation; outputs
// of a waiting call before a new user message are a 400.
func TestConversationToolRoundTrip(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[streaming], func(t *testing.T) {
			srv, stub := stubServer(t)
			c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			tools := []responses.ToolUnionParam{weatherTool()}
			send := func(input []responses.ResponseInputItemUnionParam) *responses.Response {
				t.Helper()
				p := responses.ResponseNewParams{Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}}
				if streaming {
					return streamSDK(t, ctx, c, p)
				}
				r, err := c.Responses.New(ctx, p)
				if err != nil {
					t.Fatalf("Responses.New: %s", sdkErr(err))
				}
				checkRequired(t, "response", reflect.ValueOf(*r))
				return r
			}
			input := []responses.ResponseInputItemUnionParam{userItem(weatherPrompt)}
			first := send(input)
			calls := asInput(first)
			if len(calls) != 1 || calls[0].OfFunctionCall == nil {
				t.Fatalf("first response: %s", first.RawJSON())
			}
			call := first.Output[len(first.Output)-1].AsFunctionCall() // ToParam's fields are empty: it re-sends the raw JSON
			sid := first.Conversation.ID
			input = append(append(input, calls...), outputItem(call.CallID, "22C and sunny"))
			// The output before a new user message, the call waiting:
			// refused (the turn would wait on), nothing admitted.
			_, err := c.Responses.New(ctx, responses.ResponseNewParams{Tools: tools, Conversation: responses.ResponseNewParamsConversationUnion{OfString: oai.String(sid)},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: append(append([]responses.ResponseInputItemUnionParam{}, input...), userItem("more"))}})
			var apiErr *oai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "input[1].call_id" || users(t, srv.URL, sid) != 1 {
				t.Errorf("the output of a waiting call before a user message: %v; %d user messages", err, users(t, srv.URL, sid))
			}
			next := send(input)
			if next.Conversation.ID != sid || next.OutputText() != "Done. sunny" || next.PreviousResponseID != first.ID {
				t.Fatalf("continuation %s in %s after %s: %q", next.ID, next.Conversation.ID, next.PreviousResponseID, next.OutputText())
			}
			if results := toolMessages(t, stub); len(results) != 1 || results[0].Content != "22C and sunny" {
				t.Errorf("the model was sent tool results %+v", results)
			}
			if n := users(t, srv.URL, sid); n != 1 {
				t.Errorf("%d user messages: the exchange is not one turn", n)
			}
			// The same again: the same continuation, nothing handed over.
			if again := send(input); again.ID != next.ID || again.OutputText() != next.OutputText() || len(toolMessages(t, stub)) != 1 {
				t.Errorf("the same conversation again: %s %q; want %s", again.ID, again.OutputText(), next.ID)
			}
			input = append(append(input, asInput(next)...), userItem("thanks"))
			third := send(input)
			if third.Conversation.ID != sid || third.OutputText() != "You said: thanks" {
				t.Errorf("third: %s in %s %q", third.ID, third.Conversation.ID, third.OutputText())
			}
			want := []string{"user: " + weatherPrompt, "assistant: [" + call.CallID + " get_weather -> 22C and sunny]", "assistant: Done. sunny",
				"user: thanks", "assistant: You said: thanks"}
			if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, want) {
				t.Errorf("the session holds\n%q\nwant\n%q", got, want)
			}
			if n := sessions(t, srv.URL); n != 1 {
				t.Errorf("%d sessions; want 1", n)
			}
		})
	}
}

// TestConversationBadInput: a conversation the door cannot take is a 4xx
// in OpenAI's shape naming the item, and nothing is stored, admitted or
// run; one that does not repeat the session it names is a 409.
func TestConversationBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(2)})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "hello"}, nil)
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	assistant := func(s string) map[string]any {
		return map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": s}}}
	}
	call := func(id string) map[string]any {
		return map[string]any{"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"}
	}
	output := func(id string) map[string]any {
		return map[string]any{"type": "function_call_output", "call_id": id, "output": "x"}
	}
	before, calls := sessions(t, srv.URL), len(srv.Model.Calls())
	held := messages(t, srv.URL, first.Conversation.ID)
	cases := []struct {
		name  string
		body  map[string]any
		code  int
		param string
	}{
		{"an output for no call", map[string]any{"input": []any{user("hi"), assistant("yo"), output("call_none"), user("again")}}, 400, "input[2].call_id"},
		{"an output for no call at the end", map[string]any{"input": []any{user("hi"), assistant("yo"), output("call_none")}}, 400, "input[2].call_id"},
		{"an output before its call", map[string]any{"input": []any{user("hi"), output("c1"), call("c1"), user("again")}}, 400, "input[1].call_id"},
		{"an output at the end for a call that waits nowhere", map[string]any{"input": []any{user("hi"), call("c1"), output("c1")}}, 400, "input[2].call_id"},
		{"a call with no output", map[string]any{"input": []any{user("hi"), call("c1"), user("again")}}, 400, "input[1].call_id"},
		{"a call twice", map[string]any{"input": []any{user("hi"), call("c1"), call("c1"), output("c1"), user("again")}}, 400, "input[2].call_id"},
		{"an output twice", map[string]any{"input": []any{user("hi"), call("c1"), output("c1"), output("c1"), user("again")}}, 400, "input[3].call_id"},
		{"a call without call_id", map[string]any{"input": []any{user("hi"), map[string]any{"type": "function_call", "name": "f", "arguments": "{}"}, user("again")}}, 400, "input[1].call_id"},
		{"a call without a name", map[string]any{"input": []any{user("hi"), map[string]any{"type": "function_call", "call_id": "c1", "arguments": "{}"}, output("c1"), user("again")}}, 400, "input[1].name"},
		{"arguments not JSON", map[string]any{"input": []any{user("hi"), map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{"}, output("c1"), user("again")}}, 400, "input[1].arguments"},
		{"an assistant image", map[string]any{"input": []any{user("hi"), map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "output_image", "url": "x"}}}, user("again")}}, 400, "input[1].content[0].type"},
		{"an assistant content number", map[string]any{"input": []any{user("hi"), map[string]any{"role": "assistant", "content": 3}, user("again")}}, 400, "input[1].content"},
		{"ends with the assistant", map[string]any{"input": []any{user("hi"), assistant("yo")}}, 400, "input[1]"},
		{"ends with a call", map[string]any{"input": []any{user("hi"), call("c1")}}, 400, "input[1].call_id"},
		{"an item reference", map[string]any{"input": []any{user("hi"), map[string]any{"type": "item_reference", "id": "msg_1"}, assistant("yo"), user("again")}}, 400, "input[1].type"},
		{"a user image", map[string]any{"input": []any{user("hi"), assistant("yo"), map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "x"}}}}}, 400, "input[2].content[0].type"},
		{"as a steer", map[string]any{"previous_response_id": first.ID, "delivery": "steer", "input": []any{user("hi"), assistant("yo"), user("again")}}, 400, "input"},
		{"not the named session's", map[string]any{"conversation": first.Conversation.ID, "input": []any{user("not hello"), assistant("x"), user("again")}}, 409, "input"},
		{"not the previous response's session's", map[string]any{"previous_response_id": first.ID, "input": []any{user("hello"), assistant("something else"), user("again")}}, 409, "input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["model"] = scriptedModel
			code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", c.body, nil)
			checkRefused(t, code, raw, c.code, "invalid_request_error", c.param)
		})
	}
	if n, m := sessions(t, srv.URL), len(srv.Model.Calls()); n != before || m != calls {
		t.Errorf("bad requests: %d sessions (were %d), %d model calls (were %d)", n, before, m, calls)
	}
	if got := messages(t, srv.URL, first.Conversation.ID); len(got) != len(held) {
		t.Errorf("the session holds %d messages after the bad requests; held %d", len(got), len(held))
	}
}

// TestForkAtOlderResponse: with openai-go, previous_response_id naming a
// response whose turn is not the session's last forks the session after
// that turn: the response runs in the new session (its conversation.id),
// the model is sent that turn's conversation and the new input only, and
// the original session is unchanged. A retry with the same
// Idempotency-Key is the same response in the same fork (not forked
// again); a response after the fork's last goes on in the fork, and one
// after the original's last in the original.
func TestForkAtOlderResponse(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(2)})
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	send := func(prev, text string, opts ...option.RequestOption) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Model: scriptedModel, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(text)}}
		if prev != "" {
			p.PreviousResponseID = oai.String(prev)
		}
		r, err := c.Responses.New(ctx, p, opts...)
		if err != nil {
			t.Fatalf("Responses.New(%q after %s): %s", text, prev, sdkErr(err))
		}
		if r.Status != responses.ResponseStatusCompleted || r.OutputText() != "You said: "+text {
			t.Fatalf("%q: %s %q", text, r.Status, r.OutputText())
		}
		return r
	}
	lastSeen := func() []string {
		calls := srv.Model.Calls()
		var out []string
		for _, m := range calls[len(calls)-1].Messages {
			if m.Role == "user" || m.Role == "assistant" {
				out = append(out, m.Role+": "+m.Texts())
			}
		}
		return out
	}
	one := send("", "one")
	two := send(one.ID, "two")
	three := send(two.ID, "three")
	sid := one.Conversation.ID
	if two.Conversation.ID != sid || three.Conversation.ID != sid {
		t.Fatalf("three turns in %s %s %s", sid, two.Conversation.ID, three.Conversation.ID)
	}
	original := sessionItems(t, srv.URL, sid)

	for _, tc := range []struct {
		name, prev, text string
		want             []string
	}{
		{"after the first", one.ID, "four", []string{"user: one", "assistant: You said: one", "user: four"}},
		{"after the second", two.ID, "five", []string{"user: one", "assistant: You said: one", "user: two", "assistant: You said: two", "user: five"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sessionsBefore := sessions(t, srv.URL)
			key := option.WithHeader("Idempotency-Key", "fork-"+tc.text)
			r := send(tc.prev, tc.text, key)
			fork := r.Conversation.ID
			if fork == sid || !strings.HasPrefix(fork, "ses_") || r.PreviousResponseID != tc.prev {
				t.Fatalf("forked response %s in %s after %s; the original is %s", r.ID, fork, r.PreviousResponseID, sid)
			}
			if got := lastSeen(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("the model was sent %q; want %q", got, tc.want)
			}
			if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, original) {
				t.Errorf("the original session holds %q; held %q", got, original)
			}
			calls := len(srv.Model.Calls())
			again := send(tc.prev, tc.text, key)
			if again.ID != r.ID || again.Conversation.ID != fork || len(srv.Model.Calls()) != calls {
				t.Errorf("the retry: %s in %s after %d model calls; want %s in %s after %d", again.ID, again.Conversation.ID, len(srv.Model.Calls()), r.ID, fork, calls)
			}
			if n := sessions(t, srv.URL); n != sessionsBefore+1 {
				t.Errorf("%d sessions after the fork and its retry; were %d", n, sessionsBefore)
			}
			// The fork's last response goes on in the fork.
			next := send(r.ID, "more")
			if next.Conversation.ID != fork {
				t.Errorf("after the fork's last: in %s; want the fork %s", next.Conversation.ID, fork)
			}
			want := append(append([]string{}, tc.want...), "assistant: You said: "+tc.text, "user: more")
			if got := lastSeen(); !reflect.DeepEqual(got, want) {
				t.Errorf("the model was sent %q; want %q", got, want)
			}
		})
	}
	// After the original's last, no fork.
	if r := send(three.ID, "six"); r.Conversation.ID != sid {
		t.Errorf("after the last response: in %s; want %s", r.Conversation.ID, sid)
	}
}

// TestForkAtContinuation: previous_response_id naming a continuation (the
// assistant message after the client's calls) of a turn that is not the
// session's last forks the session after that turn: the model is sent the
// turn with the call and its output, and the new input, not the later
// turn. A conversation sent as input with it is matched against the fork
// (whose messages have new IDs): only its new user message runs.
func TestForkAtContinuation(t *testing.T) {
	srv, stub := stubServer(t)
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools := []responses.ToolUnionParam{weatherTool()}
	first, err := c.Responses.New(ctx, responses.ResponseNewParams{Tools: tools, Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(weatherPrompt)}})
	if err != nil {
		t.Fatal(sdkErr(err))
	}
	call := first.Output[len(first.Output)-1].AsFunctionCall()
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: oai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{outputItem(call.CallID, "22C")}}})
	if err != nil || next.OutputText() != "Done. sunny" {
		t.Fatalf("continuation: %v", err)
	}
	sid := first.Conversation.ID
	later, err := c.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: oai.String(next.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("a later turn")}})
	if err != nil || later.Conversation.ID != sid {
		t.Fatalf("later turn: %v", err)
	}
	original := sessionItems(t, srv.URL, sid)

	fork, err := c.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: oai.String(next.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("instead")}})
	if err != nil {
		t.Fatal(sdkErr(err))
	}
	if fork.Conversation.ID == sid || fork.OutputText() != "You said: instead" || fork.PreviousResponseID != next.ID {
		t.Fatalf("fork: %s in %s after %s %q", fork.ID, fork.Conversation.ID, fork.PreviousResponseID, fork.OutputText())
	}
	want := []string{"user: " + weatherPrompt, fmt.Sprintf(`assistant:  [%s get_weather {"city":"Paris"}]`, call.CallID),
		"tool " + call.CallID + ": 22C", "assistant: Done. sunny", "user: instead"}
	if got := lastModelConversation(t, stub); !reflect.DeepEqual(got, want) {
		t.Errorf("the model was sent\n%q\nwant\n%q", got, want)
	}
	if got := sessionItems(t, srv.URL, sid); !reflect.DeepEqual(got, original) {
		t.Errorf("the original session holds %q; held %q", got, original)
	}

	// The conversation up to the continuation, as a stateless client
	// keeps it, with previous_response_id: forked again, nothing stored.
	input := []responses.ResponseInputItemUnionParam{userItem(weatherPrompt)}
	input = append(append(append(input, asInput(first)...), outputItem(call.CallID, "22C")), asInput(next)...)
	input = append(input, userItem("once more"))
	again, err := c.Responses.New(ctx, responses.ResponseNewParams{PreviousResponseID: oai.String(next.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
	if err != nil {
		t.Fatal(sdkErr(err))
	}
	if again.Conversation.ID == sid || again.Conversation.ID == fork.Conversation.ID || again.OutputText() != "You said: once more" {
		t.Fatalf("the conversation after the continuation: %s in %s %q", again.ID, again.Conversation.ID, again.OutputText())
	}
	want[len(want)-1] = "user: once more"
	if got := lastModelConversation(t, stub); !reflect.DeepEqual(got, want) {
		t.Errorf("the model was sent\n%q\nwant\n%q", got, want)
	}
	if n := users(t, srv.URL, again.Conversation.ID); n != 2 {
		t.Errorf("the second fork holds %d user messages; want 2", n)
	}
}

// TestConversationIDs: the msg_ IDs a conversation's messages are sent
// under are kept for its history when they are of our form, no session
// holds them and they sort after the message before (OpenCode's clients
// order messages by ID); others are minted.
func TestConversationIDs(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(2)})
	older := identifier.Default().NewMessage()
	kept := []string{identifier.Default().NewMessage(), identifier.Default().NewMessage()}
	held := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "held"}, nil)
	r := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": []any{
		map[string]any{"type": "message", "role": "user", "id": kept[0], "content": "a"},
		map[string]any{"type": "message", "role": "assistant", "id": kept[1], "content": []any{map[string]any{"type": "output_text", "text": "b"}}},
		map[string]any{"type": "message", "role": "user", "id": older, "content": "c"},
		map[string]any{"type": "message", "role": "assistant", "id": held.ID, "content": "d"},
		map[string]any{"type": "message", "role": "assistant", "id": "msg_abc", "content": "e"},
		map[string]any{"role": "user", "content": "f"},
	}}, nil)
	if r.Status != "completed" || r.text() != "You said: f" {
		t.Fatalf("response %s %q", r.Status, r.text())
	}
	conv := messages(t, srv.URL, r.Conversation.ID)
	if len(conv) != 7 {
		t.Fatalf("the session holds %d messages; want 7", len(conv))
	}
	for i, m := range conv {
		switch {
		case i < 2 && m.Info.ID != kept[i]:
			t.Errorf("message %d is %s; want the client's %s", i, m.Info.ID, kept[i])
		case i >= 2 && (m.Info.ID == older || m.Info.ID == held.ID || m.Info.ID == "msg_abc"):
			t.Errorf("message %d kept the client's ID %s", i, m.Info.ID)
		case i > 0 && m.Info.ID <= conv[i-1].Info.ID:
			t.Errorf("message %d's ID %s does not sort after %s", i, m.Info.ID, conv[i-1].Info.ID)
		}
	}
	if conv[5].Info.ID != r.ID {
		t.Errorf("the turn's user message is %s; the response %s", conv[5].Info.ID, r.ID)
	}
}
