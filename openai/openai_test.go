package openai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// client keeps no idle connection: none outlives a test's server.
var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

const scriptedModel = "scripted/scripted-model"

// response is what the tests read of a response object.
type response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Status             string            `json:"status"`
	Model              string            `json:"model"`
	Metadata           map[string]string `json:"metadata"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       struct {
		ID string `json:"id"`
	} `json:"conversation"`
	Output []struct {
		ID      string `json:"id"`
		Type    string `json:"type"`
		Role    string `json:"role"`
		Status  string `json:"status"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage *struct {
		InputTokens, OutputTokens, TotalTokens int64
	} `json:"usage"`
}

func (r response) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// apiError is OpenAI's error body.
type apiError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func do(t *testing.T, method, url string, body any, header map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// create posts a response and decodes a 200's body.
func create(t *testing.T, url string, body any, header map[string]string) response {
	t.Helper()
	code, raw := do(t, http.MethodPost, url+"/v1/responses", body, header)
	if code != http.StatusOK {
		t.Fatalf("POST /v1/responses: %d %s", code, raw)
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("response %s: %v", raw, err)
	}
	return r
}

func messages(t *testing.T, url, session string) []opencode.MessageWithParts {
	t.Helper()
	code, raw := do(t, http.MethodGet, url+"/session/"+session+"/message", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET messages: %d %s", code, raw)
	}
	var out []opencode.MessageWithParts
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("messages: %v", err)
	}
	return out
}

func sessions(t *testing.T, url string) int {
	t.Helper()
	code, raw := do(t, http.MethodGet, url+"/session", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("GET /session: %d %s", code, raw)
	}
	var out []json.RawMessage
	_ = json.Unmarshal(raw, &out)
	return len(out)
}

// TestResponseJSON: a response is one turn of a new session; its ID is
// the user message's, its output item the assistant message's, and GET
// /session/{id}/message and GET /v1/responses/{id} show the same.
func TestResponseJSON(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	r := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "hello there", "instructions": "be brief",
		"metadata": map[string]string{"k": "v"}}, nil)
	if !strings.HasPrefix(r.ID, "msg_") || r.Object != "response" || r.Status != "completed" || r.Model != scriptedModel {
		t.Fatalf("response %+v", r)
	}
	if got := r.text(); got != "You said: hello there" {
		t.Errorf("text %q", got)
	}
	if r.Metadata["k"] != "v" || r.Usage == nil || r.PreviousResponseID != nil {
		t.Errorf("metadata %v usage %v previous %v", r.Metadata, r.Usage, r.PreviousResponseID)
	}
	conv := messages(t, srv.URL, r.Conversation.ID)
	if len(conv) != 2 || conv[0].Info.ID != r.ID || conv[0].Info.Role != opencode.User || conv[1].Info.ID != r.Output[0].ID {
		t.Fatalf("session %s holds %d messages; want the user message %s and the assistant %s", r.Conversation.ID, len(conv), r.ID, r.Output[0].ID)
	}
	if conv[0].Info.System != "be brief" {
		t.Errorf("instructions: system %q", conv[0].Info.System)
	}
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/"+r.ID, nil, nil)
	var got response
	if code != http.StatusOK || json.Unmarshal(raw, &got) != nil {
		t.Fatalf("GET /v1/responses/%s: %d %s", r.ID, code, raw)
	}
	if got.ID != r.ID || got.Status != "completed" || got.text() != r.text() || got.Output[0].ID != r.Output[0].ID || got.Metadata["k"] != "v" {
		t.Errorf("retrieved %+v; created %+v", got, r)
	}
}

// sse is one server-sent event: its event line and its data.
type sse struct {
	name string
	data map[string]any
	raw  string
}

func (e sse) s(k string) string { v, _ := e.data[k].(string); return v }
func (e sse) n(k string) int    { v, _ := e.data[k].(float64); return int(v) }

// stream posts a streamed response and reads every event.
func stream(t *testing.T, url string, body map[string]any, header map[string]string) []sse {
	t.Helper()
	body["stream"] = true
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/responses: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var evs []sse
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur sse
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
				t.Fatalf("data %q: %v", cur.raw, err)
			}
		case line == "" && cur.data != nil:
			evs = append(evs, cur)
			cur = sse{}
		}
	}
	return evs
}

// checkStream checks a stream by OpenAI's rules: sequence numbers from 0
// without a gap, the event line naming the type, created and in_progress
// first and completed last, items and content parts added before their
// deltas and done after, and the deltas adding up to each text. It
// returns the final response and the streamed text.
func checkStream(t *testing.T, evs []sse) (response, string) {
	t.Helper()
	if len(evs) < 3 {
		t.Fatalf("%d events", len(evs))
	}
	want := []string{"response.created", "response.in_progress"}
	for i, w := range want {
		if evs[i].s("type") != w {
			t.Fatalf("event %d is %s; want %s", i, evs[i].s("type"), w)
		}
	}
	type partKey struct {
		item string
		idx  int
	}
	items := map[string]int{}
	open := map[partKey]*strings.Builder{}
	var texts strings.Builder
	for i, e := range evs {
		if e.name != e.s("type") {
			t.Errorf("event %d: event line %q, type %q", i, e.name, e.s("type"))
		}
		if n := e.n("sequence_number"); n != i {
			t.Errorf("event %d (%s) has sequence_number %d", i, e.name, n)
		}
		if _, ok := e.data["error"]; ok {
			t.Errorf("event %d (%s) has a top-level error key: %s", i, e.name, e.raw)
		}
		switch e.name {
		case "response.output_item.added":
			item, _ := e.data["item"].(map[string]any)
			id, _ := item["id"].(string)
			if _, dup := items[id]; dup {
				t.Fatalf("item %s added twice", id)
			}
			items[id] = e.n("output_index")
		case "response.content_part.added":
			if _, ok := items[e.s("item_id")]; !ok {
				t.Fatalf("a part of item %s not added", e.s("item_id"))
			}
			open[partKey{e.s("item_id"), e.n("content_index")}] = &strings.Builder{}
		case "response.output_text.delta":
			b := open[partKey{e.s("item_id"), e.n("content_index")}]
			if b == nil {
				t.Fatalf("a delta of a part not added: %s", e.raw)
			}
			b.WriteString(e.s("delta"))
		case "response.output_text.done":
			k := partKey{e.s("item_id"), e.n("content_index")}
			if b := open[k]; b == nil || b.String() != e.s("text") {
				t.Fatalf("text done %q; the deltas say %v", e.s("text"), b)
			}
			texts.WriteString(e.s("text"))
		case "response.completed", "response.failed":
			if i != len(evs)-1 {
				t.Fatalf("%s is event %d of %d", e.name, i, len(evs))
			}
		}
	}
	last := evs[len(evs)-1]
	if last.name != "response.completed" {
		t.Fatalf("the stream ends with %s: %s", last.name, last.raw)
	}
	var r struct {
		Response response `json:"response"`
	}
	if err := json.Unmarshal([]byte(last.raw), &r); err != nil {
		t.Fatal(err)
	}
	for _, it := range r.Response.Output {
		if idx, ok := items[it.ID]; !ok || r.Response.Output[idx].ID != it.ID {
			t.Errorf("final item %s was not streamed at its index", it.ID)
		}
	}
	return r.Response, texts.String()
}

// TestResponseStream: a streamed response is OpenAI's events in order,
// its deltas add up to the text, the final response is the stored one.
func TestResponseStream(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(8)})
	evs := stream(t, srv.URL, map[string]any{"model": scriptedModel, "input": []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "stream this please"}}}}}, nil)
	r, text := checkStream(t, evs)
	if text != "You said: stream this please" || r.text() != text || r.Status != "completed" {
		t.Fatalf("streamed %q, final %q (%s)", text, r.text(), r.Status)
	}
	deltas := 0
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("%d deltas: the text was not streamed in pieces", deltas)
	}
	conv := messages(t, srv.URL, r.Conversation.ID)
	if len(conv) != 2 || conv[0].Info.ID != r.ID || conv[1].Info.ID != r.Output[0].ID {
		t.Errorf("the session does not hold the response's messages under its IDs")
	}
}

func scriptedConfig(chunks int) scripted.Config { return scripted.Config{Chunks: chunks} }
