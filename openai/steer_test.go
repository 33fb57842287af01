package openai_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// slowModel streams each reply for about 4 s: time enough, on a loaded
// machine, to steer a turn while its first model call runs.
func slowModel() scripted.Config { return scripted.Config{Chunks: 40, Delay: 100 * time.Millisecond} }

// lastUser is the text of the last user message a model call was sent.
func lastUser(req provider.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Texts()
		}
	}
	return ""
}

// steerResponse is what the steer tests read of a response object.
type steerResponse struct {
	response
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

func getResponse(t *testing.T, url, id string) steerResponse {
	t.Helper()
	code, raw := do(t, http.MethodGet, url+"/v1/responses/"+id, nil, nil)
	var r steerResponse
	if code != 200 || json.Unmarshal(raw, &r) != nil {
		t.Fatalf("GET /v1/responses/%s: %d %s", id, code, raw)
	}
	return r
}

// TestSteerHTTP: POST /v1/responses with "delivery": "steer" and the
// running response as previous_response_id admits the input into that
// turn; the steered response ends incomplete ("steered") at the model
// call boundary where the steer is delivered, and the steer's request
// streams the successor (the steer's user message ID) that carries the
// rest of the turn, whose model call is sent the steer.
func TestSteerHTTP(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: slowModel()})
	a := openStream(t, srv.URL, map[string]any{"input": "first task"})
	aID := <-a.id
	<-a.texting
	evs := stream(t, srv.URL, map[string]any{"previous_response_id": aID, "delivery": "steer", "input": "change of plan",
		"metadata": map[string]string{"why": "steer"}}, nil)
	succ, text := checkStream(t, evs)
	if text != "You said: change of plan" || succ.ID == aID || !strings.HasPrefix(succ.ID, "msg_") ||
		succ.PreviousResponseID == nil || *succ.PreviousResponseID != aID || succ.Metadata["why"] != "steer" {
		t.Fatalf("successor %+v streamed %q", succ, text)
	}
	last := lastEvent(t, <-a.done)
	var ended struct {
		Response steerResponse `json:"response"`
	}
	if last.name != "response.incomplete" || json.Unmarshal([]byte(last.raw), &ended) != nil ||
		ended.Response.Status != "incomplete" || ended.Response.IncompleteDetails == nil ||
		ended.Response.IncompleteDetails.Reason != "steered" || ended.Response.text() != "You said: first task" {
		t.Fatalf("the steered stream ends %s %s", last.name, last.raw)
	}
	calls := srv.Model.Calls()
	if len(calls) != 2 || lastUser(calls[0]) != "first task" || lastUser(calls[1]) != "change of plan" {
		t.Fatalf("%d model calls; the second was sent %q", len(calls), lastUser(calls[len(calls)-1]))
	}
	// Read back: the steered response holds its own step, the successor
	// the rest; the session is one turn under the same IDs.
	if r := getResponse(t, srv.URL, aID); r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "steered" ||
		r.text() != "You said: first task" || len(r.Output) != 1 {
		t.Errorf("GET the steered response: %+v", r)
	}
	if r := getResponse(t, srv.URL, succ.ID); r.Status != "completed" || r.text() != text || r.IncompleteDetails != nil {
		t.Errorf("GET the successor: %+v", r)
	}
	conv := messages(t, srv.URL, succ.Conversation.ID)
	if len(conv) != 4 || conv[0].Info.ID != aID || conv[2].Info.ID != succ.ID || conv[3].Info.ParentID != succ.ID {
		t.Errorf("the session holds %d messages", len(conv))
	}
	// Both turns are over: a steer now is refused and admits nothing.
	for _, id := range []string{aID, succ.ID} {
		code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", map[string]any{"previous_response_id": id, "delivery": "steer", "input": "too late"}, nil)
		var e apiError
		if code != 409 || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Code == nil || *e.Error.Code != "response_already_completed" {
			t.Errorf("a steer of %s after its turn: %d %s", id, code, raw)
		}
	}
	if n := len(messages(t, srv.URL, succ.Conversation.ID)); n != 4 {
		t.Errorf("a refused steer left %d messages", n)
	}
}

// TestSteerHTTPBadInput: the steer extension's bad input is a 4xx in
// OpenAI's shape and admits nothing.
func TestSteerHTTPBadInput(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	done := create(t, srv.URL, map[string]any{"input": "hello"}, nil)
	cases := []struct {
		name  string
		body  map[string]any
		code  int
		param string
		ecode string
	}{
		{"unknown delivery", map[string]any{"input": "x", "delivery": "later"}, 400, "delivery", "invalid_value"},
		{"steer without a response", map[string]any{"input": "x", "delivery": "steer"}, 400, "previous_response_id", "missing_required_parameter"},
		{"steer with a conversation", map[string]any{"input": "x", "delivery": "steer", "conversation": done.Conversation.ID}, 400, "previous_response_id", "missing_required_parameter"},
		{"steer with a model", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": done.ID, "model": scriptedModel}, 400, "model", "unsupported_parameter"},
		{"steer with instructions", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": done.ID, "instructions": "be brief"}, 400, "instructions", "unsupported_parameter"},
		{"steer with a reasoning effort", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": done.ID, "reasoning": map[string]any{"effort": "high"}}, 400, "reasoning", "unsupported_parameter"},
		{"steer with tools", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": done.ID, "tools": []any{map[string]any{
			"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}, 400, "tools", "unsupported_parameter"},
		{"steer with a tool output", map[string]any{"delivery": "steer", "previous_response_id": done.ID, "input": []any{map[string]any{
			"type": "function_call_output", "call_id": "call_x", "output": "y"}}}, 400, "input", "unsupported_value"},
		{"steer an unknown response", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": "msg_ffffffffffffffffffffffffff"}, 404, "previous_response_id", "response_not_found"},
		{"steer a finished response", map[string]any{"input": "x", "delivery": "steer", "previous_response_id": done.ID}, 409, "previous_response_id", "response_already_completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses", c.body, nil)
			var e apiError
			if code != c.code || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Param == nil || *e.Error.Param != c.param ||
				e.Error.Code == nil || *e.Error.Code != c.ecode {
				t.Errorf("%d %s; want %d %s %s", code, raw, c.code, c.param, c.ecode)
			}
		})
	}
	if n := len(messages(t, srv.URL, done.Conversation.ID)); n != 2 {
		t.Errorf("the session holds %d messages after the refusals", n)
	}
}
