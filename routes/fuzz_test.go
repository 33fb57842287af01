package routes_test

// Fuzz targets for the request decoders, driven through the whole handler
// (routes over a real lifecycle manager and memory store) by direct calls,
// one server per target. Every response is also checked against
// api/openapi.yaml. Invariants: never a 5xx or a panic, a JSON error of the
// route's family on 4xx, and nothing admitted on 4xx.
//
//	go test -run '^$' -fuzz '^FuzzV1Prompt$' -fuzztime 20s ./routes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/apitest"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// fzSink collects apitest's contract violations, which arrive from handler
// code: inside a fuzz target only the *testing.T may fail.
type fzSink struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (s *fzSink) Helper() {}

// fzKnown are contract violations that are known bugs (each has a
// regression test): fuzzing goes on past them.
var fzKnown = []string{
	// TestRegressionSessionFields: metadata and permission are stored as
	// sent (null, any array, any JSON), breaking the Session schema.
	"at /metadata",
	"at /permission",
}

func (s *fzSink) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	for _, k := range fzKnown {
		if strings.Contains(msg, k) {
			return
		}
	}
	s.mu.Lock()
	s.errs = append(s.errs, msg)
	s.mu.Unlock()
}

func (s *fzSink) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.errs
	s.errs = nil
	return e
}

// fzServer is a whole server called directly, without sockets.
type fzServer struct {
	ts   *testserver.Server
	h    http.Handler
	sink *fzSink
}

func fzStart(f *testing.F, o testserver.Options) *fzServer {
	f.Helper()
	ts := testserver.Start(f, o)
	sink := &fzSink{TB: f}
	return &fzServer{ts: ts, h: apitest.Middleware(sink, ts.App.Handler), sink: sink}
}

// fzSession creates a session outside the fuzz function.
func fzSession(f *testing.F, h http.Handler) string {
	f.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, loopbackRequest("POST", "/session", strings.NewReader("{}")))
	var ses struct{ ID string }
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &ses) != nil {
		f.Fatalf("POST /session = %d %s", rec.Code, rec.Body)
	}
	return ses.ID
}

func (s *fzServer) do(t *testing.T, method, target, ct string, body []byte) biResp {
	t.Helper()
	var req *http.Request
	if body != nil {
		req = loopbackRequest(method, target, strings.NewReader(string(body)))
	} else {
		req = loopbackRequest(method, target, nil)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	for _, e := range s.sink.take() {
		t.Errorf("%s %s: %s", method, target, e)
	}
	return biResp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// check applies the invariants common to every target and reports whether
// the answer was a 4xx.
func (s *fzServer) check(t *testing.T, path string, r biResp, body []byte) bool {
	t.Helper()
	if r.status >= 500 {
		t.Fatalf("status %d for body %q: %s", r.status, body, biClip(r.body))
	}
	if r.status < 400 {
		return false
	}
	for _, p := range biErrorShape(path, r, "") {
		t.Errorf("body %q: %s", body, p)
	}
	return true
}

func (s *fzServer) newSession(t *testing.T) string {
	t.Helper()
	r := s.do(t, "POST", "/session", "application/json", []byte("{}"))
	var ses struct{ ID string }
	if r.status != 200 || json.Unmarshal(r.body, &ses) != nil {
		t.Fatalf("POST /session = %d %s", r.status, r.body)
	}
	return ses.ID
}

// admitted reports what the manager holds for a session: messages, pending
// inputs, durable events.
func (s *fzServer) admitted(t *testing.T, id string) (msgs, pending, events int) {
	t.Helper()
	ctx := context.Background()
	m, err := s.ts.Manager.Messages(ctx, id)
	if err != nil {
		t.Fatalf("messages: %v", err)
	}
	in, err := s.ts.Manager.Inbox(ctx, id)
	if err != nil {
		t.Fatalf("inbox: %v", err)
	}
	ev, err := s.ts.Manager.Events(ctx, id, 0, 1<<20)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	return len(m), len(in), len(ev)
}

// settle waits for any turn a fuzz input started, then deletes the session
// so the store does not grow with the run.
func (s *fzServer) settle(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ts.Manager.WaitIdle(ctx, id); err != nil {
		t.Fatalf("session %s never went idle: %v", id, err)
	}
	if err := s.ts.Manager.DeleteSession(ctx, id); err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
}

// fuzzPrompt is the body of FuzzV1Prompt and FuzzV2Prompt.
func fuzzPrompt(f *testing.F, route string, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	s := fzStart(f, testserver.Options{Scripted: scripted.Config{Reply: "ok", Chunks: 1}})
	f.Fuzz(func(t *testing.T, body []byte) {
		id := s.newSession(t)
		path := strings.ReplaceAll(route, "{ses}", id)
		r := s.do(t, "POST", path, "application/json", body)
		if s.check(t, path, r, body) {
			if m, p, e := s.admitted(t, id); m+p+e > 0 {
				t.Fatalf("%d for body %q, yet admitted %d messages, %d pending inputs, %d events", r.status, body, m, p, e)
			}
		}
		s.settle(t, id)
	})
}

func FuzzV1Prompt(f *testing.F) {
	fuzzPrompt(f, "/session/{ses}/prompt_async", []string{
		`{"parts":[{"type":"text","text":"x"}]}`,
		`{"parts":[{"type":"text","text":"x"}]`,
		`{"parts":[]}`,
		`{}`,
		`{"messageID":"msg_abc","parts":[{"type":"text","text":"x","id":"prt_1"}],"delivery":"queue"}`,
		`{"parts":[{"type":"file","mime":"text/plain","url":"data:text/plain,hi","filename":"a.txt"}]}`,
		`{"parts":[{"type":"agent","name":"build"},{"type":"subtask","prompt":"p","description":"d","agent":"a"}]}`,
		`{"parts":[{"type":"text","text":"x","time":{"start":1,"end":2},"metadata":{"a":[1]}}],"noReply":true,"tools":{"bash":false}}`,
		`{"model":{"providerID":"scripted","modelID":"scripted-model"},"parts":[{"type":"text","text":"x"}]}`,
		`{"parts":[],"parts":[{"type":"text","text":"x"}]}`,
		`{"PARTS":[{"type":"text","Text":"x"}],"parts":[{"type":"text","text":"a","text":"b"}]}`,
		"{\"parts\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
	})
}

func FuzzV2Prompt(f *testing.F) {
	fuzzPrompt(f, "/api/session/{ses}/prompt", []string{
		`{"prompt":{"text":"x"}}`,
		`{"id":"msg_abc","prompt":{"text":"x","files":[{"uri":"file:///a.go","name":"a.go"}],"agents":[{"name":"build"}]},"delivery":"queue","resume":true}`,
		`{"prompt":{}}`,
		`{"prompt":{"text":"x"},"delivery":"later"}`,
		`{"prompt":{"text":"x","files":[{"uri":"data:image/png;base64,AAAA"}]}}`,
		`{bad json`,
		``,
		`{"prompt":{"text":"x","text":"y"},"Prompt":{}}`,
	})
}

// FuzzPatchInbox edits a pending input of a session whose turn never ends:
// a 4xx must leave the inbox and the history as they were.
func FuzzPatchInbox(f *testing.F) {
	for _, s := range []string{
		`{"delivery":"queue"}`,
		`{"delivery":"steer"}`,
		`{"prompt":{"text":"edited"}}`,
		`{"delivery":"queue","prompt":{"text":"y","files":[{"uri":"/tmp/"}],"agents":[{"name":"plan"}]}}`,
		`{}`,
		`{"delivery":null}`,
		`{"delivery":"later"}`,
		`{"prompt":{}}`,
		``,
	} {
		f.Add([]byte(s))
	}
	// The model waits an hour before its first chunk: the first turn stays
	// running and the queued input stays pending.
	s := fzStart(f, testserver.Options{Scripted: scripted.Config{Reply: "ok", Chunks: 1, Delay: time.Hour}})
	id, mid := fzSession(f, s.ts.App.Handler), "msg_fuzzinbox0001"
	{
		h := s.ts.App.Handler
		for _, b := range []string{`{"parts":[{"type":"text","text":"first"}]}`,
			`{"messageID":"` + mid + `","delivery":"queue","parts":[{"type":"text","text":"second"}]}`} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, loopbackRequest("POST", "/session/"+id+"/prompt_async", strings.NewReader(b)))
			if rec.Code != http.StatusNoContent {
				f.Fatalf("prompt: %d %s", rec.Code, rec.Body)
			}
		}
	}
	path := "/api/session/" + id + "/inbox/" + mid
	inbox := func(t *testing.T) string {
		r := s.do(t, "GET", "/api/session/"+id+"/inbox", "", nil)
		if r.status != 200 || !strings.Contains(string(r.body), mid) {
			t.Fatalf("inbox: %d %s", r.status, r.body)
		}
		return string(r.body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := inbox(t)
		_, _, evBefore := s.admitted(t, id)
		r := s.do(t, "PATCH", path, "application/json", body)
		if s.check(t, path, r, body) {
			if after := inbox(t); after != before {
				t.Fatalf("%d for body %q, yet the inbox changed:\n%s\n->\n%s", r.status, body, before, after)
			}
			if _, _, evAfter := s.admitted(t, id); evAfter != evBefore {
				t.Fatalf("%d for body %q, yet %d events were logged", r.status, body, evAfter-evBefore)
			}
		}
	})
}

// FuzzCursor drives the `after` and `limit` queries of the history: a
// non-negative integer cursor answers 200 with only later events, anything
// else a 400 naming the parameter.
func FuzzCursor(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"0", "1"}, {"3", "100"}, {"-1", ""}, {"abc", ""}, {"1e3", ""},
		{"99999999999999999999", ""}, {"9223372036854775807", ""}, {"+5", "5"}, {"1.5", ""}, {"0x10", ""}, {"", "0"}, {"", "101"}} {
		f.Add(s[0], s[1])
	}
	s := fzStart(f, testserver.Options{Scripted: scripted.Config{Reply: "a b c d", Chunks: 4}})
	rec := httptest.NewRecorder()
	id := fzSession(f, s.ts.App.Handler)
	s.ts.App.Handler.ServeHTTP(rec, loopbackRequest("POST", "/session/"+id+"/message",
		strings.NewReader(`{"parts":[{"type":"text","text":"x"}]}`)))
	if rec.Code != 200 {
		f.Fatalf("prompt: %d %s", rec.Code, rec.Body)
	}
	all, err := s.ts.Manager.Events(context.Background(), id, 0, 1000)
	if err != nil || len(all) < 5 {
		f.Fatalf("history: %d events, %v", len(all), err)
	}
	f.Fuzz(func(t *testing.T, after, limit string) {
		q := url.Values{}
		if after != "" {
			q.Set("after", after)
		}
		if limit != "" {
			q.Set("limit", limit)
		}
		path := "/api/session/" + id + "/history"
		r := s.do(t, "GET", path+"?"+q.Encode(), "", nil)
		s.check(t, path, r, []byte(after+"|"+limit))
		n, aerr := strconv.ParseInt(after, 10, 64)
		if after == "" {
			n, aerr = 0, nil
		}
		l, lerr := strconv.Atoi(limit)
		if limit == "" {
			l, lerr = 100, nil
		}
		valid := aerr == nil && n >= 0 && lerr == nil && l >= 1 && l <= 100
		if !valid {
			if r.status != 400 {
				t.Fatalf("after=%q limit=%q: %d, want 400: %s", after, limit, r.status, r.body)
			}
			var e struct{ Field string }
			_ = json.Unmarshal(r.body, &e)
			if e.Field != "after" && e.Field != "limit" {
				t.Errorf("after=%q limit=%q: error names field %q", after, limit, e.Field)
			}
			return
		}
		if r.status != 200 {
			t.Fatalf("after=%q limit=%q: %d, want 200: %s", after, limit, r.status, r.body)
		}
		var page struct {
			Data []struct {
				Durable struct{ Seq int64 } `json:"durable"`
			} `json:"data"`
			HasMore bool `json:"hasMore"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("page: %v: %s", err, r.body)
		}
		var want []int64
		for _, e := range all {
			if e.Seq > n {
				want = append(want, e.Seq)
			}
		}
		more := len(want) > l
		if more {
			want = want[:l]
		}
		var got []int64
		for _, e := range page.Data {
			got = append(got, e.Durable.Seq)
		}
		if !slices.Equal(got, want) || page.HasMore != more {
			t.Fatalf("after=%q limit=%q: seqs %v hasMore %v, want %v %v", after, limit, got, page.HasMore, want, more)
		}
	})
}

// FuzzCreateSession posts bodies to both session-creation routes: a 4xx
// creates no session.
func FuzzCreateSession(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, `{"title":"t"}`, `{"parentID":"ses_x"}`, `{"parentID":"msg_x"}`,
		`{"model":{"id":"scripted-model","providerID":"scripted"}}`, `{"model":{"id":"x"}}`,
		`{"permission":[{"permission":"bash","pattern":"*","action":"ask"}]}`, `{"permission":{}}`,
		`{"metadata":{"a":1}}`, `{"id":"ses_fuzz1"}`, `{"location":{"directory":"/tmp"}}`, `{"location":{"directory":"x"}}`,
		`{"nope":1}`, `{`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	s := fzStart(f, testserver.Options{})
	f.Fuzz(func(t *testing.T, body []byte, v2 bool) {
		ctx := context.Background()
		path := "/session"
		if v2 {
			path = "/api/session"
		}
		before, err := s.ts.Manager.ListSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := s.do(t, "POST", path, "application/json", body)
		after, err := s.ts.Manager.ListSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.check(t, path, r, body) {
			if len(after) != len(before) {
				t.Fatalf("%d for body %q, yet %d sessions were created", r.status, body, len(after)-len(before))
			}
			return
		}
		var out struct {
			ID   string
			Data struct{ ID string }
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("%d %s: %v", r.status, r.body, err)
		}
		created := out.ID
		if v2 {
			created = out.Data.ID
		}
		if !strings.HasPrefix(created, "ses_") {
			t.Fatalf("%d for body %q: session id %q", r.status, body, created)
		}
		// A v2 create with an existing id answers the existing session;
		// clean up only what this input created.
		if len(after) > len(before) {
			if err := s.ts.Manager.DeleteSession(ctx, created); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
	})
}
