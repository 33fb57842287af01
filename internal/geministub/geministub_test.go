package geministub

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, s *Server, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const streamPath = "/models/gemini-x:streamGenerateContent?alt=sse"

// chunk is the part of a response the tests look at.
type chunk struct {
	Candidates []struct {
		Content struct {
			Parts []Part `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  map[string]int64 `json:"usageMetadata"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// chunks reads an SSE body: data lines with \r\n\r\n between events.
func chunks(t *testing.T, r io.Reader) ([]chunk, error) {
	t.Helper()
	var out []chunk
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("line %q", line)
		}
		var c chunk
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
			t.Fatalf("bad data %q: %v", line, err)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// shape renders the parts of every chunk: t(hought), x(text), f(unction
// call), with * for a signature, and the finish reason.
func shape(cs []chunk) string {
	var b []string
	for _, c := range cs {
		s := ""
		for _, cand := range c.Candidates {
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					s += "f"
				case p.Thought:
					s += "t"
				default:
					s += "x"
				}
				if p.ThoughtSignature != "" {
					s += "*"
				}
			}
			if cand.FinishReason != "" {
				s += ":" + cand.FinishReason
			}
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

const simple = `{"contents":[{"role":"user","parts":[{"text":"hello there"}]}],"systemInstruction":{"parts":[{"text":"be nice"}]},"generationConfig":{"maxOutputTokens":100,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}}`

func TestStreamShape(t *testing.T) {
	s := NewServer(t, Fixed(Response{Thinking: "hmm hmm", ThoughtSignature: "ts", Text: "Hi there!",
		Calls: []Call{{Name: "bash", Args: `{"command":"ls"}`}, {Name: "todoread"}}, Signature: "sig"}), WithChunks(2))
	resp := post(t, s, streamPath, simple)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	cs, err := chunks(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(cs), "t t* x x f*f:STOP"; got != want {
		t.Fatalf("shape %q, want %q", got, want)
	}
	last := cs[len(cs)-1]
	calls := last.Candidates[0].Content.Parts
	if calls[0].FunctionCall.Name != "bash" || string(calls[0].FunctionCall.Args) != `{"command":"ls"}` || calls[0].ThoughtSignature != "sig" ||
		string(calls[1].FunctionCall.Args) != `{}` {
		t.Errorf("calls %+v", calls)
	}
	// Words: prompt 4 (system and user), text 2, thoughts 2, calls 1+1 and 0+1.
	if u := last.UsageMetadata; u["promptTokenCount"] != 4 || u["candidatesTokenCount"] != 5 || u["thoughtsTokenCount"] != 2 || u["totalTokenCount"] != 11 {
		t.Errorf("usage %v", u)
	}
	if u := cs[0].UsageMetadata; u["promptTokenCount"] != 4 || u["candidatesTokenCount"] != 0 {
		t.Errorf("partial usage %v", u)
	}
	r := s.Parsed()[0]
	if r.N != 1 || r.Model != "gemini-x" || !r.Stream || r.SystemText() != "be nice" || r.LastUserText() != "hello there" ||
		r.GenerationConfig.MaxOutputTokens != 100 || r.GenerationConfig.ThinkingConfig.ThinkingLevel != "high" {
		t.Errorf("parsed %+v", r)
	}
	if s.Headers()[0].Get("X-Goog-Api-Key") != "k" || s.Paths()[0] != "/v1beta"+streamPath {
		t.Errorf("headers or path not recorded: %v", s.Paths())
	}
}

func TestTextSignature(t *testing.T) {
	s := NewServer(t, Fixed(Response{Text: "Answer", Signature: "sig", Usage: &Usage{PromptTokenCount: 9, CandidatesTokenCount: 1, CachedContentTokenCount: 8}}), WithChunks(1))
	cs, _ := chunks(t, post(t, s, streamPath, simple).Body)
	if got := shape(cs); got != "x x*:STOP" {
		t.Fatalf("shape %q", got)
	}
	if cs[1].UsageMetadata["cachedContentTokenCount"] != 8 || cs[1].Candidates[0].Content.Parts[0].Text != "" {
		t.Errorf("last %+v", cs[1])
	}
}

func TestErrors(t *testing.T) {
	s := NewServer(t, Sequence(
		Response{Status: 429, Headers: map[string]string{"retry-after": "3"}},
		Response{Status: 503, ErrorMessage: "The model is overloaded."},
		Response{Text: "x", StreamError: &Error{Code: 500, Message: "boom"}},
		Response{Text: "x", Cut: true},
		Response{Text: "x", Truncate: true},
		Response{BlockReason: "PROHIBITED_CONTENT"},
		Response{Text: "x", Malformed: true},
	))
	resp := post(t, s, streamPath, simple)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" ||
		string(b) != `{"error":{"code":429,"message":"Too Many Requests","status":"RESOURCE_EXHAUSTED"}}`+"\n" {
		t.Errorf("429: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp = post(t, s, streamPath, simple)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), `"message":"The model is overloaded.","status":"UNAVAILABLE"`) {
		t.Errorf("503: %d %s", resp.StatusCode, b)
	}
	cs, err := chunks(t, post(t, s, streamPath, simple).Body)
	if err != nil || len(cs) != 2 || cs[1].Error == nil || cs[1].Error.Code != 500 || cs[1].Error.Status != "INTERNAL" || cs[1].Error.Message != "boom" {
		t.Errorf("error object: %v %+v", err, cs)
	}
	if _, err = chunks(t, post(t, s, streamPath, simple).Body); err == nil {
		t.Errorf("cut connection read cleanly")
	}
	cs, err = chunks(t, post(t, s, streamPath, simple).Body)
	if err != nil || shape(cs) != "x" {
		t.Errorf("truncated: %v %q", err, shape(cs))
	}
	cs, _ = chunks(t, post(t, s, streamPath, simple).Body)
	if len(cs) != 1 || cs[0].PromptFeedback == nil || cs[0].PromptFeedback.BlockReason != "PROHIBITED_CONTENT" || len(cs[0].Candidates) != 0 {
		t.Errorf("blocked: %+v", cs)
	}
	b, _ = io.ReadAll(post(t, s, streamPath, simple).Body)
	if !strings.HasSuffix(string(b), "\"broken\r\n\r\n") {
		t.Errorf("malformed: %q", b)
	}
	resp = post(t, s, "/models/gemini-x:countTokens", simple)
	if resp.StatusCode != 404 {
		t.Errorf("unknown method: %d", resp.StatusCode)
	}
	resp = post(t, s, streamPath, "{")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || !strings.Contains(string(b), `"INVALID_ARGUMENT"`) {
		t.Errorf("bad JSON: %d %s", resp.StatusCode, b)
	}
}

func TestTitleAndNonStream(t *testing.T) {
	s := NewServer(t, nil)
	title := `{"contents":[{"role":"user","parts":[{"text":"Generate a title for this conversation:\n"}]},{"role":"user","parts":[{"text":"Fix the login bug\nplease"}]}],"systemInstruction":{"parts":[{"text":"You are a title generator."}]}}`
	cs, _ := chunks(t, post(t, s, streamPath, title).Body)
	var got string
	for _, c := range cs {
		for _, p := range c.Candidates[0].Content.Parts {
			got += p.Text
		}
	}
	if s.Count() != 0 || len(s.Titles()) != 1 || got != "Fix the login bug" {
		t.Errorf("title %q: count %d titles %d", got, s.Count(), len(s.Titles()))
	}
	var c chunk
	if err := json.NewDecoder(post(t, s, "/models/gemini-x:generateContent", simple).Body).Decode(&c); err != nil ||
		c.Candidates[0].Content.Parts[0].Text != "You said: hello there" || c.Candidates[0].FinishReason != "STOP" {
		t.Errorf("whole: %v %+v", err, c)
	}
	var arr []chunk
	if err := json.NewDecoder(post(t, s, "/models/gemini-x:streamGenerateContent", simple).Body).Decode(&arr); err != nil || len(arr) != 1 {
		t.Errorf("array: %v %+v", err, arr)
	}
	if r := s.Parsed(); r[0].Stream || r[1].Stream != true {
		t.Errorf("stream flags %v %v", r[0].Stream, r[1].Stream)
	}
}

func TestFromStubmodel(t *testing.T) {
	var seen Request
	s := NewServer(t, func(r Request) Response { seen = r; return Directives(r) })
	first := `{"tools":[{"functionDeclarations":[{"name":"bash","description":"","parameters":{"type":"object"}}]}],"contents":[
		{"role":"user","parts":[{"text":"think:hmm\ncall:bash {\"command\":\"ls\"} then:fine"}]}]}`
	cs, _ := chunks(t, post(t, s, streamPath, first).Body)
	if got := shape(cs); got != "t t t f*:STOP" {
		t.Errorf("shape %q", got)
	}
	body := `{"tools":[{"functionDeclarations":[{"name":"bash","description":"","parameters":{"type":"object"}}]}],"contents":[
		{"role":"user","parts":[{"text":"call:bash {\"command\":\"ls\"} then:fine"}]},
		{"role":"model","parts":[{"functionCall":{"name":"bash","args":{"command":"ls"}},"thoughtSignature":"s"}]},
		{"role":"user","parts":[{"functionResponse":{"name":"bash","response":{"name":"bash","content":"a.go"}}}]}]}`
	cs, _ = chunks(t, post(t, s, streamPath, body).Body)
	var text string
	for _, c := range cs {
		for _, p := range c.Candidates[0].Content.Parts {
			text += p.Text
		}
	}
	if text != "Done. fine" || !seen.LastIsToolResult() || seen.LastContent().Parts[0].FunctionResponse.ResultText() != "a.go" {
		t.Errorf("text %q, last %+v", text, seen.LastContent())
	}
}

func TestCloseDuringStream(t *testing.T) {
	s := New(Fixed(Response{Text: strings.Repeat("a ", 100)}), WithDelay(50*time.Millisecond), WithChunks(100))
	if _, err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	resp := post(t, s, streamPath, simple)
	// Mid-stream: the reply has begun (100 chunks 50 ms apart).
	if _, err := io.ReadFull(resp.Body, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, resp.Body); close(done) }()
	s.Close()
	<-done
	s.Close()
	if len(s.Requests()) != 1 {
		t.Errorf("requests %d", len(s.Requests()))
	}
}
