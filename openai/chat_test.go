package openai_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

const sessionHeader = "OpenCode-Session"

// seen is how often each user and assistant text was in the model's last
// request.
func seen(t *testing.T, srv *testserver.Server) map[string]int {
	t.Helper()
	calls := srv.Model.Calls()
	if len(calls) == 0 {
		t.Fatal("no model call")
	}
	out := map[string]int{}
	for _, m := range calls[len(calls)-1].Messages {
		if m.Role == "user" || m.Role == "assistant" {
			out[m.Texts()]++
		}
	}
	return out
}

// conversation is what a session shows: each message's role and text.
func conversation(t *testing.T, url, session string) []string {
	t.Helper()
	var out []string
	for _, m := range messages(t, url, session) {
		var texts []string
		for _, p := range m.Parts {
			if p.Type == opencode.PartText && !p.Synthetic {
				texts = append(texts, p.Text)
			}
		}
		out = append(out, string(m.Info.Role)+": "+strings.Join(texts, " "))
	}
	return out
}

// TestChatCompletions: with openai-go, a chat completion without a
// session header starts a session (named in the answer's header) and
// stores the conversation before the last message as history; the next
// call re-sends the conversation with one new user message under the
// header and runs exactly one turn, the model sent the history once; the
// same conversation again is answered from its turn, running none.
// Streaming with include_usage ends with the usage chunk and [DONE].
func TestChatCompletions(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(4)})
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	msgs := []oai.ChatCompletionMessageParamUnion{
		oai.SystemMessage("be brief"),
		oai.UserMessage("first question"),
		oai.AssistantMessage("an answer from elsewhere"),
		oai.UserMessage("second question"),
	}
	var hr *http.Response
	r, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: scriptedModel, Messages: msgs}, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatalf("Chat.Completions.New: %v", err)
	}
	checkRequired(t, "completion", reflect.ValueOf(*r))
	sid := hr.Header.Get(sessionHeader)
	if !strings.HasPrefix(sid, "ses_") || !strings.HasPrefix(r.ID, "msg_") || len(r.Choices) != 1 ||
		r.Choices[0].Message.Content != "You said: second question" || r.Choices[0].FinishReason != "stop" || r.Usage.TotalTokens == 0 {
		t.Fatalf("completion in %q: %s", sid, r.RawJSON())
	}
	want := []string{"user: first question", "assistant: an answer from elsewhere", "user: second question", "assistant: You said: second question"}
	if got := conversation(t, srv.URL, sid); !reflect.DeepEqual(got, want) {
		t.Fatalf("the session holds %q; want %q", got, want)
	}
	if got := conversation(t, srv.URL, sid); len(srv.Model.Calls()) != 1 || got[2] != "user: second question" {
		t.Fatalf("%d model calls: the history ran as turns", len(srv.Model.Calls()))
	}
	if n := seen(t, srv); n["first question"] != 1 || n["an answer from elsewhere"] != 1 || n["second question"] != 1 {
		t.Errorf("the model was sent %v", n)
	}

	// The conversation again with our answer and one new message: one
	// turn, the model sent each earlier message once.
	msgs = append(msgs, oai.AssistantMessage(r.Choices[0].Message.Content), oai.UserMessage("third question"))
	st := c.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Model: scriptedModel, Messages: msgs,
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}},
		option.WithHeader(sessionHeader, sid), option.WithResponseInto(&hr))
	acc := oai.ChatCompletionAccumulator{}
	chunks, usage := 0, 0
	var finish string
	for st.Next() {
		ch := st.Current()
		checkRequired(t, "chunk", reflect.ValueOf(ch))
		acc.AddChunk(ch)
		chunks++
		if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
			usage++
			if len(ch.Choices) != 0 || finish != "stop" {
				t.Errorf("the usage chunk %s is not last: choices %d, finish %q", ch.RawJSON(), len(ch.Choices), finish)
			}
		}
		for _, ch := range ch.Choices {
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if hr.Header.Get(sessionHeader) != sid {
		t.Errorf("the stream names session %q; want %q", hr.Header.Get(sessionHeader), sid)
	}
	if got := acc.Choices[0].Message.Content; got != "You said: third question" || finish != "stop" || usage != 1 || chunks < 4 {
		t.Errorf("streamed %q in %d chunks, finish %q, %d usage chunks", got, chunks, finish, usage)
	}
	if len(srv.Model.Calls()) != 2 {
		t.Fatalf("%d model calls after the second completion; want 2", len(srv.Model.Calls()))
	}
	if n := seen(t, srv); n["first question"] != 1 || n["an answer from elsewhere"] != 1 || n["second question"] != 1 ||
		n["You said: second question"] != 1 || n["third question"] != 1 {
		t.Errorf("the model was sent %v", n)
	}
	want = append(want, "user: third question", "assistant: You said: third question")
	if got := conversation(t, srv.URL, sid); !reflect.DeepEqual(got, want) {
		t.Fatalf("the session holds %q; want %q", got, want)
	}

	// The same conversation again (a retry): its turn answers, none runs.
	again, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Model: scriptedModel, Messages: msgs}, option.WithHeader(sessionHeader, sid))
	if err != nil {
		t.Fatalf("the same conversation again: %v", err)
	}
	if again.ID != acc.ID || again.Choices[0].Message.Content != "You said: third question" || len(srv.Model.Calls()) != 2 {
		t.Errorf("the retry answered %s %q after %d model calls; want %s", again.ID, again.Choices[0].Message.Content, len(srv.Model.Calls()), acc.ID)
	}
	if got := conversation(t, srv.URL, sid); !reflect.DeepEqual(got, want) {
		t.Errorf("after the retry the session holds %q", got)
	}
}

// TestChatBadInput: what chat completions cannot take is a 4xx in
// OpenAI's shape, and nothing is stored or run.
func TestChatBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "hello"}, nil)
	sid := first.Conversation.ID
	user := func(s string) map[string]any { return map[string]any{"role": "user", "content": s} }
	cases := []struct {
		name    string
		body    any
		session string
		code    int
		param   string
	}{
		{"not JSON", "{", "", 400, ""},
		{"no messages", map[string]any{"model": scriptedModel}, "", 400, "messages"},
		{"last not the user's", map[string]any{"messages": []any{user("hi"), map[string]any{"role": "assistant", "content": "yo"}}}, "", 400, "messages[1].role"},
		{"unknown role", map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "hi"}}}, "", 400, "messages[0].role"},
		{"a call from elsewhere", map[string]any{"messages": []any{map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c", "content": "x"}, user("hi")}}, "", 400, "messages[0].tool_calls[0].id"},
		{"tool message first", map[string]any{"messages": []any{map[string]any{"role": "tool", "tool_call_id": "c", "content": "x"}}}, "", 400, "messages[0].role"},
		{"tool results with no session", map[string]any{"messages": []any{user("hi"), map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c", "content": "x"}}}, "", 400, "messages"},
		{"tool results for no waiting call", map[string]any{"messages": []any{user("hello"), map[string]any{"role": "assistant", "content": "You said: hello", "tool_calls": []any{map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c", "content": "x"}}}, sid, 400, "messages[1].tool_calls[0].id"},
		{"image part", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "x"}}}}}}, "", 400, "messages[0].content[0].type"},
		{"no content", map[string]any{"messages": []any{map[string]any{"role": "user"}}}, "", 400, "messages[0].content"},
		{"n 2", map[string]any{"n": 2, "messages": []any{user("hi")}}, "", 400, "n"},
		{"hosted tool", map[string]any{"tools": []any{map[string]any{"type": "web_search"}}, "messages": []any{user("hi")}}, "", 400, "tools[0]"},
		{"a tool named as a server tool", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash"}}}, "messages": []any{user("hi"), map[string]any{"role": "assistant", "content": "yo"}, user("again")}}, "", 400, "tools"},
		{"tool_choice required", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}, "tool_choice": "required", "messages": []any{user("hi")}}, "", 400, "tool_choice"},
		{"unknown model", map[string]any{"model": "nope/none", "messages": []any{user("hi")}}, "", 404, "model"},
		{"bad session header", map[string]any{"messages": []any{user("hi")}}, "conv_1", 400, ""},
		{"unknown session", map[string]any{"messages": []any{user("hi")}}, "ses_ffffffffffffffffffffffffff", 404, ""},
		{"another conversation", map[string]any{"messages": []any{user("not hello"), map[string]any{"role": "assistant", "content": "x"}, user("hi")}}, sid, 409, "messages"},
	}
	before, calls := sessions(t, srv.URL), len(srv.Model.Calls())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{}
			if c.session != "" {
				h[sessionHeader] = c.session
			}
			code, raw := do(t, http.MethodPost, srv.URL+"/v1/chat/completions", c.body, h)
			checkRefused(t, code, raw, c.code, "", c.param)
		})
	}
	if n := sessions(t, srv.URL); n != before || len(srv.Model.Calls()) != calls {
		t.Errorf("bad requests left %d sessions (were %d) and %d model calls (were %d)", n, before, len(srv.Model.Calls()), calls)
	}
	if got := conversation(t, srv.URL, sid); len(got) != 2 {
		t.Errorf("the session holds %q after the bad requests", got)
	}
}

// TestChatFunctionTool: with openai-go, a chat completion's function tool
// called by the model ends the completion with tool_calls (streamed as
// tool_calls deltas, finish_reason tool_calls); the conversation sent
// again with the tool's result goes to the waiting call, the model sees
// it, and the completion is the turn going on: one turn, one user
// message. A result for a call that does not wait is a 400.
func TestChatFunctionTool(t *testing.T) {
	srv, stub := stubServer(t, stubmodel.WithChunks(3))
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools := []oai.ChatCompletionToolUnionParam{oai.ChatCompletionFunctionTool(oai.FunctionDefinitionParam{Name: "get_weather",
		Parameters: oai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}
	msgs := []oai.ChatCompletionMessageParamUnion{oai.UserMessage(weatherPrompt)}
	var hr *http.Response
	st := c.Chat.Completions.NewStreaming(ctx, oai.ChatCompletionNewParams{Messages: msgs, Tools: tools}, option.WithResponseInto(&hr))
	acc := oai.ChatCompletionAccumulator{}
	for st.Next() {
		ch := st.Current()
		checkRequired(t, "chunk", reflect.ValueOf(ch))
		acc.AddChunk(ch)
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	sid := hr.Header.Get(sessionHeader)
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("streamed %+v", acc.Choices)
	}
	call := acc.Choices[0].Message.ToolCalls[0]
	if call.Function.Name != "get_weather" || call.Function.Arguments != `{"city":"Paris"}` || call.ID == "" {
		t.Fatalf("tool call %+v", call)
	}
	var maker string
	for _, m := range messages(t, srv.URL, sid) {
		for _, p := range m.Parts {
			if p.CallID == call.ID {
				maker = m.Info.ID
			}
		}
	}

	bad := append(append([]oai.ChatCompletionMessageParamUnion{}, msgs...), acc.Choices[0].Message.ToParam(), oai.ToolMessage("22C", "call_never_made"))
	if _, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Messages: bad, Tools: tools}, option.WithHeader(sessionHeader, sid)); err == nil ||
		!strings.Contains(err.Error(), "400") {
		t.Errorf("a result for a call never made: %v", err)
	}

	msgs = append(msgs, acc.Choices[0].Message.ToParam(), oai.ToolMessage("22C and sunny", call.ID))
	r, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Messages: msgs, Tools: tools}, option.WithHeader(sessionHeader, sid))
	if err != nil {
		t.Fatalf("the tool's result: %v", err)
	}
	checkRequired(t, "completion", reflect.ValueOf(*r))
	if r.ID != maker || r.Choices[0].Message.Content != "Done. sunny" || r.Choices[0].FinishReason != "stop" {
		t.Errorf("continuation %s %q %s; want %s", r.ID, r.Choices[0].Message.Content, r.Choices[0].FinishReason, maker)
	}
	if results := toolMessages(t, stub); len(results) != 1 || results[0].Content != "22C and sunny" || results[0].ToolCallID != call.ID {
		t.Errorf("the model was sent tool results %+v", results)
	}
	if n := users(t, srv.URL, sid); n != 1 {
		t.Errorf("%d user messages: the exchange is not one turn", n)
	}

	// The conversation goes on: the calls and results it repeats are the
	// session's, nothing is stored again, the new message is one turn.
	msgs = append(msgs, r.Choices[0].Message.ToParam(), oai.UserMessage("thanks"))
	next, err := c.Chat.Completions.New(ctx, oai.ChatCompletionNewParams{Messages: msgs, Tools: tools}, option.WithHeader(sessionHeader, sid))
	if err != nil {
		t.Fatalf("the next message: %v", err)
	}
	if next.Choices[0].Message.Content != "You said: thanks" || users(t, srv.URL, sid) != 2 || len(messages(t, srv.URL, sid)) != 5 {
		t.Errorf("next %q; the session holds %q", next.Choices[0].Message.Content, conversation(t, srv.URL, sid))
	}
}
