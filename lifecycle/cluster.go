package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Scale-out (store.Cluster): several instances share one database. A
// session's runner runs only on the instance that owns it; a runner was
// started under a claim's epoch and stops, publishing nothing, as soon as
// that ownership is fenced (another instance claimed the session, or this
// instance's lease ran out). Requests for a session another live instance
// owns are forwarded to it by routes (see Owner); events of sessions run
// elsewhere come in through relay and go out on this instance's bus.

// sweepEvery is how often an instance looks for sessions with work whose
// owner died (store.Cluster.ClaimOrphans).
const sweepEvery = 500 * time.Millisecond

// owned reports whether the runner may still act for its session: always
// alone, and in a cluster while it holds the session under its epoch with
// a trusted lease. Checked before anything is published, a model is
// called or a tool runs.
func (r *runner) owned() bool {
	return r.m.cl == nil || r.m.cl.Holds(r.id, r.epoch)
}

// fenced records that the runner lost its session: the loop stops it
// without committing or publishing anything more (see fail).
func (r *runner) fenced() {
	if r.failure == nil {
		r.failure = store.ErrFenced
	}
}

// claim makes this instance the session's owner before its runner loads
// it (what it reads is then final: a former owner's commits are fenced).
func (m *Manager) claim(ctx context.Context, id string) (int64, error) {
	if m.cl == nil {
		return 0, nil
	}
	epoch, err := m.cl.Claim(ctx, id)
	var owned *store.OwnedError
	// An owner the request was not forwarded to is gone or going: its
	// lease lapses within the lease time (the two sides may read the
	// clock a little apart). Wait for that instead of answering 503.
	for deadline := time.Now().Add(m.cfg.StoreTimeout); errors.As(err, &owned) && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
		epoch, err = m.cl.Claim(ctx, id)
	}
	switch {
	case err == nil:
		m.mu.Lock()
		m.forgetRemote(id)
		m.mu.Unlock()
		return epoch, nil
	case errors.As(err, &owned):
		return 0, &opencode.Error{Code: opencode.EUnavailable, SessionID: id,
			Message: "Session " + id + " is run by another instance (" + owned.Addr + "); retry the request", Cause: err}
	case errors.Is(err, store.ErrFenced):
		return 0, &opencode.Error{Code: opencode.EUnavailable, SessionID: id,
			Message: "This instance's lease is being renewed; retry the request", Cause: err}
	}
	return 0, mapStoreErr(err, id)
}

// Clustered reports whether other instances may run sessions.
func (m *Manager) Clustered() bool { return m.cl != nil }

// Owner returns the address of the live instance that runs the session,
// or "" when this instance may serve it (alone, it runs it already, or
// nobody live owns it: the request's runner claims it).
func (m *Manager) Owner(ctx context.Context, id string) (string, error) {
	if m.cl == nil {
		return "", nil
	}
	m.mu.Lock()
	r := m.runners[id]
	m.mu.Unlock()
	if r != nil && m.cl.Holds(id, r.epoch) {
		return "", nil
	}
	// No runner, or one that lost the session (a lease lost, not yet
	// stopped: it may be stuck in a commit): ask who owns it now.
	addr, err := m.cl.Owner(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil // the handler answers the 404
	}
	if addr != "" {
		// Its owner serves it: a failure this instance had with it is over.
		m.clearFailure(id, "session taken over by another instance: no longer retried here")
	}
	return addr, err
}

// relay publishes an event another instance published, keeping what this
// instance shows of sessions run elsewhere: their pending asks. (Their
// status is read from the store: see SessionStatus.)
func (m *Manager) relay(e *opencode.Event) {
	switch e.Type {
	case opencode.EvPermissionAsked:
		var req opencode.PermissionRequest
		if json.Unmarshal(e.Data, &req) == nil && req.ID != "" {
			m.mu.Lock()
			m.remotePerms[req.ID] = req
			m.mu.Unlock()
		}
	case opencode.EvQuestionAsked:
		var req opencode.QuestionRequest
		if json.Unmarshal(e.Data, &req) == nil && req.ID != "" {
			m.mu.Lock()
			m.remoteQuestions[req.ID] = req
			m.mu.Unlock()
		}
	case opencode.EvPermissionReply, opencode.EvQuestionReplied, opencode.EvQuestionRejected:
		var p struct {
			RequestID string `json:"requestID"`
		}
		if json.Unmarshal(e.Data, &p) == nil {
			m.mu.Lock()
			delete(m.remotePerms, p.RequestID)
			delete(m.remoteQuestions, p.RequestID)
			m.mu.Unlock()
		}
	}
	m.bus.Publish(e)
}

// forgetRemote drops what this instance showed of a session run elsewhere
// (it takes the session over: an ask of the former owner died with its
// tool call); m.mu held.
func (m *Manager) forgetRemote(id string) {
	for k, r := range m.remotePerms {
		if r.SessionID == id {
			delete(m.remotePerms, k)
		}
	}
	for k, r := range m.remoteQuestions {
		if r.SessionID == id {
			delete(m.remoteQuestions, k)
		}
	}
}

// AskSession returns the session of a permission or question request that
// another instance's runner asked ("" if none is known): its reply goes to
// that session's owner.
func (m *Manager) AskSession(requestID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.remotePerms[requestID]; ok {
		return r.SessionID
	}
	if r, ok := m.remoteQuestions[requestID]; ok {
		return r.SessionID
	}
	return ""
}

// lost stops every runner: the lease ran out, so other instances may have
// claimed any of their sessions. Each stops as a fenced runner does.
func (m *Manager) lost() {
	m.ext.stopAll() // bounded: each kill waits a few seconds at most
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	for _, r := range rs {
		go func() {
			select {
			case r.cmds <- command{f: r.fenced, done: make(chan struct{})}:
			case <-r.done:
			}
		}()
	}
}

// sweep claims sessions with work whose owner died and starts their
// runners, which close the interrupted turn, continue it and drain the
// queue (today's recovery).
func (m *Manager) sweep(ctx context.Context) error {
	for {
		ids, err := m.cl.ClaimOrphans(ctx, 32)
		if err != nil {
			return err
		}
		for _, id := range ids {
			m.log.Info("taking over a session whose owner is gone", "session", id)
			if err := m.resume(ctx, id); err != nil {
				m.log.Warn("take over session", "session", id, "err", err)
			}
		}
		if len(ids) < 32 {
			return nil
		}
	}
}

func (m *Manager) sweepLoop() {
	defer m.wg.Done()
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		if err := m.sweep(m.ctx); err != nil && m.ctx.Err() == nil {
			m.log.Warn("sweep for orphaned sessions", "err", err)
		}
	}
}

// SessionStatus is the status of every session with a running turn: this
// instance's, and in a cluster those other instances run, read from the
// store (a session whose turn is open: flagged when it starts, cleared in
// the commit that ends it).
func (m *Manager) SessionStatus(ctx context.Context) (map[string]string, error) {
	out := m.Status()
	m.mu.Lock()
	for id := range m.failed {
		out[id] = "retry"
	}
	m.mu.Unlock()
	if m.cl == nil {
		return out, nil
	}
	ids, err := m.cl.Running(ctx)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = "busy"
		}
	}
	return out, nil
}
