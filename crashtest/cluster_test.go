package crashtest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

const clusterTTL = 2 * time.Second

// stream collects the frames of one SSE stream in the background.
type stream struct {
	mu     sync.Mutex
	frames []sseFrame
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func openStream(t *testing.T, cl *client, path string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &stream{done: make(chan struct{}), cancel: cancel}
	up := make(chan struct{})
	go func() {
		defer close(s.done)
		req, _ := http.NewRequestWithContext(ctx, "GET", cl.base+path, nil)
		resp, err := cl.hc.Do(req)
		if err != nil {
			s.err = err
			close(up)
			return
		}
		defer resp.Body.Close()
		close(up)
		s.err = readSSE(resp.Body, func(f sseFrame) bool {
			s.mu.Lock()
			s.frames = append(s.frames, f)
			s.mu.Unlock()
			return true
		})
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	<-up
	return s
}

func (s *stream) snapshot() []sseFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.frames)
}

// frameEvent decodes a frame of /api/event or a session stream.
func frameEvent(f sseFrame) event {
	var e event
	_ = json.Unmarshal(f.data, &e)
	return e
}

// owner returns the advertised address of the session's owner.
func ownerOf(t *testing.T, conn *pgx.Conn, sid string) string {
	var addr *string
	if err := conn.QueryRow(context.Background(), `SELECT i.addr FROM sessions s LEFT JOIN instances i ON i.id = s.owner
		WHERE s.id = $1`, sid).Scan(&addr); err != nil {
		t.Fatalf("owner of %s: %v", sid, err)
	}
	if addr == nil {
		return ""
	}
	return *addr
}

// TestScaleOut: three instances on one PostgreSQL database. A session is
// created on A, prompted through B and streamed on C; the owner is killed
// mid-turn and another instance takes the session over within the lease
// TTL + 2 s: every acknowledged input is delivered once, the interrupted
// turn is closed and continued, C's session stream is gapless with no
// duplicate. Then the new owner is SIGSTOPped mid-turn, replaced, and
// woken: it writes and publishes nothing.
func TestScaleOut(t *testing.T) {
	pg := pgtest.Need(t)
	db := pg.FreshDB(t)
	url := pg.URL(db)
	dir, project := clusterDirs(t)
	names := []string{"a", "b", "c"}
	srvs := map[string]*server{}
	cls := map[string]*client{}
	logs := func() string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(tail(filepath.Join(dir, n+".log"), 30) + "\n")
		}
		return b.String()
	}
	started, clients := startInstances(t, dir, project, url, names, "--scripted-delay", "150ms", "--scripted-chunks", "20")
	for i, n := range names {
		srvs[n], cls[n] = started[i], clients[i]
	}
	byURL := map[string]string{}
	for _, n := range names {
		byURL[srvs[n].url] = n
	}
	conn, err := pgx.Connect(context.Background(), pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	// A session created on A.
	a, b, c := cls["a"], cls["b"], cls["c"]
	sid := newID("ses")
	if st, body, err := a.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create on A: %d %v %s", st, err, body)
	}
	// C streams: every event (/api/event) and the session's durable log.
	cAll := openStream(t, c, "/api/event")
	cLog := openStream(t, c, "/api/session/"+sid+"/event")

	// Prompted through B: a blocking prompt, then a queued one, then one
	// without an ID (B mints it before forwarding).
	msgA := newID("msg")
	type answer struct {
		st  int
		b   []byte
		err error
	}
	blocked := make(chan answer, 1)
	go func() {
		st, body, err := b.doTimeout("POST", "/session/"+sid+"/message", mustJSON(map[string]any{"messageID": msgA,
			"parts": []any{map[string]any{"type": "text", "text": "a slow turn"}}}), 60*time.Second)
		blocked <- answer{st, body, err}
	}()
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		for _, f := range cAll.snapshot() {
			if e := frameEvent(f); e.Type == "session.next.text.delta" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no text delta of the turn reached C's /api/event within 10s\n%s", logs())
	}
	if owner := byURL[ownerOf(t, conn, sid)]; owner != "a" {
		t.Fatalf("the session is owned by %q, want a (its creator)", owner)
	}
	// Every instance shows it busy (the status lives in the store).
	for _, n := range []string{"b", "c"} {
		status := map[string]struct {
			Type string `json:"type"`
		}{}
		if err := cls[n].getJSON("/session/status", &status); err != nil || status[sid].Type != "busy" {
			t.Errorf("GET /session/status on %s during A's turn: %v %v, want %s busy", n, status, err, sid)
		}
	}
	msgB := newID("msg")
	if st, body, err := b.do("POST", "/api/session/"+sid+"/prompt", mustJSON(map[string]any{"id": msgB,
		"prompt": map[string]any{"text": "queued behind"}, "delivery": "queue"})); err != nil || st != 200 {
		t.Fatalf("queue through B: %d %v %s", st, err, body)
	}
	st, body, err := b.do("POST", "/api/session/"+sid+"/prompt", mustJSON(map[string]any{
		"prompt": map[string]any{"text": "no id"}, "delivery": "queue"}))
	var minted struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err != nil || st != 200 || json.Unmarshal(body, &minted) != nil || !strings.HasPrefix(minted.Data.ID, "msg_") {
		t.Fatalf("queue without an ID through B: %d %v %s", st, err, body)
	}
	msgC := minted.Data.ID

	// The owner dies mid-turn.
	killed := time.Now()
	srvs["a"].kill()
	// The blocking prompt is retried by B (same message ID) on the new owner.
	var takeover time.Duration
	if !poll(clusterTTL+10*time.Second, 20*time.Millisecond, func() bool {
		if o := byURL[ownerOf(t, conn, sid)]; o == "b" || o == "c" {
			takeover = time.Since(killed)
			return true
		}
		return false
	}) {
		t.Fatalf("no instance took the session over\n%s", logs())
	}
	t.Logf("taken over by %s %v after the kill", byURL[ownerOf(t, conn, sid)], takeover.Round(time.Millisecond))
	if takeover > clusterTTL+2*time.Second {
		t.Errorf("takeover took %v, want within the lease TTL + 2s (%v)", takeover, clusterTTL+2*time.Second)
	}

	// It settles: the cut-off turn continued, the queue drained.
	h := &history{}
	if !poll(60*time.Second, 50*time.Millisecond, func() bool {
		var inbox struct {
			Data []json.RawMessage `json:"data"`
		}
		status := map[string]any{}
		if c.getJSON("/api/session/"+sid+"/inbox", &inbox) != nil || c.getJSON("/session/status", &status) != nil {
			return false
		}
		if probs, err := c.fetchHistory(sid, h, 100); err != nil || len(probs) > 0 {
			return false
		}
		pending, open := pendingOf(h)
		return len(inbox.Data) == 0 && len(status) == 0 && len(pending) == 0 && len(open) == 0
	}) {
		t.Fatalf("the session did not settle after the takeover\n%s", logs())
	}
	select {
	case ans := <-blocked:
		var m v1Message
		if ans.err != nil || ans.st != 200 || json.Unmarshal(ans.b, &m) != nil || m.Info.Role != "assistant" {
			t.Errorf("the blocking prompt through B: %d %v %s, want the answer", ans.st, ans.err, clip(ans.b))
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the blocking prompt through B never got an answer")
	}
	checkDeliveredOnce(t, c, sid, []string{msgA, msgB, msgC}, msgA)
	checkStream(t, cLog, h, "C's session stream")

	// The new owner is frozen mid-turn, replaced, and woken.
	ownerName := byURL[ownerOf(t, conn, sid)]
	other := "b"
	if ownerName == "b" {
		other = "c"
	}
	watch := openStream(t, cls[other], "/api/event")
	frozenAll := openStream(t, cls[ownerName], "/api/event")
	msgD := newID("msg")
	if st, body, err := cls[other].do("POST", "/session/"+sid+"/prompt_async", mustJSON(map[string]any{"messageID": msgD,
		"parts": []any{map[string]any{"type": "text", "text": "frozen turn"}}})); err != nil || st != 204 {
		t.Fatalf("prompt through %s: %d %v %s", other, st, err, body)
	}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		for _, f := range watch.snapshot() {
			if e := frameEvent(f); e.Type == "session.next.text.delta" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the turn of %s does not stream\n%s", msgD, logs())
	}
	if err := srvs[ownerName].signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	seenAtStop := len(frozenAll.snapshot())
	if !poll(clusterTTL+10*time.Second, 20*time.Millisecond, func() bool {
		return byURL[ownerOf(t, conn, sid)] == other
	}) {
		_ = srvs[ownerName].signal(syscall.SIGCONT)
		t.Fatalf("the frozen owner %s was not replaced\n%s", ownerName, logs())
	}
	t.Logf("frozen owner %s replaced by %s after %v", ownerName, other, time.Since(stopped).Round(time.Millisecond))
	// Let the new owner continue the turn before the old one wakes: wait
	// for a delta of it on the new owner's stream (what the frozen one
	// published came through long before: a replacement takes a lease).
	mark := len(watch.snapshot())
	if !poll(30*time.Second, 20*time.Millisecond, func() bool {
		for _, f := range watch.snapshot()[mark:] {
			if e := frameEvent(f); e.Type == "session.next.text.delta" && strings.Contains(string(f.data), sid) {
				return true
			}
		}
		return false
	}) {
		_ = srvs[ownerName].signal(syscall.SIGCONT)
		t.Fatalf("the new owner %s does not continue the turn\n%s", other, logs())
	}
	if err := srvs[ownerName].signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	h2 := &history{}
	if !poll(60*time.Second, 50*time.Millisecond, func() bool {
		status := map[string]any{}
		if cls[other].getJSON("/session/status", &status) != nil {
			return false
		}
		if probs, err := cls[other].fetchHistory(sid, h2, 100); err != nil || len(probs) > 0 {
			return false
		}
		pending, open := pendingOf(h2)
		return len(status) == 0 && len(pending) == 0 && len(open) == 0
	}) {
		t.Fatalf("the session did not settle after the freeze\n%s", logs())
	}
	time.Sleep(time.Second) // a bounded wait for what the woken process must not send
	checkDeliveredOnce(t, cls[other], sid, []string{msgA, msgB, msgC, msgD}, msgD)
	// Every event the woken instance showed after it was frozen is one
	// the new owner published (the watcher saw it too): the old runner
	// published nothing.
	legit := map[string]bool{}
	for _, f := range watch.snapshot() {
		legit[frameEvent(f).ID] = true
	}
	for _, f := range frozenAll.snapshot()[seenAtStop:] {
		e := frameEvent(f)
		if e.ID != "" && e.Type != "server.heartbeat" && !legit[e.ID] && strings.Contains(string(f.data), sid) {
			t.Errorf("the woken former owner published %s %s, which the new owner never did", e.Type, clip(f.data))
		}
	}
	if !strings.Contains(tail(filepath.Join(dir, ownerName+".log"), 400), "taken over by another instance") {
		t.Errorf("the woken former owner's log does not say its runner was fenced\n%s", logs())
	}
	// The log the new owner wrote is whole: every durable event is one of
	// a gapless sequence whoever wrote it (fetchHistory checks), and no
	// step is left open.
	if probs, err := cls[other].fetchHistory(sid, &history{}, 100); err != nil || len(probs) > 0 {
		t.Errorf("history after the freeze: %v %v", probs, err)
	}
	for _, n := range names {
		if n == "a" {
			continue
		}
		for _, l := range errorLines(filepath.Join(dir, n+".log")) {
			t.Errorf("server log %s has an error line: %s", n, l)
		}
	}
}

// checkDeliveredOnce: each input has exactly one user message; the
// interrupted one was answered by a continued turn.
func checkDeliveredOnce(t *testing.T, cl *client, sid string, ids []string, interrupted string) {
	t.Helper()
	var msgs []v1Message
	if err := cl.getJSON("/session/"+sid+"/message", &msgs); err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	var answers []v1Message
	for _, m := range msgs {
		switch m.Info.Role {
		case "user":
			users[m.Info.ID]++
		case "assistant":
			if m.Info.Time.Completed == nil {
				t.Errorf("assistant message %s is left open", m.Info.ID)
			}
			if m.Info.ParentID == interrupted {
				answers = append(answers, m)
			}
		}
	}
	for _, id := range ids {
		if users[id] != 1 {
			t.Errorf("input %s delivered %d times, want once", id, users[id])
		}
	}
	if len(answers) < 2 {
		t.Errorf("the interrupted turn of %s has %d assistant messages, want the interrupted one and its continuation", interrupted, len(answers))
		return
	}
	if first := answers[0]; first.Info.Error == nil || first.Info.Error.Name != "MessageAbortedError" {
		t.Errorf("the interrupted assistant message %s: error %+v, want MessageAbortedError", first.Info.ID, first.Info.Error)
	}
	if last := answers[len(answers)-1]; last.Info.Error != nil {
		t.Errorf("the continuation %s ended with %+v", last.Info.ID, last.Info.Error)
	}
}

// checkStream: a session stream carried the log exactly: seq 1, 2, ...
// with no gap and no duplicate, the same events as the history.
func checkStream(t *testing.T, s *stream, h *history, what string) {
	t.Helper()
	if !poll(5*time.Second, 20*time.Millisecond, func() bool { return len(s.snapshot()) >= len(h.evs) }) {
		t.Errorf("%s has %d events, the log %d", what, len(s.snapshot()), len(h.evs))
	}
	for i, f := range s.snapshot() {
		e := frameEvent(f)
		if e.Durable.Seq != int64(i+1) {
			t.Errorf("%s: frame %d has seq %d (gap or duplicate)", what, i, e.Durable.Seq)
			return
		}
		if i < len(h.evs) && h.evs[i].ID != e.ID {
			t.Errorf("%s: seq %d is %s, the log has %s", what, i+1, e.ID, h.evs[i].ID)
			return
		}
	}
}

// TestScaleOutAsk: a permission asked by a session's runner on one
// instance is listed, and answered, on another: the reply is forwarded to
// the owner and the tool call goes on.
func TestScaleOutAsk(t *testing.T) {
	pg := pgtest.Need(t)
	url := pg.URL(pg.FreshDB(t))
	dir, project := clusterDirs(t)
	if err := os.WriteFile(filepath.Join(project, "x.env"), []byte("SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(2))
	cfg := filepath.Join(dir, "opencode.json")
	if err := os.WriteFile(cfg, []byte(`{"model":"stub/stub-model","provider":{"stub":{"npm":"@ai-sdk/openai-compatible",`+
		`"options":{"baseURL":"`+stub.URL()+`","apiKey":"k"},"models":{"stub-model":{"tool_call":true}}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, cls := startInstances(t, dir, project, url, []string{"a", "b"}, "--config", cfg)
	a, b := cls[0], cls[1]
	sid := newID("ses")
	if st, body, err := a.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create on A: %d %v %s", st, err, body)
	}
	bAll := openStream(t, b, "/api/event")
	if st, body, err := a.do("POST", "/session/"+sid+"/prompt_async", mustJSON(map[string]any{
		"parts": []any{map[string]any{"type": "text", "text": `call:read {"filePath":"` + filepath.Join(project, "x.env") + `"} then: read it`}}})); err != nil || st != 204 {
		t.Fatalf("prompt on A: %d %v %s", st, err, body)
	}
	var asks []struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionID"`
	}
	if !poll(15*time.Second, 50*time.Millisecond, func() bool {
		return b.getJSON("/permission", &asks) == nil && len(asks) == 1
	}) {
		t.Fatalf("B does not list A's permission request: %+v", asks)
	}
	if asks[0].SessionID != sid {
		t.Fatalf("listed ask %+v, want one of %s", asks[0], sid)
	}
	if st, body, err := b.do("POST", "/permission/"+asks[0].ID+"/reply", mustJSON(map[string]any{"reply": "once"})); err != nil || st != 200 {
		t.Fatalf("reply through B: %d %v %s", st, err, body)
	}
	if !poll(15*time.Second, 50*time.Millisecond, func() bool {
		for _, f := range bAll.snapshot() {
			if strings.Contains(string(f.data), "Done. read it") {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the turn did not go on after the reply through B\n%s\n%s", tail(filepath.Join(dir, "a.log"), 30), tail(filepath.Join(dir, "b.log"), 30))
	}
	if b.getJSON("/permission", &asks) != nil || len(asks) != 0 {
		t.Errorf("B still lists %+v after the reply", asks)
	}
	// Deleted through B (forwarded to A): B's streams hear of it.
	if st, body, err := b.do("DELETE", "/session/"+sid, nil); err != nil || st != 200 {
		t.Fatalf("delete through B: %d %v %s", st, err, body)
	}
	if !poll(10*time.Second, 50*time.Millisecond, func() bool {
		for _, f := range bAll.snapshot() {
			if e := frameEvent(f); e.Type == "session.deleted" && strings.Contains(string(f.data), sid) {
				return true
			}
		}
		return false
	}) {
		t.Errorf("B's /api/event never carried the deletion of %s", sid)
	}
}
