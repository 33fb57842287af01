package routes_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestStoreOutage: requests that meet a store outage (a history read or
// an admission's input read timing out) are answered 503 with
// Retry-After, in the v1 and the v2 shape, the store's error kept in the
// log. routes maps no store error itself: the core types the outage
// (lifecycle's storeErr), so this fails if any of these reads lets a raw
// one out (it would be a 500).
func TestStoreOutage(t *testing.T) {
	st := &storetest.Failing{}
	srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { st.Store = s; return st }})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	do := func(method, path, body string) (int, string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, resp.Header.Get("Retry-After"), m
	}
	status, _, sess := do("POST", "/session", "{}")
	sid, _ := sess["id"].(string)
	if status != 200 || sid == "" {
		t.Fatalf("POST /session: %d %v", status, sess)
	}
	for _, c := range []struct {
		name, method, path, body string
		arm                      func()
		nameKey, want            string // the body's name (v1) or _tag (v2)
	}{
		{"history read", "GET", "/session/" + sid + "/message", "", func() { st.FailReads(1) }, "name", "ServiceUnavailableError"},
		{"v2 history read", "GET", "/api/session/" + sid + "/message", "", func() { st.FailReads(1) }, "_tag", "ServiceUnavailableError"},
		{"prompt's input read", "POST", "/session/" + sid + "/message", `{"messageID":"` + identifier.NewMessage() + `","parts":[{"type":"text","text":"hi"}]}`,
			func() { st.SetInputsDown(true) }, "name", "ServiceUnavailableError"},
		{"v2 prompt's input read", "POST", "/api/session/" + sid + "/prompt", `{"id":"` + identifier.NewMessage() + `","prompt":{"text":"hi"}}`,
			func() { st.SetInputsDown(true) }, "_tag", "ServiceUnavailableError"},
	} {
		c.arm()
		status, retry, body := do(c.method, c.path, c.body)
		st.SetInputsDown(false)
		st.FailReads(0)
		if n, err := strconv.Atoi(retry); status != http.StatusServiceUnavailable || err != nil || n < 1 || body[c.nameKey] != c.want {
			t.Errorf("%s: %d, Retry-After %q, %v; want 503 %s with a Retry-After", c.name, status, retry, body, c.want)
		}
		if b, _ := json.Marshal(body); strings.Contains(string(b), "timed out") {
			t.Errorf("%s: the store's error reached the client: %s", c.name, b)
		}
	}
	// The store answers again: so does the session.
	if status, _, body := do("POST", "/session/"+sid+"/message", `{"parts":[{"type":"text","text":"after"}]}`); status != 200 {
		t.Errorf("a prompt after the outage: %d %v", status, body)
	}
}
