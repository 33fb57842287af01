package google_test

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

	"github.com/opencode-server/opencode-server/internal/geministub"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/google"
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

func newProvider(t *testing.T, cfg google.Config) *google.Provider {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = "AIza-test"
	}
	if cfg.Clock == nil {
		cfg.Clock = newClock()
	}
	if cfg.ProviderID == "" {
		cfg.ProviderID = "google"
	}
	p := google.New(cfg)
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func userReq(text string) provider.Request {
	return provider.Request{SessionID: "ses_1", ModelID: "gemini-2.5-flash", MaxTokens: 1000,
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
	s := geministub.NewServer(t, geministub.Fixed(geministub.Response{Thinking: "Hmm.", Text: "Hello there, friend.",
		Usage: &geministub.Usage{PromptTokenCount: 310, CandidatesTokenCount: 5, ThoughtsTokenCount: 7, CachedContentTokenCount: 300}}))
	p := newProvider(t, google.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if text(got, provider.TextDelta) != "Hello there, friend." || len(kinds(got, provider.TextDelta)) != 4 || text(got, provider.ReasoningDelta) != "Hmm." {
		t.Errorf("chunks %+v", got)
	}
	fin := checkFinish(t, got)
	if want := (provider.Usage{Input: 310, Output: 12, Reasoning: 7, CacheRead: 300}); fin.Reason != "stop" || fin.Usage != want {
		t.Errorf("finish %q %+v, want stop %+v", fin.Reason, fin.Usage, want)
	}
	h := s.Headers()[0]
	for k, want := range map[string]string{
		"X-Goog-Api-Key": "AIza-test", "Content-Type": "application/json", "User-Agent": google.UserAgent,
		"X-Session-Affinity": "ses_1", "X-Session-Id": "ses_1", "Accept": "*/*",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	if path := s.Paths()[0]; path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("path %q", path)
	}
	r := s.Parsed()[0]
	if !r.Stream || r.Model != "gemini-2.5-flash" || r.GenerationConfig.MaxOutputTokens != 1000 || r.LastUserText() != "hi" ||
		r.GenerationConfig.ThinkingConfig == nil || !*r.GenerationConfig.ThinkingConfig.IncludeThoughts {
		t.Errorf("request %+v", r)
	}
}

func TestToolCall(t *testing.T) {
	s := geministub.NewServer(t, geministub.CallThenAnswer("read", `{"filePath":"/tmp/a.go","limit":10}`, "Done."))
	p := newProvider(t, google.Config{BaseURL: s.URL(), GenerateID: func() string { return "fixedCallId00001" }})
	req := userReq("read it")
	req.Tools = []provider.ToolSpec{{Name: "read", Description: "Read.", Parameters: json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"}}}`)}}
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	starts, calls := kinds(got, provider.ToolInputStart), kinds(got, provider.ToolCallChunk)
	if len(starts) != 1 || starts[0].ToolCall.ID != "fixedCallId00001" || starts[0].ToolCall.Name != "read" || len(calls) != 1 {
		t.Fatalf("chunks %+v", got)
	}
	c := calls[0].ToolCall
	if string(c.Arguments) != `{"filePath":"/tmp/a.go","limit":10}` || string(c.Metadata) != `{"google":{"thoughtSignature":"stub-signature-1"}}` ||
		text(got, provider.ToolInputDelta) != string(c.Arguments) {
		t.Errorf("call %+v", c)
	}
	if fin := checkFinish(t, got); fin.Reason != "tool-calls" {
		t.Errorf("reason %q", fin.Reason)
	}
	// The call goes back with its signature, the result as a function
	// response; the stub answers.
	req.Messages = append(req.Messages,
		provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{*c}},
		provider.Message{Role: "tool", ToolCallID: c.ID, ToolName: "read", Content: "package a", IsError: true})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Done." {
		t.Fatalf("%v %+v", err, got)
	}
	r := s.Parsed()[1]
	model, last := r.Contents[1], r.LastContent()
	if model.Role != "model" || model.Parts[0].FunctionCall == nil || model.Parts[0].ThoughtSignature != "stub-signature-1" ||
		last.Role != "user" || last.Parts[0].FunctionResponse.ResultText() != "package a" {
		t.Errorf("history sent as %+v / %+v", model, last)
	}
	if d := r.Declarations(); len(d) != 1 || d[0].Name != "read" || string(r.ToolConfig) != `{"functionCallingConfig":{"mode":"AUTO"}}` {
		t.Errorf("tools %+v %s", d, r.ToolConfig)
	}
}

func TestThinkingSignatures(t *testing.T) {
	s := geministub.NewServer(t, geministub.Fixed(geministub.Response{Thinking: "Let me think about this.", ThoughtSignature: "sig-abc",
		Text: "42", Signature: "sig-empty"}))
	p := newProvider(t, google.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("?"))
	if err != nil {
		t.Fatal(err)
	}
	rs := kinds(got, provider.ReasoningDelta)
	if text(got, provider.ReasoningDelta) != "Let me think about this." || string(rs[len(rs)-1].Metadata) != `{"google":{"thoughtSignature":"sig-abc"}}` ||
		rs[0].Metadata != nil {
		t.Errorf("reasoning %+v", rs)
	}
	for _, c := range kinds(got, provider.TextDelta) {
		if c.Metadata != nil || c.Text == "" {
			t.Errorf("text chunk %+v (the empty signed part is dropped, as the AI SDK drops it)", c)
		}
	}
	// Sent back (as lifecycle stores it: the last metadata) it is a
	// signed thought.
	req := userReq("?")
	req.Messages = append(req.Messages, provider.Message{Role: "assistant", Parts: []provider.Part{
		{Type: provider.PartReasoning, Text: text(got, provider.ReasoningDelta), Metadata: rs[len(rs)-1].Metadata},
		{Type: provider.PartText, Text: "42"}}}, provider.Message{Role: "user", Content: "why"})
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	m := s.Parsed()[1].Contents[1]
	if m.Role != "model" || !m.Parts[0].Thought || m.Parts[0].ThoughtSignature != "sig-abc" || m.Parts[0].Text != "Let me think about this." || m.Parts[1].Text != "42" {
		t.Errorf("model content sent as %+v", m)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	s := geministub.NewServer(t, geministub.Sequence(
		geministub.Response{Status: 429, ErrorMessage: "Resource has been exhausted (e.g. check quota).", Headers: map[string]string{"retry-after": "7"}},
		geministub.Response{Text: "ok"}))
	clock := newClock()
	p := newProvider(t, google.Config{BaseURL: s.URL(), Clock: clock})
	got, err := run(t, p, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	retries := kinds(got, provider.Retry)
	if len(retries) != 1 || retries[0].Attempt != 1 || retries[0].Message != "Resource has been exhausted (e.g. check quota)." ||
		!reflect.DeepEqual(clock.Waits(), []time.Duration{7 * time.Second}) || text(got, provider.TextDelta) != "ok" {
		t.Fatalf("retries %+v waits %v chunks %+v", retries, clock.Waits(), got)
	}
	checkFinish(t, got)
}

func TestRetriedFailures(t *testing.T) {
	for _, first := range []geministub.Response{
		{Status: 503},
		{Status: 408},
		{StreamError: &geministub.Error{Code: 503, Status: "UNAVAILABLE", Message: "The model is overloaded."}},
		{Cut: true}, // a connection cut before any output
		{Disconnect: true},
	} {
		s := geministub.NewServer(t, geministub.Sequence(first, geministub.Response{Text: "ok"}))
		clock := newClock()
		p := newProvider(t, google.Config{BaseURL: s.URL(), Clock: clock, RetryBase: 100 * time.Millisecond})
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
		resp   geministub.Response
		status int
		msg    string
		chunks int
	}{
		{"bad request", geministub.Response{Status: 400, ErrorMessage: "* GenerateContentRequest.contents: contents is not specified"}, 400,
			"* GenerateContentRequest.contents: contents is not specified", 0},
		{"bad key", geministub.Response{Status: 400, ErrorStatus: "INVALID_ARGUMENT", ErrorMessage: "API key not valid. Please pass a valid API key."}, 400,
			"API key not valid", 0},
		{"forbidden", geministub.Response{Status: 403}, 403, "Forbidden", 0},
		{"error object mid-stream", geministub.Response{Text: "partial", StreamError: &geministub.Error{Code: 503, Message: "overloaded"}}, 503,
			"overloaded", 4},
		{"cut after output", geministub.Response{Text: "partial", Cut: true}, 200, "stream interrupted", 4},
		{"truncated", geministub.Response{Text: "partial", Truncate: true}, 200, "no finishReason", 4},
		{"malformed", geministub.Response{Text: "partial", Malformed: true}, 200, "malformed stream event", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := geministub.NewServer(t, geministub.Fixed(c.resp))
			p := newProvider(t, google.Config{BaseURL: s.URL()})
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
	s := geministub.NewServer(t, geministub.Fixed(geministub.Response{Status: 500, ErrorMessage: "An internal error has occurred."}))
	p := newProvider(t, google.Config{BaseURL: s.URL(), MaxRetries: 2})
	got, err := run(t, p, userReq("hi"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 500 || !ae.Retryable || ae.Message != "An internal error has occurred." ||
		!strings.Contains(ae.ResponseBody, `"status":"INTERNAL"`) || s.Count() != 3 || len(kinds(got, provider.Retry)) != 2 {
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
	p := newProvider(t, google.Config{BaseURL: "http://" + addr + "/v1beta", MaxRetries: 1})
	got, err := run(t, p, userReq("hi"))
	if err == nil || !strings.Contains(err.Error(), "connection error") || len(kinds(got, provider.Retry)) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestAbortMidStream(t *testing.T) {
	s := geministub.NewServer(t, geministub.Fixed(geministub.Response{Text: strings.Repeat("word ", 50)}),
		geministub.WithDelay(20*time.Millisecond), geministub.WithChunks(50))
	p := newProvider(t, google.Config{BaseURL: s.URL()})
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
	s := geministub.NewServer(t, geministub.Directives)
	p := newProvider(t, google.Config{BaseURL: s.URL()})
	req := userReq("think:pondering\ncall:bash {\"command\":\"ls\"} then:all good")
	req.Tools = []provider.ToolSpec{{Name: "bash", Parameters: json.RawMessage(`{"type":"object"}`)}}
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	calls := kinds(got, provider.ToolCallChunk)
	if text(got, provider.ReasoningDelta) != "pondering" || len(calls) != 1 || calls[0].ToolCall.Name != "bash" ||
		string(calls[0].ToolCall.Arguments) != `{"command":"ls"}` {
		t.Fatalf("chunks %+v", got)
	}
	req.Messages = append(req.Messages, provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{*calls[0].ToolCall}},
		provider.Message{Role: "tool", ToolCallID: calls[0].ToolCall.ID, ToolName: "bash", Content: "a b"})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Done. all good" {
		t.Fatalf("%v %+v", err, got)
	}
}

func TestTitle(t *testing.T) {
	s := geministub.NewServer(t, nil)
	p := newProvider(t, google.Config{BaseURL: s.URL()})
	req := provider.Request{ModelID: "gemini-2.5-flash", Purpose: provider.PurposeTitle, System: "Generate a title for this conversation",
		Messages: []provider.Message{{Role: "user", Content: "Generate a title for this conversation:\n"}, {Role: "user", Content: "Fix the login bug\nplease"}}}
	got, err := run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "Fix the login bug" || s.Count() != 0 || len(s.Titles()) != 1 {
		t.Fatalf("%v %+v", err, got)
	}
	if !strings.Contains(string(s.Titles()[0]), `"thinkingConfig":{"thinkingBudget":12288,"includeThoughts":true}`) {
		t.Errorf("title body %s", s.Titles()[0])
	}
}

func TestNoKeyNoHeader(t *testing.T) {
	t.Setenv("GOOGLE_GENERATIVE_AI_API_KEY", "")
	s := geministub.NewServer(t, nil)
	p := google.New(google.Config{BaseURL: s.URL() + "/", Headers: map[string]string{"X-Extra": "1", "User-Agent": "mine"}})
	t.Cleanup(p.CloseIdleConnections)
	if _, err := run(t, p, provider.Request{ModelID: "models/gemini-2.5-flash", Messages: []provider.Message{{Role: "user", Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if h := s.Headers()[0]; h.Get("X-Goog-Api-Key") != "" || h.Get("X-Extra") != "1" || h.Get("User-Agent") != "mine" || h.Get("X-Session-Id") != "" {
		t.Errorf("headers %v", h)
	}
	if path := s.Paths()[0]; path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("path %q", path)
	}
	t.Setenv("GOOGLE_GENERATIVE_AI_API_KEY", "from-env")
	p2 := google.New(google.Config{BaseURL: s.URL()})
	t.Cleanup(p2.CloseIdleConnections)
	if _, err := run(t, p2, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if got := s.Headers()[1].Get("X-Goog-Api-Key"); got != "from-env" {
		t.Errorf("x-goog-api-key %q", got)
	}
}
