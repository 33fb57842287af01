package openai_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestStoreOutage: a response read or continued while the store cannot
// be read (its input reads time out) is OpenAI's 503 server_error with
// Retry-After, the store's error kept in the log. The door maps no store
// error itself: the core types the outage, so this fails if that read
// lets a raw one out (it would be a 500).
func TestStoreOutage(t *testing.T) {
	st := &storetest.Failing{}
	srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { st.Store = s; return st }})
	first := create(t, srv.URL, map[string]any{"model": scriptedModel, "input": "before the outage"}, nil)
	for _, c := range []struct {
		name, method, path, body string
	}{
		{"read", http.MethodGet, "/v1/responses/" + first.ID, ""},
		{"continue", http.MethodPost, "/v1/responses", `{"model":"` + scriptedModel + `","input":"during it","previous_response_id":"` + first.ID + `"}`},
	} {
		st.SetInputsDown(true)
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		st.SetInputsDown(false)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body apiError
		_ = json.Unmarshal(raw, &body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body.Error == nil ||
			body.Error.Type != opencode.KindOf(opencode.EUnavailable).OpenAI {
			t.Errorf("%s during an outage: %d, Retry-After %q, %s; want 503 server_error with a Retry-After",
				c.name, resp.StatusCode, resp.Header.Get("Retry-After"), raw)
		}
		if strings.Contains(string(raw), "timed out") {
			t.Errorf("%s: the store's error reached the client: %s", c.name, raw)
		}
	}
	// The store answers again: so does the door.
	if code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/"+first.ID, nil, nil); code != http.StatusOK {
		t.Errorf("a read after the outage: %d %s", code, raw)
	}
}
