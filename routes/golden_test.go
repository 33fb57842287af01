package routes_test

// Golden tests of the SSE streams, black-box over HTTP against a whole test
// server (memory store, scripted model). Volatile parts are normalized:
// every distinct ID becomes <prefix_N> by order of first appearance, epoch-ms
// numbers and ISO timestamps become <ts>, the project directory <dir>, the
// random session slug <slug>. Run with -update to rewrite the golden files.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const (
	reply       = "Hello from scripted model"
	replyChunks = 3
	waitBound   = 10 * time.Second
)

// env is one test server plus an HTTP client whose connections are closed
// when the test ends (goleak).
type env struct {
	t   *testing.T
	ts  *testserver.Server
	c   *http.Client
	dir string
}

func start(t *testing.T, o testserver.Options) *env {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections) // registered first: runs after the server stops
	if o.Scripted == (scripted.Config{}) {
		o.Scripted = scripted.Config{Reply: reply, Chunks: replyChunks}
	}
	if o.Directory == "" {
		o.Directory = t.TempDir()
	}
	ts := testserver.Start(t, o)
	return &env{t: t, ts: ts, c: &http.Client{Transport: tr}, dir: o.Directory}
}

// do sends a request and returns status and body.
func (e *env) do(method, path, body string) (int, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

func (e *env) mustJSON(method, path, body string, out any) {
	e.t.Helper()
	st, b := e.do(method, path, body)
	if st != http.StatusOK {
		e.t.Fatalf("%s %s = %d %s", method, path, st, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		e.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
	}
}

func (e *env) createSession() string {
	e.t.Helper()
	var s struct{ ID string }
	e.mustJSON("POST", "/session", "{}", &s)
	if !strings.HasPrefix(s.ID, "ses_") {
		e.t.Fatalf("POST /session: id %q", s.ID)
	}
	return s.ID
}

type messageWithParts struct {
	Info  map[string]any   `json:"info"`
	Parts []map[string]any `json:"parts"`
}

// prompt sends the blocking v1 prompt and returns the assistant message.
func (e *env) prompt(sessionID, text string) messageWithParts {
	e.t.Helper()
	var m messageWithParts
	body, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}})
	e.mustJSON("POST", "/session/"+sessionID+"/message", string(body), &m)
	return m
}

// stream captures the raw bytes of one SSE response.
type stream struct {
	t      *testing.T
	name   string
	cancel context.CancelFunc
	hdr    chan *http.Response
	resp   *http.Response
	mu     sync.Mutex
	buf    []byte
	err    error
	notify chan struct{}
	done   chan struct{}
}

// open starts a GET in the background: a stream may send no headers until
// it has something to say.
func (e *env) open(path string) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{t: e.t, name: path, cancel: cancel, hdr: make(chan *http.Response, 1),
		notify: make(chan struct{}, 1), done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, "GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		resp, err := e.c.Do(req)
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		s.hdr <- resp
		defer resp.Body.Close()
		b := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(b)
			s.mu.Lock()
			s.buf = append(s.buf, b[:n]...)
			if err != nil {
				s.err = err
			}
			s.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	e.t.Cleanup(s.close)
	return s
}

func (s *stream) close() {
	s.cancel()
	<-s.done
}

// header waits for the response headers.
func (s *stream) header() *http.Response {
	s.t.Helper()
	if s.resp != nil {
		return s.resp
	}
	select {
	case s.resp = <-s.hdr:
		return s.resp
	case <-s.done:
		s.t.Fatalf("%s: no response: %v", s.name, s.err)
	case <-time.After(waitBound):
		s.t.Fatalf("%s: no response headers", s.name)
	}
	return nil
}

func (s *stream) raw() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.buf)
}

// frames returns the complete frames received so far, without their
// terminating blank line.
func (s *stream) frames() []string {
	raw := string(s.raw())
	parts := strings.Split(raw, "\n\n")
	return parts[:len(parts)-1]
}

// waitFor waits until pred holds for the frames received so far and returns
// them.
func (s *stream) waitFor(what string, pred func([]string) bool) []string {
	s.t.Helper()
	deadline := time.After(waitBound)
	for {
		fs := s.frames()
		if pred(fs) {
			return fs
		}
		select {
		case <-s.notify:
		case <-s.done:
			if fs := s.frames(); pred(fs) {
				return fs
			}
			s.t.Fatalf("%s: stream ended (%v) before %s; got:\n%s", s.name, s.err, what, s.raw())
		case <-deadline:
			s.t.Fatalf("%s: timed out waiting for %s; got:\n%s", s.name, what, s.raw())
		}
	}
}

// envelope is the /event payload.
type envelope struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// dataOf returns the JSON of a data-only frame, failing on any other field.
func dataOf(t *testing.T, frame string) []byte {
	t.Helper()
	if strings.Contains(frame, "\n") || !strings.HasPrefix(frame, "data: ") {
		t.Fatalf("frame is not exactly one data: line: %q", frame)
	}
	return []byte(strings.TrimPrefix(frame, "data: "))
}

func v1Envelope(t *testing.T, frame string) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(dataOf(t, frame), &e); err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	return e
}

type globalEnvelope struct {
	Directory *string         `json:"directory"`
	Payload   json.RawMessage `json:"payload"`
}

func globalOf(t *testing.T, frame string) (globalEnvelope, envelope) {
	t.Helper()
	var g globalEnvelope
	if err := json.Unmarshal(dataOf(t, frame), &g); err != nil {
		t.Fatalf("frame %q: %v", frame, err)
	}
	var e envelope
	if err := json.Unmarshal(g.Payload, &e); err != nil {
		t.Fatalf("global payload %q: %v", g.Payload, err)
	}
	return g, e
}

// countType counts the frames whose (possibly wrapped) type is typ.
func hasType(typ string, n int) func([]string) bool {
	needle := `"type":"` + typ + `"`
	return func(fs []string) bool {
		c := 0
		for _, f := range fs {
			if strings.Contains(f, needle) {
				c++
			}
		}
		return c >= n
	}
}

// cutBefore returns the frames before the n-th frame containing needle.
func cutBefore(t *testing.T, fs []string, needle string, n int) []string {
	t.Helper()
	c := 0
	for i, f := range fs {
		if strings.Contains(f, needle) {
			c++
			if c == n {
				return fs[:i]
			}
		}
	}
	t.Fatalf("no %d-th frame with %s", n, needle)
	return nil
}

// normalizer replaces volatile values consistently within one golden file.
type normalizer struct {
	dir   string
	ids   map[string]string
	count map[string]int
}

var (
	idRE   = regexp.MustCompile(`\b(ses|msg|prt|evt|per|que)_[0-9A-Za-z]{26}\b`)
	isoRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)
	msRE   = regexp.MustCompile(`\b1[0-9]{12}\b`)
	slugRE = regexp.MustCompile(`"slug":"[^"]*"`)
)

func newNormalizer(dir string) *normalizer {
	return &normalizer{dir: dir, ids: map[string]string{}, count: map[string]int{}}
}

func (n *normalizer) apply(s string) string {
	s = idRE.ReplaceAllStringFunc(s, func(id string) string {
		if p, ok := n.ids[id]; ok {
			return p
		}
		pfx := id[:3]
		n.count[pfx]++
		p := fmt.Sprintf("<%s_%d>", pfx, n.count[pfx])
		n.ids[id] = p
		return p
	})
	s = isoRE.ReplaceAllString(s, "<ts>")
	s = msRE.ReplaceAllString(s, "<ts>")
	s = slugRE.ReplaceAllString(s, `"slug":"<slug>"`)
	if n.dir != "" {
		s = strings.ReplaceAll(s, n.dir, "<dir>")
		s = strings.ReplaceAll(s, strings.TrimPrefix(n.dir, "/"), "<dir>")
	}
	return s
}

// render is the golden text: the status, the headers we care about, a blank
// line, then the normalized frames exactly as sent.
func render(resp *http.Response, frames []string, n *normalizer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", resp.StatusCode)
	for _, h := range []string{"Cache-Control", "Content-Type", "X-Accel-Buffering", "X-Content-Type-Options"} {
		if v, ok := resp.Header[h]; ok {
			fmt.Fprintf(&b, "%s: %s\n", h, strings.Join(v, ", "))
		}
	}
	b.WriteString("\n")
	// The v1 frames, then the v2 ones (session.next.*, session.inbox.*),
	// each in stream order: each stream's order is promised, how the two
	// interleave depends on how model chunks fall into commits.
	var v2 []string
	v1 := 0
	for _, f := range frames {
		if strings.Contains(f, `"type":"session.next.`) || strings.Contains(f, `"type":"session.inbox.`) {
			v2 = append(v2, f)
			continue
		}
		v1++
		b.WriteString(n.apply(f))
		b.WriteString("\n\n")
	}
	if len(v2) > 0 {
		if v1 > 0 {
			b.WriteString("# v2 frames of the same stream, in their order\n\n")
		}
		for _, f := range v2 {
			b.WriteString(n.apply(f))
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./routes -run %s -update to create it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (-update rewrites it)\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first differing lines.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 8; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func checkSSEHeaders(t *testing.T, name string, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: status %d", name, resp.StatusCode)
	}
	for h, want := range map[string]string{
		"Content-Type":           "text/event-stream",
		"Cache-Control":          "no-cache, no-transform",
		"X-Content-Type-Options": "nosniff",
		"X-Accel-Buffering":      "no",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: header %s = %q, want %q", name, h, got, want)
		}
	}
}

// turn is one recorded v1 turn: POST /session + blocking POST message, with
// /event, /global/event and the v2 session stream open throughout.
type turn struct {
	e         *env
	session   string
	assistant messageWithParts
	event     []string // /event frames of the turn (connected first)
	global    []string // /global/event frames of the turn
	v2        []string // /api/session/{id}/event frames (live)
	eventS    *stream
	globalS   *stream
	v2S       *stream
	lastSeq   int64
}

func recordTurn(t *testing.T) *turn {
	t.Helper()
	e := start(t, testserver.Options{})
	tr := &turn{e: e}
	tr.eventS = e.open("/event")
	tr.globalS = e.open("/global/event")
	// server.connected first: the subscriptions exist before anything is published.
	tr.eventS.waitFor("server.connected", hasType("server.connected", 1))
	tr.globalS.waitFor("server.connected", hasType("server.connected", 1))

	// A titled session: an untitled one would get its title from the small
	// model at a moment of its own, and the stream would not be one order.
	var created struct{ ID string }
	e.mustJSON("POST", "/session", `{"title":"hello"}`, &created)
	tr.session = created.ID
	tr.v2S = e.open("/api/session/" + tr.session + "/event")
	tr.assistant = e.prompt(tr.session, "hello")

	// A second POST /session is the sentinel that ends the capture: every
	// event of the turn was published before the blocking POST returned.
	e.createSession()
	tr.event = cutBefore(t, tr.eventS.waitFor("2nd session.created", hasType("session.created", 2)), `"type":"session.created"`, 2)
	tr.global = cutBefore(t, tr.globalS.waitFor("2nd session.created", hasType("session.created", 2)), `"type":"session.created"`, 2)

	// The last durable seq, read from the lifecycle directly (not over HTTP, so
	// that this test does not depend on the /history route).
	evs, err := e.ts.Manager.Events(context.Background(), tr.session, 0, 10000)
	if err != nil || len(evs) == 0 {
		t.Fatalf("durable events of %s: %d, %v", tr.session, len(evs), err)
	}
	tr.lastSeq = evs[len(evs)-1].Seq
	tr.v2 = tr.v2S.waitFor("last durable seq", func(fs []string) bool {
		return slices.ContainsFunc(fs, func(f string) bool {
			return strings.HasPrefix(f, "id: "+strconv.FormatInt(tr.lastSeq, 10)+"\n")
		})
	})
	return tr
}

func TestGoldenEvent(t *testing.T) {
	tr := recordTurn(t)
	checkSSEHeaders(t, "/event", tr.eventS.header())
	for i, f := range tr.event {
		ev := v1Envelope(t, f)
		if i == 0 && (ev.Type != "server.connected" || string(ev.Properties) != "{}") {
			t.Errorf("first /event frame %q, want server.connected with {}", f)
		}
		if !idRE.MatchString(ev.ID) || !strings.HasPrefix(ev.ID, "evt_") {
			t.Errorf("frame %d: event id %q", i, ev.ID)
		}
	}
	// A consumer that stops at session.idle has seen the turn's step end.
	ended := slices.IndexFunc(tr.event, func(f string) bool { return strings.Contains(f, `"type":"session.next.step.ended"`) })
	idle := slices.IndexFunc(tr.event, func(f string) bool { return strings.Contains(f, `"type":"session.idle"`) })
	if ended < 0 || idle < 0 || ended > idle {
		t.Errorf("session.next.step.ended at frame %d, session.idle at %d: the step end must come first", ended, idle)
	}
	golden(t, "event.golden", render(tr.eventS.header(), tr.event, newNormalizer(tr.e.dir)))
}

func TestGoldenGlobalEvent(t *testing.T) {
	tr := recordTurn(t)
	checkSSEHeaders(t, "/global/event", tr.globalS.header())
	// Same events, same payload bytes as on /event, wrapped.
	v1 := map[string]string{}
	for _, f := range tr.event {
		v1[v1Envelope(t, f).ID] = string(dataOf(t, f))
	}
	for i, f := range tr.global {
		g, ev := globalOf(t, f)
		if i == 0 {
			if ev.Type != "server.connected" {
				t.Errorf("first /global/event frame %q, want server.connected", f)
			}
			if g.Directory != nil {
				t.Errorf("server.connected on /global/event has a directory: %q", f)
			}
			if f != `data: {"payload":`+string(g.Payload)+`}` {
				t.Errorf("connected frame %q is not exactly {payload}", f)
			}
			continue
		}
		if g.Directory == nil || *g.Directory != tr.e.dir {
			t.Errorf("frame %d: directory %v, want %q", i, g.Directory, tr.e.dir)
		}
		if want, ok := v1[ev.ID]; !ok || want != string(g.Payload) {
			t.Errorf("frame %d: payload %s\nnot the /event payload %s", i, g.Payload, want)
		}
	}
	if len(tr.global) != len(tr.event) {
		t.Errorf("/global/event has %d frames, /event %d", len(tr.global), len(tr.event))
	}
	golden(t, "global-event.golden", render(tr.globalS.header(), tr.global, newNormalizer(tr.e.dir)))
}

// TestGoldenSessionEventV2: the v2 stream has an id: line with the seq and
// the durable payload {id, type, durable:{aggregateID, seq, version}, data};
// a replay from after=0 is byte-identical to the live stream.
func TestGoldenSessionEventV2(t *testing.T) {
	tr := recordTurn(t)
	resp := tr.v2S.header()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	for i, f := range tr.v2 {
		lines := strings.Split(f, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("frame %d %q is not id: + data:", i, f)
		}
		var p struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Durable struct {
				AggregateID string `json:"aggregateID"`
				Seq         int64  `json:"seq"`
				Version     int    `json:"version"`
			} `json:"durable"`
			Data json.RawMessage `json:"data"`
		}
		var keys map[string]json.RawMessage
		payload := strings.TrimPrefix(lines[1], "data: ")
		if err := json.Unmarshal([]byte(payload), &p); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(payload), &keys)
		if len(keys) != 4 || keys["id"] == nil || keys["type"] == nil || keys["durable"] == nil || keys["data"] == nil {
			t.Errorf("frame %d payload keys %v, want exactly id,type,durable,data", i, slices.Sorted(maps.Keys(keys)))
		}
		if lines[0] != "id: "+strconv.FormatInt(p.Durable.Seq, 10) {
			t.Errorf("frame %d: %q but durable.seq %d", i, lines[0], p.Durable.Seq)
		}
		if p.Durable.Seq != int64(i+1) {
			t.Errorf("frame %d: seq %d, want %d (consecutive from 1)", i, p.Durable.Seq, i+1)
		}
		if p.Durable.AggregateID != tr.session || p.Durable.Version < 1 || !strings.HasPrefix(p.ID, "evt_") {
			t.Errorf("frame %d: %s", i, payload)
		}
		if p.Type == "session.next.text.delta" || !strings.HasPrefix(p.Type, "session.") {
			t.Errorf("frame %d: type %q on the durable stream", i, p.Type)
		}
	}
	if int64(len(tr.v2)) != tr.lastSeq {
		t.Errorf("live stream has %d frames, history ends at seq %d", len(tr.v2), tr.lastSeq)
	}

	replay := tr.e.open("/api/session/" + tr.session + "/event?after=0")
	got := replay.waitFor("replay to the last seq", func(fs []string) bool { return int64(len(fs)) >= tr.lastSeq })
	if strings.Join(got, "\n\n") != strings.Join(tr.v2, "\n\n") {
		t.Errorf("replay differs from the live stream:\n%s", lineDiff(strings.Join(tr.v2, "\n"), strings.Join(got, "\n")))
	}
	golden(t, "session-event-v2.golden", render(resp, tr.v2, newNormalizer(tr.e.dir)))
}

// TestNormalizer pins the normalization rules the golden files rely on.
func TestNormalizer(t *testing.T) {
	n := newNormalizer("/tmp/x/001")
	in := `{"id":"ses_dd6e6bd8effeLKJPFpVbLMAbIK","m":"msg_22919428a001hfLAHytsBHTWtJ","m2":"msg_22919428a002hfLAHytsBHTWtJ",` +
		`"again":"ses_dd6e6bd8effeLKJPFpVbLMAbIK","t":1795985850993,"iso":"2026-11-29T20:57:30.993Z","slug":"happy-harbor",` +
		`"directory":"/tmp/x/001","path":"tmp/x/001","n":42}`
	want := `{"id":"<ses_1>","m":"<msg_1>","m2":"<msg_2>","again":"<ses_1>","t":<ts>,"iso":"<ts>","slug":"<slug>",` +
		`"directory":"<dir>","path":"<dir>","n":42}`
	if got := n.apply(in); got != want {
		t.Fatalf("normalize:\n got %s\nwant %s", got, want)
	}
	if !bytes.Equal([]byte(n.apply("msg_22919428a002hfLAHytsBHTWtJ")), []byte("<msg_2>")) {
		t.Fatal("placeholders not stable across calls")
	}
}
