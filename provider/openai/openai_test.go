package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/openai"
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

func newProvider(t *testing.T, cfg openai.Config) *openai.Provider {
	t.Helper()
	p := openai.New(cfg)
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func userReq(text string) provider.Request {
	return provider.Request{ModelID: "stub-model", Messages: []provider.Message{{Role: "user", Content: text}}}
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

// checkFinish asserts one Finish chunk, last, and returns it.
func checkFinish(t *testing.T, cs []provider.Chunk) provider.Chunk {
	t.Helper()
	if n := len(kinds(cs, provider.Finish)); n != 1 || cs[len(cs)-1].Kind != provider.Finish {
		t.Fatalf("want exactly one trailing Finish, got %d in %+v", n, cs)
	}
	return cs[len(cs)-1]
}

func TestStreamedText(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithChunks(5))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("hello over there"))
	if err != nil {
		t.Fatal(err)
	}
	if deltas := kinds(got, provider.TextDelta); len(deltas) != 5 {
		t.Fatalf("want 5 text deltas, got %d", len(deltas))
	}
	if txt := text(got, provider.TextDelta); txt != "You said: hello over there" {
		t.Fatalf("text %q", txt)
	}
	if f := checkFinish(t, got); f.Reason != "stop" {
		t.Fatalf("reason %q", f.Reason)
	}
}

func TestReasoning(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Reasoning: "let me think about it", Text: "42"}), stubmodel.WithChunks(3))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	if r := kinds(got, provider.ReasoningDelta); len(r) != 3 || got[0].Kind != provider.ReasoningDelta {
		t.Fatalf("reasoning chunks %+v", got)
	}
	if text(got, provider.ReasoningDelta) != "let me think about it" || text(got, provider.TextDelta) != "42" {
		t.Fatalf("%+v", got)
	}
	checkFinish(t, got)
}

func TestToolCalls(t *testing.T) {
	args0 := `{"command":"echo tool-done","description":"echo"}`
	args1 := `{"filePath":"/PROJECT/main.go"}`
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{
		Text: "Calling tools.",
		ToolCalls: []stubmodel.ToolCall{
			{ID: "call_1", Name: "bash", Arguments: args0},
			{ID: "call_2", Name: "read", Arguments: args1},
			{ID: "call_3", Name: "noargs", Arguments: ""},
			{ID: "call_4", Name: "broken", Arguments: `{"a":`},
		},
	}), stubmodel.WithChunks(4))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("do it"))
	if err != nil {
		t.Fatal(err)
	}
	starts := kinds(got, provider.ToolInputStart)
	calls := kinds(got, provider.ToolCallChunk)
	if len(starts) != 4 || len(calls) != 4 {
		t.Fatalf("starts %d calls %d: %+v", len(starts), len(calls), got)
	}
	wantIDs := []string{"call_1", "call_2", "call_3", "call_4"}
	wantNames := []string{"bash", "read", "noargs", "broken"}
	wantArgs := []string{args0, args1, "{}", `{"a":`}
	for i := range 4 {
		if s := starts[i].ToolCall; s.ID != wantIDs[i] || s.Name != wantNames[i] || len(s.Arguments) != 0 {
			t.Fatalf("start %d: %+v", i, s)
		}
		if c := calls[i].ToolCall; c.ID != wantIDs[i] || c.Name != wantNames[i] || string(c.Arguments) != wantArgs[i] {
			t.Fatalf("call %d: %+v (%s)", i, c, c.Arguments)
		}
	}
	// Every start precedes every complete call; the start of call_2 comes
	// while call_1's arguments are still streaming (before any complete call).
	firstCall := -1
	for i, c := range got {
		if c.Kind == provider.ToolCallChunk && firstCall < 0 {
			firstCall = i
		}
		if c.Kind == provider.ToolInputStart && firstCall >= 0 {
			t.Fatalf("ToolInputStart after a ToolCallChunk: %+v", got)
		}
	}
	if f := checkFinish(t, got); f.Reason != "tool-calls" {
		t.Fatalf("reason %q", f.Reason)
	}
}

func TestUsage(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{
		Text:  "ok",
		Usage: &stubmodel.Usage{PromptTokens: 1200, CompletionTokens: 80, ReasoningTokens: 30, CachedTokens: 1024},
	}))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	got, err := run(t, p, userReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	f := checkFinish(t, got)
	if want := (provider.Usage{Input: 1200, Output: 80, Reasoning: 30, CacheRead: 1024}); f.Usage != want {
		t.Fatalf("usage %+v want %+v", f.Usage, want)
	}
}

func TestFinishReasons(t *testing.T) {
	for wire, want := range map[string]string{
		"stop": "stop", "length": "length", "content_filter": "content-filter",
		"function_call": "tool-calls", "tool_calls": "tool-calls", "weird": "other",
	} {
		s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: "x", FinishReason: wire}))
		p := newProvider(t, openai.Config{BaseURL: s.URL()})
		got, err := run(t, p, userReq("q"))
		if err != nil {
			t.Fatal(err)
		}
		if f := checkFinish(t, got); f.Reason != want {
			t.Fatalf("%s: reason %q want %q", wire, f.Reason, want)
		}
	}
}

func TestRequestShape(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo)
	p := newProvider(t, openai.Config{
		BaseURL: s.URL() + "/", APIKey: "sk-test",
		Headers: map[string]string{"X-Title": "opencode"},
	})
	req := provider.Request{
		SessionID: "ses_test",
		ModelID:   "mock-model",
		MaxTokens: 4096,
		System:    "You are opencode.",
		Messages: []provider.Message{
			{Role: "user", Content: "turn with a tool (h)"},
			{Role: "assistant", Content: "Hello.", ToolCalls: []provider.ToolCall{
				{ID: "call_mock_2", Name: "bash", Arguments: json.RawMessage(`{"command":"echo tool-done","description":"echo"}`)},
				{ID: "call_mock_3", Name: "ls"},
			}},
			{Role: "tool", ToolCallID: "call_mock_2", Content: "tool-done\n"},
			{Role: "tool", ToolCallID: "call_mock_3", Content: "a b"},
			{Role: "user", Content: "thanks"},
		},
		Tools: []provider.ToolSpec{
			{Name: "bash", Description: "Run a command", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Name: "ls", Description: "List"},
		},
	}
	if _, err := run(t, p, req); err != nil {
		t.Fatal(err)
	}
	var body any
	if err := json.Unmarshal(s.Requests()[0], &body); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(`{
		"model":"mock-model",
		"messages":[
			{"role":"system","content":"You are opencode."},
			{"role":"user","content":"turn with a tool (h)"},
			{"role":"assistant","content":"Hello.","tool_calls":[
				{"id":"call_mock_2","type":"function","function":{"name":"bash","arguments":"{\"command\":\"echo tool-done\",\"description\":\"echo\"}"}},
				{"id":"call_mock_3","type":"function","function":{"name":"ls","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"call_mock_2","content":"tool-done\n"},
			{"role":"tool","tool_call_id":"call_mock_3","content":"a b"},
			{"role":"user","content":"thanks"}],
		"tools":[
			{"type":"function","function":{"name":"bash","description":"Run a command","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}},
			{"type":"function","function":{"name":"ls","description":"List","parameters":{"type":"object","properties":{}}}}],
		"tool_choice":"auto",
		"max_tokens":4096,
		"stream":true,
		"stream_options":{"include_usage":true}}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body\n%s\nwant\n%v", s.Requests()[0], want)
	}
	h := s.Headers()[0]
	if h.Get("Authorization") != "Bearer sk-test" || h.Get("X-Title") != "opencode" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
	// As the recorded opencode serve requests: accept */*, the session.
	if h.Get("Accept") != "*/*" || h.Get("X-Session-Affinity") != "ses_test" || h.Get("X-Session-Id") != "ses_test" {
		t.Fatalf("headers %v", h)
	}
}

func TestNoToolsNoSystemNoAuth(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo)
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	if _, err := run(t, p, userReq("hi")); err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(s.Requests()[0], &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["tools"]; ok {
		t.Fatalf("tools sent: %s", s.Requests()[0])
	}
	if string(body["messages"]) != `[{"role":"user","content":"hi"}]` {
		t.Fatalf("messages %s", body["messages"])
	}
	if h := s.Headers()[0].Get("Authorization"); h != "" {
		t.Fatalf("authorization %q", h)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(
		stubmodel.Response{Status: 429, ErrorMessage: "Rate limit reached", Headers: map[string]string{"Retry-After": "3"}},
		stubmodel.Response{Text: "finally"},
	))
	clock := newClock()
	start := clock.Now()
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: clock})
	got, err := run(t, p, userReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Kind != provider.Retry || got[0].Attempt != 1 || got[0].Message != "Rate limit reached" ||
		got[0].Next != start.Add(3*time.Second).UnixMilli() {
		t.Fatalf("retry chunk %+v", got[0])
	}
	if len(kinds(got, provider.Retry)) != 1 || text(got, provider.TextDelta) != "finally" {
		t.Fatalf("%+v", got)
	}
	checkFinish(t, got)
	if w := clock.Waits(); !reflect.DeepEqual(w, []time.Duration{3 * time.Second}) {
		t.Fatalf("waits %v", w)
	}
	if s.Count() != 2 {
		t.Fatalf("requests %d", s.Count())
	}
}

func TestServerErrorTwiceThenSuccess(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(
		stubmodel.Response{Status: 500},
		stubmodel.Response{Status: 503, ErrorMessage: "overloaded"},
		stubmodel.Response{Text: "ok"},
	))
	clock := newClock()
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: clock, RetryBase: 100 * time.Millisecond})
	got, err := run(t, p, userReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	retries := kinds(got, provider.Retry)
	if len(retries) != 2 || retries[0].Attempt != 1 || retries[1].Attempt != 2 || retries[1].Message != "overloaded" {
		t.Fatalf("retries %+v", retries)
	}
	if w := clock.Waits(); !reflect.DeepEqual(w, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("waits %v", w)
	}
	if text(got, provider.TextDelta) != "ok" {
		t.Fatalf("%+v", got)
	}
	checkFinish(t, got)
}

func TestRealClockRetry(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(stubmodel.Response{Status: 502}, stubmodel.Response{Text: "ok"}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), RetryBase: time.Millisecond})
	got, err := run(t, p, userReq("q"))
	if err != nil || text(got, provider.TextDelta) != "ok" {
		t.Fatal(err, got)
	}
}

func TestServerErrorForever(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 500, ErrorMessage: "boom"}))
	clock := newClock()
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: clock, MaxRetries: 3})
	got, err := run(t, p, userReq("q"))
	var ae *provider.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err %T %v", err, err)
	}
	if ae.StatusCode != 500 || ae.Message != "boom" || !ae.Retryable || !strings.Contains(ae.ResponseBody, `"boom"`) {
		t.Fatalf("%+v", ae)
	}
	if s.Count() != 4 || len(kinds(got, provider.Retry)) != 3 || len(got) != 3 {
		t.Fatalf("requests %d chunks %+v", s.Count(), got)
	}
	if w := clock.Waits(); !reflect.DeepEqual(w, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}) {
		t.Fatalf("waits %v", w)
	}
}

func TestDefaultMaxRetries(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 429}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: newClock()})
	if _, err := run(t, p, userReq("q")); err == nil || s.Count() != 5 {
		t.Fatalf("err %v requests %d", err, s.Count())
	}
	s2 := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 429}))
	p2 := newProvider(t, openai.Config{BaseURL: s2.URL(), Clock: newClock(), MaxRetries: -1})
	if _, err := run(t, p2, userReq("q")); err == nil || s2.Count() != 1 {
		t.Fatalf("err %v requests %d", err, s2.Count())
	}
}

func TestBadRequestNotRetried(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 400, ErrorMessage: "messages: field required"}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: newClock()})
	got, err := run(t, p, userReq("q"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Retryable || ae.Message != "messages: field required" {
		t.Fatalf("err %#v", err)
	}
	if len(got) != 0 || s.Count() != 1 {
		t.Fatalf("chunks %+v requests %d", got, s.Count())
	}
}

func TestConnectionErrorRetried(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(stubmodel.Response{Disconnect: true}, stubmodel.Response{Text: "back"}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: newClock()})
	got, err := run(t, p, userReq("q"))
	if err != nil || got[0].Kind != provider.Retry || text(got, provider.TextDelta) != "back" {
		t.Fatalf("err %v chunks %+v", err, got)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := newProvider(t, openai.Config{BaseURL: "http://" + addr + "/v1", Clock: newClock(), MaxRetries: 2})
	got, err := run(t, p, userReq("q"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 0 || !ae.Retryable || len(kinds(got, provider.Retry)) != 2 {
		t.Fatalf("err %#v chunks %+v", err, got)
	}
}

func TestMalformedStream(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: "partial", Malformed: true}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: newClock()})
	got, err := run(t, p, userReq("q"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "malformed") {
		t.Fatalf("err %#v", err)
	}
	if len(kinds(got, provider.Finish)) != 0 || s.Count() != 1 {
		t.Fatalf("chunks %+v requests %d", got, s.Count())
	}
}

func TestTruncatedStream(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: "partial", Truncate: true}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), Clock: newClock()})
	got, err := run(t, p, userReq("q"))
	if err == nil || len(kinds(got, provider.Finish)) != 0 {
		t.Fatalf("err %v chunks %+v", err, got)
	}
}

func TestAbortMidStream(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithDelay(300*time.Millisecond), stubmodel.WithChunks(10))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []provider.Chunk
	var canceledAt time.Time
	err := p.Stream(ctx, userReq("a long question"), func(c provider.Chunk) {
		got = append(got, c)
		if c.Kind == provider.TextDelta && canceledAt.IsZero() {
			canceledAt = time.Now()
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(canceledAt); d > 250*time.Millisecond {
		t.Fatalf("Stream returned %v after cancel", d)
	}
	if len(got) != 1 {
		t.Fatalf("chunks after cancel: %+v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Canceled() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("stub did not see the request cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAbortDuringRetryWait(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 503}))
	p := newProvider(t, openai.Config{BaseURL: s.URL(), RetryBase: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	err := p.Stream(ctx, userReq("q"), func(c provider.Chunk) {
		if c.Kind == provider.Retry {
			if next := time.UnixMilli(c.Next); next.Before(start.Add(59 * time.Minute)) {
				t.Errorf("next %v", next)
			}
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

// rawServer serves one fixed SSE body for wire-format edge cases.
func rawServer(t *testing.T, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestWireEdgeCases(t *testing.T) {
	body := ": keep-alive\r\n\r\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"hmm\"}}]}\r\n\r\n" +
		"event: message\n" +
		"data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\nb\"}}]}\n\n" +
		// tool calls without index: a new id starts a call
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"x\",\"arguments\":\"{\\\"k\\\":\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"1}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"t2\",\"function\":{\"name\":\"y\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after done\"}}]}\n\n"
	p := newProvider(t, openai.Config{BaseURL: rawServer(t, body)})
	got, err := run(t, p, userReq("q"))
	if err != nil {
		t.Fatal(err)
	}
	if text(got, provider.ReasoningDelta) != "hmm" || text(got, provider.TextDelta) != "a\nb" {
		t.Fatalf("%+v", got)
	}
	calls := kinds(got, provider.ToolCallChunk)
	if len(calls) != 2 || calls[0].ToolCall.ID != "t1" || string(calls[0].ToolCall.Arguments) != `{"k":1}` ||
		calls[1].ToolCall.ID != "t2" || calls[1].ToolCall.Name != "y" || string(calls[1].ToolCall.Arguments) != "{}" {
		t.Fatalf("calls %+v %+v", calls[0].ToolCall, calls)
	}
	f := checkFinish(t, got)
	if f.Reason != "tool-calls" || f.Usage != (provider.Usage{Input: 7, Output: 3}) {
		t.Fatalf("finish %+v", f)
	}
}

func TestFinishReasonWithoutDone(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}"
	p := newProvider(t, openai.Config{BaseURL: rawServer(t, body)})
	got, err := run(t, p, userReq("q"))
	if err != nil || text(got, provider.TextDelta) != "hi" || checkFinish(t, got).Reason != "stop" {
		t.Fatalf("err %v chunks %+v", err, got)
	}
}

func TestErrorEventInStream(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n" +
		"data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\"}}\n\n"
	p := newProvider(t, openai.Config{BaseURL: rawServer(t, body), Clock: newClock()})
	got, err := run(t, p, userReq("q"))
	var ae *provider.APIError
	if !errors.As(err, &ae) || ae.Message != "upstream overloaded" || len(kinds(got, provider.Finish)) != 0 {
		t.Fatalf("err %#v chunks %+v", err, got)
	}
}

func TestEndToEndToolTurn(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.ToolThenAnswer("bash", `{"command":"echo tool-done"}`, "All done."))
	p := newProvider(t, openai.Config{BaseURL: s.URL()})
	req := userReq("run it")
	got, err := run(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	calls := kinds(got, provider.ToolCallChunk)
	if len(calls) != 1 || checkFinish(t, got).Reason != "tool-calls" {
		t.Fatalf("%+v", got)
	}
	tc := *calls[0].ToolCall
	req.Messages = append(req.Messages,
		provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{tc}},
		provider.Message{Role: "tool", ToolCallID: tc.ID, Content: "tool-done\n"})
	got, err = run(t, p, req)
	if err != nil || text(got, provider.TextDelta) != "All done." || checkFinish(t, got).Reason != "stop" {
		t.Fatalf("err %v chunks %+v", err, got)
	}
}
