package openai_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/openai"
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
	return readSSE(t, resp.Body)
}

// readSSE parses a stream's events.
func readSSE(t *testing.T, r io.Reader) []sse {
	t.Helper()
	var evs []sse
	sc := bufio.NewScanner(r)
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
	// The final response (composed from the turn's last message as the
	// core answered it) is the one GET reads from the session.
	var streamed struct {
		Response map[string]any `json:"response"`
	}
	if err := json.Unmarshal([]byte(evs[len(evs)-1].raw), &streamed); err != nil {
		t.Fatal(err)
	}
	status, body := do(t, "GET", srv.URL+"/v1/responses/"+r.ID, nil, nil)
	var got map[string]any
	if err := json.Unmarshal(body, &got); status != 200 || err != nil {
		t.Fatalf("GET: %d %s %v", status, body, err)
	}
	if !reflect.DeepEqual(streamed.Response, got) {
		t.Errorf("streamed final response\n%v\nGET /v1/responses/%s\n%v", streamed.Response, r.ID, got)
	}
}

func scriptedConfig(chunks int) scripted.Config { return scripted.Config{Chunks: chunks} }

// TestPreviousResponse: previous_response_id continues the session the
// response is a turn of, and the model is sent the earlier turn once.
func TestPreviousResponse(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "first words"}, nil)
	second := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "second words", "previous_response_id": first.ID}, nil)
	if second.Conversation.ID != first.Conversation.ID || second.ID == first.ID {
		t.Fatalf("second %s in %s; first %s in %s", second.ID, second.Conversation.ID, first.ID, first.Conversation.ID)
	}
	if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID || second.text() != "You said: second words" {
		t.Errorf("second: previous %v, text %q", second.PreviousResponseID, second.text())
	}
	calls := srv.Model.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d model calls", len(calls))
	}
	var seen []string
	for _, m := range calls[1].Messages {
		if m.Role == "user" || m.Role == "assistant" {
			seen = append(seen, m.Role+": "+m.Texts())
		}
	}
	want := []string{"user: first words", "assistant: You said: first words", "user: second words"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Errorf("the model was sent %q; want %q", seen, want)
	}
	// conversation names the session the same way.
	third := create(t, srv.URL, map[string]any{"input": "third", "conversation": first.Conversation.ID}, nil)
	if third.Conversation.ID != first.Conversation.ID || len(messages(t, srv.URL, first.Conversation.ID)) != 6 {
		t.Errorf("conversation did not continue the session")
	}
}

// TestIdempotencyKey: a request sent again with its Idempotency-Key is
// the same response, admitted once and run once, whether it started a
// session or continued one; the key with another body is a 409.
func TestIdempotencyKey(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	body := map[string]any{"model": scriptedModel, "input": "only once"}
	key := map[string]string{"Idempotency-Key": "key-1"}
	a := create(t, srv.URL, body, key)
	b := create(t, srv.URL, body, key)
	if a.ID != b.ID || a.Conversation.ID != b.Conversation.ID || b.text() != "You said: only once" {
		t.Fatalf("retry answered %s in %s; first %s in %s", b.ID, b.Conversation.ID, a.ID, a.Conversation.ID)
	}
	// Streamed, the retry reads the turn from the log.
	_, text := checkStream(t, stream(t, srv.URL, map[string]any{"model": scriptedModel, "input": "only once"}, key))
	if text != "You said: only once" {
		t.Errorf("the streamed retry says %q", text)
	}
	next := map[string]any{"input": "then this", "previous_response_id": a.ID}
	key2 := map[string]string{"Idempotency-Key": "key-2"}
	c := create(t, srv.URL, next, key2)
	d := create(t, srv.URL, next, key2)
	if c.ID != d.ID {
		t.Errorf("continued retry: %s then %s", c.ID, d.ID)
	}
	if n := len(srv.Model.Calls()); n != 2 || sessions(t, srv.URL) != 1 || len(messages(t, srv.URL, a.Conversation.ID)) != 4 {
		t.Errorf("%d model calls, %d sessions; want each request run once", n, sessions(t, srv.URL))
	}
	if code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", body, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}); code != 400 {
		t.Errorf("a 256-byte key: %d %s", code, raw)
	}
	code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", map[string]any{"input": "something else", "previous_response_id": a.ID}, key2)
	var e apiError
	if code != http.StatusConflict || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Type != "invalid_request_error" {
		t.Errorf("the key with another body: %d %s; want 409", code, raw)
	}
}

// TestBadInput: what the door cannot take is a 4xx in OpenAI's error
// shape, naming the parameter, and nothing is created or admitted.
func TestBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	cases := []struct {
		name  string
		body  any
		code  int
		param string
	}{
		{"not JSON", "{", 400, ""},
		{"no input", map[string]any{"model": scriptedModel}, 400, "input"},
		{"empty input", map[string]any{"input": ""}, 400, "input"},
		{"input a number", map[string]any{"input": 3}, 400, "input"},
		{"unknown item", map[string]any{"input": []any{map[string]any{"type": "item_reference", "id": "msg_1"}}}, 400, "input[0].type"},
		{"unknown role", map[string]any{"input": []any{map[string]any{"role": "robot", "content": "hi"}}}, 400, "input[0].role"},
		{"image part without a URL", map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "x"}}}}}, 400, "input[0].content[0].image_url"},
		{"image part of a system message", map[string]any{"input": []any{map[string]any{"role": "system", "content": []any{map[string]any{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}}}, map[string]any{"role": "user", "content": "hi"}}}, 400, "input[0].content[0].type"},
		{"only system", map[string]any{"input": []any{map[string]any{"role": "system", "content": "be"}}}, 400, "input"},
		{"unknown model", map[string]any{"model": "nope/none", "input": "hi"}, 404, "model"},
		{"unknown agent", map[string]any{"model": "nobody", "input": "hi"}, 404, "model"},
		{"foreign previous", map[string]any{"input": "hi", "previous_response_id": "resp_123"}, 404, "previous_response_id"},
		{"unknown previous", map[string]any{"input": "hi", "previous_response_id": "msg_ffffffffffffffffffffffffff"}, 404, "previous_response_id"},
		{"bad conversation", map[string]any{"input": "hi", "conversation": "conv_1"}, 400, "conversation"},
		{"unknown conversation", map[string]any{"input": "hi", "conversation": map[string]any{"id": "ses_ffffffffffffffffffffffffff"}}, 404, "conversation"},
		{"both", map[string]any{"input": "hi", "conversation": "ses_1", "previous_response_id": "msg_1"}, 400, "conversation"},
		{"hosted tool", map[string]any{"input": "hi", "tools": []any{map[string]any{"type": "web_search"}}}, 400, "tools[0].type"},
		{"background not stored", map[string]any{"input": "hi", "background": true, "store": false}, 400, "store"},
		{"background steer", map[string]any{"input": "hi", "background": true, "delivery": "steer", "previous_response_id": "msg_x"}, 400, "background"},
		{"reasoning effort", map[string]any{"input": "hi", "reasoning": map[string]any{"effort": "extreme"}}, 400, "reasoning.effort"},
		{"reasoning type", map[string]any{"input": "hi", "reasoning": "high"}, 400, "reasoning"},
		{"background hosted tool", map[string]any{"input": "hi", "background": true, "tools": []any{map[string]any{"type": "web_search"}}}, 400, "tools[0].type"},
		{"background outputs of nothing", map[string]any{"background": true, "conversation": "ses_ffffffffffffffffffffffffff",
			"input": []any{map[string]any{"type": "function_call_output", "call_id": "c", "output": "x"}}}, 404, "conversation"},
		{"metadata too long", map[string]any{"input": "hi", "metadata": map[string]string{"k": strings.Repeat("v", 513)}}, 400, "metadata"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", c.body, nil)
			checkRefused(t, code, raw, c.code, "invalid_request_error", c.param)
		})
	}
	if n := sessions(t, srv.URL); n != 0 || len(srv.Model.Calls()) != 0 {
		t.Errorf("bad requests left %d sessions and %d model calls", n, len(srv.Model.Calls()))
	}
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/msg_ffffffffffffffffffffffffff", nil, nil)
	var e apiError
	if code != http.StatusNotFound || json.Unmarshal(raw, &e) != nil || e.Error == nil {
		t.Errorf("GET an unknown response: %d %s", code, raw)
	}
}

// TestBearerAuth: with a password the OpenAI door takes it as a bearer
// token (the SDKs' API key) as well as basic auth, and refuses in
// OpenAI's shape; the other routes take no bearer token.
func TestBearerAuth(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Password: "sekrit"})
	body := map[string]any{"input": "hi"}
	if code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", body, map[string]string{"Authorization": "Bearer sekrit"}); code != 200 {
		t.Errorf("bearer: %d %s", code, raw)
	}
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/models", nil, map[string]string{"Authorization": "Bearer wrong"})
	var e apiError
	if code != 401 || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Type != "authentication_error" {
		t.Errorf("a wrong key: %d %s", code, raw)
	}
	if code, _ := do(t, http.MethodGet, srv.URL+"/session", nil, map[string]string{"Authorization": "Bearer sekrit"}); code != 401 {
		t.Errorf("a bearer token on /session: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/models", nil)
	req.SetBasicAuth("opencode", "sekrit")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("basic auth: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// TestModels: GET /v1/models lists the catalog's models as
// provider/model and the agents by name, each usable as a model.
func TestModels(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/models", nil, nil)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object string
			OwnedBy    string `json:"owned_by"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal(raw, &list) != nil || list.Object != "list" {
		t.Fatalf("%d %s", code, raw)
	}
	ids := map[string]string{}
	for _, m := range list.Data {
		ids[m.ID] = m.OwnedBy
	}
	if ids[scriptedModel] != "scripted" || ids["build"] != "agent" || ids["plan"] != "agent" {
		t.Fatalf("models %v", ids)
	}
	r := create(t, srv.URL, map[string]any{"model": "plan", "input": "plan it"}, nil)
	if conv := messages(t, srv.URL, r.Conversation.ID); conv[0].Info.Agent != "plan" {
		t.Errorf("model plan: the user message's agent is %q", conv[0].Info.Agent)
	}
}

// TestResponseQueued: a response posted while another turn of its session
// runs waits behind it, and its stream carries its own turn only.
func TestResponseQueued(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 20 * time.Millisecond}})
	first := create(t, srv.URL, map[string]any{"input": "warm up"}, nil)
	sid := first.Conversation.ID

	j, _ := json.Marshal(map[string]any{"input": "A words", "conversation": sid, "stream": true})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/responses", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream A: %v %v", resp, err)
	}
	defer resp.Body.Close()
	// A is read on its own; B is posted once A's text streams (its turn runs).
	streaming, doneA := make(chan struct{}), make(chan string, 1)
	go func() {
		var all strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		seen := false
		for sc.Scan() {
			all.WriteString(sc.Text() + "\n")
			if !seen && sc.Text() == "event: response.output_text.delta" {
				seen = true
				close(streaming)
			}
		}
		if !seen {
			close(streaming)
		}
		doneA <- all.String()
	}()
	<-streaming
	b, textB := checkStream(t, stream(t, srv.URL, map[string]any{"input": "B words", "conversation": sid}, nil))
	a, textA := checkStream(t, readSSE(t, strings.NewReader(<-doneA)))
	if textA != "You said: A words" || textB != "You said: B words" {
		t.Fatalf("A streamed %q, B %q", textA, textB)
	}
	if a.text() != textA || b.text() != textB || len(b.Output) != 1 || b.Output[0].ID == a.Output[0].ID {
		t.Errorf("final A %q %v, B %q %v", a.text(), a.Output, b.text(), b.Output)
	}
	// Read back, each response is its own turn.
	for _, r := range []response{a, b} {
		code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/"+r.ID, nil, nil)
		var got response
		if code != 200 || json.Unmarshal(raw, &got) != nil || got.text() != r.text() || got.Status != "completed" {
			t.Errorf("GET %s: %d %s", r.ID, code, raw)
		}
	}
}

// TestRefusals: what the router refuses on /v1/* (an unknown route or
// method, a Host that is not this server's) is in OpenAI's error shape.
func TestRefusals(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	cases := []struct {
		name, method, path, host string
		code                     int
		typ                      string
	}{
		{"unknown route", http.MethodGet, "/v1/assistants", "", 404, "invalid_request_error"},
		{"unknown method", http.MethodDelete, "/v1/models", "", 405, "invalid_request_error"},
		{"foreign host", http.MethodGet, "/v1/models", "evil.example", 403, "permission_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
			if c.host != "" {
				req.Host = c.host
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var e apiError
			if resp.StatusCode != c.code || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Type != c.typ {
				t.Errorf("%d %s; want %d %s in OpenAI's shape", resp.StatusCode, raw, c.code, c.typ)
			}
		})
	}
}

// live is a stream read on its own goroutine: its response ID once
// created, a signal at its first text delta, its whole text at the end.
type live struct {
	id      chan string
	texting chan struct{}
	done    chan string
}

func openStream(t *testing.T, url string, body map[string]any) *live {
	t.Helper()
	body["stream"] = true
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	l := &live{id: make(chan string, 1), texting: make(chan struct{}), done: make(chan string, 1)}
	go func() {
		defer resp.Body.Close()
		var all strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		gotID, texting := false, false
		for sc.Scan() {
			line := sc.Text()
			all.WriteString(line + "\n")
			if d, ok := strings.CutPrefix(line, "data: "); ok && !gotID {
				var e struct {
					Response response `json:"response"`
				}
				_ = json.Unmarshal([]byte(d), &e)
				l.id <- e.Response.ID
				gotID = true
			}
			if !texting && line == "event: response.output_text.delta" {
				texting = true
				close(l.texting)
			}
		}
		if !gotID {
			l.id <- ""
		}
		if !texting {
			close(l.texting)
		}
		l.done <- all.String()
	}()
	return l
}

// lastEvent is a stream's last event.
func lastEvent(t *testing.T, raw string) sse {
	t.Helper()
	evs := readSSE(t, strings.NewReader(raw))
	if len(evs) == 0 {
		t.Fatalf("an empty stream")
	}
	return evs[len(evs)-1]
}

// TestCancel: POST /v1/responses/{id}/cancel revokes a queued response
// (its turn never runs) and aborts a running one; both answer and end
// their streams cancelled, and the session takes the next response.
func TestCancel(t *testing.T) {
	// Each turn streams for 5 s: time enough, on a loaded machine, to
	// cancel a turn that is running.
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Reply: strings.Repeat("la ", 100), Chunks: 100, Delay: 50 * time.Millisecond}})
	a := openStream(t, srv.URL, map[string]any{"input": "long answer"})
	aID := <-a.id
	<-a.texting
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/"+aID, nil, nil)
	var running response
	if code != 200 || json.Unmarshal(raw, &running) != nil || running.Status != "in_progress" {
		t.Fatalf("GET a running response: %d %s", code, raw)
	}
	b := openStream(t, srv.URL, map[string]any{"input": "never runs", "conversation": running.Conversation.ID})
	bID := <-b.id
	cancel := func(id string) response {
		t.Helper()
		code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses/"+id+"/cancel", nil, nil)
		var r response
		if code != 200 || json.Unmarshal(raw, &r) != nil || r.ID != id || r.Status != "cancelled" {
			t.Fatalf("cancel %s: %d %s", id, code, raw)
		}
		return r
	}
	cancel(bID)
	if e := lastEvent(t, <-b.done); e.name != "response.failed" || !strings.Contains(e.raw, `"status":"cancelled"`) {
		t.Errorf("the queued response's stream ends %s %s", e.name, e.raw)
	}
	cancel(aID)
	if e := lastEvent(t, <-a.done); e.name != "response.failed" || !strings.Contains(e.raw, `"status":"cancelled"`) {
		t.Errorf("the running response's stream ends %s %s", e.name, e.raw)
	}
	next := create(t, srv.URL, map[string]any{"input": "short", "conversation": running.Conversation.ID}, nil)
	if next.Status != "completed" || len(srv.Model.Calls()) != 2 {
		t.Errorf("after the cancels: %s, %d model calls (want the running one and this one)", next.Status, len(srv.Model.Calls()))
	}
	if code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses/msg_ffffffffffffffffffffffffff/cancel", nil, nil); code != 404 {
		t.Errorf("cancel an unknown response: %d %s", code, raw)
	}
}

// checkRefused checks a refusal is OpenAI's error shape with the status,
// the error type (typ, if set) and the param (none for "") expected.
func checkRefused(t *testing.T, code int, raw []byte, wantCode int, typ, param string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(raw, &e); err != nil || e.Error == nil {
		t.Fatalf("%d %s: not OpenAI's error shape", code, raw)
	}
	if code != wantCode || (typ != "" && e.Error.Type != typ) || e.Error.Message == "" {
		t.Errorf("%d %s; want %d %s", code, raw, wantCode, typ)
	}
	if got := e.Error.Param; (param == "") != (got == nil) || (got != nil && *got != param) {
		t.Errorf("param %v; want %q (%s)", got, param, raw)
	}
}

// TestMessageIDHeader: a response named by the OpenCode-Message-ID header
// (what an instance of a cluster sends when it forwards one) has that ID,
// and sent again it is the same response, run once; the same ID with
// another body is a 409, a malformed one a 400.
func TestMessageIDHeader(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "first"}, nil)
	id := identifier.Default().NewMessage()
	named := map[string]string{openai.MessageIDHeader: id}
	body := map[string]any{"input": "named", "previous_response_id": first.ID}
	a := create(t, srv.URL, body, named)
	b := create(t, srv.URL, body, named)
	if a.ID != id || b.ID != id || b.text() != "You said: named" {
		t.Fatalf("named %s: answered %s, then %s (%q)", id, a.ID, b.ID, b.text())
	}
	if n := len(srv.Model.Calls()); n != 2 || len(messages(t, srv.URL, first.Conversation.ID)) != 4 {
		t.Errorf("%d model calls; want the named response run once", n)
	}
	code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", map[string]any{"input": "other", "previous_response_id": first.ID}, named)
	checkRefused(t, code, raw, http.StatusConflict, "", "")
	code, raw = do(t, http.MethodPost, srv.URL+"/v1/responses", body, map[string]string{openai.MessageIDHeader: "nope"})
	checkRefused(t, code, raw, http.StatusBadRequest, "invalid_request_error", "")
}

// TestDeleteResponse: DELETE /v1/responses/{id} takes the response's
// input and output out of its session (GET is then a 404, and the model
// is no longer sent them); a running response is a 409, an unknown one a
// 404.
func TestDeleteResponse(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "forget this"}, nil)
	second := create(t, srv.URL, map[string]any{"input": "keep this", "previous_response_id": first.ID}, nil)
	code, raw := do(t, http.MethodDelete, srv.URL+"/v1/responses/"+first.ID, nil, nil)
	var d struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}
	if code != 200 || json.Unmarshal(raw, &d) != nil || d.ID != first.ID || d.Object != "response" || !d.Deleted {
		t.Fatalf("DELETE: %d %s", code, raw)
	}
	code, raw = do(t, http.MethodGet, srv.URL+"/v1/responses/"+first.ID, nil, nil)
	checkRefused(t, code, raw, http.StatusNotFound, "", "")
	if got := conversation(t, srv.URL, second.Conversation.ID); len(got) != 2 || !strings.Contains(got[0], "keep this") {
		t.Errorf("the session holds %q; want the second response's two messages", got)
	}
	create(t, srv.URL, map[string]any{"input": "and now", "previous_response_id": second.ID}, nil)
	calls := srv.Model.Calls()
	if sent := fmt.Sprint(calls[len(calls)-1].Messages); strings.Contains(sent, "forget this") || !strings.Contains(sent, "keep this") {
		t.Errorf("the model was sent %s", sent)
	}
	code, raw = do(t, http.MethodDelete, srv.URL+"/v1/responses/msg_nosuchresponse", nil, nil)
	checkRefused(t, code, raw, http.StatusNotFound, "", "")

	// Running (a background response of a slow model): a 409; queued
	// behind it: revoked, never run.
	slow := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 50, Delay: 50 * time.Millisecond}})
	running := create(t, slow.URL, map[string]any{"model": scriptedModel, "input": "slowly", "background": true}, nil)
	queued := create(t, slow.URL, map[string]any{"input": "never", "background": true, "conversation": running.Conversation.ID}, nil)
	code, raw = do(t, http.MethodDelete, slow.URL+"/v1/responses/"+running.ID, nil, nil)
	checkRefused(t, code, raw, http.StatusConflict, "", "")
	if code, raw = do(t, http.MethodDelete, slow.URL+"/v1/responses/"+queued.ID, nil, nil); code != 200 {
		t.Errorf("DELETE of a queued response: %d %s", code, raw)
	}
	if code, raw = do(t, http.MethodPost, slow.URL+"/v1/responses/"+running.ID+"/cancel", nil, nil); code != 200 {
		t.Errorf("cancel: %d %s", code, raw)
	}
	for _, c := range slow.Model.Calls() {
		if strings.Contains(fmt.Sprint(c.Messages), "never") {
			t.Errorf("the deleted queued response reached the model")
		}
	}
}

// TestInputImageAndFile: input_image and input_file parts of a user
// message are the user message's file parts (after its text) and reach
// the model as the TUI's attachments do; the forms OpenAI's Files API
// needs (file_id) and malformed URLs are 400s admitting nothing.
func TestInputImageAndFile(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	png := "data:image/png;base64,iVBORw0KGgo="
	notes := "aGVsbG8gbm90ZXM=" // "hello notes"
	r := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "input_text", "text": "look at these"},
		map[string]any{"type": "input_image", "image_url": png, "detail": "auto"},
		map[string]any{"type": "input_file", "file_data": notes, "filename": "notes.txt"},
	}}}}, nil)
	conv := messages(t, srv.URL, r.Conversation.ID)
	var got []string
	read := false // a text file is read for the model, as OpenCode reads an attached one
	for _, p := range conv[0].Parts {
		if p.Synthetic {
			read = read || p.Text == "hello notes"
			continue
		}
		got = append(got, string(p.Type)+" "+p.Mime+" "+p.Filename+" "+p.URL+p.Text)
	}
	if !read {
		t.Errorf("the text file was not read for the model: %+v", conv[0].Parts)
	}
	want := []string{"text   look at these", "file image/png image " + png, "file text/plain notes.txt data:text/plain;base64," + notes}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the user message's parts are\n%q\nwant\n%q", got, want)
	}
	calls := srv.Model.Calls()
	sent := calls[len(calls)-1].Messages
	var media []string
	for _, p := range sent[len(sent)-1].Parts {
		if p.Type == "file" {
			media = append(media, p.MediaType+" "+p.Data)
		}
	}
	// The scripted model takes no images: the core tells it so, as
	// OpenCode does for a model without image input, and sends the text
	// file as read.
	var words []string
	for _, p := range sent[len(sent)-1].Parts {
		words = append(words, p.Text)
	}
	if said := strings.Join(words, "\n"); len(media) != 0 || !strings.Contains(said, `ERROR: Cannot read "image" (this model does not support image input)`) ||
		!strings.Contains(said, "hello notes") {
		t.Errorf("the model was sent files %q and %q; want the image refused in words and the text file read", media, said)
	}
	for _, c := range []struct {
		part  map[string]any
		param string
	}{
		{map[string]any{"type": "input_image", "file_id": "file-abc"}, "input[0].content[1].file_id"},
		{map[string]any{"type": "input_image", "image_url": "ftp://x/y.png"}, "input[0].content[1].image_url"},
		{map[string]any{"type": "input_image", "image_url": "data:,"}, "input[0].content[1].image_url"},
		{map[string]any{"type": "input_image", "image_url": "data:text/plain;base64,aGk="}, "input[0].content[1].image_url"},
		{map[string]any{"type": "input_file"}, "input[0].content[1].file_data"},
		{map[string]any{"type": "input_text", "text": ""}, "input[0].content[1].text"},
	} {
		before := len(srv.Model.Calls())
		code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", map[string]any{"model": scriptedModel, "input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi"}, c.part}}}}, nil)
		checkRefused(t, code, raw, http.StatusBadRequest, "invalid_request_error", c.param)
		if len(srv.Model.Calls()) != before {
			t.Errorf("%v ran a turn", c.part)
		}
	}
}

// TestStreamedChainForks: a streamed response after one this process
// streamed to its end continues the session without reading it while
// nothing was written since; once another door wrote a turn after it,
// a response after it forks (the model is not sent the other door's turn).
func TestStreamedChainForks(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	one, _ := checkStream(t, stream(t, srv.URL, map[string]any{"model": scriptedModel, "input": "one"}, nil))
	two, _ := checkStream(t, stream(t, srv.URL, map[string]any{"input": "two", "previous_response_id": one.ID}, nil))
	sid := one.Conversation.ID
	if two.Conversation.ID != sid {
		t.Fatalf("the second response is in %s, the first in %s", two.Conversation.ID, sid)
	}
	code, raw := do(t, http.MethodPost, srv.URL+"/session/"+sid+"/message", map[string]any{
		"parts": []any{map[string]any{"type": "text", "text": "from another door"}}}, nil)
	if code != 200 {
		t.Fatalf("POST /session/%s/message: %d %s", sid, code, raw)
	}
	three, _ := checkStream(t, stream(t, srv.URL, map[string]any{"input": "three", "previous_response_id": two.ID}, nil))
	if three.Conversation.ID == sid {
		t.Fatalf("a response after a turn that is no longer the session's last did not fork")
	}
	calls := srv.Model.Calls()
	sent := fmt.Sprint(calls[len(calls)-1].Messages)
	if strings.Contains(sent, "from another door") || !strings.Contains(sent, "two") || !strings.Contains(sent, "three") {
		t.Errorf("the fork's model call was sent %s", sent)
	}
}
