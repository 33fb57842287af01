package acp

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// Updates come from the session's v2 events: the durable log (what
// session/load replays, in seq order) and the live deltas between its
// entries. A connection follows a session from the moment it creates,
// loads, resumes or prompts it.

// wanted is the events a followed session's stream looks at.
func wanted(e *opencode.Event) bool {
	if e.Durable || strings.HasPrefix(e.Type, "session.next.") {
		return true
	}
	switch e.Type {
	case opencode.EvTodoUpdated, opencode.EvSessionUpdated, opencode.EvPermissionAsked, opencode.EvPermissionReply,
		opencode.EvSessionStatus, opencode.EvPartUpdated:
		return true
	}
	return false
}

// attach follows a session on this connection (once); with replay its log
// is sent as updates first.
func (a *Agent) attach(ctx context.Context, id string, replay bool) (*attached, error) {
	a.mu.Lock()
	at := a.sessions[id]
	a.mu.Unlock()
	if at != nil && !replay {
		return at, nil
	}
	if at != nil {
		a.detach(id) // session/load again: a fresh replay
	}
	s, err := a.core.GetSession(ctx, id)
	if err != nil {
		return nil, coreError(err)
	}
	// Subscribed before the log is read: nothing falls between the two.
	sub := a.subscribe(id)
	at = &attached{id: id, sub: sub, done: make(chan struct{}), quit: make(chan struct{}), asks: map[string]context.CancelFunc{}}
	a.mu.Lock()
	if prev := a.sessions[id]; prev != nil {
		a.mu.Unlock()
		sub.Close()
		return prev, nil
	}
	a.sessions[id] = at
	a.mu.Unlock()
	mp := newMapper(s.Title)
	mp.size = a.contextSize(s)
	if !replay {
		mp.cost = s.Cost // the replay sums the log's steps instead
	}
	var sent int64
	if replay {
		for after := int64(0); ; {
			evs, err := a.core.Events(ctx, id, after, 500)
			if err != nil {
				close(at.done) // no stream runs
				a.detach(id)
				return nil, coreError(err)
			}
			for _, e := range evs {
				for _, u := range mp.updates(e, true) {
					_ = a.update(id, u)
				}
				after = e.Seq
			}
			if len(evs) < 500 {
				break
			}
		}
		sent = mp.lastSeq
	}
	go a.pump(at, mp, sent)
	return at, nil
}

// subscribe is a followed session's subscription.
func (a *Agent) subscribe(id string) *eventbus.Subscription {
	sub := a.core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == id && wanted(e) })
	sub.Track() // a prompt's reply waits until its turn's updates are written (Flushed)
	return sub
}

// pump streams a followed session's live updates until it is detached.
// sent is the seq of the last log event mapped. A subscription cut off
// (the client fell behind, or Bus.Reset when events may have been missed)
// is resumed: the log fills the gap, so the client's updates go on with
// nothing lost and nothing twice.
func (a *Agent) pump(at *attached, mp *mapper, sent int64) {
	defer close(at.done)
	at.mu.Lock()
	sub := at.sub
	at.mu.Unlock()
	for {
		for e := range sub.C {
			if e.Durable {
				if e.Seq <= sent {
					sub.Ack(e.Pos)
					continue // mapped already
				}
				sent = e.Seq
			}
			a.deliver(at, mp, e)
			sub.Ack(e.Pos)
		}
		if !sub.Dropped() {
			return // detached
		}
		a.log.Warn("acp: session updates cut off; resuming from the log", "session", at.id, "after", sent)
		if sub = a.resume(at, mp, &sent); sub == nil {
			return
		}
	}
}

// deliver writes one event's updates (and asks the client a permission).
func (a *Agent) deliver(at *attached, mp *mapper, e *opencode.Event) {
	at.gate.Lock()
	for _, u := range mp.updates(e, false) {
		switch u["state"] {
		case "idle":
			if u["stopReason"] == "end_turn" && at.cancelAsked.Load() {
				u["stopReason"] = "cancelled" // cancelled between two steps
			}
			at.cancelAsked.Store(false)
		case "running":
			if e.Type == opencode.EvPrompted {
				at.cancelAsked.Store(false) // new work: an earlier cancel was for older work
			}
		}
		_ = a.update(at.id, u)
	}
	at.gate.Unlock()
	switch e.Type {
	case opencode.EvPermissionAsked:
		a.askPermission(at, e)
	case opencode.EvPermissionReply:
		var p struct {
			RequestID string `json:"requestID"`
		}
		if json.Unmarshal(e.Data, &p) == nil {
			at.mu.Lock()
			if cancel := at.asks[p.RequestID]; cancel != nil {
				cancel() // answered elsewhere, or rejected by an abort
			}
			at.mu.Unlock()
		}
	}
}

// resumeRetry is the wait between tries to resume a cut stream whose log
// could not be read.
var resumeRetry = time.Second

// resume replaces a cut subscription (subscribed before the log is read,
// as attach does) and maps the log after *sent. What is not in the log is
// asked of the core: whether the session's work ended in the gap (its idle
// is live only) and which of its permission asks are pending. It returns
// nil once the session is detached or the connection ends.
func (a *Agent) resume(at *attached, mp *mapper, sent *int64) *eventbus.Subscription {
	mp.cut()
	for {
		sub := a.subscribe(at.id)
		at.mu.Lock()
		select {
		case <-at.quit:
			at.mu.Unlock()
			sub.Close()
			return nil
		default:
		}
		at.sub = sub
		at.mu.Unlock()
		err := a.catchUp(at, mp, sent)
		if err == nil {
			return sub
		}
		sub.Close()
		a.log.Warn("acp: resuming session updates", "session", at.id, "err", err)
		select {
		case <-at.quit:
			return nil
		case <-a.life.Done():
			return nil
		case <-time.After(resumeRetry):
		}
	}
}

// catchUp maps the log after *sent, then what the log does not hold.
func (a *Agent) catchUp(at *attached, mp *mapper, sent *int64) error {
	ctx, cancel := context.WithTimeout(a.life, 30*time.Second)
	defer cancel()
	mp.catchUp = true
	defer func() { mp.catchUp = false }()
	for {
		evs, err := a.core.Events(ctx, at.id, *sent, 500)
		if err != nil {
			return err
		}
		for _, e := range evs {
			a.deliver(at, mp, e)
			*sent = e.Seq
		}
		if len(evs) < 500 {
			break
		}
	}
	status, err := a.core.SessionStatus(ctx)
	if err != nil {
		return err
	}
	if status[at.id] == "" {
		// Idle now: the work mapped ended in the gap (a later turn's
		// updates are still to come on the new subscription).
		mp.skipIdle = 0
		a.deliver(at, mp, &opencode.Event{Type: opencode.EvSessionStatus, SessionID: at.id,
			Data: json.RawMessage(`{"status":{"type":"idle"}}`)})
	}
	for _, p := range a.core.Permissions() {
		if p.SessionID != at.id {
			continue
		}
		at.mu.Lock()
		_, asking := at.asks[p.ID]
		at.mu.Unlock()
		if !asking {
			data, _ := json.Marshal(p)
			a.deliver(at, mp, &opencode.Event{Type: opencode.EvPermissionAsked, SessionID: at.id, Data: data})
		}
	}
	return nil
}

// update writes one update of the mapping, in the connection's version.
func (a *Agent) update(sessionID string, u map[string]any) error {
	if u = a.encode(sessionID, u); u == nil {
		return nil
	}
	return a.conn.notify("session/update", map[string]any{"sessionId": sessionID, "update": u})
}

func (a *Agent) detach(id string) {
	a.mu.Lock()
	at := a.sessions[id]
	delete(a.sessions, id)
	a.mu.Unlock()
	if at != nil {
		at.mu.Lock()
		close(at.quit)
		at.sub.Close()
		at.mu.Unlock()
		<-at.done
		// Our permission asks of this session stop waiting for the client
		// (the core's asks stay, for another client to answer).
		at.mu.Lock()
		for _, cancel := range at.asks {
			cancel()
		}
		at.mu.Unlock()
		at.askers.Wait()
	}
}

func (a *Agent) detachAll() {
	a.mu.Lock()
	ids := make([]string, 0, len(a.sessions))
	for id := range a.sessions {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, id := range ids {
		a.detach(id)
	}
}

// askPermission asks the client (session/request_permission) and answers
// the core with its choice; a cancelled or failed ask rejects.
func (a *Agent) askPermission(at *attached, e *opencode.Event) {
	var req struct {
		ID         string   `json:"id"`
		Permission string   `json:"permission"`
		Patterns   []string `json:"patterns"`
		Tool       *struct {
			CallID string `json:"callID"`
		} `json:"tool"`
	}
	if json.Unmarshal(e.Data, &req) != nil || req.ID == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	at.mu.Lock()
	if at.asks[req.ID] != nil {
		at.mu.Unlock()
		cancel()
		return // asked already (found pending when a cut stream resumed)
	}
	at.asks[req.ID] = cancel
	at.mu.Unlock()
	callID := req.ID
	if req.Tool != nil && req.Tool.CallID != "" {
		callID = req.Tool.CallID
	}
	title := req.Permission
	if len(req.Patterns) > 0 {
		title += " " + strings.Join(req.Patterns, ", ")
	}
	at.askers.Add(1)
	go func() {
		defer at.askers.Done()
		defer func() {
			at.mu.Lock()
			delete(at.asks, req.ID)
			at.mu.Unlock()
			cancel()
		}()
		call := map[string]any{"toolCallId": callID, "title": title, "status": "pending"}
		ask := map[string]any{
			"sessionId": at.id,
			"toolCall":  call,
			"options": []map[string]any{
				{"optionId": "once", "name": "Allow once", "kind": "allow_once"},
				{"optionId": "always", "name": "Always allow", "kind": "allow_always"},
				{"optionId": "reject", "name": "Reject", "kind": "reject_once"},
			},
		}
		if a.v2.Load() {
			// v2: a title, and the tool call as the ask's subject.
			delete(ask, "toolCall")
			ask["title"] = title
			ask["subject"] = map[string]any{"type": "tool_call", "toolCall": call}
		}
		res, err := a.conn.call(ctx, "session/request_permission", ask)
		if ctx.Err() != nil {
			return // answered elsewhere or aborted: nothing to say
		}
		reply := "reject"
		var out struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		if err == nil && json.Unmarshal(res, &out) == nil && out.Outcome.Outcome == "selected" {
			switch out.Outcome.OptionID {
			case "once", "always":
				reply = out.Outcome.OptionID
			}
		}
		if err := a.core.ReplyPermission(context.Background(), req.ID, reply); err != nil {
			a.log.Debug("acp: permission reply", "request", req.ID, "err", err)
		}
	}()
}
