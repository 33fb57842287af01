package openairesponses_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/responsesstub"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/openairesponses"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock returns from every wait at once and records the waits.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

func newProvider(t *testing.T, cfg openairesponses.Config) *openairesponses.Provider {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-test"
	}
	if cfg.Clock == nil {
		cfg.Clock = newClock()
	}
	p := openairesponses.New(cfg)
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func userReq(text string) provider.Request {
	return provider.Request{ModelID: "gpt-5.1", SessionID: "ses_1", MaxTokens: 32000, System: "You are OpenCode.",
		Messages: []provider.Message{{Role: "user", Content: text}}}
}

func run(t *testing.T, p provider.Provider, req provider.Request) ([]provider.Chunk, error) {
	t.Helper()
	var got []provider.Chunk
	err := p.Stream(context.Background(), req, func(c provider.Chunk) { got = append(got, c) })
	return got, err
}

func kinds(cs []provider.Chunk, k provider.ChunkKind) []provider.Chunk {
	var out []provider.Chunk
	for _, c := range cs {
		if c.Kind == k {
			out = append(out, c)
		}
	}
	return out
}

func text(cs []provider.Chunk, k provider.ChunkKind) string {
	var b strings.Builder
	for _, c := range kinds(cs, k) {
		b.WriteString(c.Text)
	}
	return b.String()
}

func checkFinish(t *testing.T, cs []provider.Chunk) provider.Chunk {
	t.Helper()
	if n := len(kinds(cs, provider.Finish)); n != 1 || cs[len(cs)-1].Kind != provider.Finish {
		t.Fatalf("want exactly one trailing Finish, got %d in %+v", n, cs)
	}
	return cs[len(cs)-1]
}

func TestText(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Fixed(responsesstub.Response{Text: "Hello there, friend.",
		Usage: &responsesstub.Usage{InputTokens: 1300, CachedTokens: 1024, OutputTokens: 50, ReasoningTokens: 40}}))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL(), ProviderID: "proxy"})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if text(got, provider.TextDelta) != "Hello there, friend." || len(kinds(got, provider.TextDelta)) != 4 ||
		string(got[0].Metadata) != `{"openai":{"itemId":"msg_stub_1"}}` {
		t.Errorf("text chunks %+v", got)
	}
	fin := checkFinish(t, got)
	if want := (provider.Usage{Input: 1300, Output: 50, Reasoning: 40, CacheRead: 1024}); fin.Reason != "stop" || fin.Usage != want {
		t.Errorf("finish %q %+v, want stop %+v", fin.Reason, fin.Usage, want)
	}
	h := s.Headers()[0]
	for k, want := range map[string]string{
		"Authorization": "Bearer sk-test", "Content-Type": "application/json", "Accept": "*/*",
		"X-Session-Affinity": "ses_1", "X-Session-Id": "ses_1", "Originator": "", "Session-Id": "",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	r := s.Parsed()[0]
	if !r.Stream || r.Model != "gpt-5.1" || r.MaxOutputTokens != 32000 || r.LastUserText() != "hi" || r.SystemText() != "You are OpenCode." ||
		r.Input[0].Role != "developer" || r.PromptCacheKey != "ses_1" || r.Store == nil || *r.Store ||
		r.Reasoning == nil || *r.Reasoning != (responsesstub.Reasoning{Effort: "medium", Summary: "auto"}) ||
		r.Text == nil || r.Text.Verbosity != "low" || !r.Includes("reasoning.encrypted_content") {
		t.Errorf("request %+v", r)
	}
}

// TestOpenAIProvider: the "openai" provider gets what OpenCode's OpenAI
// plugin adds (testdata/opencode/headers.json): originator and
// session-id headers, and no max_output_tokens.
func TestOpenAIProvider(t *testing.T) {
	var want map[string]map[string]string
	raw, err := os.ReadFile(filepath.Join("testdata", "opencode", "headers.json"))
	if err != nil || json.Unmarshal(raw, &want) != nil {
		t.Fatal(err)
	}
	s := responsesstub.NewServer(t, nil)
	for i, id := range []string{"openai", "proxy"} {
		sid := want[id]["x-session-id"]
		p := newProvider(t, openairesponses.Config{BaseURL: s.URL(), ProviderID: id, APIKey: strings.TrimPrefix(want[id]["authorization"], "Bearer ")})
		req := userReq("hi")
		req.SessionID = sid
		if _, err := run(t, p, req); err != nil {
			t.Fatal(err)
		}
		h := s.Headers()[i]
		for k, v := range want[id] {
			if k == "user-agent" {
				continue // Go's, not Bun's
			}
			if got := h.Get(k); got != v {
				t.Errorf("%s: header %s %q, want %q", id, k, got, v)
			}
		}
		for k := range h {
			if _, ok := want[id][strings.ToLower(k)]; !ok && k != "Content-Length" && k != "Accept-Encoding" && k != "User-Agent" {
				t.Errorf("%s: extra header %s", id, k)
			}
		}
		if got, wantMax := s.Parsed()[i].MaxOutputTokens, map[string]int{"openai": 0, "proxy": 32000}[id]; got != wantMax {
			t.Errorf("%s: max_output_tokens %d", id, got)
		}
	}
}

func TestToolUse(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.ToolThenAnswer("read", `{"filePath":"/tmp/a.go","limit":10}`, "Done."))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	req := userReq("read it")
	req.Tools = []provider.ToolSpec{{Name: "read", Description: "Read.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	starts, deltas, calls := kinds(got, provider.ToolInputStart), kinds(got, provider.ToolInputDelta), kinds(got, provider.ToolCallChunk)
	if len(starts) != 1 || starts[0].ToolCall.ID != "call_stub_1" || starts[0].ToolCall.Name != "read" || len(deltas) < 2 || len(calls) != 1 {
		t.Fatalf("chunks %+v", got)
	}
	c := calls[0].ToolCall
	if text(got, provider.ToolInputDelta) != `{"filePath":"/tmp/a.go","limit":10}` || string(c.Arguments) != `{"filePath":"/tmp/a.go","limit":10}` ||
		string(c.Metadata) != `{"openai":{"itemId":"fc_stub_1_0"}}` {
		t.Errorf("arguments %q / %s, metadata %s", text(got, provider.ToolInputDelta), c.Arguments, c.Metadata)
	}
	if fin := checkFinish(t, got); fin.Reason != "tool-calls" {
		t.Errorf("reason %q", fin.Reason)
	}
	tools := s.Parsed()[0].Tools
	if len(tools) != 1 || tools[0].Type != "function" || tools[0].Strict == nil || *tools[0].Strict || string(s.Parsed()[0].ToolChoice) != `"auto"` {
		t.Errorf("tools %+v", tools)
	}
	// The result goes back; the stub sees it and answers.
	req.Messages = append(req.Messages,
		provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{*c}},
		provider.Message{Role: "tool", ToolCallID: c.ID, Content: "package a", IsError: true})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Done." || checkFinish(t, got).Reason != "stop" {
		t.Fatalf("%v %+v", err, got)
	}
	in := s.Parsed()[1].Input
	call, out := in[len(in)-2], in[len(in)-1]
	if call.Type != "function_call" || call.CallID != "call_stub_1" || call.Name != "read" || call.Arguments != `{"filePath":"/tmp/a.go","limit":10}` || call.ID != "" ||
		out.Type != "function_call_output" || out.CallID != "call_stub_1" || out.OutputText() != "package a" {
		t.Errorf("sent back as %+v, %+v", call, out)
	}
}

// TestReasoning: summaries stream as reasoning, each summary part its own
// part; the last one ends with the item's encrypted content, which goes
// back on the next call as a reasoning item.
func TestReasoning(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Fixed(responsesstub.Response{
		Reasoning: []string{"**Planning**\n\nFirst part.", "Second part."}, EncryptedContent: "gAAAAenc", Text: "42"}))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("?"))
	if err != nil {
		t.Fatal(err)
	}
	ends := kinds(got, provider.ReasoningEnd)
	if text(got, provider.ReasoningDelta) != "**Planning**\n\nFirst part.Second part." || len(ends) != 2 ||
		string(ends[0].Metadata) != `{"openai":{"itemId":"rs_stub_1"}}` ||
		string(ends[1].Metadata) != `{"openai":{"itemId":"rs_stub_1","reasoningEncryptedContent":"gAAAAenc"}}` {
		t.Errorf("reasoning %+v", got)
	}
	// Sent back as lifecycle stores it: two parts, each with its last
	// metadata; only the one with the encrypted content is sent.
	req := userReq("?")
	req.Messages = append(req.Messages, provider.Message{Role: "assistant", Parts: []provider.Part{
		{Type: provider.PartReasoning, Text: "**Planning**\n\nFirst part.", Metadata: ends[0].Metadata},
		{Type: provider.PartReasoning, Text: "Second part.", Metadata: ends[1].Metadata},
		{Type: provider.PartText, Text: "42", Metadata: kinds(got, provider.TextDelta)[0].Metadata}}}, provider.Message{Role: "user", Content: "why"})
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	in := s.Parsed()[1].Input
	r, a := in[2], in[3]
	if len(in) != 5 || r.Type != "reasoning" || r.EncryptedContent == nil || *r.EncryptedContent != "gAAAAenc" || r.ID != "" ||
		len(r.Summary) != 1 || r.Summary[0].Text != "Second part." || a.Role != "assistant" || a.Text() != "42" || a.ID != "" {
		t.Errorf("sent back as %+v", in)
	}
	// Without include (a non-reasoning model) the stub sends no
	// encrypted content, and the part then goes back to nothing.
	req = userReq("?")
	req.ModelID = "gpt-4.1"
	got, err = run(t, p, req)
	if err != nil || string(kinds(got, provider.ReasoningEnd)[1].Metadata) != `{"openai":{"itemId":"rs_stub_3","reasoningEncryptedContent":null}}` {
		t.Errorf("%v %+v", err, got)
	}
}

func TestLengthAndEmptyReasoning(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Fixed(responsesstub.Response{EmptyReasoning: true, Text: "cut sh", IncompleteReason: "max_output_tokens"}))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	md := `{"openai":{"itemId":"rs_stub_1","reasoningEncryptedContent":"stub-encrypted-1"}}`
	if got[0].Kind != provider.ReasoningDelta || string(got[0].Metadata) != md || got[1].Kind != provider.ReasoningEnd ||
		string(got[1].Metadata) != md || checkFinish(t, got).Reason != "length" {
		t.Errorf("chunks %+v", got)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Sequence(
		responsesstub.Response{Status: 429, ErrorMessage: "Rate limit reached for gpt-5.1 in organization org-x on tokens per min (TPM).", Headers: map[string]string{"retry-after-ms": "1500"}},
		responsesstub.Response{Text: "ok"}))
	clock := newClock()
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL(), Clock: clock})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	retries := kinds(got, provider.Retry)
	if len(retries) != 1 || retries[0].Attempt != 1 || retries[0].Message != "Rate limit reached for gpt-5.1 in organization org-x on tokens per min (TPM)." ||
		!reflect.DeepEqual(clock.Waits(), []time.Duration{1500 * time.Millisecond}) || text(got, provider.TextDelta) != "ok" {
		t.Fatalf("retries %+v waits %v chunks %+v", retries, clock.Waits(), got)
	}
	checkFinish(t, got)
}

// TestRetriedBeforeOutput: what fails before any output is tried again:
// server errors, an error event or a failed response (the AI SDK's
// APICallError before output), a cut connection.
func TestRetriedBeforeOutput(t *testing.T) {
	for _, first := range []responsesstub.Response{
		{Status: 500},
		{Status: 503, ErrorMessage: "The server is overloaded or not ready yet."},
		{Status: 408},
		{StreamError: &responsesstub.Error{Type: "server_error", Code: "server_error", Message: "An error occurred while processing your request."}},
		{StreamError: &responsesstub.Error{Code: "rate_limit_exceeded", Message: "Slow down", Flat: true}},
		{Failed: &responsesstub.Error{Code: "server_error", Message: "The model failed to generate a response."}},
		{Cut: true},
	} {
		s := responsesstub.NewServer(t, responsesstub.Sequence(first, responsesstub.Response{Text: "ok"}))
		clock := newClock()
		p := newProvider(t, openairesponses.Config{BaseURL: s.URL(), Clock: clock, RetryBase: 100 * time.Millisecond})
		got, err := run(t, p, userReq("hi"))
		if err != nil {
			t.Fatalf("%+v: %v", first, err)
		}
		if r := kinds(got, provider.Retry); len(r) != 1 || text(got, provider.TextDelta) != "ok" || s.Count() != 2 ||
			!reflect.DeepEqual(clock.Waits(), []time.Duration{100 * time.Millisecond}) {
			t.Errorf("%+v: retries %+v chunks %+v", first, r, got)
		}
	}
}

func TestErrorsNotRetried(t *testing.T) {
	cases := []struct {
		name   string
		resp   responsesstub.Response
		status int
		msg    string
		chunks int
	}{
		{"bad request", responsesstub.Response{Status: 400, ErrorMessage: "Invalid 'input[2].content': empty array."}, 400,
			"Invalid 'input[2].content': empty array.", 0},
		{"auth", responsesstub.Response{Status: 401, ErrorMessage: "Incorrect API key provided: sk-test."}, 401, "Incorrect API key provided", 0},
		{"context length error event", responsesstub.Response{StreamError: &responsesstub.Error{Type: "invalid_request_error", Code: "context_length_exceeded",
			Message: "Your input exceeds the context window of this model."}}, 400, "Your input exceeds the context window", 0},
		{"error event mid-stream", responsesstub.Response{Text: "partial", StreamError: &responsesstub.Error{Type: "server_error", Code: "server_error", Message: "boom"}},
			500, "boom", 4},
		{"failed mid-stream", responsesstub.Response{Text: "partial", Failed: &responsesstub.Error{Code: "server_error", Message: "failed late"}},
			500, "failed late", 4},
		{"cut after output", responsesstub.Response{Text: "partial", Cut: true}, 200, "stream interrupted", 4},
		{"truncated", responsesstub.Response{Text: "partial", Truncate: true}, 200, "no response.completed", 4},
		{"malformed", responsesstub.Response{Text: "partial", Malformed: true}, 200, "malformed stream event", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := responsesstub.NewServer(t, responsesstub.Fixed(c.resp))
			p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
			got, err := run(t, p, userReq("hi"))
			var ae *provider.APIError
			if !errors.As(err, &ae) || ae.StatusCode != c.status || !strings.Contains(ae.Message, c.msg) {
				t.Fatalf("err %#v", err)
			}
			if s.Count() != 1 || len(got) != c.chunks || len(kinds(got, provider.Finish)) != 0 {
				t.Errorf("%d requests, chunks %+v", s.Count(), got)
			}
		})
	}
}

func TestServerErrorForever(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Fixed(responsesstub.Response{Status: 500, ErrorMessage: "The server had an error while processing your request."}))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL(), MaxRetries: 2})
	got, err := run(t, p, userReq("hi"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !ae.Retryable || ae.Message != "The server had an error while processing your request." ||
		!strings.Contains(ae.ResponseBody, `"server_error"`) || s.Count() != 3 || len(kinds(got, provider.Retry)) != 2 {
		t.Fatalf("err %#v, %d requests", err, s.Count())
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProvider(t, openairesponses.Config{BaseURL: "http://" + addr + "/v1", MaxRetries: 1})
	got, err := run(t, p, userReq("hi"))
	if err == nil || !strings.Contains(err.Error(), "connection error") || len(kinds(got, provider.Retry)) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestAbortMidStream(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Fixed(responsesstub.Response{Text: strings.Repeat("word ", 50)}),
		responsesstub.WithDelay(20*time.Millisecond), responsesstub.WithChunks(50))
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := p.Stream(ctx, userReq("hi"), func(c provider.Chunk) {
		if n++; n == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Canceled() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Canceled() != 1 {
		t.Errorf("stub saw %d abandoned replies", s.Canceled())
	}
}

// TestDirectives: the stubmodel directives drive this stub too.
func TestDirectives(t *testing.T) {
	s := responsesstub.NewServer(t, responsesstub.Directives)
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	req := userReq("think:pondering\ncall:bash {\"command\":\"ls\"} then:all good")
	req.Tools = []provider.ToolSpec{{Name: "bash", Parameters: json.RawMessage(`{"type":"object"}`)}}
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	calls := kinds(got, provider.ToolCallChunk)
	if text(got, provider.ReasoningDelta) != "pondering" || len(calls) != 1 || calls[0].ToolCall.Name != "bash" {
		t.Fatalf("chunks %+v", got)
	}
	req.Messages = append(req.Messages, provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{*calls[0].ToolCall}},
		provider.Message{Role: "tool", ToolCallID: calls[0].ToolCall.ID, Content: "a b"})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Done. all good" {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestNoKeyNoHeader(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	s := responsesstub.NewServer(t, nil)
	p := openairesponses.New(openairesponses.Config{BaseURL: s.URL() + "/"})
	t.Cleanup(p.CloseIdleConnections)
	req := userReq("hi")
	req.SessionID = ""
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	if h := s.Headers()[0]; h.Get("Authorization") != "" || h.Get("X-Session-Id") != "" {
		t.Errorf("headers %v", h)
	}
	t.Setenv("OPENAI_API_KEY", "from-env")
	t.Setenv("OPENAI_BASE_URL", s.URL())
	p2 := openairesponses.New(openairesponses.Config{Headers: map[string]string{"OpenAI-Project": "proj_1"}})
	t.Cleanup(p2.CloseIdleConnections)
	if _, err := run(t, p2, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if h := s.Headers()[1]; h.Get("Authorization") != "Bearer from-env" || h.Get("OpenAI-Project") != "proj_1" {
		t.Errorf("headers %v", h)
	}
}

func TestUnsupportedFile(t *testing.T) {
	s := responsesstub.NewServer(t, nil)
	p := newProvider(t, openairesponses.Config{BaseURL: s.URL()})
	req := userReq("")
	req.Messages[0] = provider.Message{Role: "user", Parts: []provider.Part{{Type: provider.PartFile, MediaType: "text/plain", Data: "data:text/plain;base64,aGk="}}}
	_, err := run(t, p, req)
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Message != "'file part media type text/plain' functionality not supported." || s.Count() != 0 {
		t.Fatalf("%v, %d requests", err, s.Count())
	}
}
