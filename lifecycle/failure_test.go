package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestFailedCommitStopsCleanly: when a commit of a running turn fails, the
// turn stops, the blocking prompt waiting on it gets a 503 (EUnavailable),
// nothing of the failed work is visible, and the session works again on the
// next command from what is stored: the cut-off turn is closed by recovery.
func TestFailedCommitStopsCleanly(t *testing.T) {
	for _, kind := range []struct {
		name  string
		match func(string, *store.Batch) bool
	}{
		{"step end", func(_ string, b *store.Batch) bool {
			for _, p := range b.Parts {
				if p.Type == opencode.PartStepFinish {
					return true
				}
			}
			return false
		}},
		{"step start", func(_ string, b *store.Batch) bool {
			for _, p := range b.Parts {
				if p.Type == opencode.PartStepStart {
					return true
				}
			}
			return false
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			st := &storetest.Failing{Store: memory.New()}
			bus := eventbus.New()
			m := lifecycle.New(lifecycle.Config{Store: st, Bus: bus, Provider: scripted.New(scripted.Config{Chunks: 3, Delay: 5 * time.Millisecond}),
				ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
			if err != nil {
				t.Fatal(err)
			}
			prompt := func(text string) error {
				in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
					Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
				if _, _, err := m.Admit(ctx, in); err != nil {
					return err
				}
				_, err := m.Wait(ctx, s.ID, in.ID)
				return err
			}
			st.FailNext(kind.match)
			err = prompt("first")
			var oe *opencode.Error
			if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
				t.Fatalf("the blocking prompt of the failed turn got %v, want EUnavailable", err)
			}
			if st.Failed() != 1 {
				t.Fatalf("%d commits failed, want 1", st.Failed())
			}
			// The session is retried in the background at once (its
			// cut-off turn may run again): it settles, not stuck busy.
			if err := m.WaitIdle(ctx, s.ID); err != nil {
				t.Fatalf("the session did not settle after the failure: %v", err)
			}
			if _, busy := m.Status()[s.ID]; busy {
				t.Error("the session is still busy after it settled")
			}
			// The next prompt is answered; the stored conversation has no
			// assistant message left open.
			if err := prompt("second"); err != nil {
				t.Fatalf("the next prompt after the failure: %v", err)
			}
			msgs, err := m.Messages(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, mp := range msgs {
				if mp.Info.Role == opencode.Assistant && mp.Info.Time.Completed == nil {
					t.Errorf("assistant message %s is left open", mp.Info.ID)
				}
			}
			last := msgs[len(msgs)-1]
			if last.Info.Role != opencode.Assistant || last.Info.Error != nil {
				t.Errorf("the last message is %s with error %+v, want the second turn's answer", last.Info.Role, last.Info.Error)
			}
		})
	}
}

// TestEveryCommitKindFailsCleanly fails one commit of each kind (admission,
// delivery, step start, step end, turn end, abort, revoke) and checks that
// the store and the clients agree afterwards: no event of the failed work
// was published (a witness store checks each event against what was
// committed), the caller of the failed command got a 503, the session runs
// again on the next command, every input the client was not told is
// revoked is delivered exactly once, and no assistant message is left open.
func TestEveryCommitKindFailsCleanly(t *testing.T) {
	hasInput := func(b *store.Batch, state opencode.InputState) bool {
		for _, in := range b.Inputs {
			if in.State == state {
				return true
			}
		}
		return false
	}
	hasEvent := func(b *store.Batch, typ string) bool {
		for _, e := range b.Events {
			if e.Type == typ {
				return true
			}
		}
		return false
	}
	hasPart := func(b *store.Batch, typ string) bool {
		for _, p := range b.Parts {
			if p.Type == typ {
				return true
			}
		}
		return false
	}
	type env struct {
		t      *testing.T
		ctx    context.Context
		m      *lifecycle.Manager
		st     *storetest.Failing
		sid    string
		inputs []string // admitted and not revoked, as the client was told
		arm    func()   // arms the failure
	}
	admit := func(e *env, text string, d opencode.Delivery) (string, error) {
		in := &opencode.Input{ID: identifier.NewMessage(), SessionID: e.sid, Delivery: d,
			Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
		_, _, err := e.m.Admit(e.ctx, in)
		if err == nil {
			e.inputs = append(e.inputs, in.ID)
		}
		return in.ID, err
	}
	// busy starts a long turn, then arms the failure.
	busy := func(e *env) {
		e.t.Helper()
		if _, err := admit(e, "a long turn", opencode.Steer); err != nil {
			e.t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for e.m.Status()[e.sid] != "busy" && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		e.arm()
	}
	unavailable := func(e *env, what string, err error) {
		e.t.Helper()
		var oe *opencode.Error
		if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
			e.t.Errorf("%s: got %v, want EUnavailable (503)", what, err)
		}
	}
	for _, kind := range []struct {
		name  string
		match func(string, *store.Batch) bool
		run   func(e *env)
	}{
		{"admission", func(_ string, b *store.Batch) bool { return len(b.Admit) > 0 }, func(e *env) {
			e.arm()
			id, err := admit(e, "refused", opencode.Steer)
			unavailable(e, "admission", err)
			if _, err := e.m.Input(e.ctx, e.sid, id); err == nil {
				e.t.Errorf("the failed admission left input %s", id)
			}
		}},
		{"delivery", func(_ string, b *store.Batch) bool { return len(b.Admit) == 0 && hasInput(b, opencode.InputDelivered) },
			func(e *env) {
				busy(e)
				if _, err := admit(e, "queued", opencode.Queue); err != nil {
					e.t.Fatal(err)
				}
			}},
		{"step start", func(_ string, b *store.Batch) bool { return len(b.Admit) == 0 && hasPart(b, opencode.PartStepStart) }, func(e *env) {
			busy(e)
			// A steer starts a second step when the first ends.
			if _, err := admit(e, "steer", opencode.Steer); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"step end", func(_ string, b *store.Batch) bool { return hasPart(b, opencode.PartStepFinish) }, func(e *env) {
			busy(e)
		}},
		{"turn end", func(_ string, b *store.Batch) bool { return b.Open != nil && !*b.Open }, func(e *env) {
			busy(e)
		}},
		{"abort", func(_ string, b *store.Batch) bool { return hasEvent(b, opencode.EvStepFailed) }, func(e *env) {
			busy(e)
			unavailable(e, "abort", e.m.Abort(e.ctx, e.sid))
		}},
		{"revoke", func(_ string, b *store.Batch) bool { return hasInput(b, opencode.InputRevoked) }, func(e *env) {
			busy(e)
			id, err := admit(e, "revoke me", opencode.Queue)
			if err != nil {
				e.t.Fatal(err)
			}
			revoked, err := e.m.Revoke(e.ctx, e.sid, id)
			unavailable(e, "revoke", err)
			if revoked {
				e.t.Error("a revoke whose commit failed answered revoked")
			}
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			f := &storetest.Failing{Store: memory.New()}
			w := &storetest.Witness{Store: f}
			bus := eventbus.New()
			m := lifecycle.New(lifecycle.Config{Store: w, Bus: bus, Provider: scripted.New(scripted.Config{Chunks: 8, Delay: 10 * time.Millisecond}),
				ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
			defer m.Close()
			sub := bus.Subscribe(1<<14, nil)
			var unstored []string
			checked := make(chan struct{})
			go func() {
				defer close(checked)
				for ev := range sub.C {
					if err := w.Check(ev); err != nil {
						unstored = append(unstored, err.Error())
					}
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
			if err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, ctx: ctx, m: m, st: f, sid: s.ID}
			e.arm = func() { f.FailNext(kind.match) }
			kind.run(e)
			deadline := time.Now().Add(5 * time.Second)
			for f.Failed() == 0 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if f.Failed() != 1 {
				t.Fatalf("%d commits failed, want 1", f.Failed())
			}
			// The next command rebuilds the session; it settles by itself.
			if _, err := admit(e, "after the failure", opencode.Queue); err != nil {
				t.Fatalf("the next prompt after the failure: %v", err)
			}
			if err := m.WaitIdle(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			msgs, err := m.Messages(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			users := map[string]int{}
			for _, mp := range msgs {
				if mp.Info.Role == opencode.User {
					users[mp.Info.ID]++
				}
				if mp.Info.Role == opencode.Assistant && mp.Info.Time.Completed == nil {
					t.Errorf("assistant message %s is left open", mp.Info.ID)
				}
			}
			for _, id := range e.inputs {
				in, err := m.Input(ctx, s.ID, id)
				if err != nil {
					t.Errorf("input %s: %v", id, err)
					continue
				}
				if in.State == opencode.InputDelivered && users[id] != 1 {
					t.Errorf("input %s delivered as %d user messages", id, users[id])
				}
				if in.State == opencode.InputPending {
					t.Errorf("input %s still pending on an idle session", id)
				}
			}
			if inbox, _ := m.Inbox(ctx, s.ID); len(inbox) != 0 {
				t.Errorf("inbox not empty: %d", len(inbox))
			}
			m.Close()
			sub.Close()
			<-checked
			for _, u := range unstored {
				t.Errorf("published but not stored: %s", u)
			}
		})
	}
}

// TestStoreOutageRecoversAlone: while every commit fails (a full disk, a
// database that is down), a session that failed is not rebuilt again and
// again (a bounded number of attempts, requests answered 503 at once, the
// status says "retry"); once the store is back, the queued input admitted
// before the outage is delivered and answered with no client request.
func TestStoreOutageRecoversAlone(t *testing.T) {
	st := &storetest.Failing{Store: memory.New()}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{Chunks: 20, Delay: 20 * time.Millisecond}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(text string, d opencode.Delivery) (*opencode.Input, error) {
		in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: d,
			Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
		_, _, err := m.Admit(ctx, in)
		return in, err
	}
	if _, err := admit("first", opencode.Steer); err != nil {
		t.Fatal(err)
	}
	queued, err := admit("queued before the outage", opencode.Queue)
	if err != nil {
		t.Fatal(err)
	}
	st.SetDown(true)
	// The running turn's next commit fails; the session stops.
	deadline := time.Now().Add(5 * time.Second)
	for st.Failed() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Second) // an outage of a second: count the attempts in it
	if n := st.Failed(); n > 8 {
		t.Errorf("%d commits tried in a second of outage: the session is rebuilt in a loop", n)
	}
	_, err = admit("during the outage", opencode.Queue)
	var oe *opencode.Error
	if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
		t.Errorf("an admission during the outage: %v, want EUnavailable", err)
	}
	status, _ := m.SessionStatus(ctx)
	if status[s.ID] != "retry" {
		t.Errorf("status during the outage %q, want retry", status[s.ID])
	}
	st.SetDown(false)
	// No request: the background retry resumes the session and drains
	// its queue (the store is only read here).
	deadline = time.Now().Add(10 * time.Second)
	for {
		msgs, err := m.Messages(ctx, s.ID)
		answered := false
		for _, mp := range msgs {
			answered = answered || err == nil && mp.Info.Role == opencode.Assistant && mp.Info.ParentID == queued.ID && mp.Info.Time.Completed != nil
		}
		if answered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the input queued before the outage was not answered after it: %d messages", len(msgs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSilentStoreBounded: a store that stops answering (a partition) does
// not hold a session's requests as long as it lasts: the commit gives up
// at StoreTimeout and the prompt gets a 503 soon after.
func TestSilentStoreBounded(t *testing.T) {
	st := &storetest.Failing{Store: memory.New()}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID, StoreTimeout: 300 * time.Millisecond})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	st.SetSilent(true)
	start := time.Now()
	in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "hello"}}}
	_, _, err = m.Admit(ctx, in)
	var oe *opencode.Error
	if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
		t.Errorf("admission against a silent store: %v, want EUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the admission took %v against a store timeout of 300ms", d)
	}
	st.SetSilent(false)
}

// driftStore gives the first commit with events a sequence number past
// the one the runner expects, as a second writer would.
type driftStore struct {
	store.Store
	done atomic.Bool
}

func (d *driftStore) Commit(ctx context.Context, id string, b *store.Batch) error {
	if err := d.Store.Commit(ctx, id, b); err != nil {
		return err
	}
	if n := len(b.Events); n > 0 && d.done.CompareAndSwap(false, true) {
		b.Events[n-1].Seq += 3
	}
	return nil
}

// TestSequenceDriftStopsRunner: when the store's sequence numbers stop
// matching the runner's, the runner stops and is rebuilt from the store
// (not logged and carried on): the session goes on answering.
func TestSequenceDriftStopsRunner(t *testing.T) {
	st := &driftStore{Store: memory.New()}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "hello"}}}
	_, _, err = m.Admit(ctx, in)
	var oe *opencode.Error
	if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
		t.Fatalf("the admission whose commit drifted: %v, want EUnavailable (the runner stopped)", err)
	}
	// A retry under the same ID finds it admitted, and it is answered.
	if _, existed, err := m.Admit(ctx, in); err != nil || !existed {
		t.Fatalf("the retry: existed=%v err=%v", existed, err)
	}
	if _, err := m.Wait(ctx, s.ID, in.ID); err != nil {
		t.Fatalf("the drifted input's answer: %v", err)
	}
}

// titleWitness checks, for every title request, that the prompt it titles
// is stored: a title request goes out only after its delivery commit.
type titleWitness struct {
	provider.Provider
	st             store.Store
	titles, before atomic.Int32
}

func (w *titleWitness) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	if req.Purpose == provider.PurposeTitle {
		w.titles.Add(1)
		msgs, err := w.st.ListMessages(ctx, req.SessionID)
		if err != nil || !slices.ContainsFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.Role == opencode.User }) {
			w.before.Add(1)
		}
	}
	return w.Provider.Stream(ctx, req, emit)
}

// TestTitleAfterDeliveryStored: the title request of a session's first
// prompt waits for the prompt's delivery commit; when that commit fails,
// the model is asked nothing until the delivery is stored on a retry.
func TestTitleAfterDeliveryStored(t *testing.T) {
	mem := memory.New()
	st := &storetest.Failing{Store: mem}
	w := &titleWitness{Provider: scripted.New(scripted.Config{Chunks: 3, Delay: 5 * time.Millisecond}), st: mem}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: w,
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	// The first prompt's admission and delivery are one commit: it fails,
	// nothing is admitted, and nothing may be asked of the model.
	st.FailNext(func(_ string, b *store.Batch) bool {
		return slices.ContainsFunc(b.Events, func(e *opencode.Event) bool { return e.Type == opencode.EvPrompted })
	})
	in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Queue,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "name this"}}}
	var oe *opencode.Error
	if _, _, err := m.Admit(ctx, in); !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
		t.Fatalf("the failed admission got %v, want EUnavailable", err)
	}
	// The client retries; this time it is stored, and titled once.
	if _, _, err := m.Admit(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Wait(ctx, s.ID, in.ID); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, "the session to be titled", func() bool {
		got, err := m.GetSession(ctx, s.ID)
		return err == nil && got.Title == "name this"
	})
	if n, before := w.titles.Load(), w.before.Load(); n != 1 || before != 0 {
		t.Errorf("%d title requests, %d of them before their prompt was stored; want 1, 0", n, before)
	}
}

// TestAdmissionAnswerLost: an admission whose commit was written but whose
// answer was lost (the connection broke after the database committed) gets
// a 503 that says it may be stored, and the stored input is delivered and
// answered with no further client request: the runner, which undid it in
// memory, is rebuilt from the store.
func TestAdmissionAnswerLost(t *testing.T) {
	mem := memory.New()
	st := &storetest.Failing{Store: mem}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{Chunks: 2}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	st.LoseNext(func(_ string, b *store.Batch) bool { return len(b.Admit) > 0 })
	in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Queue,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "lost answer"}}}
	var oe *opencode.Error
	if _, _, err := m.Admit(ctx, in); !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
		t.Fatalf("the admission got %v, want EUnavailable", err)
	}
	checkFor(t, 10*time.Second, "the stored input to be answered", func() bool {
		msgs, err := mem.ListMessages(ctx, s.ID)
		return err == nil && slices.ContainsFunc(msgs, func(mp opencode.MessageWithParts) bool {
			return mp.Info.Role == opencode.Assistant && mp.Info.ParentID == in.ID && mp.Info.Time.Completed != nil
		})
	})
	// The client's retry is the same admission.
	if _, existed, err := m.Admit(ctx, in); err != nil || !existed {
		t.Fatalf("the retry got existed=%v err=%v, want the stored admission", existed, err)
	}
}

// TestFreedStoreServesNextRequest: a session stopped by failed commits,
// whose background retry has paused long (20 s), is tried by a request at
// once, at most one per session every 250 ms while the store still fails;
// once the store takes writes again the next request is served at once,
// not after the pause, and the work queued before the outage runs.
func TestFreedStoreServesNextRequest(t *testing.T) {
	st := &storetest.Failing{Store: memory.New()}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{Chunks: 20, Delay: 20 * time.Millisecond}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	m.SetFailPace(20*time.Second, 20*time.Second, 250*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(text string) (*opencode.Input, error) {
		in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Queue,
			Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
		_, _, err := m.Admit(ctx, in)
		return in, err
	}
	if _, err := admit("first"); err != nil {
		t.Fatal(err)
	}
	queued, err := admit("queued before the outage")
	if err != nil {
		t.Fatal(err)
	}
	st.SetDown(true)
	// The turn's commit fails, the rebuild at once fails too: the next
	// background retry is 20 s away.
	checkFor(t, 10*time.Second, "the background retry to pause", func() bool {
		attempt, _, _, ok := m.StoreRetry(s.ID)
		return ok && attempt >= 2
	})
	// Requests while the store still fails: 503 each, and the store is
	// tried at most once per 250 ms of them (each try is a commit).
	before, start := st.Failed(), time.Now()
	for i := range 20 {
		_, err := admit("during the outage " + strconv.Itoa(i))
		var oe *opencode.Error
		if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
			t.Fatalf("an admission during the outage: %v, want EUnavailable", err)
		}
	}
	if tries, most := st.Failed()-before, 2+int(time.Since(start)/(250*time.Millisecond)); tries < 1 || tries > most {
		t.Errorf("%d commits tried by 20 requests in %v, want 1 to %d", tries, time.Since(start), most)
	}
	st.SetDown(false)
	// The next request after the window is served at once (its own try),
	// long before the background retry.
	m.SetFailPace(20*time.Second, 20*time.Second, 0)
	start = time.Now()
	if _, err := admit("after the outage"); err != nil {
		t.Fatalf("the first request after the store came back: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the first request after the store came back took %v", d)
	}
	// A read the rebuilt runner started while the store was still down
	// may fail late on a loaded machine: its own retry then clears it.
	checkFor(t, 5*time.Second, "the session to leave retry after a request was served", func() bool {
		status, _ := m.SessionStatus(ctx)
		return status[s.ID] != "retry"
	})
	checkFor(t, 10*time.Second, "the input queued before the outage to be answered", func() bool {
		msgs, err := m.Messages(ctx, s.ID)
		for _, mp := range msgs {
			if err == nil && mp.Info.Role == opencode.Assistant && mp.Info.ParentID == queued.ID && mp.Info.Time.Completed != nil {
				return true
			}
		}
		return false
	})
}

// TestFailedReadRetried: a history read that fails (a deadline just after
// a start) while a session's runner needs it is retried in the background
// as a failed commit is, and the pending input is answered with no other
// request: when a cold session's turn reads its history, and when the
// recovery at start reads a session a shutdown left with queued input.
func TestFailedReadRetried(t *testing.T) {
	model := scripted.New(scripted.Config{Chunks: 3, Delay: 5 * time.Millisecond})
	newManager := func(st store.Store) *lifecycle.Manager {
		return lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: model,
			ProviderID: scripted.ProviderID, ModelID: scripted.ModelID, IdleTimeout: 50 * time.Millisecond})
	}
	admit := func(ctx context.Context, m *lifecycle.Manager, sid, text string, d opencode.Delivery) (*opencode.Input, error) {
		in := &opencode.Input{ID: identifier.NewMessage(), SessionID: sid, Delivery: d,
			Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
		_, _, err := m.Admit(ctx, in)
		return in, err
	}
	for _, c := range []struct {
		name string
		// run leaves an input pending behind failing history reads and
		// returns it, and the manager that must answer it.
		run func(t *testing.T, ctx context.Context, st *storetest.Failing, sid string) (*lifecycle.Manager, *opencode.Input)
	}{
		{"turn of a cold session", func(t *testing.T, ctx context.Context, st *storetest.Failing, sid string) (*lifecycle.Manager, *opencode.Input) {
			m := newManager(st)
			t.Cleanup(m.Close)
			if _, err := admit(ctx, m, sid, "first", opencode.Steer); err != nil {
				t.Fatal(err)
			}
			if err := m.WaitIdle(ctx, sid); err != nil {
				t.Fatal(err)
			}
			checkFor(t, 10*time.Second, "the idle runner to be evicted", func() bool { return !m.Resident(sid) })
			st.FailReads(3)
			in, err := admit(ctx, m, sid, "after a cold start", opencode.Queue)
			if err != nil {
				t.Fatalf("the admission (its commit works): %v", err)
			}
			return m, in
		}},
		{"recovery at start", func(t *testing.T, ctx context.Context, st *storetest.Failing, sid string) (*lifecycle.Manager, *opencode.Input) {
			slow := lifecycle.New(lifecycle.Config{Store: st.Store, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{Chunks: 200, Delay: 20 * time.Millisecond}),
				ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
			if _, err := admit(ctx, slow, sid, "cut off by the shutdown", opencode.Steer); err != nil {
				t.Fatal(err)
			}
			in, err := admit(ctx, slow, sid, "queued behind it", opencode.Queue)
			if err != nil {
				t.Fatal(err)
			}
			slow.Close()
			st.FailReads(3)
			m := newManager(st)
			t.Cleanup(m.Close)
			if err := m.Resume(ctx); err != nil {
				t.Fatalf("start with a failing history read: %v", err)
			}
			return m, in
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			st := &storetest.Failing{Store: memory.New()}
			sid := identifier.NewSession()
			setup := newManager(st.Store)
			if _, _, err := setup.CreateSession(ctx, opencode.SessionOptions{ID: sid}); err != nil {
				t.Fatal(err)
			}
			setup.Close()
			_, in := c.run(t, ctx, st, sid)
			// No request: read the store itself (a read through the
			// manager would be a request, and take a failing read).
			checkFor(t, 15*time.Second, "the pending input to be answered", func() bool {
				msgs, err := st.Store.ListMessages(ctx, sid)
				for _, mp := range msgs {
					if err == nil && mp.Info.Role == opencode.Assistant && mp.Info.ParentID == in.ID && mp.Info.Time.Completed != nil {
						return true
					}
				}
				return false
			})
		})
	}
}
