package eventbus

import (
	"context"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
)

// TestStuckSubscriberNotAwaited: a tracked subscriber that stops writing
// holds WaitDelivered up for stuckAfter once, then not at all until it
// acknowledges again; a subscriber that keeps writing is still waited for.
func TestStuckSubscriberNotAwaited(t *testing.T) {
	b := New()
	stuck := b.Subscribe(16, nil)
	stuck.Track()
	defer stuck.Close()
	ok := b.Subscribe(16, nil)
	ok.Track()
	defer ok.Close()
	go func() {
		for e := range ok.C {
			time.Sleep(5 * time.Millisecond) // a slow but working writer
			ok.Ack(e.Pos)
		}
	}()
	wait := func() time.Duration {
		pos := b.Publish(&opencode.Event{Type: "x"})
		start := time.Now()
		b.WaitDelivered(context.Background(), pos, nil)
		if got := ok.ack.Load(); got < pos {
			t.Fatalf("returned before the working subscriber acknowledged %d (at %d)", pos, got)
		}
		return time.Since(start)
	}
	if d := wait(); d < stuckAfter || d > stuckAfter+time.Second {
		t.Errorf("first wait %v, want about %v (then the subscriber counts as stuck)", d, stuckAfter)
	}
	for range 3 {
		if d := wait(); d > stuckAfter/2 {
			t.Errorf("a known stuck subscriber was waited for again: %v", d)
		}
	}
	// It acknowledges again: it is waited for again.
	for len(stuck.C) > 0 {
		e := <-stuck.C
		stuck.Ack(e.Pos)
	}
	go func() {
		e := <-stuck.C
		time.Sleep(20 * time.Millisecond) // the scenario: it acknowledges, but 20 ms late
		stuck.Ack(e.Pos)
	}()
	if d := wait(); d < 20*time.Millisecond {
		t.Errorf("a recovered subscriber was not waited for: %v", d)
	}
}

// TestWaitOnlyForThoseWhoReceive: WaitDelivered with a probe waits for the
// subscribers whose filter takes the probe, not for a stuck stream of
// another session.
func TestWaitOnlyForThoseWhoReceive(t *testing.T) {
	b := New()
	other := b.Subscribe(16, func(e *opencode.Event) bool { return e.SessionID == "ses_b" })
	other.Track()
	defer other.Close()
	mine := b.Subscribe(16, func(e *opencode.Event) bool { return e.SessionID == "ses_a" })
	mine.Track()
	defer mine.Close()
	b.Publish(&opencode.Event{Type: "x", SessionID: "ses_b"}) // never acknowledged
	pos := b.Publish(&opencode.Event{Type: "x", SessionID: "ses_a"})
	go func() {
		e := <-mine.C
		time.Sleep(10 * time.Millisecond) // the scenario: a writer a little slow to acknowledge
		mine.Ack(e.Pos)
	}()
	start := time.Now()
	b.WaitDelivered(context.Background(), pos, &opencode.Event{SessionID: "ses_a"})
	if d := time.Since(start); d > stuckAfter/2 {
		t.Errorf("waited %v: the other session's stream was waited for", d)
	}
	if mine.ack.Load() < pos {
		t.Errorf("returned before the session's own stream acknowledged")
	}
}
