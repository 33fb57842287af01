package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestRandomizedInbox runs many short random sessions against the whole
// server: concurrent admissions (steer/queue, v1/v2, idempotent retries,
// conflicting retries), revokes, replaces and aborts racing turn boundaries.
// After each run the session must be idle and every invariant of the inbox
// must hold: see checkRun and checkModel.
//
// The runs are bounded by a time budget (a loaded machine runs fewer; each
// seed logs how many it ran). LIFECYCLE_SEED=n runs only seed n (memory, or
// sqlite with LIFECYCLE_STORE=sqlite) without a budget;
// LIFECYCLE_FUZZ_BUDGET=10m soaks for that long.
func TestRandomizedInbox(t *testing.T) {
	type cfg struct {
		name   string
		store  string // memory, sqlite or postgres
		seeds  []uint64
		runs   int
		lanes  int
		budget time.Duration // for all seeds; a loaded machine runs fewer
	}
	cfgs := []cfg{
		{"memory", "memory", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 400, 6, 20 * time.Second},
		{"sqlite", "sqlite", []uint64{101, 102}, 100, 4, 6 * time.Second},
		// One cluster instance on PostgreSQL: every commit is fenced by
		// the session's epoch, every event also goes to the relay.
		{"postgres", "postgres", []uint64{201, 202}, 100, 4, 8 * time.Second},
	}
	if s := os.Getenv("LIFECYCLE_FUZZ_BUDGET"); s != "" { // e.g. 10m for a soak
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[0].budget, cfgs[0].runs, cfgs[1].budget, cfgs[1].runs = d*3/5, 1<<30, d/5, 1<<30
		cfgs[2].budget, cfgs[2].runs = d/5, 1<<30
	}
	if s := os.Getenv("LIFECYCLE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		cfgs = []cfg{{"memory", "memory", []uint64{n}, 200, 8, time.Hour}}
		if st := os.Getenv("LIFECYCLE_STORE"); st == "sqlite" || st == "postgres" {
			cfgs[0].name, cfgs[0].store = st, st
		}
	}
	for _, cf := range cfgs {
		t.Run(cf.name, func(t *testing.T) {
			for _, seed := range cf.seeds {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					runs := cf.runs
					if testing.Short() {
						runs = max(runs/10, 3)
					}
					fuzzSeed(t, seed, cf.store, runs, cf.lanes, cf.budget/time.Duration(len(cf.seeds)))
				})
			}
		})
	}
}

// fuzzSeed runs `runs` random sessions on one server, `lanes` at a time;
// after budget it starts no new run (but always runs at least 5).
func fuzzSeed(t *testing.T, seed uint64, kind string, runs, lanes int, budget time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 0))
	sc := scripted.Config{Chunks: 1 + rng.IntN(2), Delay: time.Duration(1+rng.IntN(2)) * time.Millisecond}
	// Every published state event must be readable: a witness store checks
	// each one against what was committed before it went out.
	w := &storetest.Witness{}
	o := testserver.Options{SQLite: kind == "sqlite", Scripted: sc}
	if kind == "postgres" {
		pg := pgtest.Need(t)
		o.Postgres = pg.DSN(pg.FreshDB(t))
	}
	o.WrapStore = func(s store.Store) store.Store { w.Store = s; return w }
	srv := testserver.Start(t, o)
	sub := srv.Manager.Subscribe(1<<16, nil)
	var unstored []string
	witnessed := make(chan struct{})
	go func() {
		defer close(witnessed)
		for e := range sub.C {
			if err := w.Check(e); err != nil && len(unstored) < 5 {
				unstored = append(unstored, err.Error())
			}
		}
	}()
	c := newClient(t, srv)
	spares := make([]string, lanes)
	for i := range spares {
		spares[i] = c.newSession()
	}
	var (
		mu      sync.Mutex
		done    []*fuzzRun
		failed  atomic.Int32
		next    atomic.Int64
		wg      sync.WaitGroup
		started = time.Now()
	)
	for lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= runs || failed.Load() >= 3 || (i >= 5 && time.Since(started) > budget) {
					return
				}
				fr := newFuzzRun(c, seed, i, spares[lane])
				fr.play()
				fr.checkRun()
				if len(fr.errs) > 0 {
					failed.Add(1)
				}
				mu.Lock()
				done = append(done, fr)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Stop the server so every model call goroutine has recorded its request.
	srv.Stop()
	sub.Close()
	<-witnessed
	for _, u := range unstored {
		t.Errorf("seed %d: published before it was stored: %s", seed, u)
	}
	reported := 0
	for _, fr := range done {
		fr.checkModel(srv)
		if len(fr.errs) > 0 && reported < 3 {
			reported++
			t.Errorf("seed %d run %d (session %s, model %+v):\n  %s\n  log: %v", seed, fr.run, fr.sid, sc,
				strings.Join(fr.errs, "\n  "), fr.logSummary())
		}
	}
	t.Logf("seed %d: %d runs, %d inputs, %d model calls in %v", seed, len(done), countInputs(done),
		len(srv.Model.Calls()), time.Since(started).Round(time.Millisecond))
}

func countInputs(runs []*fuzzRun) int {
	n := 0
	for _, fr := range runs {
		n += len(fr.all)
	}
	return n
}

// fin is one input of a run, as the client saw it.
type fin struct {
	id       string
	text     string
	delivery string // as sent ("" = default steer)
	api      string // v2, v1async, v1sync
	reusable bool   // retried; else replaced
	visible  bool   // admission confirmed: other ops may target it
	seqs     []int64
	revokes  []revokeAnswer
	replaces []replaceAnswer
	sync     *resp
}

type revokeAnswer struct {
	status  int
	revoked bool
}

type replaceAnswer struct {
	status   int
	text     string // "" when only the delivery changed
	delivery string
}

// fuzzRun is one random session.
type fuzzRun struct {
	c     *client
	seed  uint64
	run   int
	sid   string
	spare string

	mu        sync.Mutex
	all       map[string]*fin
	visible   []*fin
	forbidden []string
	errs      []string
	texts     atomic.Int64
	syncs     sync.WaitGroup

	// filled by checkRun
	log   []durableEvent
	steps [][]string // user texts each model call must have seen
	msgs  []v1Message
	// delivered and revoked IDs, from the log
	delivered map[string]string
	revoked   map[string]string
}

func newFuzzRun(c *client, seed uint64, run int, spare string) *fuzzRun {
	fr := &fuzzRun{c: c, seed: seed, run: run, spare: spare, all: map[string]*fin{}}
	fr.sid = c.newSession()
	return fr
}

func (fr *fuzzRun) errorf(format string, args ...any) {
	fr.mu.Lock()
	fr.errs = append(fr.errs, fmt.Sprintf(format, args...))
	fr.mu.Unlock()
}

func (fr *fuzzRun) uniq(kind string) string {
	return fmt.Sprintf("%s-s%d-r%d-%d", kind, fr.seed, fr.run, fr.texts.Add(1))
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

// play runs 1-4 goroutines of 2-6 random operations each.
func (fr *fuzzRun) play() {
	rng := rand.New(rand.NewPCG(fr.seed, uint64(fr.run)+1))
	g := 1 + rng.IntN(4)
	var wg sync.WaitGroup
	for i := range g {
		r := rand.New(rand.NewPCG(fr.seed, uint64(fr.run)<<8+uint64(i)+1000))
		ops := 2 + r.IntN(5)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range ops {
				fr.op(r)
				if d := r.IntN(8); d > 0 { // random pacing between operations (the scenario)
					time.Sleep(time.Duration(d) * time.Millisecond / 2)
				}
			}
		}()
	}
	wg.Wait()
	fr.syncs.Wait()
}

func (fr *fuzzRun) pickVisible(rng *rand.Rand, want func(*fin) bool) *fin {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var c []*fin
	for _, in := range fr.visible {
		if want(in) {
			c = append(c, in)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rng.IntN(len(c))]
}

func (fr *fuzzRun) publish(in *fin) {
	fr.mu.Lock()
	if !in.visible {
		in.visible = true
		fr.visible = append(fr.visible, in)
	}
	fr.mu.Unlock()
}

func (fr *fuzzRun) op(rng *rand.Rand) {
	ctx := context.Background()
	sid := fr.sid
	switch k := rng.IntN(100); {
	case k < 40:
		fr.admit(rng)
	case k < 52: // idempotent or conflicting retry
		in := fr.pickVisible(rng, func(in *fin) bool { return in.reusable })
		if in == nil {
			fr.admit(rng)
			return
		}
		text, target, want := in.text, sid, 200
		switch x := rng.IntN(10); {
		case x < 2:
			text, want = fr.uniq("conflict"), 409
		case x < 3:
			target, want = fr.spare, 409
		}
		if text != in.text {
			fr.mu.Lock()
			fr.forbidden = append(fr.forbidden, text)
			fr.mu.Unlock()
		}
		delivery := in.delivery
		if delivery == "" && rng.IntN(2) == 0 {
			delivery = "steer"
		}
		if rng.IntN(2) == 0 {
			r := fr.c.do(ctx, "POST", "/api/session/"+target+"/prompt", v2Body(in.id, text, delivery))
			if r.Err != nil || r.Status != want {
				fr.errorf("v2 retry of %s (want %d): %v %s", in.id, want, r.Err, r)
				return
			}
			if want == 200 {
				var out struct {
					Data admitted `json:"data"`
				}
				_ = json.Unmarshal(r.Body, &out)
				fr.mu.Lock()
				in.seqs = append(in.seqs, out.Data.AdmittedSeq)
				fr.mu.Unlock()
			}
		} else {
			if want == 200 {
				want = 204
			}
			r := fr.c.do(ctx, "POST", "/session/"+target+"/prompt_async", v1Body(in.id, text, delivery))
			if r.Err != nil || r.Status != want {
				fr.errorf("v1 retry of %s (want %d): %v %s", in.id, want, r.Err, r)
			}
		}
	case k < 67:
		in := fr.pickVisible(rng, func(*fin) bool { return true })
		if in == nil {
			return
		}
		path := pick(rng, "/api/session/", "/session/") + sid + "/inbox/" + in.id
		r := fr.c.do(ctx, "DELETE", path, nil)
		a := revokeAnswer{status: r.Status}
		if r.Err != nil {
			fr.errorf("revoke %s: %v", in.id, r.Err)
			return
		}
		if r.Status == 200 {
			var out struct {
				Revoked bool `json:"revoked"`
			}
			if err := json.Unmarshal(r.Body, &out); err != nil {
				fr.errorf("revoke %s: %s", in.id, r)
			}
			a.revoked = out.Revoked
		}
		fr.mu.Lock()
		in.revokes = append(in.revokes, a)
		fr.mu.Unlock()
	case k < 80:
		in := fr.pickVisible(rng, func(in *fin) bool { return !in.reusable })
		if in == nil {
			return
		}
		body := map[string]any{}
		a := replaceAnswer{}
		if rng.IntN(10) < 7 {
			a.text = fr.uniq("replaced")
			body["prompt"] = map[string]any{"text": a.text}
		}
		if len(body) == 0 || rng.IntN(2) == 0 {
			a.delivery = pick(rng, "steer", "queue")
			body["delivery"] = a.delivery
		}
		path := pick(rng, "/api/session/", "/session/") + sid + "/inbox/" + in.id
		r := fr.c.do(ctx, "PATCH", path, body)
		if r.Err != nil {
			fr.errorf("replace %s: %v", in.id, r.Err)
			return
		}
		a.status = r.Status
		fr.mu.Lock()
		in.replaces = append(in.replaces, a)
		if r.Status != 200 && a.text != "" {
			fr.forbidden = append(fr.forbidden, a.text)
		}
		fr.mu.Unlock()
		if r.Status != 200 && r.Status != 409 {
			fr.errorf("replace %s: %s", in.id, r)
		}
	case k < 88:
		if rng.IntN(2) == 0 {
			r := fr.c.do(ctx, "POST", "/session/"+sid+"/abort", nil)
			if r.Err != nil || r.Status != 200 || strings.TrimSpace(string(r.Body)) != "true" {
				fr.errorf("abort: %v %s", r.Err, r)
			}
		} else {
			r := fr.c.do(ctx, "POST", "/api/session/"+sid+"/interrupt", nil)
			if r.Err != nil || r.Status != 204 {
				fr.errorf("interrupt: %v %s", r.Err, r)
			}
		}
	case k < 94:
		path := pick(rng, "/api/session/", "/session/") + sid + "/inbox"
		r := fr.c.do(ctx, "GET", path, nil)
		var out struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &out) != nil {
			fr.errorf("inbox: %v %s", r.Err, r)
			return
		}
		fr.mu.Lock()
		for _, x := range out.Data {
			if fr.all[x.ID] == nil {
				fr.errs = append(fr.errs, "inbox lists unknown input "+x.ID)
			}
		}
		fr.mu.Unlock()
	default: // the operation "wait a little": lets turns move on between the others
		time.Sleep(time.Duration(rng.IntN(6)) * time.Millisecond)
	}
}

// admit admits a new input through a random route.
func (fr *fuzzRun) admit(rng *rand.Rand) {
	ctx := context.Background()
	in := &fin{id: newID(), text: fr.uniq("input"), delivery: pick(rng, "", "steer", "queue"),
		reusable: rng.IntN(2) == 0}
	switch x := rng.IntN(10); {
	case x < 5:
		in.api = "v2"
	case x < 8:
		in.api = "v1async"
	default:
		in.api = "v1sync"
	}
	fr.mu.Lock()
	fr.all[in.id] = in
	fr.mu.Unlock()
	switch in.api {
	case "v2":
		r := fr.c.do(ctx, "POST", "/api/session/"+fr.sid+"/prompt", v2Body(in.id, in.text, in.delivery))
		var out struct {
			Data admitted `json:"data"`
		}
		if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &out) != nil {
			fr.errorf("v2 admit %s: %v %s", in.id, r.Err, r)
			return
		}
		if out.Data.ID != in.id || out.Data.Prompt.Text != in.text || out.Data.SessionID != fr.sid ||
			out.Data.Delivery != cmp(in.delivery, "steer") {
			fr.errorf("v2 admit %s answered %s", in.id, r.Body)
		}
		fr.mu.Lock()
		in.seqs = append(in.seqs, out.Data.AdmittedSeq)
		fr.mu.Unlock()
		fr.publish(in)
	case "v1async":
		r := fr.c.do(ctx, "POST", "/session/"+fr.sid+"/prompt_async", v1Body(in.id, in.text, in.delivery))
		if r.Err != nil || r.Status != 204 {
			fr.errorf("v1 async admit %s: %v %s", in.id, r.Err, r)
			return
		}
		fr.publish(in)
	case "v1sync":
		answered := make(chan struct{})
		fr.syncs.Add(1)
		go func() {
			defer fr.syncs.Done()
			defer close(answered)
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			r := fr.c.do(ctx, "POST", "/session/"+fr.sid+"/message", v1Body(in.id, in.text, in.delivery))
			fr.mu.Lock()
			in.sync = &r
			fr.mu.Unlock()
		}()
		// Other operations may target it once it is admitted.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := fr.c.srv.Manager.Input(ctx, fr.sid, in.id); err == nil {
				fr.publish(in)
				return
			}
			select {
			case <-answered:
				fr.mu.Lock()
				ok := in.sync.Err == nil && (in.sync.Status == 200 || in.sync.Status == 409)
				fr.mu.Unlock()
				if ok {
					fr.publish(in)
				}
				return
			case <-time.After(time.Millisecond):
			}
		}
		fr.errorf("blocking admit %s: not admitted after 5s", in.id)
	}
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkRun waits for the session to go idle and checks everything but the
// model calls.
func (fr *fuzzRun) checkRun() {
	c, sid := fr.c, fr.sid
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if r := c.do(ctx, "POST", "/api/session/"+sid+"/wait", nil); r.Err != nil || r.Status != 204 {
		fr.errorf("wait: %v %s", r.Err, r)
		return
	}
	for _, p := range []string{"/api/session/" + sid + "/inbox", "/session/" + sid + "/inbox"} {
		r := c.do(ctx, "GET", p, nil)
		var out struct {
			Data []json.RawMessage `json:"data"`
		}
		if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &out) != nil || len(out.Data) != 0 {
			fr.errorf("inbox of an idle session (%s): %v %s", p, r.Err, r)
		}
	}
	if st := c.srv.Manager.Status(); st[sid] != "" {
		fr.errorf("session is %q after wait", st[sid])
	}
	log, err := fr.fetchHistory(ctx)
	if err != nil {
		fr.errorf("history: %v", err)
		return
	}
	fr.log = log
	r := c.do(ctx, "GET", "/session/"+sid+"/message", nil)
	if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &fr.msgs) != nil {
		fr.errorf("messages: %v %s", r.Err, r)
		return
	}
	fr.replay()
	fr.checkClients()
	fr.checkMessages()
	fr.checkForbidden(string(r.Body))
}

// fetchHistory reads the log in pages of a random size and checks the
// sequence is gapless from 1.
func (fr *fuzzRun) fetchHistory(ctx context.Context) ([]durableEvent, error) {
	limit := []int{1, 3, 10, 50, 100, 100}[fr.run%6]
	var all []durableEvent
	after := int64(0)
	for {
		r := fr.c.do(ctx, "GET", fmt.Sprintf("/api/session/%s/history?after=%d&limit=%d", fr.sid, after, limit), nil)
		var page struct {
			Data    []durableEvent `json:"data"`
			HasMore bool           `json:"hasMore"`
		}
		if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &page) != nil {
			return nil, fmt.Errorf("%v %s", r.Err, r)
		}
		for i := range page.Data {
			e := &page.Data[i]
			if err := json.Unmarshal(e.Data, &e.d); err != nil {
				return nil, err
			}
			if want := int64(len(all) + 1); e.Durable.Seq != want {
				return nil, fmt.Errorf("seq %d where %d was due (page after=%d limit=%d): not gapless", e.Durable.Seq, want, after, limit)
			}
			if e.Durable.AggregateID != fr.sid || (e.d.SessionID != "" && e.d.SessionID != fr.sid) {
				return nil, fmt.Errorf("event %d belongs to %s/%s", e.Durable.Seq, e.Durable.AggregateID, e.d.SessionID)
			}
			all = append(all, *e)
		}
		if page.HasMore && len(page.Data) != limit {
			return nil, fmt.Errorf("short page (%d of %d) with hasMore", len(page.Data), limit)
		}
		if !page.HasMore {
			return all, nil
		}
		after = all[len(all)-1].Durable.Seq
	}
}

type pendingIn struct {
	id       string
	delivery string
	text     string
	order    int
}

// replay runs the durable log through a model of the inbox and checks
// every transition.
func (fr *fuzzRun) replay() {
	pending := map[string]*pendingIn{}
	fr.delivered, fr.revoked = map[string]string{}, map[string]string{}
	seen := map[string]bool{}
	var promoted []string
	stepOpen, stepMsg := false, ""
	mustPromote := map[string]bool{} // steers pending at a step end
	mustCancel := map[string]bool{}  // steers pending at a step failure
	order := 0
	steersPending := func() (out []string) {
		for id, p := range pending {
			if p.delivery == "steer" {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	bad := func(i int, format string, args ...any) {
		fr.errorf("log event %d (%s): %s", i+1, fr.log[i].Type, fmt.Sprintf(format, args...))
	}
	for i, e := range fr.log {
		d := e.d
		if len(mustCancel) > 0 && e.Type != "session.inbox.cancelled" {
			bad(i, "steers %v pending at the abort were not cancelled at once", keys(mustCancel))
			mustCancel = map[string]bool{}
		}
		if len(mustPromote) > 0 && e.Type != "session.next.prompted" && e.Type != "session.inbox.delivered" {
			bad(i, "steers %v pending at the step end were not promoted at once", keys(mustPromote))
			mustPromote = map[string]bool{}
		}
		switch e.Type {
		case "session.next.prompt.admitted", "session.next.prompted", "session.inbox.enqueued", "session.inbox.delivered",
			"session.inbox.cancelled", "session.inbox.delivery.changed", "session.inbox.replaced":
			if d.MessageID == "" {
				bad(i, "no messageID: %s", e.Data)
				continue
			}
			fr.mu.Lock()
			in := fr.all[d.MessageID]
			fr.mu.Unlock()
			if in == nil {
				bad(i, "about %s, which no client admitted", d.MessageID)
				continue
			}
		}
		p := pending[d.MessageID]
		switch e.Type {
		case "session.next.prompt.admitted":
			if seen[d.MessageID] {
				bad(i, "%s admitted twice", d.MessageID)
			}
			seen[d.MessageID] = true
			if d.Prompt == nil || d.Delivery == "" {
				bad(i, "no prompt/delivery: %s", e.Data)
				continue
			}
			order++
			pending[d.MessageID] = &pendingIn{id: d.MessageID, delivery: d.Delivery, text: d.Prompt.Text, order: order}
		case "session.inbox.enqueued":
			if i == 0 || fr.log[i-1].Type != "session.next.prompt.admitted" || fr.log[i-1].d.MessageID != d.MessageID {
				bad(i, "enqueued without its admission just before")
			}
		case "session.next.prompted":
			if p == nil {
				bad(i, "%s promoted while not pending", d.MessageID)
				continue
			}
			if stepOpen {
				bad(i, "%s promoted during a model call", d.MessageID)
			}
			if d.Prompt == nil || d.Prompt.Text != p.text || d.Delivery != p.delivery {
				bad(i, "promoted as %s, pending as %+v", e.Data, *p)
			}
			if p.delivery == "queue" {
				if s := steersPending(); len(s) > 0 {
					bad(i, "queued %s promoted while steers %v were pending", d.MessageID, s)
				}
				for _, q := range pending {
					if q.delivery == "queue" && q.order < p.order {
						bad(i, "queued %s promoted before the older queued %s", d.MessageID, q.id)
					}
				}
				if len(mustPromote) > 0 {
					bad(i, "queued %s promoted at a boundary with steers pending", d.MessageID)
				}
			}
			delete(mustPromote, d.MessageID)
			delete(pending, d.MessageID)
			fr.delivered[d.MessageID] = p.text
			promoted = append(promoted, p.text)
		case "session.inbox.delivered":
			if prev := fr.log[i-1]; prev.Type != "session.next.prompted" || prev.d.MessageID != d.MessageID {
				bad(i, "delivered %s without its promotion just before", d.MessageID)
			}
		case "session.inbox.cancelled":
			if p == nil {
				bad(i, "%s cancelled while not pending", d.MessageID)
				continue
			}
			switch d.Reason {
			case "aborted":
				if p.delivery != "steer" || !mustCancel[d.MessageID] {
					bad(i, "%s (%s) cancelled by an abort it was not due to", d.MessageID, p.delivery)
				}
			case "revoked":
			default:
				bad(i, "reason %q", d.Reason)
			}
			delete(mustCancel, d.MessageID)
			delete(pending, d.MessageID)
			fr.revoked[d.MessageID] = d.Reason
		case "session.inbox.delivery.changed":
			if p == nil {
				bad(i, "%s changed while not pending", d.MessageID)
				continue
			}
			if d.Delivery == p.delivery {
				bad(i, "delivery change to the same delivery")
			}
			p.delivery = d.Delivery
		case "session.inbox.replaced":
			if p == nil {
				bad(i, "%s replaced while not pending", d.MessageID)
				continue
			}
			if d.Prompt == nil {
				bad(i, "no prompt")
				continue
			}
			p.text = d.Prompt.Text
		case "session.next.step.started":
			if stepOpen {
				bad(i, "a step started while one was open")
			}
			if s := steersPending(); len(s) > 0 {
				bad(i, "a model call started with steers %v left pending", s)
			}
			stepOpen, stepMsg = true, d.AssistantMessageID
			fr.steps = append(fr.steps, slices.Clone(promoted))
		case "session.next.step.ended", "session.next.step.failed":
			if !stepOpen || d.AssistantMessageID != stepMsg {
				bad(i, "step end without an open step")
			}
			stepOpen = false
			for _, id := range steersPending() {
				if e.Type == "session.next.step.ended" {
					mustPromote[id] = true
				} else {
					mustCancel[id] = true
				}
			}
		case "session.next.text.started", "session.next.text.ended":
			if !stepOpen || d.AssistantMessageID != stepMsg {
				bad(i, "text outside its step")
			}
		}
	}
	if stepOpen {
		fr.errorf("log ends with a model call open")
	}
	if len(pending) > 0 || len(mustPromote) > 0 || len(mustCancel) > 0 {
		fr.errorf("log ends with inputs pending %v / stranded steers %v / uncancelled steers %v",
			keys(pending), keys(mustPromote), keys(mustCancel))
	}
	// Every admitted input was admitted once and ended exactly one way.
	fr.mu.Lock()
	defer fr.mu.Unlock()
	for id, in := range fr.all {
		if !in.visible {
			if seen[id] {
				fr.errs = append(fr.errs, fmt.Sprintf("%s is in the log though its admission failed", id))
			}
			continue
		}
		if !seen[id] {
			fr.errs = append(fr.errs, fmt.Sprintf("admitted %s (%s) has no admission event", id, in.api))
		}
		_, del := fr.delivered[id]
		_, rev := fr.revoked[id]
		if del == rev {
			fr.errs = append(fr.errs, fmt.Sprintf("%s: delivered=%v revoked=%v", id, del, rev))
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkClients checks what the clients were told against the outcome.
func (fr *fuzzRun) checkClients() {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	admittedSeq := map[string]int64{}
	for _, e := range fr.log {
		if e.Type == "session.next.prompt.admitted" {
			admittedSeq[e.d.MessageID] = e.Durable.Seq
		}
	}
	errf := func(format string, args ...any) { fr.errs = append(fr.errs, fmt.Sprintf(format, args...)) }
	for id, in := range fr.all {
		text, del := fr.delivered[id]
		reason, rev := fr.revoked[id]
		for _, s := range in.seqs {
			if s != admittedSeq[id] {
				errf("%s: admission answered admittedSeq %d, log says %d", id, s, admittedSeq[id])
			}
		}
		for _, a := range in.revokes {
			switch {
			case a.status == 200 && a.revoked:
				if del {
					errf("%s: revoke answered revoked:true but it was delivered", id)
				}
			case a.status == 409:
				if !del {
					errf("%s: revoke answered 409 but it was not delivered (revoked: %q)", id, reason)
				}
			default:
				errf("%s: revoke answered %d revoked=%v", id, a.status, a.revoked)
			}
		}
		if rev && reason == "revoked" {
			ok := false
			for _, a := range in.revokes {
				ok = ok || a.revoked
			}
			if !ok {
				errf("%s revoked by a revoke no client got revoked:true from", id)
			}
		}
		var replacedTexts []string
		for _, a := range in.replaces {
			if a.status == 200 && a.text != "" {
				replacedTexts = append(replacedTexts, a.text)
			}
		}
		if del {
			want := []string{in.text}
			if len(replacedTexts) > 0 {
				want = replacedTexts
			}
			if !slices.Contains(want, text) {
				errf("%s delivered with text %q, want one of %q", id, text, want)
			}
		}
		if in.sync != nil {
			r := *in.sync
			var m v1Message
			var ne namedErr
			switch {
			case r.Err != nil:
				errf("%s: blocking POST: %v", id, r.Err)
			case r.Status == 200:
				if !del {
					errf("%s: blocking POST answered 200 but it was not delivered", id)
				}
				if json.Unmarshal(r.Body, &m) != nil || m.Info.Role != "assistant" || m.Info.ID == "" {
					errf("%s: blocking POST answer: %s", id, r)
				}
			case r.Status == 409 && json.Unmarshal(r.Body, &ne) == nil && ne.Name == "MessageRevokedError":
				if !rev {
					errf("%s: blocking POST answered revoked but it was delivered", id)
				}
			default:
				errf("%s: blocking POST answered %s", id, r)
			}
		}
	}
}

// checkMessages checks the stored messages against the log.
func (fr *fuzzRun) checkMessages() {
	users := map[string]int{}
	ids := map[string]bool{}
	for _, m := range fr.msgs {
		if ids[m.Info.ID] {
			fr.errorf("message %s listed twice", m.Info.ID)
		}
		ids[m.Info.ID] = true
		switch m.Info.Role {
		case "user":
			users[m.Info.ID]++
			text, ok := fr.delivered[m.Info.ID]
			if !ok {
				fr.errorf("user message %s of an input that was not delivered", m.Info.ID)
			} else if m.text() != text {
				fr.errorf("user message %s has text %q, promoted %q", m.Info.ID, m.text(), text)
			}
			for _, p := range m.Parts {
				if p.MessageID != m.Info.ID {
					fr.errorf("part %s of %s says messageID %s", p.ID, m.Info.ID, p.MessageID)
				}
			}
		case "assistant":
			if m.Info.Time.Completed == nil {
				fr.errorf("assistant message %s left open on an idle session", m.Info.ID)
			}
			if _, ok := fr.delivered[m.Info.ParentID]; !ok {
				fr.errorf("assistant message %s answers %s, not a delivered input", m.Info.ID, m.Info.ParentID)
			}
		}
	}
	for id := range fr.delivered {
		if users[id] != 1 {
			fr.errorf("delivered %s has %d user messages", id, users[id])
		}
	}
}

// checkForbidden: texts of rejected admissions and replacements appear
// nowhere.
func (fr *fuzzRun) checkForbidden(messages string) {
	var logText strings.Builder
	for _, e := range fr.log {
		logText.Write(e.Data)
	}
	for _, s := range fr.forbidden {
		if strings.Contains(messages, s) || strings.Contains(logText.String(), s) {
			fr.errorf("rejected text %q was stored", s)
		}
	}
}

// checkModel checks the model calls (after the server stopped, so all are
// recorded): one per step, each with exactly the user messages promoted
// before it, so every delivered input reached the model once per call
// after its promotion and no revoked or rejected text ever did.
func (fr *fuzzRun) checkModel(srv *testserver.Server) {
	if fr.log == nil {
		return
	}
	calls := callsOf(srv, fr.sid)
	got := make([]string, len(calls))
	for i, c := range calls {
		u := userTexts(c)
		got[i] = strings.Join(u, "|")
		counts := map[string]int{}
		for _, s := range u {
			counts[s]++
			if counts[s] == 2 {
				fr.errorf("model call %d saw %q twice", i+1, s)
			}
		}
		for _, s := range fr.forbidden {
			if counts[s] > 0 {
				fr.errorf("model call %d saw rejected text %q", i+1, s)
			}
		}
		for id := range fr.revoked {
			in := fr.all[id]
			texts := []string{in.text}
			for _, a := range in.replaces {
				texts = append(texts, a.text)
			}
			for _, s := range texts {
				if s != "" && counts[s] > 0 {
					fr.errorf("model call %d saw revoked input %s (%q)", i+1, id, s)
				}
			}
		}
	}
	want := make([]string, len(fr.steps))
	for i, s := range fr.steps {
		want[i] = strings.Join(s, "|")
	}
	// Calls of one session are sequential, but a call cut off by an abort may
	// record itself after the next one started: compare as multisets.
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		fr.errorf("model calls do not match the log's steps:\n    calls %q\n    steps %q", got, want)
	}
	for id, text := range fr.delivered {
		seen := false
		for _, c := range calls {
			seen = seen || slices.Contains(userTexts(c), text)
		}
		if !seen {
			fr.errorf("delivered %s never reached the model", id)
		}
	}
}

func (fr *fuzzRun) logSummary() []string {
	out := make([]string, len(fr.log))
	for i, e := range fr.log {
		s := strings.TrimPrefix(strings.TrimPrefix(e.Type, "session.next."), "session.")
		if e.d.MessageID != "" {
			s += "(" + e.d.MessageID[len(e.d.MessageID)-6:] + "," + e.d.Delivery + e.d.Reason + ")"
		}
		out[i] = s
	}
	return out
}
