package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTUIOpenAIResponses: a conversation held through the OpenAI door is
// a session the real TUI shows like any other: two responses (the second
// after the first, by previous_response_id), then the TUI attached to the
// response's conversation shows both prompts and answers, and a third
// response streamed while it is attached shows live. The session's
// messages are the responses' IDs: each response ID its user message,
// each output item its assistant message.
func TestTUIOpenAIResponses(t *testing.T) {
	t.Parallel()
	srv := stubServer(t)
	tag := strings.ToLower(randomTag())
	type response struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
	}
	create := func(body map[string]any) response {
		t.Helper()
		status, out, err := srv.post("/v1/responses", mustMarshal(body))
		var r response
		if err != nil || status != 200 || json.Unmarshal(out, &r) != nil || r.Status != "completed" {
			t.Fatalf("POST /v1/responses %v: %d %v %s", body, status, err, out)
		}
		return r
	}
	first := create(map[string]any{"input": "first question " + tag})
	second := create(map[string]any{"input": "second question " + tag, "previous_response_id": first.ID})
	sid := first.Conversation.ID
	if second.Conversation.ID != sid {
		t.Fatalf("the second response is in %s, the first in %s", second.Conversation.ID, sid)
	}

	x := aguiTUI(t, srv, "", sid)
	x.waitScreen(60*time.Second, "You said: first question "+tag)
	x.waitScreen(30*time.Second, "You said: second question "+tag)

	// Streamed while the TUI is attached: it shows it as it runs.
	req, _ := http.NewRequest("POST", srv.URL+"/v1/responses", strings.NewReader(mustMarshal(map[string]any{
		"input": "third question " + tag, "previous_response_id": second.ID, "stream": true})))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(stream, []byte("event: response.completed")) {
		t.Fatalf("streamed response: %d %s", resp.StatusCode, stream)
	}
	x.waitScreen(30*time.Second, "You said: third question "+tag)

	ms, err := srv.messages(sid)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first.ID, first.Output[0].ID, second.ID, second.Output[0].ID}
	var got []string
	for _, m := range ms {
		got = append(got, m.Info.ID)
	}
	if len(got) != 6 || fmt.Sprint(got[:4]) != fmt.Sprint(want) {
		t.Errorf("the session's messages are %v; the responses and their items %v (and the third's two)", got, want)
	}
}
