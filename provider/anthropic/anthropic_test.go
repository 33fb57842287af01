package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/anthropicstub"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/anthropic"
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

func newProvider(t *testing.T, cfg anthropic.Config) *anthropic.Provider {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-ant-test"
	}
	if cfg.Clock == nil {
		cfg.Clock = newClock()
	}
	p := anthropic.New(cfg)
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func userReq(text string) provider.Request {
	return provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 1000, Messages: []provider.Message{{Role: "user", Content: text}}}
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
	s := anthropicstub.NewServer(t, anthropicstub.Fixed(anthropicstub.Response{Text: "Hello there, friend.",
		Usage: &anthropicstub.Usage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 300, CacheCreationInputTokens: 40}}))
	// The loader's betas come as a header from the catalog.
	p := newProvider(t, anthropic.Config{BaseURL: s.URL(), ProviderID: "anthropic",
		Headers: map[string]string{"anthropic-beta": strings.Join(anthropic.DefaultBetas, ",")}})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if text(got, provider.TextDelta) != "Hello there, friend." || len(kinds(got, provider.TextDelta)) != 4 {
		t.Errorf("text chunks %+v", got)
	}
	fin := checkFinish(t, got)
	if want := (provider.Usage{Input: 350, Output: 5, CacheRead: 300, CacheWrite: 40}); fin.Reason != "stop" || fin.Usage != want {
		t.Errorf("finish %q %+v, want stop %+v", fin.Reason, fin.Usage, want)
	}
	h := s.Headers()[0]
	for k, want := range map[string]string{
		"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json",
		"Anthropic-Beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	r := s.Parsed()[0]
	if !r.Stream || r.Model != "claude-sonnet-4-5" || r.MaxTokens != 1000 || r.LastUserText() != "hi" {
		t.Errorf("request %+v", r)
	}
}

func TestBetasFromHeadersAndTools(t *testing.T) {
	s := anthropicstub.NewServer(t, nil)
	p := newProvider(t, anthropic.Config{BaseURL: s.URL(), ProviderID: "anthropic",
		Headers: map[string]string{"anthropic-beta": " Context-1m-2025-08-07 ,interleaved-thinking-2025-05-14", "X-Extra": "1"}})
	req := userReq("hi")
	req.Tools = []provider.ToolSpec{{Name: "bash", Description: "Run.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	h := s.Headers()[0]
	// The config's header replaces the loader's (the catalog merges them
	// as OpenCode's mergeDeep does); the request's own betas come first.
	want := "structured-outputs-2025-11-13,context-1m-2025-08-07,interleaved-thinking-2025-05-14"
	if got := h.Get("Anthropic-Beta"); got != want || h.Get("X-Extra") != "1" {
		t.Errorf("anthropic-beta %q, want %q; x-extra %q", got, want, h.Get("X-Extra"))
	}
	// Another provider ID using the package gets no loader betas.
	p2 := newProvider(t, anthropic.Config{BaseURL: s.URL(), ProviderID: "my-proxy"})
	if _, err := run(t, p2, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got := s.Headers()[1].Get("Anthropic-Beta"); got != "" {
		t.Errorf("anthropic-beta %q for another provider", got)
	}
}

// TestSessionHeaders: every call says its session in x-session-affinity
// and X-Session-Id, over the provider's options.headers of those names
// (OpenCode's call headers win over the provider's), with Accept as Bun's
// fetch sends it; a request without a session sends neither.
func TestSessionHeaders(t *testing.T) {
	s := anthropicstub.NewServer(t, nil)
	p := newProvider(t, anthropic.Config{BaseURL: s.URL(), Headers: map[string]string{"X-Session-Id": "configured", "X-Extra": "1"}})
	req := userReq("hi")
	req.SessionID = "ses_0123456789abcdefABCDEF"
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, p, userReq("no session")); err != nil {
		t.Fatal(err)
	}
	h := s.Headers()[0]
	for k, want := range map[string]string{"X-Session-Affinity": req.SessionID, "X-Session-Id": req.SessionID, "X-Extra": "1", "Accept": "*/*"} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	if h := s.Headers()[1]; h.Get("X-Session-Affinity") != "" || h.Get("X-Session-Id") != "configured" {
		t.Errorf("without a session: x-session-affinity %q, x-session-id %q", h.Get("X-Session-Affinity"), h.Get("X-Session-Id"))
	}
}

func TestToolUse(t *testing.T) {
	s := anthropicstub.NewServer(t, anthropicstub.ToolThenAnswer("read", `{"filePath":"/tmp/a.go","limit":10}`, "Done."))
	p := newProvider(t, anthropic.Config{BaseURL: s.URL()})
	req := userReq("read it")
	req.Tools = []provider.ToolSpec{{Name: "read", Parameters: json.RawMessage(`{"type":"object"}`)}}
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	starts, deltas, calls := kinds(got, provider.ToolInputStart), kinds(got, provider.ToolInputDelta), kinds(got, provider.ToolCallChunk)
	if len(starts) != 1 || starts[0].ToolCall.ID != "toolu_stub_1" || starts[0].ToolCall.Name != "read" || len(deltas) < 2 || len(calls) != 1 {
		t.Fatalf("chunks %+v", got)
	}
	if text(got, provider.ToolInputDelta) != `{"filePath":"/tmp/a.go","limit":10}` || string(calls[0].ToolCall.Arguments) != `{"filePath":"/tmp/a.go","limit":10}` {
		t.Errorf("arguments %q / %s", text(got, provider.ToolInputDelta), calls[0].ToolCall.Arguments)
	}
	if fin := checkFinish(t, got); fin.Reason != "tool-calls" {
		t.Errorf("reason %q", fin.Reason)
	}
	// The result goes back; the stub sees it and answers.
	req.Messages = append(req.Messages,
		provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{*calls[0].ToolCall}},
		provider.Message{Role: "tool", ToolCallID: calls[0].ToolCall.ID, Content: "package a", IsError: true})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Done." {
		t.Fatalf("%v %+v", err, got)
	}
	last := s.Parsed()[1].LastMessage()
	if len(last.Content) != 1 || last.Content[0].Type != "tool_result" || !last.Content[0].IsError || last.Content[0].ResultText() != "package a" {
		t.Errorf("tool result sent as %+v", last)
	}
}

func TestThinking(t *testing.T) {
	s := anthropicstub.NewServer(t, anthropicstub.Fixed(anthropicstub.Response{RedactedThinking: "REDACTED",
		Thinking: "Let me think about this.", Signature: "sig-abc", Text: "42"}))
	p := newProvider(t, anthropic.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("?"))
	if err != nil {
		t.Fatal(err)
	}
	rs := kinds(got, provider.ReasoningDelta)
	if text(got, provider.ReasoningDelta) != "Let me think about this." || string(rs[0].Metadata) != `{"anthropic":{"redactedData":"REDACTED"}}` ||
		string(rs[len(rs)-1].Metadata) != `{"anthropic":{"signature":"sig-abc"}}` || rs[len(rs)-1].Text != "" {
		t.Errorf("reasoning %+v", rs)
	}
	// Sent back (as lifecycle stores it: the last metadata) it is a signed
	// thinking block.
	req := userReq("?")
	req.Messages = append(req.Messages, provider.Message{Role: "assistant", Parts: []provider.Part{
		{Type: provider.PartReasoning, Text: text(got, provider.ReasoningDelta), Metadata: rs[len(rs)-1].Metadata},
		{Type: provider.PartText, Text: "42"}}}, provider.Message{Role: "user", Content: "why"})
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	a := s.Parsed()[1].Messages[1]
	if a.Role != "assistant" || a.Content[0].Type != "thinking" || a.Content[0].Signature != "sig-abc" || a.Content[0].Thinking != "Let me think about this." {
		t.Errorf("assistant sent as %+v", a)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	s := anthropicstub.NewServer(t, anthropicstub.Sequence(
		anthropicstub.Response{Status: 429, ErrorMessage: "Number of request tokens has exceeded your rate limit.", Headers: map[string]string{"retry-after": "7"}},
		anthropicstub.Response{Text: "ok"}))
	clock := newClock()
	p := newProvider(t, anthropic.Config{BaseURL: s.URL(), Clock: clock})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	retries := kinds(got, provider.Retry)
	if len(retries) != 1 || retries[0].Attempt != 1 || retries[0].Message != "Number of request tokens has exceeded your rate limit." ||
		!reflect.DeepEqual(clock.Waits(), []time.Duration{7 * time.Second}) || text(got, provider.TextDelta) != "ok" {
		t.Fatalf("retries %+v waits %v chunks %+v", retries, clock.Waits(), got)
	}
	checkFinish(t, got)
}

func TestOverloadedThenSuccess(t *testing.T) {
	for _, first := range []anthropicstub.Response{
		{Status: 529},
		{StreamError: &anthropicstub.Error{Type: "overloaded_error", Message: "Overloaded"}},
		{Cut: true}, // a connection cut before any output
	} {
		s := anthropicstub.NewServer(t, anthropicstub.Sequence(first, anthropicstub.Response{Text: "ok"}))
		clock := newClock()
		p := newProvider(t, anthropic.Config{BaseURL: s.URL(), Clock: clock, RetryBase: 100 * time.Millisecond})
		got, err := run(t, p, userReq("hi"))
		if err != nil {
			t.Fatalf("%+v: %v", first, err)
		}
		if r := kinds(got, provider.Retry); len(r) != 1 || text(got, provider.TextDelta) != "ok" || s.Count() != 2 ||
			!reflect.DeepEqual(clock.Waits(), []time.Duration{100 * time.Millisecond}) {
			t.Errorf("%+v: retries %+v chunks %+v", first, r, got)
		}
		if first.Status == 529 && kinds(got, provider.Retry)[0].Message != "Overloaded" {
			t.Errorf("529 message %q", kinds(got, provider.Retry)[0].Message)
		}
	}
}

func TestErrorsNotRetried(t *testing.T) {
	cases := []struct {
		name   string
		resp   anthropicstub.Response
		status int
		msg    string
		chunks int
	}{
		{"bad request", anthropicstub.Response{Status: 400, ErrorMessage: "messages: text content blocks must be non-empty"}, 400,
			"messages: text content blocks must be non-empty", 0},
		{"auth", anthropicstub.Response{Status: 401, ErrorMessage: "invalid x-api-key"}, 401, "invalid x-api-key", 0},
		{"error event mid-stream", anthropicstub.Response{Text: "partial", StreamError: &anthropicstub.Error{Type: "overloaded_error", Message: "Overloaded"}}, 529,
			"Overloaded", 4},
		{"cut after output", anthropicstub.Response{Text: "partial", Cut: true}, 200, "stream interrupted", 4},
		{"truncated", anthropicstub.Response{Text: "partial", Truncate: true}, 200, "no message_stop", 4},
		{"malformed", anthropicstub.Response{Text: "partial", Malformed: true}, 200, "malformed stream event", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := anthropicstub.NewServer(t, anthropicstub.Fixed(c.resp))
			p := newProvider(t, anthropic.Config{BaseURL: s.URL()})
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
	s := anthropicstub.NewServer(t, anthropicstub.Fixed(anthropicstub.Response{Status: 500, ErrorMessage: "Internal server error"}))
	p := newProvider(t, anthropic.Config{BaseURL: s.URL(), MaxRetries: 2})
	got, err := run(t, p, userReq("hi"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !ae.Retryable || ae.Message != "Internal server error" ||
		!strings.Contains(ae.ResponseBody, `"api_error"`) || s.Count() != 3 || len(kinds(got, provider.Retry)) != 2 {
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
	p := newProvider(t, anthropic.Config{BaseURL: "http://" + addr + "/v1", MaxRetries: 1})
	got, err := run(t, p, userReq("hi"))
	if err == nil || !strings.Contains(err.Error(), "connection error") || len(kinds(got, provider.Retry)) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestAbortMidStream(t *testing.T) {
	s := anthropicstub.NewServer(t, anthropicstub.Fixed(anthropicstub.Response{Text: strings.Repeat("word ", 50)}),
		anthropicstub.WithDelay(20*time.Millisecond), anthropicstub.WithChunks(50))
	p := newProvider(t, anthropic.Config{BaseURL: s.URL()})
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
	s := anthropicstub.NewServer(t, anthropicstub.Directives)
	p := newProvider(t, anthropic.Config{BaseURL: s.URL()})
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
	t.Setenv("ANTHROPIC_API_KEY", "")
	s := anthropicstub.NewServer(t, nil)
	p := anthropic.New(anthropic.Config{BaseURL: s.URL() + "/"})
	t.Cleanup(p.CloseIdleConnections)
	if _, err := run(t, p, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if h := s.Headers()[0]; h.Get("X-Api-Key") != "" || h.Get("Anthropic-Beta") != "" {
		t.Errorf("headers %v", h)
	}
	t.Setenv("ANTHROPIC_API_KEY", "from-env")
	p2 := anthropic.New(anthropic.Config{BaseURL: s.URL()})
	t.Cleanup(p2.CloseIdleConnections)
	if _, err := run(t, p2, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got := s.Headers()[1].Get("X-Api-Key"); got != "from-env" {
		t.Errorf("x-api-key %q", got)
	}
}
