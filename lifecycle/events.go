package lifecycle

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are encoded here; failing is a programming error.
		panic("lifecycle: encode event: " + err.Error())
	}
	return b
}

// liveEvent builds a bus-only event (not in the session's log).
func liveEvent(sessionID, dir, typ string, props any) *opencode.Event {
	return &opencode.Event{ID: identifier.NewEvent(), Type: typ, SessionID: sessionID, Directory: dir, Data: mustJSON(props)}
}

// tx collects the runner's pending work: the store rows and durable events
// that commit together, and the order in which all events (durable and
// live) are then published. The runner has one pending tx; everything it
// does while handling one command or a burst of model chunks joins it, and
// the loop commits it once (group commit) before handling the next.
type tx struct {
	r      *runner
	batch  store.Batch
	events []*opencode.Event
	after  []func(pos int64)
	// hold keeps every event, v1 ones too, until the commit succeeded (an
	// admission that may still fail must show nothing).
	hold bool
}

// tx returns the runner's pending tx.
func (r *runner) tx() *tx {
	if r.pend == nil {
		r.pend = &tx{r: r}
	}
	return r.pend
}

// then runs f after the pending work is committed and published, with the
// bus position of the last event (answers to blocking prompts wait for it).
func (t *tx) then(f func(pos int64)) { t.after = append(t.after, f) }

// durable appends a log event and returns the seq the store will give it:
// the runner is the session's only writer, so it knows the next seq.
func (t *tx) durable(typ string, version int, data any) int64 {
	e := &opencode.Event{ID: identifier.NewEvent(), Type: typ, SessionID: t.r.id, Directory: t.r.sess.Directory,
		Version: version, Durable: true, Data: mustJSON(data)}
	t.batch.Events = append(t.batch.Events, e)
	t.events = append(t.events, e)
	return t.r.lastSeq + int64(len(t.batch.Events))
}

func (t *tx) live(typ string, props any) {
	t.events = append(t.events, liveEvent(t.r.id, t.r.sess.Directory, typ, props))
}

func (t *tx) message(m opencode.Message) {
	t.batch.Messages = append(t.batch.Messages, m)
	t.live(opencode.EvMessageUpdated, map[string]any{"sessionID": t.r.id, "info": m})
}

func (t *tx) part(p opencode.Part, at int64) {
	t.batch.Parts = append(t.batch.Parts, p)
	t.live(opencode.EvPartUpdated, map[string]any{"sessionID": t.r.id, "part": p, "time": at})
}

func (t *tx) session(s opencode.Session) {
	c := s
	t.batch.Session = &c
	t.live(opencode.EvSessionUpdated, map[string]any{"sessionID": s.ID, "info": s})
}

// flush commits the pending batch, then publishes every event in order and
// runs the after-commit callbacks. On a failed commit nothing is published
// and the pending work is dropped: the caller reports the error.
func (t *tx) flush() (int64, error) {
	r := t.r
	r.pend = nil
	// v1 events are live-only (OpenCode keeps no log of them), so those of
	// a message still streaming go out before the commit: a v1 client sees
	// the first text without waiting for an fsync. A held flush (admission,
	// a finished step, the end of a turn) publishes them after the commit,
	// so a client that refetches on them finds what they announce, and
	// after its v2 events: a consumer that stops at session.idle has seen
	// the turn's session.next.step.ended. v2 events (durable ones first
	// committed) always follow the commit. Each stream keeps its own order.
	pos := r.m.bus.Position()
	var early, late []*opencode.Event
	for _, e := range t.events {
		if e.Durable || isV2Event(e.Type) {
			late = append(late, e)
		} else {
			early = append(early, e)
		}
	}
	if !t.hold {
		for _, e := range early {
			pos = r.m.publish(e)
		}
	}
	if !t.batch.Empty() {
		if err := r.m.store.Commit(context.Background(), r.id, &t.batch); err != nil {
			return 0, err
		}
		r.lastSeq += int64(len(t.batch.Events))
		if n := len(t.batch.Events); n > 0 && t.batch.Events[n-1].Seq != r.lastSeq {
			r.m.log.Error("event sequence drift", "session", r.id, "want", r.lastSeq, "got", t.batch.Events[n-1].Seq)
			r.lastSeq = t.batch.Events[n-1].Seq
		}
	}
	for _, e := range late {
		pos = r.m.publish(e)
	}
	if t.hold {
		for _, e := range early {
			pos = r.m.publish(e)
		}
	}
	for _, f := range t.after {
		f(pos)
	}
	return pos, nil
}

// isV2Event reports whether an event type belongs to the v2 (session.next)
// stream or our inbox extension, whose order is tied to the durable log.
func isV2Event(typ string) bool {
	return strings.HasPrefix(typ, "session.next.") || strings.HasPrefix(typ, "session.inbox.")
}

// flushPending commits whatever the runner has pending. A failed commit is
// not retried: the runner's memory has moved past what is stored, so the
// loop stops it (see fail) and the next command rebuilds it from the store.
func (r *runner) flushPending() {
	if r.pend == nil {
		return
	}
	if _, err := r.pend.flush(); err != nil && r.failure == nil {
		r.failure = err
	}
}

// publishLive queues a bus-only event behind the pending work, keeping order.
func (r *runner) publishLive(typ string, props any) {
	r.tx().live(typ, props)
}
