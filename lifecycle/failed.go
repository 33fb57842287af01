package lifecycle

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// storeFailure is a session stopped after a failed write to the store.
// The manager retries it in the background, pausing longer after each
// failure, so work admitted before the failure continues once the store
// is back, with no client request. A request for it meanwhile tries the
// store at once, at most one per session every failTryEvery (a full disk
// or a database that is down would fail every rebuild, and a request loop
// would spin): space freed or a database back helps the next request, not
// the one after the background pause. GET /session/status says "retry"
// meanwhile.
type storeFailure struct {
	attempt int
	next    time.Time
	err     error
	// tried is when a request last tried the store itself (see failedErr).
	tried time.Time
	// scheduled: the background retry at next is pending; a failure of a
	// request's own try leaves it as it is.
	scheduled bool
}

// Pauses between background retries: doubled from failRetryFirst up to
// failRetryMax; failTryEvery is how often a request may try a failed
// session's store itself.
const (
	failRetryFirst = 250 * time.Millisecond
	failRetryMax   = 30 * time.Second
	failTryEvery   = 250 * time.Millisecond
)

// failPace is the pacing of a manager's retries (the constants above;
// tests set their own).
type failPace struct{ first, max, tryEvery time.Duration }

// storeFailed records a failed write of session id and schedules its
// retry (noteFailure, then retryLater).
func (m *Manager) storeFailed(id string, epoch int64, err error) {
	m.retryLater(id, epoch, m.noteFailure(id, err))
}

// failureNote is what noteFailure recorded, for retryLater.
type failureNote struct {
	f     *storeFailure
	first bool
	again bool // a background retry is to be scheduled
	wait  time.Duration
	err   error
}

// noteFailure records a failed write of session id. A failing runner
// notes it before it leaves the registry, so no request can start the
// next runner (whose start clears the record) before the record exists:
// noted after, it would outlive the runner that recovered and say
// "retry" with no retry to come.
func (m *Manager) noteFailure(id string, err error) failureNote {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.failed[id]
	n := failureNote{f: f, first: f == nil, err: err}
	if n.first {
		f = &storeFailure{}
		m.failed[id] = f
		n.f = f
	}
	f.err = err
	// A request's own try that failed: the background retry stays as it
	// was scheduled (the pause is not doubled by requests).
	n.again = !f.scheduled
	if n.again {
		f.attempt++
		// The first rebuild is at once (a one-off failure costs nothing);
		// each further failure of the same outage pauses longer.
		if f.attempt > 1 {
			n.wait = min(m.pace.first<<min(f.attempt-2, 16), m.pace.max)
		}
		f.next = time.Now().Add(n.wait)
		f.scheduled = true
	}
	return n
}

// retryLater logs a noted failure and schedules its background retry. The
// first failure is logged; later ones of the same outage only at debug
// level (one line per change of state, not per attempt). In a cluster the
// session's lease is let go, so another instance's sweep may take the
// work over if this one's store connection stays broken. A failing runner
// calls it once it has left the registry, so the retry starts a new one.
func (m *Manager) retryLater(id string, epoch int64, n failureNote) {
	f := n.f
	m.mu.Lock()
	closed := m.closed
	attempt := f.attempt
	m.mu.Unlock()
	if n.first {
		m.log.Error("commit failed: session stopped, retrying in the background", "session", id, "err", n.err)
	} else {
		m.log.Debug("session still failing", "session", id, "attempt", attempt, "err", n.err)
	}
	if closed {
		return
	}
	if cl := m.cl; cl != nil {
		if epoch == 0 {
			epoch, _ = cl.Held(id) // claimed, then its reads failed
		}
		ctx, cancel := context.WithTimeout(m.ctx, time.Second)
		cl.Release(ctx, id, epoch)
		cancel()
	}
	if !n.again {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(n.wait)
		defer t.Stop()
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		current := m.failed[id] == f
		f.scheduled = false
		m.mu.Unlock()
		if current {
			m.retryFailed(id)
		}
	}()
}

// retryFailed starts the session's runner again; its recovery continues
// what was cut off and drains the queue. A failure schedules the next try
// (runner.fail); success clears the record.
func (m *Manager) retryFailed(id string) {
	m.mu.Lock()
	f := m.failed[id]
	m.mu.Unlock()
	if f == nil {
		return
	}
	if cl := m.cl; cl != nil {
		// Another instance took it over meanwhile (this one let its
		// lease go): it is served there, not retried here.
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.StoreTimeout)
		addr, err := cl.Owner(ctx, id)
		cancel()
		if err == nil && addr != "" {
			m.clearFailure(id, "session taken over by another instance: no longer retried here")
			return
		}
	}
	r, err := m.runner(m.ctx, id)
	if err != nil {
		if !storeDown(err) {
			// Taken over by another instance, or gone: nothing to retry.
			m.clearFailure(id, "session not retried: "+err.Error())
			return
		}
		// The session cannot even be read: try again later.
		m.storeFailed(id, 0, err)
		return
	}
	c := command{f: func() {}, done: make(chan struct{})}
	select {
	case r.cmds <- c:
	case <-r.done:
	case <-m.ctx.Done():
		return
	}
	select {
	case <-c.done:
		// Started (runner.loop cleared the record).
	case <-r.done:
		// Its start failed again: fail() has scheduled the next try.
	case <-m.ctx.Done():
	}
}

// recovered clears the failure record of a session whose runner started:
// its store works again.
func (m *Manager) recovered(id string) { m.clearFailure(id, "session recovered after failed writes") }

// clearFailure drops a session's failure record, if it has one, and says
// why in the log.
func (m *Manager) clearFailure(id, why string) {
	m.mu.Lock()
	f := m.failed[id]
	delete(m.failed, id)
	m.mu.Unlock()
	if f != nil {
		m.log.Info(why, "session", id, "attempts", f.attempt)
	}
}

// storeDown reports whether a runner that could not start (err) is worth
// a retry in the background. The core's outage is (unavailable: what
// storeErr mapped, a session stopped after a failed write); an answer is
// not: a session another instance runs (an EUnavailable to a client, but
// served there), one that is gone, a shutdown. An error storeErr left as
// it is and that is no answer (a bad row, a bug) is retried too, as a
// failed commit is: a retry costs a read, giving up strands the session's
// work.
func storeDown(err error) bool {
	var owned *store.OwnedError
	var oe *opencode.Error
	switch {
	case err == nil, errors.Is(err, ErrClosed), errors.As(err, &owned), errors.Is(err, store.ErrNotFound),
		errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &oe):
		return unavailable(oe)
	}
	return true
}

// StoreRetry tells a session waiting for its background retry: the
// attempt, the message a client shows and the retry's time (epoch ms).
func (m *Manager) StoreRetry(id string) (attempt int, message string, next int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.failed[id]
	if f == nil {
		return 0, "", 0, false
	}
	return f.attempt, "The store cannot be written; retrying", f.next.UnixMilli(), true
}

// failedErr is the error a request for a session that is waiting for its
// background retry gets (nil: none is, or this request may try the store
// itself: the pause is over, or no request tried it for failTryEvery).
func (m *Manager) failedErr(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.failed[id]
	now := time.Now()
	if f == nil || !now.Before(f.next) {
		return nil
	}
	if now.Sub(f.tried) >= m.pace.tryEvery {
		f.tried = now
		return nil
	}
	secs := int(f.next.Sub(now).Seconds()) + 1
	// Retry-After is the next request's own try, not the background one.
	return &opencode.Error{Code: opencode.EUnavailable, SessionID: id, Cause: f.err, RetryAfter: 1,
		Message: "Session " + id + " is stopped after failed writes to the store; a request tries it again, and the server in the background in " + strconv.Itoa(secs) + " s"}
}
