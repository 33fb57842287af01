// Package eventbus is the in-process pub/sub of committed events. Every
// subscriber has a bounded queue; a subscriber that cannot keep up is cut off
// (its channel closed, Dropped set) and the publisher never blocks.
package eventbus

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
)

// Bus fans events out to subscribers.
type Bus struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	pos  atomic.Int64
}

// New returns an empty bus.
func New() *Bus { return &Bus{subs: map[*Subscription]struct{}{}} }

// Subscription receives the events that pass its filter on C, in publish
// order. C is closed when the subscription is closed or cut off.
type Subscription struct {
	C       <-chan *opencode.Event
	c       chan *opencode.Event
	filter  func(*opencode.Event) bool
	bus     *Bus
	once    sync.Once
	dropped atomic.Bool
	closed  chan struct{}
	// enq is the bus position of the last event queued to this subscriber,
	// ack the last one its consumer reported written; acked signals changes.
	enq   atomic.Int64
	ack   atomic.Int64
	ackMu sync.Mutex
	acked chan struct{} // closed and replaced at an Ack that has waiters
	// waiting counts WaitDelivered calls waiting on this subscriber.
	waiting atomic.Int32
	track   atomic.Bool
	// stuck is the ack position at which the subscriber was found not
	// writing for stuckAfter (-1: not stuck); it is not waited for again
	// until it acknowledges more.
	stuck atomic.Int64
	// since is when (unix ns) the subscriber last made progress: its last
	// Ack, or the first event queued to it after it had caught up. Every
	// waiter measures the stall from it, so they give up together.
	since atomic.Int64
}

// stuckAfter is how long WaitDelivered waits for a subscriber that makes no
// progress at all: a client that stopped reading must not hold up every
// blocking prompt (its writes time out and cut it off in their own time).
const stuckAfter = 500 * time.Millisecond

// Track makes WaitDelivered wait for this subscriber's acknowledgements. SSE
// writers track; internal subscribers that never Ack must not.
func (s *Subscription) Track() { s.track.Store(true) }

// Subscribe registers a subscriber with a queue of size buf. filter may be
// nil (every event).
func (b *Bus) Subscribe(buf int, filter func(*opencode.Event) bool) *Subscription {
	if buf < 1 {
		buf = 1
	}
	c := make(chan *opencode.Event, buf)
	s := &Subscription{C: c, c: c, filter: filter, bus: b, closed: make(chan struct{}), acked: make(chan struct{})}
	s.stuck.Store(-1)
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// Publish delivers e to every matching subscriber without blocking and
// returns its bus position. Publishes are serialized: a position is taken
// and queued to every subscriber in one step, so every subscriber receives
// events in position order (which Ack and WaitDelivered rely on), and each
// session's events, published by its one runner, keep their order.
func (b *Bus) Publish(e *opencode.Event) int64 {
	var slow []*Subscription
	var now int64
	b.mu.Lock()
	e.Pos = b.pos.Add(1)
	for s := range b.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.c <- e:
			if s.enq.Load() <= s.ack.Load() { // it had caught up: the stall clock starts
				if now == 0 {
					now = time.Now().UnixNano()
				}
				s.since.Store(now)
			}
			s.enq.Store(e.Pos)
		default:
			slow = append(slow, s)
		}
	}
	b.mu.Unlock()
	for _, s := range slow {
		s.dropped.Store(true)
		s.Close()
	}
	return e.Pos
}

// Reset cuts every subscriber off, as if each were too slow: its stream
// ends and its client reconnects (v1) or resumes from its cursor (v2).
// Used when events may have been missed (a cluster instance's feed from
// the others broke).
func (b *Bus) Reset() {
	b.mu.Lock()
	subs := make([]*Subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	for _, s := range subs {
		s.dropped.Store(true)
		s.Close()
	}
}

// Position is the position of the last event published.
func (b *Bus) Position() int64 { return b.pos.Load() }

// Ack records that the consumer has written out every event up to bus
// position pos, and wakes every WaitDelivered waiting on this subscriber.
func (s *Subscription) Ack(pos int64) {
	s.since.Store(time.Now().UnixNano())
	s.ack.Store(pos)
	// Wake waiters only if there are any: most acks have none, and this is
	// on every SSE flush. (ack is stored before waiting is read, and a
	// waiter counts itself before it reads ack, so none is missed.)
	if s.waiting.Load() == 0 {
		return
	}
	s.ackMu.Lock()
	close(s.acked)
	s.acked = make(chan struct{})
	s.ackMu.Unlock()
}

// ackWait returns a channel closed at the next Ack.
func (s *Subscription) ackWait() <-chan struct{} {
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	return s.acked
}

// WaitDelivered blocks until every current subscriber that receives events
// like probe has acknowledged all events up to position pos that were
// queued to it (or is gone, or is stuck), or ctx ends. A blocking POST uses
// it, with its session's probe, so that a client which exits as soon as the
// POST returns has already been sent every event of its turn; streams of
// other sessions and directories are not waited for. A nil probe waits for
// every tracked subscriber.
func (b *Bus) WaitDelivered(ctx context.Context, pos int64, probe *opencode.Event) {
	b.mu.Lock()
	subs := make([]*Subscription, 0, len(b.subs))
	for s := range b.subs {
		if s.track.Load() && (probe == nil || s.filter == nil || s.filter(probe)) {
			subs = append(subs, s)
		}
	}
	b.mu.Unlock()
	for _, s := range subs {
		if !s.waitFor(ctx, pos) {
			return
		}
	}
}

// waitFor waits until s acknowledged pos (or what of it was queued to it),
// is gone, or has made no progress for stuckAfter. It reports false when
// ctx ended.
func (s *Subscription) waitFor(ctx context.Context, pos int64) bool {
	if st := s.stuck.Load(); st >= 0 {
		if s.ack.Load() == st {
			return true // still stuck: not waited for
		}
		s.stuck.Store(-1) // it moved again
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	timer := time.NewTimer(stuckAfter)
	defer timer.Stop()
	for {
		next := s.ackWait()
		target := min(pos, s.enq.Load())
		ack := s.ack.Load()
		if ack >= target {
			return true
		}
		left := time.Until(time.Unix(0, s.since.Load()).Add(stuckAfter))
		if left <= 0 {
			s.stuck.Store(ack)
			return true
		}
		timer.Reset(left)
		select {
		case <-next:
		case <-timer.C:
		case <-s.closed:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// Len is the number of subscribers.
func (b *Bus) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close unsubscribes and closes C. Safe to call more than once.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs, s)
		// Closing under the write lock: no Publish is sending on s.c now.
		close(s.c)
		close(s.closed)
		s.bus.mu.Unlock()
	})
}

// Dropped reports whether the subscription was cut off for being too slow.
func (s *Subscription) Dropped() bool { return s.dropped.Load() }
