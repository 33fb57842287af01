package apitest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opencode-server/opencode-server/internal/apitest"
)

// recordingTB keeps the middleware's complaints instead of failing.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.errs
	r.errs = nil
	return e
}

const session = `{"id":"ses_1","slug":"s","projectID":"global","directory":"/d","title":"t","version":"1.18.33",
"cost":0,"tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}},"time":{"created":1,"updated":2}}`

// TestMiddlewareCatchesDrift: the validation is strict enough to see the
// drift it exists for (missing or extra fields, wrong types, wrong error
// family, undocumented routes and statuses), and lets correct answers pass.
func TestMiddlewareCatchesDrift(t *testing.T) {
	cases := []struct {
		name, method, path string
		status             int
		ct, body           string
		bad                bool
	}{
		{"valid session", "GET", "/session/ses_1", 200, "application/json", session, false},
		{"missing required", "GET", "/session/ses_1", 200, "application/json", strings.Replace(session, `"slug":"s",`, "", 1), true},
		{"extra property", "GET", "/session/ses_1", 200, "application/json", strings.Replace(session, `"slug":"s",`, `"slug":"s","bogus":1,`, 1), true},
		{"wrong type", "GET", "/session/ses_1", 200, "application/json", strings.Replace(session, `"created":1`, `"created":"1"`, 1), true},
		{"wrong id prefix", "GET", "/session/ses_1", 200, "application/json", strings.Replace(session, `"id":"ses_1"`, `"id":"msg_1"`, 1), true},
		{"not json", "GET", "/session/ses_1", 200, "text/plain", "hello", true},
		{"v1 404", "GET", "/session/ses_1", 404, "application/json", `{"name":"NotFoundError","data":{"message":"x"}}`, false},
		{"v2 shape on a v1 route", "GET", "/session/ses_1", 404, "application/json", `{"_tag":"NotFoundError","message":"x"}`, true},
		{"v1 shape on a v2 route", "GET", "/api/session/ses_1", 404, "application/json", `{"name":"NotFoundError","data":{"message":"x"}}`, true},
		{"v2 404", "GET", "/api/session/ses_1", 404, "application/json", `{"_tag":"SessionNotFoundError","sessionID":"ses_1","message":"x"}`, false},
		{"undocumented status", "GET", "/session/ses_1", 418, "application/json", `{"name":"BadRequest","data":{"message":"x"}}`, true},
		{"null cursor allowed", "GET", "/api/session", 200, "application/json", `{"data":[],"cursor":{"previous":null,"next":null}}`, false},
		{"undocumented route answering", "GET", "/nowhere", 200, "application/json", `[]`, true},
		{"unknown route v1", "GET", "/nowhere", 404, "application/json", `{"name":"NotFoundError","data":{"message":"No route"}}`, false},
		{"unknown route v2", "GET", "/api/nowhere", 404, "application/json", `{"_tag":"NotFoundError","message":"No route"}`, false},
		{"unknown route wrong family", "GET", "/api/nowhere", 404, "application/json", `{"name":"NotFoundError","data":{"message":"No route"}}`, true},
		{"method not allowed", "PUT", "/session", 405, "application/json", `{"name":"MethodNotAllowedError","data":{"message":"x"}}`, false},
		{"unauthorized", "GET", "/session", 401, "application/json", `{"name":"UnauthorizedError","data":{"message":"Unauthorized"}}`, false},
		{"event stream", "GET", "/event", 200, "text/event-stream", "data: {}\n\n", false},
		{"event stream as json", "GET", "/event", 200, "application/json", `{}`, true},
		{"no content", "POST", "/session/ses_1/prompt_async", 204, "", "", false},
		{"too many streams", "GET", "/api/event", 429, "application/json", `{"_tag":"TooManyRequestsError","message":"x"}`, false},
		{"cors preflight", "OPTIONS", "/session", 204, "", "", false},
		{"options without preflight headers", "OPTIONS", "/session", 204, "", "", true},
	}
	tb := &recordingTB{TB: t}
	var cur int
	h := apitest.Middleware(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := cases[cur]
		if c.ct != "" {
			w.Header().Set("Content-Type", c.ct)
		}
		if r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		}
		w.WriteHeader(c.status)
		_, _ = io.WriteString(w, c.body)
		if c.ct == "text/event-stream" {
			http.NewResponseController(w).Flush()
		}
	}))
	for i, c := range cases {
		cur = i
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.name == "cors preflight" {
			req.Header.Set("Origin", "http://localhost:3000")
			req.Header.Set("Access-Control-Request-Method", "POST")
		}
		h.ServeHTTP(rec, req)
		if rec.Code != c.status || rec.Body.String() != c.body {
			t.Errorf("%s: the response did not pass through: %d %q", c.name, rec.Code, rec.Body.String())
		}
		if c.ct == "text/event-stream" && !rec.Flushed {
			t.Errorf("%s: Flush did not reach the writer", c.name)
		}
		errs := tb.take()
		if c.bad && len(errs) == 0 {
			t.Errorf("%s: not flagged", c.name)
		}
		if !c.bad && len(errs) > 0 {
			t.Errorf("%s: flagged: %v", c.name, errs)
		}
	}
}
