package lifecycle

// Waiting: blocking prompts wait for the turn their input was delivered
// into, and get the message recorded as its answer.

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// waitResult answers a blocking prompt: the last assistant message of the
// turn its input was delivered into, or an error (revoked, deleted, ...).
type waitResult struct {
	msg opencode.MessageWithParts
	pos int64
	// seq is the session's last event sequence when the turn ended, if
	// no next turn began in the same commit (0 otherwise).
	seq int64
	err error
}

func (r *runner) answer(id string, res waitResult) {
	for _, w := range r.waiters[id] {
		w <- res
	}
	delete(r.waiters, id)
}

// wait registers a waiter for the turn of input id, or answers at once when
// that turn is already over.
func (r *runner) wait(id string) chan waitResult {
	ch := make(chan waitResult, 1)
	if r.pendingIndex(id) >= 0 {
		r.waiters[id] = append(r.waiters[id], ch)
		return ch
	}
	if r.turn != nil {
		for _, d := range r.turn.delivered {
			if d == id {
				r.waiters[id] = append(r.waiters[id], ch)
				return ch
			}
		}
	}
	// A turn over (or an ID the runner does not hold): the store says
	// which, read off the runner (its state cannot change any more). The
	// turn's events went out earlier; waiting for what is published now
	// covers them.
	pos := r.m.bus.Position()
	m, sid := r.m, r.id
	go func() {
		ch <- m.finished(sid, id, pos)
	}()
	return ch
}

// finished answers a waiter for input id of session sid whose turn is
// not running: its answer, or why there is none.
func (m *Manager) finished(sid, id string, pos int64) waitResult {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.StoreTimeout)
	defer cancel()
	in, err := m.store.InputStatus(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && in.SessionID != sid):
		return waitResult{err: opencode.MessageNotFound(sid, id)}
	case err != nil:
		return waitResult{err: err}
	case in.State == opencode.InputRevoked:
		return waitResult{err: revokedError(sid, id, "before it was delivered")}
	case in.State == opencode.InputTombstone:
		return waitResult{err: revokedError(sid, id, "before it was admitted")}
	}
	answer := in.Answer
	if answer == "" {
		answer = id // closed by a crash before its turn ended: the user message
	}
	mp, err := m.store.GetMessage(ctx, sid, answer)
	if err != nil {
		return waitResult{err: opencode.MessageNotFound(sid, id)}
	}
	return waitResult{msg: mp, pos: pos}
}

// finishedResult answers a delivered input whose turn is over with the
// message recorded as its answer when the turn ended ("": none was, a crash
// closed the turn first: the user message).
func (r *runner) finishedResult(id, answer string) waitResult {
	ctx := context.Background()
	if answer == "" {
		answer = id // closed by a crash before its turn ended: the user message
	}
	mp, err := r.m.store.GetMessage(ctx, r.id, answer)
	if err != nil {
		return waitResult{err: opencode.MessageNotFound(r.id, id)}
	}
	return waitResult{msg: mp}
}

// recordAnswers stores, with the turn's end, which message answers each
// input delivered into it.
func (r *runner) recordAnswers(t *outbox, tu *turn) {
	for _, in := range tu.inputs {
		c := *in
		c.Answer = c.ID
		if tu.last != nil {
			c.Answer = tu.last.Info.ID
		}
		t.batch.Inputs = append(t.batch.Inputs, &c)
	}
}
