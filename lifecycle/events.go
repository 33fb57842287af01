package lifecycle

import (
	"context"
	"encoding/json"

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

// tx collects one step of a runner's work: the store rows and durable events
// that commit together, and the order in which all events (durable and live)
// are then published.
type tx struct {
	r      *runner
	batch  store.Batch
	events []*opencode.Event
}

func (r *runner) tx() *tx { return &tx{r: r} }

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

// flush commits the batch, then publishes every event in order. It returns
// the bus position of the last event published.
func (t *tx) flush() (int64, error) {
	r := t.r
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
	var pos int64
	for _, e := range t.events {
		pos = r.m.publish(e)
	}
	return pos, nil
}

// mustFlush flushes and logs a failure: the runner's in-memory state has
// already moved on, and a failed commit of a running turn's progress is
// reported, not retried.
func (t *tx) mustFlush() int64 {
	pos, err := t.flush()
	if err != nil {
		t.r.m.log.Error("commit failed", "session", t.r.id, "err", err)
	}
	return pos
}
