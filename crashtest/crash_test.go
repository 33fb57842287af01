// Package crashtest checks the promise "nothing admitted is lost": the real
// server binary is driven over HTTP, killed with SIGKILL at random moments,
// restarted on the same data directory, and its state is compared with what
// every request was answered.
package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

var (
	flagCycles = flag.Int("crash.cycles", 0, "crash/restart cycles of TestCrashRecovery (default 50, 10 with -short)")
	flagSeed   = flag.Uint64("crash.seed", 0, "random seed of TestCrashRecovery (0: from the clock)")
	flagKeep   = flag.String("crash.keep", "", "copy the logs of a failing run into this directory (default: a new directory under $TMPDIR)")
)

const (
	numWorkers  = 4
	maxSessions = 8
	minSessions = 3
)

// ---- what the client knows --------------------------------------------------

type sessRec struct {
	id       string
	clientID bool // the ID was chosen by the client
	created  bool // a 2xx answered a creation (or it was seen in a listing)
	gone     bool // its creation had no answer and a restarted server does not list it
	// interrupts are the answer times of every interrupt/abort request
	// (the far future for one that got no answer).
	interrupts []time.Time
}

type revokeRec struct {
	cycle    int
	sentAt   time.Time
	status   int // 0: no answer
	revoked  *bool
	afterAck bool // a 2xx admission of the input was received before this was sent
}

type inputRec struct {
	id, sid  string
	text     string
	delivery string // steer or queue (the effective one)
	path     string // where the canonical body was sent
	body     []byte // the canonical body (retries resend it byte for byte)
	bad      bool   // only sent in requests that must be rejected: must never exist
	badKind  string
	cycle    int
	sentAt   time.Time
	firstAck time.Time
	ok       int // 2xx answers to the canonical body
	unknown  int // no answer (or 5xx)
	rejected []int
	// conflicts are statuses of reuses of the ID with other content.
	conflicts []int
	revokes   []revokeRec
	// revokesSent counts revokes sent (before their answer): an admission
	// a revoke overtook is refused with 409 (the revoke left a tombstone).
	revokesSent int
}

type model struct {
	mu            sync.Mutex
	sessions      map[string]*sessRec
	sessOrder     []string
	inputs        map[string]*inputRec
	inputOrder    []*inputRec
	unknownMinted int // server-minted session creations that got no answer
	discovered    int // sessions found in a listing that the client never got an answer for
}

func newModel() *model {
	return &model{sessions: map[string]*sessRec{}, inputs: map[string]*inputRec{}}
}

func (m *model) usableSessions() []*sessRec {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*sessRec
	for _, id := range m.sessOrder {
		s := m.sessions[id]
		if s.created || (s.clientID && !s.gone) {
			out = append(out, s)
		}
	}
	return out
}

func (m *model) addInput(in *inputRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs[in.id] = in
	m.inputOrder = append(m.inputOrder, in)
}

// ---- violations ----------------------------------------------------------------

type violations struct {
	t     *testing.T
	mu    sync.Mutex
	seen  map[string]bool
	n     int
	first int // cycle of the first violation, -1 if none
	cycle map[int]bool
}

func newViolations(t *testing.T) *violations {
	return &violations{t: t, seen: map[string]bool{}, first: -1, cycle: map[int]bool{}}
}

// add reports one violation once per key.
func (v *violations) add(cycle int, key, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen[key] {
		return
	}
	v.seen[key] = true
	v.n++
	v.cycle[cycle] = true
	if v.first < 0 {
		v.first = cycle
	}
	if v.n <= 150 {
		v.t.Errorf("VIOLATION (cycle %d): "+format, append([]any{cycle}, args...)...)
	} else if v.n == 151 {
		v.t.Errorf("more violations follow; not all are printed")
	}
}

// ---- the test -----------------------------------------------------------------

type crashTest struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	dataDir string
	logDir  string
	m       *model
	v       *violations
	logs    []string // server log of each cycle

	// Taken before the kill, checked after the restart.
	snap map[string]*history
	tail *tailRec
	// seqs are the last seqs the previous verification saw.
	seqs map[string]int64
	// killedAt is when the last kill happened.
	killedAt time.Time

	// Coverage: what the crashes actually hit.
	resumedInputs  map[string]bool // admitted before a kill, delivered after the restart
	restartedTurns map[string]bool // assistant messages closed as interrupted by a restart
	cancelReasons  map[string]map[string]bool
}

type tailRec struct {
	sid    string
	after  int64
	frames []sseFrame
}

func TestCrashRecovery(t *testing.T) {
	cycles := *flagCycles
	if cycles <= 0 {
		cycles = 50
		if testing.Short() {
			cycles = 10
		}
	}
	crashRecovery(t, cycles, nil)
}

// TestCrashRecoveryPostgres is the same on PostgreSQL: each start is a new
// cluster instance that takes the killed one's sessions over once its
// lease expires.
func TestCrashRecoveryPostgres(t *testing.T) {
	pg := pgtest.Need(t)
	cycles := *flagCycles
	if cycles <= 0 {
		cycles = 12
		if testing.Short() {
			cycles = 4
		}
	}
	// The scale-out tests' lease (2 s): with 1 s, a loaded CI machine
	// (the race detector, the whole suite in parallel) sometimes renews
	// it too late, and the only instance fences itself.
	crashRecovery(t, cycles, []string{"--store", "postgres", "--postgres-url", pg.URL(pg.FreshDB(t)), "--lease-ttl", clusterTTL.String()})
}

func crashRecovery(t *testing.T, cycles int, storeArgs []string) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("cycles=%d seed=%d (rerun with -crash.seed=%d; timing still varies)", cycles, seed, seed)
	root := t.TempDir()
	ct := &crashTest{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), dataDir: filepath.Join(root, "data"),
		logDir: filepath.Join(root, "logs"), m: newModel(), v: newViolations(t),
		resumedInputs: map[string]bool{}, restartedTurns: map[string]bool{}, cancelReasons: map[string]map[string]bool{}}
	if err := os.MkdirAll(ct.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ct.logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer ct.keepOnFailure()
	start := time.Now()
	var stats struct{ kills, requests int }
	for cycle := 0; cycle <= cycles; cycle++ {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < 45*time.Second {
			t.Errorf("stopping after %d cycles: the test deadline is near", cycle)
			break
		}
		delay := time.Duration(2+ct.rng.IntN(9)) * time.Millisecond
		logPath := filepath.Join(ct.logDir, fmt.Sprintf("cycle-%03d.log", cycle))
		ct.logs = append(ct.logs, logPath)
		srv := startServer(t, ct.dataDir, logPath, append([]string{"--scripted-delay", delay.String(), "--scripted-chunks", "5"}, storeArgs...)...)
		cl := newClient(srv.url)
		if cycle > 0 {
			ct.verify(cycle, cl)
			for _, l := range errorLines(ct.logs[cycle-1]) {
				ct.v.add(cycle-1, "log:"+l, "server log of the killed run has an error line: %s", l)
			}
		}
		if cycle == cycles {
			// The last start only verifies; then a graceful stop.
			if err := srv.signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if code, ok := srv.waitExit(15 * time.Second); !ok || code != 0 {
				ct.v.add(cycle, "final-exit", "final SIGINT: exited=%v code=%d (want 0 within 15s)", ok, code)
			}
			for _, l := range errorLines(logPath) {
				ct.v.add(cycle, "log:"+l, "server log of the final run has an error line: %s", l)
			}
			cl.close()
			break
		}
		stats.requests += ct.load(cycle, cl, srv)
		stats.kills++
		cl.close()
	}
	ct.m.mu.Lock()
	ok, unk, rej, rev := 0, 0, 0, 0
	for _, in := range ct.m.inputOrder {
		switch {
		case in.ok > 0:
			ok++
		case in.unknown > 0:
			unk++
		default:
			rej++
		}
		rev += len(in.revokes)
	}
	nsess := len(ct.m.sessions)
	ct.m.mu.Unlock()
	t.Logf("%d kills, %d requests, %d sessions, inputs: %d admitted (2xx), %d unknown, %d rejected; %d revokes; %v",
		stats.kills, stats.requests, nsess, ok, unk, rej, rev, time.Since(start).Round(time.Millisecond))
	t.Logf("coverage: %d inputs pending at a kill were delivered after the restart; %d running turns were closed as interrupted by a restart; cancelled inputs by reason: revoked %d, aborted %d",
		len(ct.resumedInputs), len(ct.restartedTurns), len(ct.cancelReasons["revoked"]), len(ct.cancelReasons["aborted"]))
}

// keepOnFailure copies the logs and the data directory of a failed run
// where they survive the test, and prints the log tails of the first
// violating cycle (the killed run and the restart).
func (ct *crashTest) keepOnFailure() {
	if !ct.t.Failed() {
		return
	}
	dir := *flagKeep
	if dir == "" {
		d, err := os.MkdirTemp("", fmt.Sprintf("crashtest-fail-%d-", ct.seed))
		if err != nil {
			return
		}
		dir = d
	}
	_ = copyTree(ct.logDir, filepath.Join(dir, "logs"))
	_ = copyTree(ct.dataDir, filepath.Join(dir, "data"))
	ct.t.Logf("logs and data directory of the failed run kept in %s", dir)
	if c := ct.v.first; c >= 0 {
		for _, i := range []int{c - 1, c} {
			if i >= 0 && i < len(ct.logs) {
				ct.t.Logf("server log of cycle %d:\n%s", i, tail(ct.logs[i], 60))
			}
		}
	}
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
}

// ---- load ------------------------------------------------------------------------

type worker struct {
	ct    *crashTest
	cycle int
	n     int
	cl    *client
	rng   *rand.Rand
	reqs  int
}

// load drives the server from several goroutines and kills it with SIGKILL
// 10-300 ms after the load started. Before the kill, at a random moment,
// it snapshots every session's history; one SSE stream tails one session.
func (ct *crashTest) load(cycle int, cl *client, srv *server) int {
	killAfter := time.Duration(10+ct.rng.IntN(291)) * time.Millisecond
	snapAt := time.Duration(ct.rng.Int64N(int64(killAfter)))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	workers := make([]*worker, numWorkers)
	start := time.Now()
	for i := range workers {
		w := &worker{ct: ct, cycle: cycle, n: i, cl: cl, rng: rand.New(rand.NewPCG(ct.seed, uint64(cycle*100+i+1)))}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.step()
				time.Sleep(time.Duration(w.rng.IntN(6000)) * time.Microsecond) // the load's random pacing
			}
		}()
	}

	// An SSE stream tails one session's log from a random cursor.
	ct.tail = nil
	if ss := ct.m.usableSessions(); len(ss) > 0 {
		s := ss[ct.rng.IntN(len(ss))]
		last := ct.seqs[s.id]
		tr := &tailRec{sid: s.id, after: ct.rng.Int64N(last + 1)}
		ct.tail = tr
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				select {
				case <-stop:
					// Frames already read stay; the server is dead by now.
					time.Sleep(50 * time.Millisecond)
					cancel()
				case <-ctx.Done():
				}
			}()
			req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/session/%s/event?after=%d", cl.base, tr.sid, tr.after), nil)
			if err != nil {
				return
			}
			resp, err := cl.hc.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return
			}
			_ = readSSE(resp.Body, func(f sseFrame) bool {
				tr.frames = append(tr.frames, f)
				return true
			})
		}()
	}

	// The snapshot runs concurrently with the load; whatever prefix of each
	// log it got before the kill must be there, byte for byte, afterwards.
	snap := map[string]*history{}
	var snapMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-time.After(snapAt):
		case <-stop:
			return
		}
		for _, s := range ct.m.usableSessions() {
			h := &history{}
			_, err := cl.fetchHistory(s.id, h, 100)
			snapMu.Lock()
			if len(h.raw) > 0 {
				snap[s.id] = h
			}
			snapMu.Unlock()
			_ = err // a session whose creation had no answer may not exist
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	time.Sleep(time.Until(start.Add(killAfter))) // the scenario: the kill at a random moment of the load
	srv.kill()
	ct.killedAt = time.Now()
	close(stop)
	wg.Wait()
	ct.snap = snap
	n := 0
	for _, w := range workers {
		n += w.reqs
	}
	return n
}

func (w *worker) pickSession() *sessRec {
	ss := w.ct.m.usableSessions()
	if len(ss) == 0 {
		return nil
	}
	return ss[w.rng.IntN(len(ss))]
}

// pickInput picks a recent input of a usable session, preferring admitted ones.
func (w *worker) pickInput(needOK bool) *inputRec {
	m := w.ct.m
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.inputOrder)
	if n == 0 {
		return nil
	}
	for range 8 {
		k := min(n, 40)
		in := m.inputOrder[n-1-w.rng.IntN(k)]
		if in.bad || (needOK && in.ok == 0) {
			continue
		}
		return in
	}
	return nil
}

func (w *worker) step() {
	ss := w.ct.m.usableSessions()
	if len(ss) < minSessions {
		w.createSession()
		return
	}
	r := w.rng.IntN(100)
	switch {
	case r < 4:
		w.createSession()
	case r < 36:
		w.promptV2()
	case r < 52:
		w.promptV1()
	case r < 59:
		w.retry()
	case r < 62:
		w.conflict()
	case r < 74:
		w.revoke()
	case r < 77:
		w.interrupt()
	case r < 89:
		w.bad()
	default:
		w.read()
	}
}

// send does one request and classifies the answer: 2 (2xx), 4 (4xx),
// 5 (5xx) or 0 (no answer).
func (w *worker) send(method, path string, body []byte) (int, []byte) {
	w.reqs++
	st, b, err := w.cl.do(method, path, body)
	if err != nil {
		return 0, nil
	}
	return st, b
}

func (w *worker) serverError(what string, st int, b []byte) {
	w.ct.v.add(w.cycle, fmt.Sprintf("5xx:%s:%d:%s", what, st, clip(b)), "%s answered %d: %s", what, st, clip(b))
}

func (w *worker) createSession() {
	m := w.ct.m
	m.mu.Lock()
	total := 0
	for _, s := range m.sessions {
		if !s.gone {
			total++
		}
	}
	var existing []*sessRec
	for _, id := range m.sessOrder {
		if s := m.sessions[id]; s.clientID && s.created {
			existing = append(existing, s)
		}
	}
	m.mu.Unlock()
	r := w.rng.IntN(100)
	if total >= maxSessions {
		if len(existing) == 0 || r < 50 {
			w.read()
			return
		}
		r = 0 // re-create an existing client-chosen ID: must answer the same session
	}
	switch {
	case r < 10 && len(existing) > 0:
		s := existing[w.rng.IntN(len(existing))]
		st, b := w.send("POST", "/api/session", mustJSON(map[string]any{"id": s.id}))
		if st >= 500 {
			w.serverError("POST /api/session (existing id)", st, b)
		}
		if st == 200 {
			var resp struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if json.Unmarshal(b, &resp) != nil || resp.Data.ID != s.id {
				w.ct.v.add(w.cycle, "recreate:"+s.id, "POST /api/session with existing id %s answered %s", s.id, clip(b))
			}
		} else if st != 0 {
			w.ct.v.add(w.cycle, "recreate-st:"+s.id, "POST /api/session with existing id %s answered %d %s", s.id, st, clip(b))
		}
	case r < 60:
		id := newID("ses")
		m.mu.Lock()
		s := &sessRec{id: id, clientID: true}
		m.sessions[id] = s
		m.sessOrder = append(m.sessOrder, id)
		m.mu.Unlock()
		// Sometimes the same creation twice at once (a client retrying
		// before the first answer): both answers must be the one session.
		var twin chan []byte
		if w.rng.IntN(4) == 0 {
			twin = make(chan []byte, 1)
			go func() {
				st, b, err := w.cl.do("POST", "/api/session", mustJSON(map[string]any{"id": id}))
				if err != nil || st != 200 {
					b = nil
				}
				twin <- b
			}()
		}
		st, b := w.send("POST", "/api/session", mustJSON(map[string]any{"id": id}))
		if st >= 500 {
			w.serverError("POST /api/session", st, b)
		}
		if twin != nil {
			if b2 := <-twin; b2 != nil && st == 200 {
				var r1, r2 struct {
					Data struct {
						ID   string `json:"id"`
						Time struct {
							Created int64 `json:"created"`
						} `json:"time"`
					} `json:"data"`
				}
				_ = json.Unmarshal(b, &r1)
				_ = json.Unmarshal(b2, &r2)
				if r1.Data != r2.Data {
					w.ct.v.add(w.cycle, "twin-create", "two concurrent POST /api/session {id:%s} both answered 200 but with different sessions (the later commit overwrote the first): %+v vs %+v",
						id, r1.Data, r2.Data)
				}
			}
		}
		if st == 200 {
			var resp struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			if json.Unmarshal(b, &resp) != nil || resp.Data.ID != id {
				w.ct.v.add(w.cycle, "create-id:"+id, "POST /api/session {id:%s} answered another session: %s", id, clip(b))
			}
			m.mu.Lock()
			s.created = true
			m.mu.Unlock()
		} else if st != 0 && st < 500 {
			w.ct.v.add(w.cycle, "create-st:"+id, "POST /api/session {id:%s} answered %d %s", id, st, clip(b))
		}
	default:
		path, v2 := "/api/session", true
		if r >= 80 {
			path, v2 = "/session", false
		}
		st, b := w.send("POST", path, []byte(`{}`))
		if st >= 500 {
			w.serverError("POST "+path, st, b)
		}
		if st == 0 || st >= 500 {
			m.mu.Lock()
			m.unknownMinted++
			m.mu.Unlock()
			return
		}
		if st != 200 {
			w.ct.v.add(w.cycle, "create-minted-st", "POST %s {} answered %d %s", path, st, clip(b))
			return
		}
		var id string
		if v2 {
			var resp struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			_ = json.Unmarshal(b, &resp)
			id = resp.Data.ID
		} else {
			var resp struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(b, &resp)
			id = resp.ID
		}
		if !strings.HasPrefix(id, "ses_") {
			w.ct.v.add(w.cycle, "create-minted-id", "POST %s {} answered no session ID: %s", path, clip(b))
			return
		}
		m.mu.Lock()
		if _, dup := m.sessions[id]; dup {
			m.mu.Unlock()
			w.ct.v.add(w.cycle, "create-minted-dup:"+id, "POST %s {} answered an existing session %s", path, id)
			return
		}
		m.sessions[id] = &sessRec{id: id, created: true}
		m.sessOrder = append(m.sessOrder, id)
		m.mu.Unlock()
	}
}

func (w *worker) text(id string) string {
	return fmt.Sprintf("c%d w%d %s", w.cycle, w.n, id[len(id)-8:])
}

func (w *worker) delivery() (sent, effective string) {
	switch w.rng.IntN(5) {
	case 0:
		return "", "steer"
	case 1, 2:
		return "steer", "steer"
	default:
		return "queue", "queue"
	}
}

// admit sends the canonical body of a new input and records the outcome.
func (w *worker) admit(in *inputRec) {
	in.sentAt = time.Now()
	w.ct.m.addInput(in)
	w.resend(in)
}

// resend sends in's canonical body (a first send or a retry).
func (w *worker) resend(in *inputRec) {
	m := w.ct.m
	m.mu.Lock()
	hadOK := in.ok > 0
	m.mu.Unlock()
	st, b := w.send("POST", in.path, in.body)
	if st >= 500 {
		w.serverError("POST "+in.path, st, b)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case st >= 200 && st < 300:
		if in.ok == 0 {
			in.firstAck = time.Now()
		}
		in.ok++
	case st == 0 || st >= 500:
		in.unknown++
	default:
		in.rejected = append(in.rejected, st)
		if hadOK {
			w.ct.v.add(w.cycle, "retry-rejected:"+in.id, "retry of admitted input %s (session %s) with the same content answered %d %s (want 2xx: admission is idempotent)",
				in.id, in.sid, st, clip(b))
		} else if st != http.StatusNotFound && !(st == http.StatusConflict && in.revokesSent > 0) {
			w.ct.v.add(w.cycle, "admit-rejected:"+in.id, "admission of input %s (session %s) answered %d %s",
				in.id, in.sid, st, clip(b))
		}
	}
	if st == 200 && strings.HasPrefix(in.path, "/api/") {
		var resp struct {
			Data struct {
				ID        string `json:"id"`
				SessionID string `json:"sessionID"`
			} `json:"data"`
		}
		if json.Unmarshal(b, &resp) != nil || resp.Data.ID != in.id || resp.Data.SessionID != in.sid {
			w.ct.v.add(w.cycle, "admit-answer:"+in.id, "v2 prompt %s answered %s", in.id, clip(b))
		}
	}
}

func (w *worker) promptV2() {
	s := w.pickSession()
	if s == nil {
		return
	}
	id := newID("msg")
	d, eff := w.delivery()
	body := map[string]any{"id": id, "prompt": map[string]any{"text": w.text(id)}}
	if d != "" {
		body["delivery"] = d
	}
	w.admit(&inputRec{id: id, sid: s.id, text: w.text(id), delivery: eff, cycle: w.cycle,
		path: "/api/session/" + s.id + "/prompt", body: mustJSON(body)})
}

func (w *worker) promptV1() {
	s := w.pickSession()
	if s == nil {
		return
	}
	id := newID("msg")
	d, eff := w.delivery()
	body := map[string]any{"messageID": id, "parts": []any{map[string]any{"type": "text", "text": w.text(id)}}}
	if d != "" {
		body["delivery"] = d
	}
	w.admit(&inputRec{id: id, sid: s.id, text: w.text(id), delivery: eff, cycle: w.cycle,
		path: "/session/" + s.id + "/prompt_async", body: mustJSON(body)})
}

func (w *worker) retry() {
	if in := w.pickInput(false); in != nil {
		w.resend(in)
	}
}

// conflict reuses an admitted input's ID with other content: 409, and the
// original content stays.
func (w *worker) conflict() {
	in := w.pickInput(true)
	if in == nil {
		return
	}
	var body []byte
	other := "other " + w.text(newID("msg"))
	if strings.HasPrefix(in.path, "/api/") {
		body = mustJSON(map[string]any{"id": in.id, "prompt": map[string]any{"text": other}, "delivery": in.delivery})
	} else {
		body = mustJSON(map[string]any{"messageID": in.id, "parts": []any{map[string]any{"type": "text", "text": other}},
			"delivery": in.delivery})
	}
	st, b := w.send("POST", in.path, body)
	if st >= 500 {
		w.serverError("POST "+in.path+" (conflicting reuse)", st, b)
	}
	w.ct.m.mu.Lock()
	in.conflicts = append(in.conflicts, st)
	w.ct.m.mu.Unlock()
	if st != 0 && st != http.StatusConflict {
		w.ct.v.add(w.cycle, "conflict:"+in.id, "reusing admitted ID %s (session %s) with different content answered %d %s (want 409)",
			in.id, in.sid, st, clip(b))
	}
}

func (w *worker) revoke() {
	in := w.pickInput(w.rng.IntN(5) > 0)
	if in == nil {
		return
	}
	m := w.ct.m
	m.mu.Lock()
	rv := revokeRec{cycle: w.cycle, sentAt: time.Now(), afterAck: in.ok > 0}
	in.revokesSent++
	m.mu.Unlock()
	path := "/api/session/" + in.sid + "/inbox/" + in.id
	if w.rng.IntN(3) == 0 {
		path = "/session/" + in.sid + "/inbox/" + in.id
	}
	st, b := w.send("DELETE", path, nil)
	if st >= 500 {
		w.serverError("DELETE "+path, st, b)
	}
	rv.status = st
	if st == 200 {
		var resp struct {
			Revoked *bool `json:"revoked"`
		}
		if json.Unmarshal(b, &resp) != nil || resp.Revoked == nil {
			w.ct.v.add(w.cycle, "revoke-answer:"+in.id, "DELETE %s answered 200 %s", path, clip(b))
		} else {
			rv.revoked = resp.Revoked
			if !*resp.Revoked {
				w.ct.v.add(w.cycle, "revoke-false:"+in.id, "DELETE %s answered revoked:false", path)
			}
		}
	} else if st != 0 && st != http.StatusConflict && st < 500 && !(st == http.StatusNotFound && in.ok == 0) {
		w.ct.v.add(w.cycle, "revoke-st:"+in.id, "DELETE %s answered %d %s", path, st, clip(b))
	}
	m.mu.Lock()
	in.revokes = append(in.revokes, rv)
	m.mu.Unlock()
}

func (w *worker) interrupt() {
	s := w.pickSession()
	if s == nil {
		return
	}
	m := w.ct.m
	m.mu.Lock()
	s.interrupts = append(s.interrupts, time.Now().Add(1000*time.Hour))
	slot := len(s.interrupts) - 1
	known := s.created
	m.mu.Unlock()
	path := "/api/session/" + s.id + "/interrupt"
	if w.rng.IntN(3) == 0 {
		path = "/session/" + s.id + "/abort"
	}
	st, b := w.send("POST", path, nil)
	if st != 0 {
		m.mu.Lock()
		s.interrupts[slot] = time.Now()
		m.mu.Unlock()
	}
	if st >= 500 {
		w.serverError("POST "+path, st, b)
	}
	if st != 0 && st < 500 && (st < 200 || st >= 300) && !(st == http.StatusNotFound && !known) {
		w.ct.v.add(w.cycle, "interrupt-st:"+path, "POST %s answered %d %s", path, st, clip(b))
	}
}

// bad sends a request that must be rejected with a 4xx; the message ID in
// it must never exist.
func (w *worker) bad() {
	s := w.pickSession()
	if s == nil {
		return
	}
	id := newID("msg")
	text := w.text(id)
	in := &inputRec{id: id, sid: s.id, text: text, delivery: "steer", bad: true, cycle: w.cycle}
	v2 := "/api/session/" + s.id + "/prompt"
	v1 := "/session/" + s.id + "/prompt_async"
	switch w.rng.IntN(8) {
	case 0:
		in.badKind, in.id = "v2 wrong ID prefix", "prt"+id[3:]
		in.path, in.body = v2, mustJSON(map[string]any{"id": in.id, "prompt": map[string]any{"text": text}})
	case 1:
		in.badKind = "v2 malformed JSON"
		in.path, in.body = v2, []byte(`{"id":"`+id+`","prompt":{"text":"`+text+`"},"delivery":"queue"`)
	case 2:
		// (Unknown fields are ignored, as OpenCode ignores them; a known
		// field of the wrong type is refused.)
		in.badKind = "v2 mistyped field"
		in.path, in.body = v2, mustJSON(map[string]any{"id": id, "prompt": map[string]any{"text": text}, "delivery": 7})
	case 3:
		in.badKind = "v2 invalid delivery"
		in.path, in.body = v2, mustJSON(map[string]any{"id": id, "prompt": map[string]any{"text": text}, "delivery": "later"})
	case 4:
		in.badKind, in.id = "v1 wrong ID prefix", "ses"+id[3:]
		in.path, in.body = v1, mustJSON(map[string]any{"messageID": in.id, "parts": []any{map[string]any{"type": "text", "text": text}}})
	case 5:
		in.badKind = "v1 text part without text"
		in.path, in.body = v1, mustJSON(map[string]any{"messageID": id, "parts": []any{map[string]any{"type": "text"}}})
	case 6:
		in.badKind = "v2 unknown session"
		in.sid = newID("ses")
		in.path, in.body = "/api/session/"+in.sid+"/prompt", mustJSON(map[string]any{"id": id, "prompt": map[string]any{"text": text}})
	default:
		in.badKind = "v2 without prompt"
		in.path, in.body = v2, mustJSON(map[string]any{"id": id, "delivery": "steer"})
	}
	in.sentAt = time.Now()
	w.ct.m.addInput(in)
	st, b := w.send("POST", in.path, in.body)
	w.ct.m.mu.Lock()
	switch {
	case st == 0 || st >= 500:
		in.unknown++
	case st >= 400 && st < 500:
		in.rejected = append(in.rejected, st)
	default:
		in.ok++
	}
	w.ct.m.mu.Unlock()
	if st != 0 && (st < 400 || st >= 500) {
		w.ct.v.add(w.cycle, "bad:"+in.badKind+fmt.Sprint(st), "bad request (%s) POST %s %s answered %d %s (want 4xx)",
			in.badKind, in.path, in.body, st, clip(b))
	}
}

func (w *worker) read() {
	s := w.pickSession()
	if s == nil {
		return
	}
	paths := []string{"/api/session/" + s.id + "/inbox", "/session/status", "/api/session/" + s.id + "/history?limit=5",
		"/session/" + s.id + "/message?limit=3", "/session/" + s.id + "/inbox"}
	p := paths[w.rng.IntN(len(paths))]
	st, b := w.send("GET", p, nil)
	if st >= 500 {
		w.serverError("GET "+p, st, b)
	}
}

// ---- verification after a restart --------------------------------------------

// logIndex is what the durable logs say about inputs and steps.
type logIndex struct {
	admitted  map[string][]string // messageID -> sessions with a prompt.admitted
	enqueued  map[string]int
	prompted  map[string]int
	delivered map[string][]string
	cancelled map[string][]string // messageID -> reasons
	stepStart map[string]int      // assistant message ID -> count
	stepEnd   map[string]int      // step.ended + step.failed
	stepFail  map[string]int
}

func newLogIndex() *logIndex {
	return &logIndex{admitted: map[string][]string{}, enqueued: map[string]int{}, prompted: map[string]int{},
		delivered: map[string][]string{}, cancelled: map[string][]string{}, stepStart: map[string]int{},
		stepEnd: map[string]int{}, stepFail: map[string]int{}}
}

// pending returns the inputs of a log admitted but neither delivered nor
// cancelled, and the steps started but not ended.
func pendingOf(h *history) (pending, open []string) {
	state := map[string]string{}
	var order []string
	steps := map[string]bool{}
	var stepOrder []string
	for _, e := range h.evs {
		switch e.Type {
		case "session.next.prompt.admitted":
			if _, ok := state[e.Data.MessageID]; !ok {
				order = append(order, e.Data.MessageID)
			}
			state[e.Data.MessageID] = "pending"
		case "session.inbox.delivered", "session.inbox.cancelled":
			state[e.Data.MessageID] = "done"
		case "session.next.step.started":
			steps[e.Data.AssistantMessageID] = true
			stepOrder = append(stepOrder, e.Data.AssistantMessageID)
		case "session.next.step.ended", "session.next.step.failed":
			delete(steps, e.Data.AssistantMessageID)
		}
	}
	for _, id := range order {
		if state[id] == "pending" {
			pending = append(pending, id)
		}
	}
	for _, id := range stepOrder {
		if steps[id] {
			open = append(open, id)
		}
	}
	return pending, open
}

func (ct *crashTest) verify(cycle int, cl *client) {
	v := ct.v
	// Sessions, as the restarted server lists them.
	var listed []struct {
		ID string `json:"id"`
	}
	if err := cl.getJSON("/session", &listed); err != nil {
		v.add(cycle, "list:"+err.Error(), "GET /session after restart: %v", err)
		return
	}
	ids := make([]string, 0, len(listed))
	seen := map[string]bool{}
	for _, s := range listed {
		if seen[s.ID] {
			v.add(cycle, "dup-session:"+s.ID, "GET /session lists session %s twice", s.ID)
		}
		seen[s.ID] = true
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)

	// 1. The restarted server settles by itself: every admitted input is
	// delivered (or was revoked), every step is closed, nothing is busy,
	// without a client touching the sessions (only the status and the logs
	// are read here, and neither starts a session's runner).
	hist := map[string]*history{}
	for _, id := range ids {
		hist[id] = &history{}
	}
	var lastStatus map[string]any
	var lastPending, lastOpen map[string][]string
	// Page sizes vary, but no log is read in more than ~40 pages.
	var longest int64
	for _, n := range ct.seqs {
		longest = max(longest, n)
	}
	pageSize := func(n int) int { return min(100, max(n, int(longest/40)+1)) }
	firstLimit := pageSize([]int{100, 1, 7, 33, 100}[ct.rng.IntN(5)])
	settled := poll(25*time.Second, 20*time.Millisecond, func() bool {
		lastStatus = map[string]any{}
		if err := cl.getJSON("/session/status", &lastStatus); err != nil {
			v.add(cycle, "status-err", "GET /session/status: %v", err)
			return false
		}
		clear := len(lastStatus) == 0
		lastPending, lastOpen = map[string][]string{}, map[string][]string{}
		for _, id := range ids {
			probs, err := cl.fetchHistory(id, hist[id], firstLimit)
			for _, p := range probs {
				v.add(cycle, "hist:"+id+p, "%s", p)
			}
			if err != nil {
				v.add(cycle, "hist-err:"+id, "history of %s: %v", id, err)
				clear = false
				continue
			}
			p, o := pendingOf(hist[id])
			if len(p) > 0 {
				lastPending[id] = p
				clear = false
			}
			if len(o) > 0 {
				lastOpen[id] = o
				clear = false
			}
		}
		return clear
	})
	if !settled {
		v.add(cycle, fmt.Sprintf("not-settled:%d", cycle),
			"the restarted server did not settle by itself within 25s: status=%v pending inputs=%v open steps=%v",
			lastStatus, lastPending, lastOpen)
	}

	// 2. Each session goes idle when asked, its inbox is empty, nothing is busy.
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b, err := cl.doTimeout("POST", "/api/session/"+id+"/wait", nil, 30*time.Second)
			if err != nil || st != http.StatusNoContent {
				v.add(cycle, "wait:"+id, "POST /api/session/%s/wait after restart: %d %v %s (want 204 within 30s)", id, st, err, clip(b))
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		var inbox struct {
			Data []struct {
				ID       string `json:"id"`
				Delivery string `json:"delivery"`
			} `json:"data"`
		}
		if err := cl.getJSON("/api/session/"+id+"/inbox", &inbox); err != nil {
			v.add(cycle, "inbox-err:"+id, "GET inbox of %s: %v", id, err)
		} else if len(inbox.Data) > 0 {
			v.add(cycle, fmt.Sprintf("inbox:%s:%d", id, cycle), "session %s still has %d pending inputs after it went idle: %+v", id, len(inbox.Data), inbox.Data)
		}
		var sess struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := cl.getJSON("/api/session/"+id, &sess); err != nil || sess.Data.ID != id {
			v.add(cycle, "get-session:"+id, "GET /api/session/%s after restart: %v id=%q", id, err, sess.Data.ID)
		}
	}
	status := map[string]any{}
	if err := cl.getJSON("/session/status", &status); err != nil || len(status) != 0 {
		v.add(cycle, fmt.Sprintf("busy-end:%d", cycle), "GET /session/status after every session went idle: %v %v (want {})", status, err)
	}
	for _, id := range ids {
		probs, err := cl.fetchHistory(id, hist[id], 100)
		for _, p := range probs {
			v.add(cycle, "hist:"+id+p, "%s", p)
		}
		if err != nil {
			v.add(cycle, "hist-err:"+id, "history of %s: %v", id, err)
		}
	}

	// 3. Paging with another page size gives the same bytes.
	for _, id := range ids {
		lim := pageSize(1 + ct.rng.IntN(100))
		h2 := &history{}
		probs, err := cl.fetchHistory(id, h2, lim)
		for _, p := range probs {
			v.add(cycle, "hist2:"+id+p, "%s", p)
		}
		if err != nil {
			continue
		}
		h := hist[id]
		if len(h2.raw) != len(h.raw) {
			v.add(cycle, fmt.Sprintf("page-len:%s:%d", id, cycle), "session %s: history paged by %d has %d events, paged by %d had %d",
				id, lim, len(h2.raw), firstLimit, len(h.raw))
		}
		for i := range min(len(h.raw), len(h2.raw)) {
			if !bytes.Equal(h.raw[i], h2.raw[i]) {
				v.add(cycle, fmt.Sprintf("page-bytes:%s:%d", id, i+1), "session %s seq %d differs between two reads:\n%s\n%s", id, i+1, h.raw[i], h2.raw[i])
				break
			}
		}
	}

	// 4. Replay before and after the restart agree.
	for id, snap := range ct.snap {
		h := hist[id]
		if h == nil {
			v.add(cycle, "snap-session:"+id, "session %s (history had %d events before the kill) is missing after the restart", id, len(snap.raw))
			continue
		}
		for i, raw := range snap.raw {
			if i >= len(h.raw) {
				v.add(cycle, fmt.Sprintf("snap-lost:%s:%d", id, i+1), "session %s: event seq %d returned before the kill is gone after the restart (log ends at %d): %s",
					id, i+1, len(h.raw), clip(raw))
				break
			}
			if !bytes.Equal(raw, h.raw[i]) {
				v.add(cycle, fmt.Sprintf("snap-diff:%s:%d", id, i+1), "session %s: event seq %d differs before and after the restart:\nbefore %s\nafter  %s",
					id, i+1, raw, h.raw[i])
				break
			}
		}
	}
	if tr := ct.tail; tr != nil {
		h := hist[tr.sid]
		for k, f := range tr.frames {
			seq := tr.after + int64(k) + 1
			if sseSeq(f) != seq {
				v.add(cycle, fmt.Sprintf("tail-seq:%s:%d", tr.sid, seq), "SSE /api/session/%s/event?after=%d before the kill: frame %d has id %q, want %d",
					tr.sid, tr.after, k, f.id, seq)
				break
			}
			if h == nil || seq > h.lastSeq() {
				v.add(cycle, fmt.Sprintf("tail-lost:%s:%d", tr.sid, seq), "SSE streamed seq %d of session %s before the kill; it is not in the log after the restart: %s",
					seq, tr.sid, clip(f.data))
				break
			}
			if !bytes.Equal(f.data, h.raw[seq-1]) {
				v.add(cycle, fmt.Sprintf("tail-diff:%s:%d", tr.sid, seq), "SSE frame seq %d of session %s before the kill differs from the history after the restart:\nsse     %s\nhistory %s",
					seq, tr.sid, f.data, h.raw[seq-1])
				break
			}
		}
	}
	ct.checkSSEReplay(cycle, cl, ids, hist)

	ct.seqs = map[string]int64{}
	for id, h := range hist {
		ct.seqs[id] = h.lastSeq()
	}

	// 5. Messages and logs agree; the client's records hold.
	ct.checkState(cycle, cl, ids, seen, hist)
}

// checkSSEReplay reads one session's /api/session/{id}/event from a random
// cursor up to its last seq and compares it with the history.
func (ct *crashTest) checkSSEReplay(cycle int, cl *client, ids []string, hist map[string]*history) {
	var cands []string
	for _, id := range ids {
		if hist[id].lastSeq() > 0 {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return
	}
	id := cands[ct.rng.IntN(len(cands))]
	h := hist[id]
	after := ct.rng.Int64N(h.lastSeq())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/session/%s/event?after=%d", cl.base, id, after), nil)
	if err != nil {
		return
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		ct.v.add(cycle, "sse-replay-err:"+id, "GET /api/session/%s/event?after=%d: %v", id, after, err)
		return
	}
	defer resp.Body.Close()
	next := after + 1
	err = readSSE(resp.Body, func(f sseFrame) bool {
		if sseSeq(f) != next {
			ct.v.add(cycle, fmt.Sprintf("sse-replay-seq:%s:%d", id, next), "SSE replay of %s after=%d: got id %q, want %d", id, after, f.id, next)
			return false
		}
		if !bytes.Equal(f.data, h.raw[next-1]) {
			ct.v.add(cycle, fmt.Sprintf("sse-replay-diff:%s:%d", id, next), "SSE replay of %s seq %d differs from history:\nsse     %s\nhistory %s",
				id, next, f.data, h.raw[next-1])
			return false
		}
		next++
		return next <= h.lastSeq()
	})
	if err != nil && next <= h.lastSeq() {
		ct.v.add(cycle, "sse-replay-short:"+id, "SSE replay of %s after=%d ended at seq %d of %d: %v", id, after, next-1, h.lastSeq(), err)
	}
}

// checkState checks messages against logs, and both against what the
// client was answered.
func (ct *crashTest) checkState(cycle int, cl *client, ids []string, listed map[string]bool, hist map[string]*history) {
	v := ct.v
	li := newLogIndex()
	userMsgs := map[string][]v1Message{} // message ID -> user messages (any session)
	allMsgIDs := map[string]string{}
	for _, sid := range ids {
		h := hist[sid]
		for _, e := range h.evs {
			mid := e.Data.MessageID
			switch e.Type {
			case "session.next.prompt.admitted":
				li.admitted[mid] = append(li.admitted[mid], sid)
			case "session.inbox.enqueued":
				li.enqueued[mid]++
			case "session.next.prompted":
				li.prompted[mid]++
			case "session.inbox.delivered":
				li.delivered[mid] = append(li.delivered[mid], sid)
			case "session.inbox.cancelled":
				li.cancelled[mid] = append(li.cancelled[mid], e.Data.Reason)
				if ct.cancelReasons[e.Data.Reason] == nil {
					ct.cancelReasons[e.Data.Reason] = map[string]bool{}
				}
				ct.cancelReasons[e.Data.Reason][mid] = true
			case "session.next.step.started":
				li.stepStart[e.Data.AssistantMessageID]++
			case "session.next.step.ended":
				li.stepEnd[e.Data.AssistantMessageID]++
			case "session.next.step.failed":
				li.stepEnd[e.Data.AssistantMessageID]++
				li.stepFail[e.Data.AssistantMessageID]++
			}
		}
		var msgs []v1Message
		if err := cl.getJSON("/session/"+sid+"/message", &msgs); err != nil {
			v.add(cycle, "msgs-err:"+sid, "GET /session/%s/message: %v", sid, err)
			continue
		}
		// Every user message is answered: no input is delivered into a turn
		// that then neither ran nor was closed (the session's last message is
		// an assistant message, and each assistant message answers an earlier
		// user message of the session).
		if n := len(msgs); n > 0 && msgs[n-1].Info.Role != "assistant" {
			var unanswered []string
			for i := n - 1; i >= 0 && msgs[i].Info.Role == "user"; i-- {
				unanswered = append(unanswered, msgs[i].Info.ID)
			}
			v.add(cycle, "unanswered:"+msgs[n-1].Info.ID, "session %s: user message(s) %v were delivered but no assistant message follows them after the restart settled: the turn neither ran nor was closed as interrupted (session log ends with %s)",
				sid, unanswered, lastTypes(hist[sid], 6))
		}
		users := map[string]bool{}
		for _, mp := range msgs {
			switch mp.Info.Role {
			case "user":
				users[mp.Info.ID] = true
			case "assistant":
				if !users[mp.Info.ParentID] {
					v.add(cycle, "parent:"+mp.Info.ID, "session %s: assistant message %s has parentID %q, not an earlier user message of the session", sid, mp.Info.ID, mp.Info.ParentID)
				}
			}
		}
		for _, mp := range msgs {
			id := mp.Info.ID
			if other, dup := allMsgIDs[id]; dup {
				v.add(cycle, "dup-msg:"+id, "message %s appears twice (sessions %s and %s)", id, other, sid)
			}
			allMsgIDs[id] = sid
			if mp.Info.SessionID != sid {
				v.add(cycle, "msg-sess:"+id, "message %s listed in session %s has sessionID %s", id, sid, mp.Info.SessionID)
			}
			switch mp.Info.Role {
			case "user":
				userMsgs[id] = append(userMsgs[id], mp)
				if len(li.delivered[id]) == 0 {
					v.add(cycle, "user-no-delivered:"+id, "session %s: user message %s has no session.inbox.delivered event", sid, id)
				}
			case "assistant":
				if mp.Info.Time.Completed == nil {
					v.add(cycle, "open-assistant:"+id, "session %s: assistant message %s has no time.completed after the restart settled", sid, id)
				}
				if li.stepStart[id] != 1 {
					v.add(cycle, "asst-start:"+id, "session %s: assistant message %s has %d step.started events (want 1)", sid, id, li.stepStart[id])
				}
				if mp.Info.Error != nil {
					if msg, _ := mp.Info.Error.Data["message"].(string); strings.HasPrefix(msg, "Interrupted by server restart") {
						ct.restartedTurns[id] = true
					}
				}
				if mp.Info.Error != nil && li.stepFail[id] == 0 {
					v.add(cycle, "asst-err-nofail:"+id, "session %s: assistant message %s ended with %s %v but the log has no step.failed",
						sid, id, mp.Info.Error.Name, mp.Info.Error.Data)
				}
				if mp.Info.Error == nil && li.stepFail[id] > 0 {
					v.add(cycle, "asst-fail-noerr:"+id, "session %s: the log has step.failed for assistant message %s, which has no error", sid, id)
				}
			}
		}
	}
	// Inputs admitted before the kill and delivered after the restart.
	kill := ct.killedAt.UnixMilli()
	for _, sid := range ids {
		adm := map[string]int64{}
		for _, e := range hist[sid].evs {
			switch e.Type {
			case "session.next.prompt.admitted":
				adm[e.Data.MessageID] = e.Data.Timestamp
			case "session.inbox.delivered":
				if t, ok := adm[e.Data.MessageID]; ok && t <= kill && e.Data.Timestamp > kill {
					ct.resumedInputs[e.Data.MessageID] = true
				}
			}
		}
	}

	// The logs on their own.
	for id, n := range li.stepStart {
		if n != 1 || li.stepEnd[id] != 1 {
			v.add(cycle, "step-count:"+id, "assistant message %s: %d step.started and %d step.ended/failed events (want 1 and 1)", id, n, li.stepEnd[id])
		}
		if _, ok := allMsgIDs[id]; !ok {
			v.add(cycle, "step-nomsg:"+id, "step.started for %s, but there is no such assistant message", id)
		}
	}
	for id, ss := range li.admitted {
		if len(ss) != 1 || li.enqueued[id] != 1 {
			v.add(cycle, "admit-count:"+id, "input %s: prompt.admitted in sessions %v, %d inbox.enqueued (want exactly one each)", id, ss, li.enqueued[id])
		}
		nd, nc := len(li.delivered[id]), len(li.cancelled[id])
		if nd+nc != 1 {
			v.add(cycle, "admit-fate:"+id, "input %s (session %v): %d delivered and %d cancelled events (want exactly one of them)", id, ss, nd, nc)
		}
		if li.prompted[id] != nd {
			v.add(cycle, "prompted:"+id, "input %s: %d session.next.prompted but %d delivered events", id, li.prompted[id], nd)
		}
		if nd == 1 && len(userMsgs[id]) != 1 {
			v.add(cycle, "delivered-msg:"+id, "input %s was delivered but has %d user messages (want 1)", id, len(userMsgs[id]))
		}
		if nc > 0 && len(userMsgs[id]) > 0 {
			v.add(cycle, "cancelled-msg:"+id, "input %s was cancelled (%v) but has a user message", id, li.cancelled[id])
		}
	}
	for id := range li.delivered {
		if len(li.admitted[id]) == 0 {
			v.add(cycle, "delivered-unadmitted:"+id, "input %s delivered without a prompt.admitted event", id)
		}
	}

	// Sessions against the client's records.
	m := ct.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range m.sessOrder {
		s := m.sessions[id]
		if s.created && !listed[id] {
			v.add(cycle, "session-lost:"+id, "session %s (created with a 2xx) is missing after the restart", id)
		}
		if !s.created && listed[id] {
			s.created = true // its creation had no answer but it happened
		}
		if !s.created && !listed[id] {
			s.gone = true // its creation had no answer and did not happen
		}
	}
	for _, id := range ids {
		if _, ok := m.sessions[id]; ok {
			continue
		}
		m.discovered++
		if m.discovered > m.unknownMinted {
			v.add(cycle, "session-extra:"+id, "session %s exists, but no creation without an answer can explain it (%d unanswered creations, %d unexplained sessions)",
				id, m.unknownMinted, m.discovered)
		}
		m.sessions[id] = &sessRec{id: id, created: true}
		m.sessOrder = append(m.sessOrder, id)
	}

	// Inputs against the client's records.
	for _, in := range m.inputOrder {
		adm := li.admitted[in.id]
		users := userMsgs[in.id]
		if in.bad || (in.ok == 0 && in.unknown == 0) {
			if len(adm) > 0 || len(users) > 0 {
				v.add(cycle, "rejected-exists:"+in.id, "input %s was rejected (%s, answers %v) but exists: admitted in %v, %d user messages; request POST %s %s",
					in.id, in.badKind, in.rejected, adm, len(users), in.path, in.body)
			}
			continue
		}
		if len(adm) > 1 || len(users) > 1 {
			v.add(cycle, "twice:"+in.id, "input %s exists twice: admitted in %v, %d user messages", in.id, adm, len(users))
		}
		if len(adm) > 0 && adm[0] != in.sid {
			v.add(cycle, "wrong-session:"+in.id, "input %s sent to session %s was admitted in %s", in.id, in.sid, adm[0])
		}
		for _, u := range users {
			if u.text() != in.text {
				v.add(cycle, "text:"+in.id, "user message %s has text %q; it was admitted with %q (conflicting reuses answered %v)",
					in.id, u.text(), in.text, in.conflicts)
			}
		}
		delivered := len(li.delivered[in.id]) > 0
		cancelled := li.cancelled[in.id]
		if in.ok > 0 {
			if len(adm) == 0 {
				v.add(cycle, "lost:"+in.id, "LOST: input %s (session %s, %s, %s) was admitted with a 2xx (at %s, sent in cycle %d) but is not in the log after the restart; user messages: %d",
					in.id, in.sid, in.delivery, in.path, in.firstAck.Format("15:04:05.000"), in.cycle, len(users))
				continue
			}
			if !delivered && len(cancelled) == 0 {
				continue // reported as pending above (admit-fate) and by settle
			}
			if delivered && len(users) != 1 {
				v.add(cycle, "ok-msg:"+in.id, "input %s admitted with a 2xx and delivered has %d user messages", in.id, len(users))
			}
		}
		for _, reason := range cancelled {
			switch reason {
			case "revoked":
				if len(in.revokes) == 0 {
					v.add(cycle, "cancel-unjustified:"+in.id, "input %s was cancelled as revoked, but the client never revoked it", in.id)
				}
			case "aborted":
				s := m.sessions[in.sid]
				justified := false
				if s != nil && in.delivery == "steer" {
					for _, at := range s.interrupts {
						if at.After(in.sentAt) {
							justified = true
						}
					}
				}
				if !justified {
					v.add(cycle, "cancel-unjustified:"+in.id, "input %s (%s) was cancelled by an abort, but every interrupt of session %s was answered before the input was sent",
						in.id, in.delivery, in.sid)
				}
			default:
				v.add(cycle, "cancel-reason:"+in.id, "input %s was cancelled with reason %q", in.id, reason)
			}
		}
		for _, rv := range in.revokes {
			switch {
			case rv.status == 200 && rv.revoked != nil && *rv.revoked && delivered:
				// Also when the revoke overtook the admission: it left a
				// tombstone that refuses the input.
				v.add(cycle, "revoked-delivered:"+in.id, "DELETE of input %s answered revoked:true (cycle %d, after its admission was acknowledged: %v), but it was delivered (user messages: %d)",
					in.id, rv.cycle, rv.afterAck, len(users))
			case rv.status == http.StatusConflict && !delivered:
				v.add(cycle, "409-undelivered:"+in.id, "DELETE of input %s answered 409 (already delivered, cycle %d), but it was not delivered (cancelled %v)",
					in.id, rv.cycle, cancelled)
			}
		}
	}
}

// lastTypes lists the last n events of a log as seq:type.
func lastTypes(h *history, n int) string {
	var out []string
	for i := max(0, len(h.evs)-n); i < len(h.evs); i++ {
		e := h.evs[i]
		out = append(out, fmt.Sprintf("%d:%s %s%s", e.Durable.Seq, strings.TrimPrefix(e.Type, "session."), e.Data.MessageID, e.Data.AssistantMessageID))
	}
	return strings.Join(out, ", ")
}
