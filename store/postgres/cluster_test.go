package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/postgres"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// feed records what an instance's Attach hooks get.
type feed struct {
	mu     sync.Mutex
	events []*opencode.Event
	lost   int
	resets int
}

func (f *feed) deliver(e *opencode.Event) { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }
func (f *feed) onLost()                   { f.mu.Lock(); f.lost++; f.mu.Unlock() }
func (f *feed) onReset()                  { f.mu.Lock(); f.resets++; f.mu.Unlock() }
func (f *feed) snapshot() ([]*opencode.Event, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*opencode.Event(nil), f.events...), f.lost
}

func instance(t *testing.T, dsn, addr string, ttl time.Duration) (*postgres.Store, store.Cluster, *feed) {
	t.Helper()
	s, err := postgres.OpenCluster(context.Background(), dsn, postgres.ClusterOptions{Addr: addr, TTL: ttl})
	if err != nil {
		t.Fatalf("OpenCluster: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	f := &feed{}
	c := s.Cluster()
	c.Attach(store.Hooks{Deliver: f.deliver, Lost: f.onLost, Reset: f.onReset})
	return s, c, f
}

// expire ends an instance's lease in the database, as its death would
// after the TTL.
func expire(t *testing.T, dsn, instance string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), strings.TrimSuffix(dsn, " pool_max_conns=8"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE instances SET expires_at = now() - interval '1 second' WHERE id = $1`, instance); err != nil {
		t.Fatal(err)
	}
}

func textEvent(sid, typ, text string) *opencode.Event {
	data, _ := json.Marshal(map[string]string{"text": text})
	return &opencode.Event{ID: "evt_" + text, Type: typ, SessionID: sid, Data: data}
}

// TestClusterFencing: a session has one owner at a time; a claim over an
// expired lease bumps the epoch and the former owner's commits are refused
// (ErrFenced) and it learns its lease is lost.
func TestClusterFencing(t *testing.T) {
	need(t)
	ctx := t.Context()
	dsn := freshDB(t)
	a, ca, fa := instance(t, dsn, "http://a", 2*time.Second)
	b, cb, _ := instance(t, dsn, "http://b", 2*time.Second)

	if err := a.Commit(ctx, "ses_f", &store.Batch{Session: storetest.NewSession("ses_f"), CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	ea, ok := ca.Held("ses_f")
	if !ok || ea != 1 || !ca.Holds("ses_f", ea) {
		t.Fatalf("creator holds epoch %d %v", ea, ok)
	}
	var owned *store.OwnedError
	if _, err := cb.Claim(ctx, "ses_f"); !errors.As(err, &owned) || owned.Addr != "http://a" {
		t.Fatalf("claim of a live owner's session: %v", err)
	}
	if addr, err := cb.Owner(ctx, "ses_f"); err != nil || addr != "http://a" {
		t.Fatalf("Owner from b = %q, %v", addr, err)
	}
	if addr, err := ca.Owner(ctx, "ses_f"); err != nil || addr != "" {
		t.Fatalf("Owner from the owner = %q, %v", addr, err)
	}
	// b may not write a session it does not hold.
	if err := b.Commit(ctx, "ses_f", &store.Batch{Events: []*opencode.Event{textEvent("ses_f", "x", "b")}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit by a non-owner: %v", err)
	}
	if err := a.Commit(ctx, "ses_f", &store.Batch{Events: []*opencode.Event{textEvent("ses_f", "x", "a1")}}); err != nil {
		t.Fatal(err)
	}

	expire(t, dsn, ca.Instance())
	eb, err := cb.Claim(ctx, "ses_f")
	if err != nil || eb != ea+1 {
		t.Fatalf("claim after expiry: epoch %d, %v", eb, err)
	}
	if err := a.Commit(ctx, "ses_f", &store.Batch{Events: []*opencode.Event{textEvent("ses_f", "x", "a2")}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("commit by the fenced owner: %v", err)
	}
	if err := a.DeleteSession(ctx, "ses_f"); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("delete by the fenced owner: %v", err)
	}
	if err := b.Commit(ctx, "ses_f", &store.Batch{Events: []*opencode.Event{textEvent("ses_f", "x", "b1")}}); err != nil {
		t.Fatalf("commit by the new owner: %v", err)
	}
	if last, _ := b.LastSeq(ctx, "ses_f"); last != 2 {
		t.Fatalf("last seq %d, want 2 (a1, b1)", last)
	}
	// a's renewal finds its lease gone: it drops everything and rejoins.
	old := ca.Instance()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, lost := fa.snapshot(); lost > 0 && ca.Instance() != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a never learned its lease was lost")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ca.Holds("ses_f", ea) {
		t.Fatal("a still trusts a session after losing its lease")
	}
	if _, err := ca.Claim(ctx, "ses_f"); !errors.As(err, &owned) {
		t.Fatalf("a's claim of b's session: %v", err)
	}
}

// TestClusterOrphansAndRelease: open sessions of dead owners are claimed
// once (SKIP LOCKED), live ones never; a released session is claimable at once.
func TestClusterOrphansAndRelease(t *testing.T) {
	need(t)
	ctx := t.Context()
	dsn := freshDB(t)
	a, ca, _ := instance(t, dsn, "http://a", 2*time.Second)
	_, cb, _ := instance(t, dsn, "http://b", 2*time.Second)
	_, cc, _ := instance(t, dsn, "http://c", 2*time.Second)
	open := true
	for _, id := range []string{"ses_o1", "ses_o2", "ses_idle"} {
		b := &store.Batch{Session: storetest.NewSession(id), CreateOnly: true}
		if id != "ses_idle" {
			b.Open = &open
		}
		if err := a.Commit(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := cb.ClaimOrphans(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("orphans of a live owner: %v %v", got, err)
	}
	expire(t, dsn, ca.Instance())
	var wg sync.WaitGroup
	var got [2][]string
	for i, c := range []store.Cluster{cb, cc} {
		wg.Go(func() {
			var err error
			if got[i], err = c.ClaimOrphans(ctx, 10); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	all := append(append([]string(nil), got[0]...), got[1]...)
	if len(all) != 2 || (all[0] == all[1]) {
		t.Fatalf("claimed %v and %v: want ses_o1 and ses_o2 once each", got[0], got[1])
	}
	owner, other := cb, cc
	if _, ok := cc.Held("ses_o1"); ok {
		owner, other = cc, cb
	}
	e, ok := owner.Held("ses_o1")
	if !ok {
		t.Fatal("no claimer holds ses_o1")
	}
	if _, err := other.Claim(ctx, "ses_o1"); err == nil {
		t.Fatal("second claim of a held session succeeded")
	}
	owner.Release(ctx, "ses_o1", e)
	if _, err := other.Claim(ctx, "ses_o1"); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
}

// TestClusterRelay: what the owner broadcasts reaches another instance in
// order: live events whole (a large one by reference), durable ones read
// from the log with no gap, even when a doorbell never rang.
func TestClusterRelay(t *testing.T) {
	need(t)
	ctx := t.Context()
	dsn := freshDB(t)
	a, ca, _ := instance(t, dsn, "http://a", 2*time.Second)
	_, _, fb := instance(t, dsn, "http://b", 2*time.Second)
	// a learns of b from b's hello (alone, it broadcasts nothing).
	for deadline := time.Now().Add(5 * time.Second); a.Peers() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a never heard of b")
		}
	}
	if err := a.Commit(ctx, "ses_r", &store.Batch{Session: storetest.NewSession("ses_r"), CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	commit := func(texts ...string) []*opencode.Event {
		var evs []*opencode.Event
		for _, s := range texts {
			evs = append(evs, textEvent("ses_r", "session.next.text.ended", s))
		}
		if err := a.Commit(ctx, "ses_r", &store.Batch{Events: evs}); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var want []string
	d := commit("d1", "d2")
	ca.Broadcast(d[0])
	ca.Broadcast(textEvent("ses_r", "session.next.text.delta", "live1"))
	ca.Broadcast(d[1])
	big := strings.Repeat("x", 20000)
	ca.Broadcast(textEvent("ses_r", "message.part.updated", big))
	want = append(want, "d1", "live1", "d2", big)
	// d3's doorbell never rings (its owner died first); d4's does: d3 is
	// read from the log before d4.
	commit("d3")
	d4 := commit("d4")
	ca.Broadcast(d4[0])
	want = append(want, "d3", "d4")
	// d5 has no doorbell at all: the poll finds it.
	commit("d5")
	want = append(want, "d5")

	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ := fb.snapshot()
		if len(evs) >= len(want) {
			var got []string
			var seq int64
			for _, e := range evs {
				var p map[string]string
				_ = json.Unmarshal(e.Data, &p)
				got = append(got, p["text"])
				if e.Durable {
					if e.Seq != seq+1 {
						t.Errorf("durable seq %d after %d", e.Seq, seq)
					}
					seq = e.Seq
				}
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("relayed %q,\nwant %q", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relayed %d events, want %d", len(evs), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
