package anthropicstub

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func post(t *testing.T, s *Server, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "k")
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

// events reads an SSE body; every event's name must match its data's type.
func events(t *testing.T, r io.Reader) ([]event, error) {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
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
			out = append(out, event{name, d})
		}
	}
	return out, sc.Err()
}

func names(evs []event) string {
	var b []string
	for _, e := range evs {
		s := e.name
		if cb, ok := e.data["content_block"].(map[string]any); ok {
			s += "(" + cb["type"].(string) + ")"
		}
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] != nil {
			s += "(" + d["type"].(string) + ")"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

const simple = `{"model":"claude-x","max_tokens":100,"stream":true,"system":[{"type":"text","text":"be nice"}],"messages":[{"role":"user","content":"hello there"}]}`

func TestStreamShape(t *testing.T) {
	s := NewServer(t, Fixed(Response{RedactedThinking: "R", Thinking: "hmm", Text: "Hi!",
		ToolUses: []ToolUse{{Name: "bash", Input: `{"command":"ls"}`}}}), WithChunks(2))
	evs, err := events(t, post(t, s, simple).Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "message_start ping content_block_start(redacted_thinking) content_block_stop " +
		"content_block_start(thinking) content_block_delta(thinking_delta) content_block_delta(thinking_delta) content_block_delta(signature_delta) content_block_stop " +
		"content_block_start(text) content_block_delta(text_delta) content_block_delta(text_delta) content_block_stop " +
		"content_block_start(tool_use) content_block_delta(input_json_delta) content_block_delta(input_json_delta) content_block_delta(input_json_delta) content_block_stop " +
		"message_delta message_stop"
	if got := names(evs); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	start := evs[0].data["message"].(map[string]any)
	if start["model"] != "claude-x" || start["usage"].(map[string]any)["input_tokens"] != float64(4) {
		t.Errorf("message_start %v", start)
	}
	tool := evs[13].data["content_block"].(map[string]any)
	if tool["id"] != "toolu_stub_1_0" || tool["name"] != "bash" || evs[13].data["index"] != float64(3) {
		t.Errorf("tool_use start %v", evs[13].data)
	}
	var args string
	for _, e := range evs[14:17] {
		args += e.data["delta"].(map[string]any)["partial_json"].(string)
	}
	delta := evs[18].data
	if args != `{"command":"ls"}` || delta["delta"].(map[string]any)["stop_reason"] != "tool_use" || evs[7].data["delta"].(map[string]any)["signature"] != "stub-signature-1" {
		t.Errorf("args %q, message_delta %v", args, delta)
	}
	r := s.Parsed()[0]
	if r.N != 1 || r.SystemText() != "be nice" || r.LastUserText() != "hello there" || r.MaxTokens != 100 {
		t.Errorf("parsed %+v", r)
	}
	if s.Headers()[0].Get("X-Api-Key") != "k" {
		t.Errorf("headers not recorded")
	}
}

func TestErrors(t *testing.T) {
	s := NewServer(t, Sequence(
		Response{Status: 429, Headers: map[string]string{"retry-after": "3"}},
		Response{Status: 529},
		Response{StreamError: &Error{Type: "overloaded_error", Message: "Overloaded"}},
		Response{Text: "x", Cut: true},
	))
	resp := post(t, s, simple)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" ||
		string(b) != `{"type":"error","error":{"type":"rate_limit_error","message":"Too Many Requests"}}`+"\n" {
		t.Errorf("429: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	resp = post(t, s, simple)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 529 || !strings.Contains(string(b), `"overloaded_error","message":"Overloaded"`) {
		t.Errorf("529: %d %s", resp.StatusCode, b)
	}
	evs, err := events(t, post(t, s, simple).Body)
	if err != nil || names(evs) != "message_start ping error" {
		t.Errorf("error event: %v %s", err, names(evs))
	}
	_, err = events(t, post(t, s, simple).Body)
	if err == nil {
		t.Errorf("cut connection read cleanly")
	}
}

func TestTitleAndNonStream(t *testing.T) {
	s := NewServer(t, nil)
	title := `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":"Generate a title for this conversation"}],"messages":[{"role":"user","content":[{"type":"text","text":"Fix the login bug\nplease"}]}]}`
	evs, _ := events(t, post(t, s, title).Body)
	if got := deltaText(evs); s.Count() != 0 || len(s.Titles()) != 1 || got != "Fix the login bug" {
		t.Errorf("title %q: count %d titles %d", got, s.Count(), len(s.Titles()))
	}
	// OpenCode's title request: the question and the first message merged
	// into one user message; the title is the first message's.
	merged := `{"model":"m","max_tokens":10,"stream":true,"system":[{"type":"text","text":"You are a title generator."}],"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Generate a title for this conversation:\n"},{"type":"text","text":"hello there"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`
	evs, _ = events(t, post(t, s, merged).Body)
	if got := deltaText(evs); got != "hello there" || len(s.Titles()) != 2 {
		t.Errorf("title of the merged request %q, titles %d", got, len(s.Titles()))
	}
	resp := post(t, s, strings.Replace(simple, `"stream":true`, `"stream":false`, 1))
	var m struct {
		Type    string `json:"type"`
		Content []Block
		Stop    string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Type != "message" || m.Content[0].Text != "You said: hello there" || m.Stop != "end_turn" {
		t.Errorf("whole: %v %+v", err, m)
	}
}

func TestFromStubmodel(t *testing.T) {
	var seen Request
	s := NewServer(t, func(r Request) Response { seen = r; return Directives(r) })
	body := `{"model":"m","max_tokens":10,"stream":true,"tools":[{"name":"bash","input_schema":{"type":"object"}}],"messages":[
		{"role":"user","content":"call:bash {\"command\":\"ls\"} then:fine"},
		{"role":"assistant","content":[{"type":"tool_use","id":"call_1_0","name":"bash","input":{"command":"ls"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1_0","content":[{"type":"text","text":"a.go"}]}]}]}`
	evs, _ := events(t, post(t, s, body).Body)
	if text := deltaText(evs); text != "Done. fine" || !seen.LastIsToolResult() || seen.LastMessage().Content[0].ResultText() != "a.go" {
		t.Errorf("text %q, last %+v", text, seen.LastMessage())
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
	if !reflect.DeepEqual(len(s.Requests()), 1) {
		t.Errorf("requests %d", len(s.Requests()))
	}
}

func deltaText(evs []event) string {
	var text string
	for _, e := range evs {
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text += d["text"].(string)
		}
	}
	return text
}
