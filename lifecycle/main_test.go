package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/opencode-server/opencode-server/internal/mcpstub"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

type opencodeEvent = opencode.Event

func TestMain(m *testing.M) {
	mcpstub.MaybeServe()   // the test binary doubles as a stdio MCP server
	acpstub.MaybeServe()   // and as an external ACP agent
	code := pgtest.Main(m) // a PostgreSQL for the randomized test's postgres runs
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ---- HTTP client -------------------------------------------------------------

// client talks to one test server over its own transport, closed at cleanup
// so no keep-alive goroutine outlives the test.
type client struct {
	t    testing.TB
	srv  *testserver.Server
	base string
	hc   *http.Client
}

func newClient(t testing.TB, srv *testserver.Server) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, srv: srv, base: srv.URL, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// resp is one HTTP answer.
type resp struct {
	Status int
	Body   []byte
	Err    error // transport error
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.Status, bytes.TrimSpace(r.Body)) }

// json decodes the body into v (failing the test on error).
func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %q: %v", r.Body, err)
	}
}

// do sends a request; it never calls t.Fatal so it may be used from any goroutine.
func (c *client) do(ctx context.Context, method, path string, body any) resp {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return resp{Err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return resp{Err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return resp{Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Body: b, Err: err}
}

// must sends a request and fails the test unless it answers with status.
func (c *client) must(method, path string, body any, status int) resp {
	c.t.Helper()
	r := c.do(context.Background(), method, path, body)
	if r.Err != nil {
		c.t.Fatalf("%s %s: %v", method, path, r.Err)
	}
	if r.Status != status {
		c.t.Fatalf("%s %s: want %d, got %s", method, path, status, r)
	}
	return r
}

func (c *client) newSession() string {
	c.t.Helper()
	var out struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	c.must("POST", "/api/session", map[string]any{}, 200).json(c.t, &out)
	if out.Data.ID == "" {
		c.t.Fatal("no session id")
	}
	return out.Data.ID
}

// admitted is the v2 SessionInputAdmitted shape.
type admitted struct {
	AdmittedSeq int64  `json:"admittedSeq"`
	ID          string `json:"id"`
	SessionID   string `json:"sessionID"`
	Prompt      struct {
		Text string `json:"text"`
	} `json:"prompt"`
	Delivery    string `json:"delivery"`
	TimeCreated int64  `json:"timeCreated"`
	PromotedSeq *int64 `json:"promotedSeq"`
}

func v2Body(id, text, delivery string) map[string]any {
	b := map[string]any{"prompt": map[string]any{"text": text}}
	if id != "" {
		b["id"] = id
	}
	if delivery != "" {
		b["delivery"] = delivery
	}
	return b
}

func v1Body(id, text, delivery string) map[string]any {
	b := map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}}
	if id != "" {
		b["messageID"] = id
	}
	if delivery != "" {
		b["delivery"] = delivery
	}
	return b
}

// promptV2 admits through POST /api/session/{id}/prompt and expects 200.
func (c *client) promptV2(sid, id, text, delivery string) admitted {
	c.t.Helper()
	var out struct {
		Data admitted `json:"data"`
	}
	c.must("POST", "/api/session/"+sid+"/prompt", v2Body(id, text, delivery), 200).json(c.t, &out)
	return out.Data
}

func (c *client) waitIdle(sid string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := c.do(ctx, "POST", "/api/session/"+sid+"/wait", nil)
	if r.Err != nil || r.Status != 204 {
		c.t.Fatalf("wait %s: %v %s", sid, r.Err, r)
	}
}

// ---- views -------------------------------------------------------------------

type namedErr struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data"`
}

type v1Part struct {
	ID        string `json:"id"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
	Text      string `json:"text"`
}

type v1Message struct {
	Info struct {
		ID       string    `json:"id"`
		Role     string    `json:"role"`
		ParentID string    `json:"parentID"`
		Finish   string    `json:"finish"`
		Error    *namedErr `json:"error"`
		Time     struct {
			Created   int64  `json:"created"`
			Completed *int64 `json:"completed"`
		} `json:"time"`
	} `json:"info"`
	Parts []v1Part `json:"parts"`
}

func (m v1Message) text() string {
	var out []string
	for _, p := range m.Parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

func (c *client) messages(sid string) []v1Message {
	c.t.Helper()
	var out []v1Message
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(c.t, &out)
	return out
}

// durableEvent is one entry of /api/session/{id}/history.
type durableEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Durable struct {
		AggregateID string `json:"aggregateID"`
		Seq         int64  `json:"seq"`
		Version     int    `json:"version"`
	} `json:"durable"`
	Data json.RawMessage `json:"data"`
	d    eventData
}

type eventData struct {
	SessionID          string `json:"sessionID"`
	MessageID          string `json:"messageID"`
	AssistantMessageID string `json:"assistantMessageID"`
	Delivery           string `json:"delivery"`
	Reason             string `json:"reason"`
	Prompt             *struct {
		Text string `json:"text"`
	} `json:"prompt"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// history reads the whole durable log page by page (limit per page) and
// checks that seqs are gapless from 1 and every page but the last is full.
func (c *client) history(sid string, limit int) []durableEvent {
	c.t.Helper()
	var all []durableEvent
	after := int64(0)
	for {
		var page struct {
			Data    []durableEvent `json:"data"`
			HasMore bool           `json:"hasMore"`
		}
		c.must("GET", fmt.Sprintf("/api/session/%s/history?after=%d&limit=%d", sid, after, limit), nil, 200).json(c.t, &page)
		for i := range page.Data {
			e := &page.Data[i]
			if err := json.Unmarshal(e.Data, &e.d); err != nil {
				c.t.Fatalf("event data %s: %v", e.Data, err)
			}
			if want := int64(len(all) + 1); e.Durable.Seq != want {
				c.t.Fatalf("history of %s: seq %d at position %d (want %d): not gapless", sid, e.Durable.Seq, len(all), want)
			}
			if e.Durable.AggregateID != sid {
				c.t.Fatalf("history of %s: event %s has aggregateID %s", sid, e.ID, e.Durable.AggregateID)
			}
			all = append(all, *e)
		}
		if page.HasMore && len(page.Data) != limit {
			c.t.Fatalf("history page of %d events (limit %d) says hasMore", len(page.Data), limit)
		}
		if !page.HasMore {
			return all
		}
		after = all[len(all)-1].Durable.Seq
	}
}

func eventsOf(evs []durableEvent, typ string) []durableEvent {
	var out []durableEvent
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func eventTypes(evs []durableEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
		if e.d.MessageID != "" {
			out[i] += "(" + e.d.MessageID + ")"
		}
	}
	return out
}

// inboxIDs lists the pending inputs through the v2 or v1 route.
func (c *client) inboxIDs(path string) []string {
	c.t.Helper()
	var out struct {
		Data []struct {
			ID       string `json:"id"`
			Delivery string `json:"delivery"`
		} `json:"data"`
	}
	c.must("GET", path, nil, 200).json(c.t, &out)
	ids := []string{}
	for _, in := range out.Data {
		ids = append(ids, in.ID)
	}
	return ids
}

// ---- model calls -------------------------------------------------------------

// callsOf returns the scripted model's requests for one session.
func callsOf(srv *testserver.Server, sid string) []provider.Request {
	var out []provider.Request
	for _, r := range srv.Model.Calls() {
		if r.SessionID == sid {
			out = append(out, r)
		}
	}
	return out
}

// userTexts is the user messages of one model request, in order.
func userTexts(r provider.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

func lastUser(r provider.Request) string {
	u := userTexts(r)
	if len(u) == 0 {
		return ""
	}
	return u[len(u)-1]
}

// ---- polling -----------------------------------------------------------------

// checkFor polls cond until it holds or the timeout passes.
func checkFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ---- live events -------------------------------------------------------------

// liveRecorder collects live bus events of one session (status, idle,
// inbox) so tests can tell turns apart.
type liveRecorder struct {
	mu   sync.Mutex
	evs  []recordedEvent
	done chan struct{}
}

type recordedEvent struct {
	Type string
	Data eventData
	Raw  json.RawMessage
}

func recordLive(t testing.TB, srv *testserver.Server, sid string) *liveRecorder {
	sub := srv.Manager.Subscribe(1<<14, func(e *opencodeEvent) bool { return e.SessionID == sid })
	lr := &liveRecorder{done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		for e := range sub.C {
			var d eventData
			_ = json.Unmarshal(e.Data, &d)
			lr.mu.Lock()
			lr.evs = append(lr.evs, recordedEvent{Type: e.Type, Data: d, Raw: e.Data})
			lr.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		sub.Close()
		<-lr.done
	})
	return lr
}

func (lr *liveRecorder) events() []recordedEvent {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return append([]recordedEvent(nil), lr.evs...)
}

func (lr *liveRecorder) count(typ string) int {
	n := 0
	for _, e := range lr.events() {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// expect checks that exactly n events of typ arrive (the recorder may lag
// behind the bus for a moment).
func (lr *liveRecorder) expect(t testing.TB, typ string, n int, why string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for lr.count(typ) < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // not more than n: a bounded wait for one that must not come
	if got := lr.count(typ); got != n {
		t.Errorf("%s events: want %d (%s), got %d", typ, n, why, got)
	}
}

// sseLines reads `data:` payloads of an SSE stream into a channel until ctx ends.
func sseLines(ctx context.Context, t testing.TB, c *client, path string) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	res, err := hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan string, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				select {
				case out <- s:
				default:
				}
			}
		}
	}()
	stop := func() {
		cancel()
		<-done
		hc.CloseIdleConnections()
	}
	return out, stop
}
