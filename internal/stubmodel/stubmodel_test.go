package stubmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type delta struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	ToolCalls        []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens            int64 `json:"prompt_tokens"`
		CompletionTokens        int64 `json:"completion_tokens"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, url, body string) *http.Response {
	t.Helper()
	resp, err := c.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readSSE returns the decoded chunks and whether [DONE] came.
func readSSE(t *testing.T, r io.Reader) ([]chunk, bool, error) {
	t.Helper()
	var out []chunk
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		if data == "[DONE]" {
			return out, true, nil
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return out, false, err
		}
		out = append(out, c)
	}
	return out, false, sc.Err()
}

const userHi = `{"model":"m1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"sys"},{"role":"user","content":"hello there"}]}`

func TestEchoStream(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithChunks(3))
	resp := post(t, client(t), s.URL(), userHi)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks, done, err := readSSE(t, resp.Body)
	if err != nil || !done {
		t.Fatalf("err %v done %v", err, done)
	}
	var text strings.Builder
	pieces := 0
	var reason string
	for _, c := range chunks {
		if c.Object != "chat.completion.chunk" || c.Model != "m1" || c.ID == "" {
			t.Fatalf("bad chunk %+v", c)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != "" {
				pieces++
				text.WriteString(ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				reason = *ch.FinishReason
			}
		}
	}
	if text.String() != "You said: hello there" || pieces != 3 || reason != "stop" {
		t.Fatalf("text %q pieces %d reason %q", text.String(), pieces, reason)
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.PromptTokens != 3 || last.Usage.CompletionTokens != 4 {
		t.Fatalf("usage chunk %+v", last)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || string(reqs[0]) != userHi || s.Count() != 1 {
		t.Fatalf("recorded %q", reqs)
	}
	if got := s.Headers()[0].Get("Content-Type"); got != "application/json" {
		t.Fatalf("header %q", got)
	}
}

func TestNoUsageWithoutIncludeUsage(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo)
	resp := post(t, client(t), s.URL(), `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	chunks, done, err := readSSE(t, resp.Body)
	if err != nil || !done {
		t.Fatal(err, done)
	}
	for _, c := range chunks {
		if c.Usage != nil {
			t.Fatalf("unexpected usage %+v", c)
		}
	}
}

func TestReasoningToolCallsUsage(t *testing.T) {
	script := stubmodel.Fixed(stubmodel.Response{
		Reasoning: "thinking hard",
		Text:      "ok",
		ToolCalls: []stubmodel.ToolCall{
			{ID: "call_a", Name: "bash", Arguments: `{"command":"echo hi","description":"say \"hi\""}`},
			{Name: "read", Arguments: `{"path":"/x/ü.go"}`},
		},
		Usage: &stubmodel.Usage{PromptTokens: 10, CompletionTokens: 5, ReasoningTokens: 2, CachedTokens: 7},
	})
	s := stubmodel.NewServer(t, script, stubmodel.WithChunks(4))
	resp := post(t, client(t), s.URL(), userHi)
	chunks, done, err := readSSE(t, resp.Body)
	if err != nil || !done {
		t.Fatal(err, done)
	}
	var reasoning strings.Builder
	type call struct{ id, name, args string }
	calls := map[int]*call{}
	argPieces := map[int]int{}
	var reason string
	for _, c := range chunks {
		for _, ch := range c.Choices {
			reasoning.WriteString(ch.Delta.ReasoningContent)
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					calls[tc.Index] = &call{id: tc.ID, name: tc.Function.Name}
				}
				if tc.Function.Arguments != "" {
					argPieces[tc.Index]++
				}
				calls[tc.Index].args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				reason = *ch.FinishReason
			}
		}
	}
	if reasoning.String() != "thinking hard" || reason != "tool_calls" {
		t.Fatalf("reasoning %q reason %q", reasoning.String(), reason)
	}
	if c := calls[0]; c.id != "call_a" || c.name != "bash" || c.args != `{"command":"echo hi","description":"say \"hi\""}` || argPieces[0] < 2 {
		t.Fatalf("call 0 %+v pieces %d", c, argPieces[0])
	}
	if c := calls[1]; c.id != "call_stub_1_1" || c.name != "read" || c.args != `{"path":"/x/ü.go"}` || argPieces[1] < 2 {
		t.Fatalf("call 1 %+v", c)
	}
	u := chunks[len(chunks)-1].Usage
	if u == nil || u.PromptTokens != 10 || u.CompletionTokens != 5 || u.CompletionTokensDetails.ReasoningTokens != 2 || u.PromptTokensDetails.CachedTokens != 7 {
		t.Fatalf("usage %+v", u)
	}
}

func TestNonStreamed(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo)
	resp := post(t, client(t), s.URL(), `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"part one"}]}]}`)
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "chat.completion" || out.Choices[0].Message.Content != "You said: part one" ||
		out.Choices[0].FinishReason != "stop" || out.Usage.PromptTokens != 2 {
		t.Fatalf("%+v", out)
	}
}

func TestModels(t *testing.T) {
	s := stubmodel.NewServer(t, nil, stubmodel.WithModels("a", "b"))
	resp, err := client(t).Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Data) != 2 || out.Data[1].ID != "b" {
		t.Fatalf("%v %+v", err, out)
	}
}

func TestErrorStatusAndSequence(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(
		stubmodel.Response{Status: 429, ErrorMessage: "slow down", Headers: map[string]string{"Retry-After": "2"}},
		stubmodel.Response{Text: "fine"},
	))
	c := client(t)
	resp := post(t, c, s.URL(), userHi)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" ||
		!strings.Contains(string(body), `"message":"slow down"`) {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	resp = post(t, c, s.URL(), userHi)
	if _, done, err := readSSE(t, resp.Body); resp.StatusCode != 200 || !done || err != nil {
		t.Fatal(resp.StatusCode, done, err)
	}
	resp = post(t, c, s.URL(), userHi) // last response repeats
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
}

func TestBadJSON(t *testing.T) {
	s := stubmodel.NewServer(t, nil)
	resp := post(t, client(t), s.URL(), `{nope`)
	if resp.StatusCode != 400 {
		t.Fatal(resp.StatusCode)
	}
}

func TestMalformedAndTruncate(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Sequence(
		stubmodel.Response{Text: "abc", Malformed: true},
		stubmodel.Response{Text: "abc", Truncate: true},
	))
	c := client(t)
	resp := post(t, c, s.URL(), userHi)
	if _, done, err := readSSE(t, resp.Body); err == nil || done {
		t.Fatalf("malformed: err %v done %v", err, done)
	}
	resp = post(t, c, s.URL(), userHi)
	chunks, done, err := readSSE(t, resp.Body)
	if err != nil || done {
		t.Fatalf("truncate: err %v done %v", err, done)
	}
	for _, ch := range chunks {
		for _, cc := range ch.Choices {
			if cc.FinishReason != nil {
				t.Fatal("finish_reason in truncated stream")
			}
		}
	}
}

func TestDisconnect(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Disconnect: true}))
	resp, err := client(t).Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(userHi))
	if err == nil {
		resp.Body.Close()
		t.Fatal("expected a transport error")
	}
}

func TestToolThenAnswer(t *testing.T) {
	script := stubmodel.ToolThenAnswer("bash", `{"command":"echo hi"}`, "done")
	r := script(stubmodel.Request{N: 3, Messages: []stubmodel.Message{{Role: "user", Content: "go"}}})
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "bash" || r.ToolCalls[0].ID != "call_stub_3" || r.Text != "" {
		t.Fatalf("%+v", r)
	}
	r = script(stubmodel.Request{Messages: []stubmodel.Message{{Role: "user"}, {Role: "assistant"}, {Role: "tool", Content: "hi"}}})
	if len(r.ToolCalls) != 0 || r.Text != "done" {
		t.Fatalf("%+v", r)
	}
}

func TestClientCancelIsSeen(t *testing.T) {
	s := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithDelay(time.Second), stubmodel.WithChunks(5))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/chat/completions", strings.NewReader(userHi))
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The role chunk arrives before the first delay.
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"role":"assistant"`) {
		t.Fatalf("%q %v", line, err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for s.Canceled() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("server did not see the cancel")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCloseWithRequestInFlight(t *testing.T) {
	s := stubmodel.New(stubmodel.Echo, stubmodel.WithDelay(time.Hour))
	url, err := s.Start("")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatal(url)
	}
	c := client(t)
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Post(url+"/chat/completions", "application/json", strings.NewReader(userHi))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); s.Count() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the stub")
		}
	}
	start := time.Now()
	s.Close()
	s.Close()
	if err := <-errc; err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("client error %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("Close was slow")
	}
}

// TestJSONEscaping checks the hand-written encoder against encoding/json.
func TestJSONEscaping(t *testing.T) {
	tricky := "quote\" back\\ nl\n cr\r tab\t nul\x00 bell\x07 ü 日本 \u2028 bad\xff end"
	s := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: tricky}), stubmodel.WithChunks(7))
	resp := post(t, client(t), s.URL(), userHi)
	chunks, done, err := readSSE(t, resp.Body)
	if err != nil || !done {
		t.Fatal(err, done)
	}
	var text strings.Builder
	for _, c := range chunks {
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	want := strings.ToValidUTF8(tricky, "\uFFFD")
	if text.String() != want {
		t.Fatalf("got %q want %q", text.String(), want)
	}
}

func BenchmarkStreamZeroDelay(b *testing.B) {
	s := stubmodel.New(stubmodel.Fixed(stubmodel.Response{Text: strings.Repeat("word ", 200)}), stubmodel.WithChunks(50))
	url, err := s.Start("")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Post(url+"/chat/completions", "application/json", strings.NewReader(userHi))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
