package eventbus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

func ev(session string, i int) *opencode.Event {
	return &opencode.Event{ID: fmt.Sprintf("evt_%d", i), Type: "test", SessionID: session}
}

// recv reads one event or fails after a generous bound (the bus must have
// queued it before Publish returned, so it is already there).
func recv(t *testing.T, s *eventbus.Subscription) (*opencode.Event, bool) {
	t.Helper()
	select {
	case e, ok := <-s.C:
		return e, ok
	case <-time.After(10 * time.Second):
		t.Fatal("no event and channel not closed")
		return nil, false
	}
}

func TestPublishOrderPerSubscriber(t *testing.T) {
	b := eventbus.New()
	const n = 1000
	subs := []*eventbus.Subscription{b.Subscribe(n, nil), b.Subscribe(n, nil), b.Subscribe(n, nil)}
	defer func() {
		for _, s := range subs {
			s.Close()
		}
	}()
	var positions []int64
	for i := range n {
		positions = append(positions, b.Publish(ev("ses_a", i)))
	}
	for i := 1; i < n; i++ {
		if positions[i] <= positions[i-1] {
			t.Fatalf("positions not increasing: %d then %d", positions[i-1], positions[i])
		}
	}
	for si, s := range subs {
		for i := range n {
			e, ok := recv(t, s)
			if !ok {
				t.Fatalf("sub %d closed at %d", si, i)
			}
			if e.ID != fmt.Sprintf("evt_%d", i) || e.Pos != positions[i] {
				t.Fatalf("sub %d event %d: got %s pos %d, want evt_%d pos %d", si, i, e.ID, e.Pos, i, positions[i])
			}
		}
		if s.Dropped() {
			t.Fatalf("sub %d dropped", si)
		}
	}
}

func TestSubscribeBufferBelowOne(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(0, nil)
	defer s.Close()
	b.Publish(ev("s", 0))
	if s.Dropped() {
		t.Fatal("a zero buffer must still hold one event")
	}
	if e, _ := recv(t, s); e.ID != "evt_0" {
		t.Fatalf("got %s", e.ID)
	}
}

func TestFilter(t *testing.T) {
	b := eventbus.New()
	onlyA := b.Subscribe(100, func(e *opencode.Event) bool { return e.SessionID == "ses_a" })
	all := b.Subscribe(100, nil)
	none := b.Subscribe(1, func(*opencode.Event) bool { return false })
	defer onlyA.Close()
	defer all.Close()
	defer none.Close()
	for i := range 20 {
		s := "ses_a"
		if i%2 == 1 {
			s = "ses_b"
		}
		b.Publish(ev(s, i))
	}
	for i := 0; i < 20; i += 2 {
		e, _ := recv(t, onlyA)
		if e.SessionID != "ses_a" || e.ID != fmt.Sprintf("evt_%d", i) {
			t.Fatalf("filtered sub got %s/%s, want ses_a/evt_%d", e.SessionID, e.ID, i)
		}
	}
	select {
	case e := <-onlyA.C:
		t.Fatalf("filtered sub got extra event %s/%s", e.SessionID, e.ID)
	default:
	}
	for i := range 20 {
		if e, _ := recv(t, all); e.ID != fmt.Sprintf("evt_%d", i) {
			t.Fatalf("unfiltered sub got %s at %d", e.ID, i)
		}
	}
	// A subscriber whose filter rejects everything is never considered slow.
	if none.Dropped() || len(none.C) != 0 {
		t.Fatalf("filtered-out sub: dropped=%v queued=%d", none.Dropped(), len(none.C))
	}
}

// TestSlowSubscriberCutOff: a subscriber that never reads is cut off and
// Publish never blocks. The assertion is that 10^5 publishes complete at all.
func TestSlowSubscriberCutOff(t *testing.T) {
	b := eventbus.New()
	stuck := b.Subscribe(8, nil)
	reader := b.Subscribe(16, nil)
	var got int
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for range reader.C {
			got++
		}
	}()
	const n = 100_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			b.Publish(ev("s", i))
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Publish blocked behind a subscriber that never reads")
	}
	if !stuck.Dropped() {
		t.Fatal("stuck subscriber not marked Dropped")
	}
	// Its channel holds what was queued before the cut, then is closed.
	var queued int
	for range stuck.C {
		queued++
	}
	if queued != 8 {
		t.Fatalf("stuck subscriber had %d events queued, want its buffer of 8", queued)
	}
	stuck.Close() // idempotent after being cut off
	reader.Close()
	<-readerDone
	if b.Len() != 0 {
		t.Fatalf("Len = %d after all subscribers gone", b.Len())
	}
	t.Logf("reader got %d of %d events (dropped=%v)", got, n, reader.Dropped())
}

func TestCloseIdempotent(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(4, nil)
	other := b.Subscribe(4, nil)
	defer other.Close()
	if b.Len() != 2 {
		t.Fatalf("Len = %d", b.Len())
	}
	s.Close()
	s.Close()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(s.Close)
	}
	wg.Wait()
	if _, ok := <-s.C; ok {
		t.Fatal("C not closed")
	}
	if s.Dropped() {
		t.Fatal("a closed (not cut off) subscription reports Dropped")
	}
	if b.Len() != 1 {
		t.Fatalf("Len = %d, want 1", b.Len())
	}
	b.Publish(ev("s", 1)) // must not panic on the closed subscription
	if e, _ := recv(t, other); e.ID != "evt_1" {
		t.Fatalf("other got %s", e.ID)
	}
}

func waitAsync(b *eventbus.Bus, ctx context.Context, pos int64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.WaitDelivered(ctx, pos, nil)
	}()
	return done
}

func mustBlock(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("WaitDelivered returned before %s", what)
	case <-time.After(100 * time.Millisecond):
	}
}

func mustReturn(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("WaitDelivered did not return after %s", what)
	}
}

func TestWaitDeliveredTrackedAck(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, nil)
	s.Track()
	defer s.Close()
	b.Publish(ev("s", 1))
	p2 := b.Publish(ev("s", 2))
	done := waitAsync(b, context.Background(), p2)
	mustBlock(t, done, "any Ack")
	e1, _ := recv(t, s)
	s.Ack(e1.Pos)
	mustBlock(t, done, "the Ack of the last event")
	e2, _ := recv(t, s)
	s.Ack(e2.Pos)
	mustReturn(t, done, "Ack of the last event")

	// Waiting for an earlier position returns at once.
	mustReturn(t, waitAsync(b, context.Background(), e1.Pos), "already acknowledged")
}

func TestWaitDeliveredUntracked(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, nil) // never Tracked, never Acks
	defer s.Close()
	p := b.Publish(ev("s", 1))
	mustReturn(t, waitAsync(b, context.Background(), p), "publish with only untracked subscribers")
}

func TestWaitDeliveredFilteredOut(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, func(e *opencode.Event) bool { return e.SessionID == "other" })
	s.Track()
	defer s.Close()
	p := b.Publish(ev("s", 1))
	mustReturn(t, waitAsync(b, context.Background(), p), "publishing an event the tracked subscriber filters out")
}

func TestWaitDeliveredSubscriberClosed(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, nil)
	s.Track()
	p := b.Publish(ev("s", 1))
	done := waitAsync(b, context.Background(), p)
	mustBlock(t, done, "Ack or Close")
	s.Close()
	mustReturn(t, done, "the tracked subscriber closed")
}

func TestWaitDeliveredSubscriberDropped(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(1, nil)
	s.Track()
	p := b.Publish(ev("s", 1))
	done := waitAsync(b, context.Background(), p)
	mustBlock(t, done, "Ack or drop")
	b.Publish(ev("s", 2)) // overflows: cut off
	mustReturn(t, done, "the tracked subscriber was cut off")
	if !s.Dropped() {
		t.Fatal("not dropped")
	}
}

func TestWaitDeliveredContext(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, nil)
	s.Track()
	defer s.Close()
	p := b.Publish(ev("s", 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := waitAsync(b, ctx, p)
	mustBlock(t, done, "cancel")
	cancel()
	mustReturn(t, done, "context cancelled")
}

// TestWaitDeliveredConcurrentWaiters: two blocking POSTs finishing at the
// same time both wait on the same SSE subscriber; one Ack covering both
// positions must release both waiters.
func TestWaitDeliveredConcurrentWaiters(t *testing.T) {
	b := eventbus.New()
	s := b.Subscribe(16, nil)
	s.Track()
	defer s.Close()
	p1 := b.Publish(ev("ses_a", 1))
	p2 := b.Publish(ev("ses_b", 2))
	d1 := waitAsync(b, t.Context(), p1)
	d2 := waitAsync(b, t.Context(), p2)
	mustBlock(t, d1, "Ack (waiter 1)")
	mustBlock(t, d2, "Ack (waiter 2)")
	s.Ack(p2) // the SSE writer wrote both events in one batch
	mustReturn(t, d1, "Ack covering waiter 1")
	mustReturn(t, d2, "Ack covering waiter 2")
}

// TestConcurrentPublishSubscribeClose exercises every operation at once under
// -race: no panic (send on closed channel), no race, and every subscriber that
// is not cut off sees positions in increasing order for each publisher.
func TestConcurrentPublishSubscribeClose(t *testing.T) {
	b := eventbus.New()
	stop := make(chan struct{})
	var pubs, subs sync.WaitGroup
	for p := range 4 {
		pubs.Go(func() {
			for i := 0; i < 5000; i++ {
				b.Publish(ev(fmt.Sprintf("ses_%d", p), i))
			}
		})
	}
	for w := range 8 {
		subs.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				var filter func(*opencode.Event) bool
				if k%2 == 0 {
					want := fmt.Sprintf("ses_%d", w%4)
					filter = func(e *opencode.Event) bool { return e.SessionID == want }
				}
				s := b.Subscribe(1+w*64, filter)
				if w%2 == 0 {
					s.Track()
				}
				last := map[string]int{}
				for n := 0; n < 200; n++ {
					e, ok := <-s.C
					if !ok {
						break
					}
					var i int
					fmt.Sscanf(e.ID, "evt_%d", &i)
					if prev, seen := last[e.SessionID]; seen && i <= prev {
						t.Errorf("subscriber saw %s %s after evt_%d", e.SessionID, e.ID, prev)
					}
					last[e.SessionID] = i
					s.Ack(e.Pos)
				}
				s.Close()
				s.Close()
			}
		})
	}
	waiters := sync.WaitGroup{}
	for range 2 {
		waiters.Go(func() {
			for i := 0; i < 200; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				b.WaitDelivered(ctx, int64(i*100), nil)
				cancel()
			}
		})
	}
	pubs.Wait()
	waiters.Wait()
	close(stop)
	// Unblock subscribers waiting for events that will never come.
	for i := 1 << 30; b.Len() > 0; i++ {
		for p := range 4 {
			b.Publish(ev(fmt.Sprintf("ses_%d", p), i))
		}
		time.Sleep(time.Millisecond)
	}
	subs.Wait()
}

// TestConcurrentPublishersDeliverInPositionOrder: runners of different
// sessions publish concurrently. A consumer (the SSE pump) acknowledges the
// position of the last event it wrote, and Ack's contract is "every event up
// to pos is written", so each subscriber must receive events in increasing
// bus position order, or WaitDelivered can return before an event with a
// smaller position is written (or wait for nothing when Ack moves backwards).
func TestConcurrentPublishersDeliverInPositionOrder(t *testing.T) {
	b := eventbus.New()
	const publishers, per = 8, 20000
	s := b.Subscribe(publishers*per, nil)
	defer s.Close()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range per {
				b.Publish(ev(fmt.Sprintf("ses_%d", p), i))
			}
		})
	}
	wg.Wait()
	var last int64
	var inversions int
	var example string
	for len(s.C) > 0 {
		e := <-s.C
		if e.Pos < last {
			if inversions == 0 {
				example = fmt.Sprintf("pos %d received after pos %d", e.Pos, last)
			}
			inversions++
		}
		last = max(last, e.Pos)
	}
	if inversions > 0 {
		t.Fatalf("%d events received out of bus position order (first: %s)", inversions, example)
	}
}
