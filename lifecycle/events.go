package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

func mustJSON(v any) json.RawMessage {
	var b []byte
	var err error
	if p, ok := v.(opencode.PartUpdated); ok {
		// It writes itself compact and escaped, its part's text once:
		// encoding/json would copy a prompt of megabytes once more.
		b, err = p.MarshalJSON()
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		// Only our own types are encoded here; failing is a programming error.
		panic("lifecycle: encode event: " + err.Error())
	}
	return b
}

// liveEvent builds a bus-only event (not in the session's log) of p's type.
func (m *Manager) liveEvent(sessionID, dir string, p opencode.Payload) *opencode.Event {
	return &opencode.Event{ID: m.ids.NewEvent(), Type: p.EventType(), SessionID: sessionID, Directory: dir, Data: mustJSON(p)}
}

// stepHeader opens a v2 event of assistant message messageID at now.
func (r *runner) stepHeader(now int64, messageID string) opencode.StepHeader {
	return opencode.StepHeader{Timestamp: now, SessionID: r.id, AssistantMessageID: messageID}
}

// inputHeader opens a v2 or inbox event of input (user message) messageID at now.
func (r *runner) inputHeader(now int64, messageID string) opencode.InputHeader {
	return opencode.InputHeader{Timestamp: now, SessionID: r.id, MessageID: messageID}
}

// status is a session.status event of the session with no retry.
func (r *runner) status(typ string) opencode.SessionStatus {
	return opencode.SessionStatus{SessionID: r.id, Status: opencode.SessionStatusInfo{Type: typ}}
}

// outbox collects the runner's pending work: the store rows and durable
// events that commit together, and the order in which all events (durable
// and live) are published once they are stored. The runner has one
// pending outbox; everything it does while handling one command or a burst
// of model chunks joins it, and the loop commits it once (group commit)
// before handling the next. Nothing in it is published before that commit
// succeeded.
type outbox struct {
	r      *runner
	batch  store.Batch
	events []*opencode.Event
	after  []func(pos int64)
}

// outbox returns the runner's pending outbox.
func (r *runner) outbox() *outbox {
	if r.pend == nil {
		r.pend = &outbox{r: r}
	}
	return r.pend
}

// then runs f after the pending work is committed and published, with the
// bus position of the last event (answers to blocking prompts wait for it).
func (t *outbox) then(f func(pos int64)) { t.after = append(t.after, f) }

// durable appends a log event of p's type and schema version and returns
// the seq the store will give it: the runner is the session's only writer,
// so it knows the next seq.
func (t *outbox) durable(p opencode.Payload) int64 {
	e := &opencode.Event{ID: t.r.m.ids.NewEvent(), Type: p.EventType(), SessionID: t.r.id, Directory: t.r.sess.Directory,
		Version: opencode.EventVersion(p), Durable: true, Data: mustJSON(p)}
	t.batch.Events = append(t.batch.Events, e)
	t.events = append(t.events, e)
	return t.r.lastSeq + int64(len(t.batch.Events))
}

func (t *outbox) live(p opencode.Payload) {
	t.events = append(t.events, t.r.m.liveEvent(t.r.id, t.r.sess.Directory, p))
}

func (t *outbox) message(m opencode.Message) {
	t.batch.Messages = append(t.batch.Messages, m)
	t.live(opencode.MessageUpdated{SessionID: t.r.id, Info: m})
}

func (t *outbox) part(p opencode.Part, at int64) {
	t.batch.Parts = append(t.batch.Parts, p)
	t.live(opencode.PartUpdated{SessionID: t.r.id, Part: p, Time: at})
}

func (t *outbox) session(s opencode.Session) {
	c := s
	t.batch.Session = &c
	t.live(opencode.SessionUpdated{SessionID: s.ID, Info: s})
}

// flush commits the pending batch, then publishes every event and runs the
// after-commit callbacks. On a failed commit nothing is published and the
// pending work is dropped: the caller reports the error.
//
// What a client sees is stored: every event, v1 ones and text deltas too,
// goes out after the commit that stores what it announces, so a client
// that refetches on message.updated finds the message, and a delta's part
// exists. Group commit keeps this to one fsync per burst of chunks. The v2
// events (durable ones in log order) go first, then the v1 ones: a consumer
// that stops at session.idle has seen the turn's session.next.step.ended.
// Each stream keeps its own order.
//
// A failed commit is not retried: the runner's memory has moved past what
// is stored, so the failure is recorded, nothing more is committed, and the
// loop stops the runner once the command returns (see fail); the next
// command rebuilds it from the store. (An admission undoes its own work and
// clears the failure: see Manager.Admit.)
func (t *outbox) flush() (int64, error) {
	r := t.r
	var drift error
	r.pend = nil
	if r.failure == nil && !r.owned() {
		r.fenced()
	}
	if r.failure != nil {
		return 0, r.failure
	}
	if !t.batch.Empty() {
		t.batch.NoSync = t.streaming()
		ctx, cancel := context.WithTimeout(context.Background(), r.m.cfg.StoreTimeout)
		err := r.m.store.Commit(ctx, r.id, &t.batch)
		cancel()
		if err != nil {
			r.failure = err
			return 0, err
		}
		r.lastSeq += int64(len(t.batch.Events))
		if n := len(t.batch.Events); n > 0 && t.batch.Events[n-1].Seq != r.lastSeq {
			// Another writer, or a bug: what this runner holds no longer
			// matches the store. What was committed is published; then
			// the runner stops and is rebuilt from the store.
			drift = fmt.Errorf("event sequence drift: want %d, the store gave %d", r.lastSeq, t.batch.Events[n-1].Seq)
			r.lastSeq = t.batch.Events[n-1].Seq
		}
	}
	pos := r.m.bus.Position()
	for _, e := range t.events {
		if e.Durable || e.IsV2() {
			pos = r.m.publish(e)
		}
	}
	for _, e := range t.events {
		if !e.Durable && !e.IsV2() {
			pos = r.m.publish(e)
		}
	}
	for _, f := range t.after {
		f(pos)
	}
	if drift != nil {
		r.failure = drift
	}
	return pos, nil
}

// streaming reports whether the pending work is only the progress of a
// running turn (its messages, parts and log events): such a commit may
// skip the fsync (store.Batch.NoSync). It is written before anything of it
// is published, so it survives the process; a power loss may take the
// last moments of a running turn, which is continued after the restart
// anyway. What a client must be able to rely on across a power loss is
// synced: admissions, inbox changes, session rows and the end of a turn.
func (t *outbox) streaming() bool {
	b := &t.batch
	return t.r.turn != nil && len(b.Admit) == 0 && len(b.Inputs) == 0 && b.Open == nil && b.Session == nil &&
		len(b.DeleteMessages) == 0 && len(b.DeleteParts) == 0
}

// flushPending commits whatever the runner has pending (a failure is
// recorded by flush).
func (r *runner) flushPending() {
	if r.pend != nil {
		_, _ = r.pend.flush()
	}
}

// publishLive queues a bus-only event behind the pending work, keeping order.
func (r *runner) publishLive(p opencode.Payload) {
	r.outbox().live(p)
}
