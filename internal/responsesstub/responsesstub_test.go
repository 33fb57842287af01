package responsesstub

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

func post(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type event struct {
	name string
	data map[string]any
}

// events reads an SSE body; every event's name must match its data's
// type, and sequence numbers count up from 0.
func events(t *testing.T, r io.Reader) ([]event, error) {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("bad data %q: %v", line, err)
			}
			if d["type"] != name {
				t.Fatalf("event %q carries type %v", name, d["type"])
			}
			if d["sequence_number"] != float64(len(out)) {
				t.Fatalf("event %d has sequence_number %v", len(out), d["sequence_number"])
			}
			out = append(out, event{name, d})
		}
	}
	return out, sc.Err()
}

func names(evs []event) string {
	var b []string
	for _, e := range evs {
		s := strings.TrimPrefix(e.name, "response.")
		if it, ok := e.data["item"].(map[string]any); ok {
			s += "(" + it["type"].(string) + ")"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

const simple = `{"model":"gpt-5.1","stream":true,"include":["reasoning.encrypted_content"],"input":[{"role":"developer","content":"be nice"},{"role":"user","content":[{"type":"input_text","text":"hello there"}]}]}`

func TestStreamShape(t *testing.T) {
	s := NewServer(t, Fixed(Response{Reasoning: []string{"h", "s"}, Text: "Hi!", Phase: "final_answer",
		FunctionCalls: []FunctionCall{{Name: "bash", Arguments: `{"command":"ls"}`}}}), WithChunks(2))
	evs, err := events(t, post(t, s, simple).Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "created in_progress output_item.added(reasoning) " +
		"reasoning_summary_part.added reasoning_summary_text.delta reasoning_summary_text.done reasoning_summary_part.done " +
		"reasoning_summary_part.added reasoning_summary_text.delta reasoning_summary_text.done reasoning_summary_part.done output_item.done(reasoning) " +
		"output_item.added(message) content_part.added output_text.delta output_text.delta output_text.done content_part.done output_item.done(message) " +
		"output_item.added(function_call) function_call_arguments.delta function_call_arguments.delta function_call_arguments.done output_item.done(function_call) " +
		"completed"
	if got := names(evs); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	rs := evs[11].data["item"].(map[string]any)
	if rs["id"] != "rs_stub_1" || rs["encrypted_content"] != "stub-encrypted-1" || len(rs["summary"].([]any)) != 2 {
		t.Errorf("reasoning item %v", rs)
	}
	if msg := evs[12].data["item"].(map[string]any); msg["phase"] != "final_answer" || evs[12].data["output_index"] != float64(1) {
		t.Errorf("message item %v", evs[12].data)
	}
	fc := evs[19].data["item"].(map[string]any)
	if fc["id"] != "fc_stub_1_0" || fc["call_id"] != "call_stub_1_0" || fc["name"] != "bash" || fc["arguments"] != "" {
		t.Errorf("function_call added %v", fc)
	}
	var args string
	for _, e := range evs[20:22] {
		args += e.data["delta"].(string)
	}
	done := evs[23].data["item"].(map[string]any)
	if args != `{"command":"ls"}` || done["arguments"] != args || done["status"] != "completed" {
		t.Errorf("args %q, done %v", args, done)
	}
	r := evs[24].data["response"].(map[string]any)
	u := r["usage"].(map[string]any)
	if r["status"] != "completed" || len(r["output"].([]any)) != 3 || u["input_tokens"] != float64(4) ||
		u["output_tokens_details"].(map[string]any)["reasoning_tokens"] != float64(2) || u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(0) {
		t.Errorf("completed %v", r)
	}
	p := s.Parsed()[0]
	if p.N != 1 || p.SystemText() != "be nice" || p.LastUserText() != "hello there" || p.Input[0].Text() != "be nice" || !p.Includes("reasoning.encrypted_content") {
		t.Errorf("parsed %+v", p)
	}
	if s.Headers()[0].Get("Authorization") != "Bearer k" {
		t.Errorf("headers not recorded")
	}
}

func TestNoEncryptedWithoutInclude(t *testing.T) {
	s := NewServer(t, Fixed(Response{EmptyReasoning: true, Text: "x", IncompleteReason: "max_output_tokens",
		Usage: &Usage{InputTokens: 10, CachedTokens: 8, OutputTokens: 3, ReasoningTokens: 1}}))
	evs, _ := events(t, post(t, s, strings.Replace(simple, `"include":["reasoning.encrypted_content"],`, "", 1)).Body)
	rs := evs[3].data["item"].(map[string]any)
	if _, ok := rs["encrypted_content"]; ok || names(evs[:4]) != "created in_progress output_item.added(reasoning) output_item.done(reasoning)" {
		t.Errorf("reasoning %v in %s", rs, names(evs))
	}
	last := evs[len(evs)-1]
	r := last.data["response"].(map[string]any)
	if last.name != "response.incomplete" || r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" ||
		r["usage"].(map[string]any)["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(8) {
		t.Errorf("last %v", last)
	}
}

func TestErrors(t *testing.T) {
	s := NewServer(t, Sequence(
		Response{Status: 429, Headers: map[string]string{"retry-after": "3"}},
		Response{Status: 500},
		Response{StreamError: &Error{Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota."}},
		Response{StreamError: &Error{Code: "server_error", Message: "boom", Flat: true}},
		Response{Text: "partial", Failed: &Error{Code: "server_error", Message: "failed"}},
		Response{Text: "x", Cut: true},
	))
	resp := post(t, s, simple)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" ||
		string(b) != `{"error":{"message":"Too Many Requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`+"\n" {
		t.Errorf("429: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp = post(t, s, simple)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || string(b) != `{"error":{"message":"Internal Server Error","type":"server_error","param":null,"code":null}}`+"\n" {
		t.Errorf("500: %d %s", resp.StatusCode, b)
	}
	evs, err := events(t, post(t, s, simple).Body)
	if err != nil || names(evs) != "created in_progress error failed" ||
		evs[2].data["error"].(map[string]any)["code"] != "insufficient_quota" ||
		evs[3].data["response"].(map[string]any)["error"].(map[string]any)["message"] != "You exceeded your current quota." {
		t.Errorf("error event: %v %s %v", err, names(evs), evs)
	}
	evs, _ = events(t, post(t, s, simple).Body)
	if names(evs) != "created in_progress error failed" || evs[2].data["code"] != "server_error" || evs[2].data["message"] != "boom" {
		t.Errorf("flat error event: %s %v", names(evs), evs)
	}
	evs, _ = events(t, post(t, s, simple).Body)
	if !strings.HasSuffix(names(evs), "output_item.done(message) failed") {
		t.Errorf("failed: %s", names(evs))
	}
	_, err = events(t, post(t, s, simple).Body)
	if err == nil {
		t.Errorf("cut connection read cleanly")
	}
}

func TestTitleAndNonStream(t *testing.T) {
	s := NewServer(t, nil)
	title := `{"model":"gpt-5-nano","stream":true,"input":[{"role":"developer","content":"You are a title generator."},{"role":"user","content":[{"type":"input_text","text":"Generate a title for this conversation:\n"}]},{"role":"user","content":[{"type":"input_text","text":"Fix the login bug\nplease"}]}]}`
	evs, _ := events(t, post(t, s, title).Body)
	if got := deltaText(evs); s.Count() != 0 || len(s.Titles()) != 1 || got != "Fix the login bug" {
		t.Errorf("title %q: count %d titles %d", got, s.Count(), len(s.Titles()))
	}
	resp := post(t, s, strings.Replace(simple, `"stream":true`, `"stream":false`, 1))
	var r struct {
		Status string `json:"status"`
		Output []struct {
			Type    string    `json:"type"`
			Content []Content `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "completed" || r.Output[0].Content[0].Text != "You said: hello there" {
		t.Errorf("whole: %v %+v", err, r)
	}
}

func TestFromStubmodel(t *testing.T) {
	var seen Request
	s := NewServer(t, func(r Request) Response { seen = r; return Directives(r) })
	body := `{"model":"m","stream":true,"tools":[{"type":"function","name":"bash","parameters":{"type":"object"},"strict":false}],"input":[
		{"role":"user","content":[{"type":"input_text","text":"call:bash {\"command\":\"ls\"} then:fine"}]},
		{"type":"reasoning","encrypted_content":"e","summary":[]},
		{"type":"function_call","call_id":"call_1_0","name":"bash","arguments":"{\"command\":\"ls\"}"},
		{"type":"function_call_output","call_id":"call_1_0","output":"a.go"}]}`
	evs, _ := events(t, post(t, s, body).Body)
	if text := deltaText(evs); text != "Done. fine" || !seen.LastIsToolResult() || seen.LastItem().OutputText() != "a.go" {
		t.Errorf("text %q, last %+v", text, seen.LastItem())
	}
	// A first call: the directive's call.
	evs, _ = events(t, post(t, s, strings.SplitN(body, `,
		{"type":"reasoning"`, 2)[0]+"]}").Body)
	var call map[string]any
	for _, e := range evs {
		if it, ok := e.data["item"].(map[string]any); ok && e.name == "response.output_item.done" && it["type"] == "function_call" {
			call = it
		}
	}
	if call == nil || call["call_id"] != "call_2_0" || call["name"] != "bash" || call["arguments"] != `{"command":"ls"}` {
		t.Errorf("call %v in %s", call, names(evs))
	}
}

func TestCloseDuringStream(t *testing.T) {
	s := New(Fixed(Response{Text: strings.Repeat("a ", 100)}), WithDelay(50*time.Millisecond), WithChunks(100))
	if _, err := s.Start(""); err != nil {
		t.Fatal(err)
	}
	resp := post(t, s, simple)
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

func deltaText(evs []event) string {
	var text string
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			text += e.data["delta"].(string)
		}
	}
	return text
}
