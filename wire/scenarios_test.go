package wire

// The scenario runner: each scenario of ../shared/traces (README.md there)
// is replayed against a base URL with prompts scripted for the stub model
// (script below), while /event (and, for v2 sessions, the live
// /api/session/{id}/event) is recorded together with every HTTP answer.
// The same runner records the goldens from the real server
// (record_test.go) and checks our server (wire_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// Stub model timing. Every reply is streamed in stubChunks pieces with
// stubDelay before each; a prompt containing slowMarker is streamed in
// slowChunks pieces with slowDelay before each, long enough for a steer, a
// queue or an abort to land while it streams.
const (
	stubChunks = 3
	stubDelay  = 10 * time.Millisecond
	slowMarker = "[slow]"
	slowChunks = 8
	slowDelay  = 150 * time.Millisecond
)

// script is stubmodel.Directives (call:NAME {json} -> tool calls, then
// "Done. <then:>", else "You said: <prompt>"), slowed down for [slow] prompts.
func script(req stubmodel.Request) stubmodel.Response {
	r := stubmodel.Directives(req)
	if strings.Contains(req.LastUserText(), slowMarker) && req.LastMessage().Role == "user" {
		r.Chunks, r.Delay = slowChunks, slowDelay
	}
	return r
}

// target is a server to run the scenarios against.
type target struct {
	Base string
	// Quiet is how long a scenario's sessions must stay silent on every
	// recorded stream, after the scenario's end condition, before the
	// capture is closed (the real server publishes summaries, diffs and
	// titles a little after session.idle).
	Quiet time.Duration
}

// scenario is one replayed trace.
type scenario struct {
	Name  string
	Title string
	Run   func(r *run)
}

// scenarios are the traces a–h of ../shared/traces (g, the client request
// log, is covered by the e2e tests, not here).
var scenarios = []scenario{
	{"a", "v1 sync POST /session/{id}/message", scenarioA},
	{"b", "v1 POST /session/{id}/prompt_async", scenarioB},
	{"c1", "v2 prompt, then a steer and a queue while the text-only turn streams", scenarioC1},
	{"c2", "v2 prompt, steer and queue, each turn a bash tool call and a final text", scenarioC2},
	{"c3", "v1 prompt_async, then a second prompt_async while busy", scenarioC3},
	{"d", "idempotency: same messageID twice on v1 (sync, async), same id 4x on v2", scenarioD},
	{"e1", "v1 sync message aborted mid-stream with POST /session/{id}/abort", scenarioE1},
	{"e2", "v2 prompt interrupted mid-stream, then interrupt and abort when idle", scenarioE2},
	{"f", "bad input (HTTP answers only)", scenarioF},
	{"h", "v1 sync turn with a bash tool call", scenarioH},
}

// frame is one SSE data frame.
type frame struct {
	Raw     json.RawMessage
	Type    string
	Session string
	// Key identifies the streamed part of a delta event (so only its first
	// delta is kept: how many deltas a text becomes is chunking, not protocol).
	Key string
}

func parseFrame(data []byte) frame {
	var env struct {
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
		Data       json.RawMessage `json:"data"`
	}
	f := frame{Raw: append(json.RawMessage(nil), data...)}
	if json.Unmarshal(data, &env) != nil {
		f.Type = "<not json>"
		return f
	}
	f.Type = env.Type
	props := env.Properties
	if props == nil {
		props = env.Data
	}
	var p struct {
		SessionID          string `json:"sessionID"`
		PartID             string `json:"partID"`
		MessageID          string `json:"messageID"`
		AssistantMessageID string `json:"assistantMessageID"`
		TextID             string `json:"textID"`
		ReasoningID        string `json:"reasoningID"`
		CallID             string `json:"callID"`
		Field              string `json:"field"`
		Info               struct {
			ID        string `json:"id"`
			SessionID string `json:"sessionID"`
		} `json:"info"`
		Part struct {
			SessionID string `json:"sessionID"`
		} `json:"part"`
	}
	_ = json.Unmarshal(props, &p)
	switch {
	case p.SessionID != "":
		f.Session = p.SessionID
	case p.Info.SessionID != "":
		f.Session = p.Info.SessionID
	case p.Part.SessionID != "":
		f.Session = p.Part.SessionID
	case strings.HasPrefix(f.Type, "session.") && strings.HasPrefix(p.Info.ID, "ses_"):
		f.Session = p.Info.ID
	}
	if strings.HasSuffix(f.Type, ".delta") {
		f.Key = strings.Join([]string{f.Type, p.MessageID, p.PartID, p.Field, p.AssistantMessageID, p.TextID, p.ReasoningID, p.CallID}, "|")
	}
	if f.Type == "message.part.updated" {
		// A running tool's progress (state.metadata.output so far) is
		// published as often as its output grows: keep the first.
		var tp struct {
			Part struct {
				ID    string `json:"id"`
				Type  string `json:"type"`
				State struct {
					Status string `json:"status"`
				} `json:"state"`
			} `json:"part"`
		}
		_ = json.Unmarshal(props, &tp)
		if tp.Part.Type == "tool" && tp.Part.State.Status == "running" {
			f.Key = "tool running|" + tp.Part.ID
		}
	}
	return f
}

// stream records the data frames of one SSE response.
type stream struct {
	mu     sync.Mutex
	frames []frame
	status int
	err    error
	notify chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// openStream GETs url in the background and records its frames until
// close. It does not wait for the response headers: the real server sends
// none on /api/session/{id}/event until it has an event to deliver.
func openStream(url string) *stream {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{notify: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			s.fail(err)
			return
		}
		defer resp.Body.Close()
		s.mu.Lock()
		s.status = resp.StatusCode
		s.mu.Unlock()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			f := parseFrame([]byte(data))
			s.mu.Lock()
			s.frames = append(s.frames, f)
			close(s.notify)
			s.notify = make(chan struct{})
			s.mu.Unlock()
		}
		if ctx.Err() == nil {
			s.fail(sc.Err())
		}
	}()
	return s
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	s.err = err
	close(s.notify)
	s.notify = make(chan struct{})
}

// snapshot returns the frames so far and a channel closed at the next one.
func (s *stream) snapshot() ([]frame, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]frame(nil), s.frames...), s.notify, s.err
}

func (s *stream) close() []frame {
	s.cancel()
	<-s.done
	fs, _, _ := s.snapshot()
	return fs
}

// exchange is one HTTP request and its answer.
type exchange struct {
	Step        string
	Method      string
	Path        string
	Body        string // request body; "" = none
	Status      int
	ContentType string
	Resp        []byte
	Err         string
}

// run is one scenario in progress.
type run struct {
	t        testing.TB
	tg       target
	ev       *stream
	sessions []string
	live     map[string]*stream
	phases   []phase
	mu       sync.Mutex
	http     []*exchange
	wg       sync.WaitGroup
}

// phase marks where a named part of a scenario begins on /event.
type phase struct {
	Name string
	At   int // index of the first /event frame of the phase
}

// phase starts a named part of the scenario: the sessions' /event frames
// from here on go to sections of their own ("event ses1 @ NAME"). Only
// call it where the server is quiet (after settle), so the boundary does
// not depend on timing.
func (r *run) phase(name string) {
	fs, _, _ := r.ev.snapshot()
	r.phases = append(r.phases, phase{name, len(fs)})
}

// capture is what a scenario saw.
type capture struct {
	Scenario     string
	Sessions     []string
	Phases       []phase
	HTTP         []*exchange
	Event        []frame            // all of /event
	SessionEvent map[string][]frame // live /api/session/{id}/event, for v2 sessions
	Replay       map[string][]frame // /api/session/{id}/event?after=0 at the end
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// runScenario runs sc against tg and returns the capture.
func runScenario(t testing.TB, tg target, sc scenario) *capture {
	t.Helper()
	r := &run{t: t, tg: tg, live: map[string]*stream{}}
	r.ev = openStream(tg.Base + "/event")
	r.waitFrames(r.ev, "server.connected on /event", func(fs []frame) bool { return len(fs) > 0 })
	sc.Run(r)
	r.wg.Wait()
	r.settle()
	c := &capture{Scenario: sc.Name, Sessions: r.sessions, Phases: r.phases, HTTP: r.http, SessionEvent: map[string][]frame{}, Replay: map[string][]frame{}}
	for _, sid := range r.sessions {
		if s, ok := r.live[sid]; ok {
			c.SessionEvent[sid] = s.close()
			c.Replay[sid] = r.replay(sid, len(c.SessionEvent[sid]))
		}
	}
	c.Event = r.ev.close()
	return c
}

// send issues a request; the exchange keeps its place in issue order.
func (r *run) send(step, method, path, body string) (*exchange, func()) {
	x := &exchange{Step: step, Method: method, Path: path, Body: body}
	r.mu.Lock()
	r.http = append(r.http, x)
	r.mu.Unlock()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.tg.Base+path, rd)
	if err != nil {
		r.t.Fatalf("%s: %v", step, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := httpClient.Do(req)
		if err != nil {
			x.Err = err.Error()
			return
		}
		defer resp.Body.Close()
		x.Status = resp.StatusCode
		x.ContentType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
		x.Resp, _ = io.ReadAll(resp.Body)
	}()
	return x, func() { <-done }
}

// do sends a request and waits for its answer.
func (r *run) do(step, method, path, body string) *exchange {
	x, wait := r.send(step, method, path, body)
	wait()
	if x.Err != "" {
		r.t.Fatalf("%s %s %s: %s", step, method, path, x.Err)
	}
	return x
}

// background sends a request whose answer comes later (a sync prompt).
func (r *run) background(step, method, path, body string) func() *exchange {
	x, wait := r.send(step, method, path, body)
	r.wg.Add(1)
	var once sync.Once
	return func() *exchange {
		once.Do(func() { wait(); r.wg.Done() })
		return x
	}
}

// newSession creates a session (v1 POST /session, as in the traces) and,
// for v2 scenarios, opens its live /api/session/{id}/event.
func (r *run) newSession(step string, v2 bool) string {
	x := r.do(step, http.MethodPost, "/session", "{}")
	var s struct {
		ID string `json:"id"`
	}
	if x.Status != 200 || json.Unmarshal(x.Resp, &s) != nil || s.ID == "" {
		r.t.Fatalf("%s: POST /session: %d %s", step, x.Status, x.Resp)
	}
	r.sessions = append(r.sessions, s.ID)
	if v2 {
		r.live[s.ID] = openStream(r.tg.Base + "/api/session/" + s.ID + "/event")
	}
	return s.ID
}

const waitTimeout = 60 * time.Second

// waitFrames waits until cond holds for the frames of s.
func (r *run) waitFrames(s *stream, what string, cond func([]frame) bool) {
	r.t.Helper()
	deadline := time.After(waitTimeout)
	for {
		fs, next, err := s.snapshot()
		if cond(fs) {
			return
		}
		if err != nil {
			r.t.Fatalf("waiting for %s: stream ended: %v", what, err)
		}
		select {
		case <-next:
		case <-deadline:
			r.t.Fatalf("waiting for %s: timed out after %v (%d frames)", what, waitTimeout, len(fs))
		}
	}
}

// tryWait waits up to d for cond, checking at every frame on /event.
func (r *run) tryWait(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for {
		_, next, _ := r.ev.snapshot()
		if cond() {
			return true
		}
		select {
		case <-next:
		case <-deadline:
			return cond()
		}
	}
}

// count is the number of frames of session sid on /event matching pred.
func (r *run) count(sid string, pred func(frame) bool) int {
	fs, _, _ := r.ev.snapshot()
	k := 0
	for _, f := range fs {
		if f.Session == sid && pred(f) {
			k++
		}
	}
	return k
}

// expect notes how many frames of sid match pred now; the returned func
// waits until n more have arrived. Call it before the request that causes
// them.
func (r *run) expect(sid, what string, n int, pred func(frame) bool) func() {
	r.t.Helper()
	base := r.count(sid, pred)
	return func() {
		r.t.Helper()
		r.waitFrames(r.ev, what, func([]frame) bool { return r.count(sid, pred) >= base+n })
	}
}

// props decodes a frame's properties (or data).
func props(f frame) map[string]any {
	var env struct {
		Properties map[string]any `json:"properties"`
		Data       map[string]any `json:"data"`
	}
	_ = json.Unmarshal(f.Raw, &env)
	if env.Properties != nil {
		return env.Properties
	}
	return env.Data
}

func isType(types ...string) func(frame) bool {
	return func(f frame) bool {
		for _, t := range types {
			if f.Type == t {
				return true
			}
		}
		return false
	}
}

// v1Idle: the session went idle (a v1 turn ended).
var v1Idle = isType("session.idle")

// v2Done: a v2 turn's last step ended (finish other than tool-calls) or failed.
func v2Done(f frame) bool {
	switch f.Type {
	case "session.next.step.failed":
		return true
	case "session.next.step.ended":
		return props(f)["finish"] != "tool-calls"
	}
	return false
}

// firstDelta: text streaming has begun (v1 part delta or v2 text delta).
var firstDelta = isType("message.part.delta", "session.next.text.delta")

// settle waits until no stream of the run has had a frame of one of the
// run's sessions for tg.Quiet.
func (r *run) settle() {
	count := func() int {
		n := 0
		mine := map[string]bool{}
		for _, s := range r.sessions {
			mine[s] = true
		}
		fs, _, _ := r.ev.snapshot()
		for _, f := range fs {
			if mine[f.Session] {
				n++
			}
		}
		for _, s := range r.live {
			fs, _, _ := s.snapshot()
			n += len(fs)
		}
		return n
	}
	last, since := count(), time.Now()
	for time.Since(since) < r.tg.Quiet {
		time.Sleep(r.tg.Quiet / 10)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}

// replay reads /api/session/{id}/event?after=0 until it has as many frames
// as the live stream had (and a short grace for extra ones), or, when the
// live stream had none, for a short while.
func (r *run) replay(sid string, want int) []frame {
	s := openStream(r.tg.Base + "/api/session/" + sid + "/event?after=0")
	deadline := time.Now().Add(5 * time.Second)
	if want == 0 {
		deadline = time.Now().Add(500 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		fs, next, err := s.snapshot()
		if err != nil || (want > 0 && len(fs) >= want) {
			break
		}
		select {
		case <-next:
		case <-time.After(time.Until(deadline)):
		}
	}
	time.Sleep(200 * time.Millisecond) // the grace: a bounded wait for extra frames, which would be a difference
	return s.close()
}

// --- request bodies ---

func v1Text(text string) string {
	b, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}})
	return string(b)
}

func v1TextID(id, text string) string {
	b, _ := json.Marshal(map[string]any{"messageID": id, "parts": []any{map[string]any{"type": "text", "text": text}}})
	return string(b)
}

func v2Prompt(id, text, delivery string) string {
	m := map[string]any{"prompt": map[string]any{"text": text}}
	if id != "" {
		m["id"] = id
	}
	if delivery != "" {
		m["delivery"] = delivery
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// bashCall is a Directives line making the model call bash.
func bashCall(command, description string) string {
	b, _ := json.Marshal(map[string]string{"command": command, "description": description})
	return "call:bash " + string(b)
}

// --- the scenarios ---

func scenarioA(r *run) {
	sid := r.newSession("create", false)
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	r.do("sync prompt", "POST", "/session/"+sid+"/message", v1Text("hello from trace a"))
	idle()
	r.do("messages", "GET", "/session/"+sid+"/message", "")
}

func scenarioB(r *run) {
	sid := r.newSession("create", false)
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	r.do("async prompt", "POST", "/session/"+sid+"/prompt_async", v1Text("hello from trace b"))
	idle()
	r.do("messages (after idle)", "GET", "/session/"+sid+"/message", "")
}

func scenarioC1(r *run) {
	sid := r.newSession("create", true)
	p := "/api/session/" + sid
	streaming := r.expect(sid, "first text delta", 1, firstDelta)
	done := r.expect(sid, "two finished turns", 2, v2Done)
	r.do("prompt (no delivery)", "POST", p+"/prompt", v2Prompt("", "first prompt (c) "+slowMarker, ""))
	streaming()
	r.do("steer (turn running)", "POST", p+"/prompt", v2Prompt("", "STEERED message", "steer"))
	r.do("queue (turn running)", "POST", p+"/prompt", v2Prompt("", "QUEUED message", "queue"))
	r.do("session (while running)", "GET", p, "")
	done()
	r.settle()
	r.do("wait (idle)", "POST", p+"/wait", "")
	r.do("v2 messages", "GET", p+"/message", "")
	r.do("v1 messages", "GET", "/session/"+sid+"/message", "")
}

func scenarioC2(r *run) {
	sid := r.newSession("create", true)
	p := "/api/session/" + sid
	running := r.expect(sid, "bash running", 1, isType("session.next.tool.called"))
	done := r.expect(sid, "two finished turns", 2, v2Done)
	r.do("prompt (no delivery)", "POST", p+"/prompt", v2Prompt("", "first prompt (c2)\n"+bashCall("sleep 1; echo first", "sleep")+" then: first done", ""))
	running()
	r.do("steer (tool running)", "POST", p+"/prompt", v2Prompt("", "STEERED message\n"+bashCall("echo steered", "echo")+" then: steered done", "steer"))
	r.do("queue (tool running)", "POST", p+"/prompt", v2Prompt("", "QUEUED message\n"+bashCall("echo queued", "echo")+" then: queued done", "queue"))
	r.do("session (while running)", "GET", p, "")
	done()
	r.settle()
	r.do("v2 messages", "GET", p+"/message", "")
	r.do("v1 messages", "GET", "/session/"+sid+"/message", "")
}

func scenarioC3(r *run) {
	sid := r.newSession("create", false)
	streaming := r.expect(sid, "first text delta", 1, firstDelta)
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	r.do("async prompt (first)", "POST", "/session/"+sid+"/prompt_async", v1Text("first prompt (c3) "+slowMarker))
	streaming()
	r.do("async prompt (second, while busy)", "POST", "/session/"+sid+"/prompt_async", v1Text("SECOND while busy"))
	idle()
	r.settle()
	r.do("messages", "GET", "/session/"+sid+"/message", "")
}

func scenarioD(r *run) {
	// v1: the same messageID twice, sync then async, each repeat sent once
	// the session is idle again, so the outcome does not depend on timing.
	s1 := r.newSession("create v1 session", false)
	id1, id2 := identifier.NewMessage(), identifier.NewMessage()
	idle := r.expect(s1, "session.idle", 1, v1Idle)
	r.do("v1 sync (1st)", "POST", "/session/"+s1+"/message", v1TextID(id1, "dup v1 sync"))
	idle()
	r.settle()
	r.phase("v1 sync (2nd, same id)")
	r.do("v1 sync (2nd, same id)", "POST", "/session/"+s1+"/message", v1TextID(id1, "dup v1 sync"))
	r.settle()
	r.phase("v1 async (1st)")
	idle = r.expect(s1, "session.idle", 1, v1Idle)
	r.do("v1 async (1st)", "POST", "/session/"+s1+"/prompt_async", v1TextID(id2, "dup v1 async"))
	idle()
	r.settle()
	r.phase("v1 async (2nd, same id)")
	r.do("v1 async (2nd, same id)", "POST", "/session/"+s1+"/prompt_async", v1TextID(id2, "dup v1 async"))
	r.settle()
	r.do("v1 messages", "GET", "/session/"+s1+"/message", "")
	r.phase("v2")

	// v2: the same id 4x: again once promoted (turn running), again once
	// idle, then with different text.
	s2 := r.newSession("create v2 session", true)
	id3 := identifier.NewMessage()
	p := "/api/session/" + s2
	promoted := r.expect(s2, "promoted", 1, isType("session.next.prompted"))
	done := r.expect(s2, "turn finished", 1, v2Done)
	r.do("v2 prompt (1st)", "POST", p+"/prompt", v2Prompt(id3, "dup v2 "+slowMarker, ""))
	promoted()
	r.do("v2 prompt (2nd, same, while running)", "POST", p+"/prompt", v2Prompt(id3, "dup v2 "+slowMarker, ""))
	done()
	r.settle()
	r.do("v2 prompt (3rd, same, idle)", "POST", p+"/prompt", v2Prompt(id3, "dup v2 "+slowMarker, ""))
	r.do("v2 prompt (4th, different text)", "POST", p+"/prompt", v2Prompt(id3, "dup v2 DIFFERENT", ""))
	r.settle()
	r.do("v2 messages", "GET", p+"/message", "")
}

func scenarioE1(r *run) {
	sid := r.newSession("create", false)
	streaming := r.expect(sid, "two text deltas", 2, isType("message.part.delta"))
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	wait := r.background("sync prompt (aborted)", "POST", "/session/"+sid+"/message", v1Text("long turn to abort "+slowMarker))
	streaming()
	r.do("abort (running)", "POST", "/session/"+sid+"/abort", "")
	wait()
	idle()
	r.settle()
	r.do("v1 messages", "GET", "/session/"+sid+"/message", "")
	r.do("v2 messages", "GET", "/api/session/"+sid+"/message", "")
}

func scenarioE2(r *run) {
	sid := r.newSession("create", true)
	p := "/api/session/" + sid
	streaming := r.expect(sid, "two text deltas", 2, isType("session.next.text.delta"))
	done := r.expect(sid, "turn failed", 1, v2Done)
	r.do("prompt", "POST", p+"/prompt", v2Prompt("", "long v2 turn to interrupt "+slowMarker, ""))
	streaming()
	r.do("interrupt (running)", "POST", p+"/interrupt", "")
	done()
	r.settle()
	r.do("interrupt (idle)", "POST", p+"/interrupt", "")
	r.do("v1 abort (idle)", "POST", "/session/"+sid+"/abort", "")
	r.settle()
	r.do("v1 messages", "GET", "/session/"+sid+"/message", "")
	r.do("v2 messages", "GET", p+"/message", "")
}

func scenarioF(r *run) {
	const none = "ses_doesnotexist0000000000000"
	sid := r.newSession("create", false)
	reqs := []struct{ method, path, body string }{
		{"POST", "/session/" + none + "/message", v1Text("x")},
		{"POST", "/session/" + none + "/prompt_async", v1Text("x")},
		{"GET", "/session/" + none, ""},
		{"GET", "/session/" + none + "/message", ""},
		{"POST", "/session/" + none + "/abort", ""},
		{"POST", "/api/session/" + none + "/prompt", v2Prompt("", "x", "")},
		{"GET", "/api/session/" + none, ""},
		{"GET", "/api/session/" + none + "/message", ""},
		{"POST", "/api/session/" + none + "/interrupt", ""},
		{"POST", "/session/" + sid + "/message", `{"parts":[{"type":"text","text":"x"}`},
		{"POST", "/session/" + sid + "/prompt_async", `not json at all`},
		{"POST", "/api/session/" + sid + "/prompt", `{bad json`},
		{"POST", "/session/" + sid + "/message", `{}`},
		{"POST", "/session/" + sid + "/prompt_async", `{}`},
		{"POST", "/session/" + sid + "/prompt_async", `{"parts":[]}`},
		{"POST", "/api/session/" + sid + "/prompt", `{}`},
		{"POST", "/api/session/" + sid + "/prompt", `{"prompt":{}}`},
		{"POST", "/session/" + sid + "/prompt_async", `{"parts":[{"type":"bogus","text":"x"}]}`},
		{"POST", "/session/" + sid + "/prompt_async", `{"parts":[{"type":"text","text":"x"}],"unknownField":1}`},
		{"POST", "/session/" + sid + "/prompt_async", `{"messageID":"abc_123","parts":[{"type":"text","text":"x"}]}`},
		{"POST", "/api/session/" + sid + "/prompt", `{"id":"abc_123","prompt":{"text":"x"}}`},
		{"POST", "/api/session/" + sid + "/prompt", `{"prompt":{"text":"x"},"delivery":"later"}`},
		{"GET", "/session/abc_123", ""},
		{"GET", "/session/abc_123/message", ""},
		{"POST", "/session/abc_123/prompt_async", v1Text("x")},
		{"GET", "/api/session/abc_123", ""},
		{"GET", "/api/session/abc_123/event", ""},
		{"GET", "/session/" + sid + "/message/msg_doesnotexist000000000", ""},
		{"GET", "/session/" + sid + "/message/abc_123", ""},
		{"GET", "/no/such/route", ""},
		{"DELETE", "/session/" + none, ""},
	}
	for i, q := range reqs {
		r.do(fmt.Sprintf("f%02d", i+1), q.method, q.path, q.body)
	}
	// The accepted prompts (parts [] and the unknown field) start turns;
	// let them end so nothing spills into the next scenario.
	r.settle()
	r.waitIdleStatus()
	r.settle()
}

func scenarioH(r *run) {
	sid := r.newSession("create", false)
	idle := r.expect(sid, "session.idle", 1, v1Idle)
	r.do("sync prompt (tool turn)", "POST", "/session/"+sid+"/message",
		v1Text("turn with a tool (h)\n"+bashCall("echo tool-done", "echo")+" then: tool turn over"))
	idle()
	r.do("messages", "GET", "/session/"+sid+"/message", "")
}

// waitIdleStatus polls GET /session/status (not recorded) until no
// session of the run is busy.
func (r *run) waitIdleStatus() {
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		resp, err := httpClient.Get(r.tg.Base + "/session/status")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			busy := false
			for _, s := range r.sessions {
				if bytes.Contains(b, []byte(s)) {
					busy = true
				}
			}
			if !busy {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.t.Fatalf("sessions still busy after %v", waitTimeout)
}
