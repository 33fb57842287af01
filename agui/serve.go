package agui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// errorKind is how an error goes out over AG-UI: the HTTP status when it
// comes before the stream, the RUN_ERROR code within it.
type errorKind struct {
	status int
	code   string
}

// classify maps any error to its kind and the message a client may see:
// an internal error's cause goes to the log, not the client.
func (h *Handler) classify(err error) (errorKind, string) {
	var ie *inputError
	if errors.As(err, &ie) {
		return errorKind{ie.status, ie.code}, ie.message
	}
	var oe *opencode.Error
	if !errors.As(err, &oe) {
		oe = &opencode.Error{Code: opencode.EInternal, Cause: err}
	}
	kind := opencode.KindOf(oe.Code) // the one table: its HTTP and AG-UI columns
	k := errorKind{kind.HTTP, kind.AGUI}
	if k.status >= 500 {
		h.o.Logger.Log(context.Background(), kind.Level(), "agui: run failed", "err", err)
		if oe.Code == opencode.EUnavailable {
			return k, "The store cannot be reached now; retry the run"
		}
		return k, "Internal error"
	}
	return k, oe.Message
}

// runError is the RUN_ERROR of a run that failed once streaming: its
// code and message by the one table, as before the stream.
func (h *Handler) runError(err error) *opencode.EventError {
	k, msg := h.classify(err)
	return &opencode.EventError{Type: k.code, Message: msg}
}

func (h *Handler) httpError(w http.ResponseWriter, err error) {
	k, msg := h.classify(err)
	w.Header().Set("Content-Type", "application/json")
	if k.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(k.status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": k.code, "message": msg}})
}

// ServeHTTP serves POST /agui (the thread in the body).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.ServeThread(w, r, "") }

// ServeThread serves a run; thread is the session of POST /agui/{id}
// ("" for POST /agui).
func (h *Handler) ServeThread(w http.ResponseWriter, r *http.Request, thread string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.httpError(w, &opencode.Error{Code: opencode.EMethod, Message: "an AG-UI run is a POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			h.httpError(w, &inputError{413, "TOO_LARGE", fmt.Sprintf("the run is larger than %d bytes", maxBody)})
			return
		}
		h.httpError(w, badInput("the body could not be read: %v", err))
		return
	}
	in, err := DecodeInput(body)
	if err != nil {
		h.httpError(w, err)
		return
	}
	if thread != "" && in.ThreadID != thread {
		h.httpError(w, badInput("threadId %q is not the thread of the path (%s)", in.ThreadID, thread))
		return
	}
	if identifier.Check(identifier.Session, in.ThreadID) != nil {
		h.httpError(w, badInput("threadId %q is not a session ID: a thread is a session, and its ID is ours (ses_…, as POST /session gives; an unknown one in that format starts a new session)", in.ThreadID))
		return
	}
	fwd, _ := in.forwarded()
	if fwd.Agent != "" && !slices.ContainsFunc(h.o.Core.Agents(), func(a agent.Agent) bool { return a.Name == fwd.Agent }) {
		h.httpError(w, badInput("forwardedProps.agent: Agent not found: %q", fwd.Agent))
		return
	}
	enc := newEncoder(r.Header.Get("Accept"))
	ctx := r.Context()

	if _, err := h.o.Core.GetSession(ctx, in.ThreadID); err != nil {
		var oe *opencode.Error
		if !errors.As(err, &oe) || oe.Code != opencode.ENotFound {
			h.httpError(w, err)
			return
		}
		if _, _, err := h.o.Core.CreateSession(ctx, opencode.SessionOptions{ID: in.ThreadID, Directory: h.o.Directory}); err != nil {
			h.httpError(w, err)
			return
		}
	}

	// Subscribed before anything is admitted or answered: what follows
	// is all in the subscription, and the log before it is read.
	sub := h.o.Core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == in.ThreadID && wanted(e) })
	defer sub.Close()

	unlock := h.lock(in.ThreadID)
	pl, err := h.plan(ctx, in, fwd)
	unlock()
	if err != nil {
		h.httpError(w, err)
		return
	}

	w.Header().Set("Content-Type", enc.contentType())
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var werr error
	emit := func(ev event) {
		if werr != nil {
			return
		}
		if werr = enc.write(w, ev); werr == nil {
			werr = rc.Flush()
		}
	}
	start := event{"type": "RUN_STARTED", "threadId": in.ThreadID, "runId": in.RunID}
	if pl.parentRun != "" && pl.parentRun != in.RunID {
		start["parentRunId"] = pl.parentRun
	} else if in.ParentRunID != "" {
		start["parentRunId"] = in.ParentRunID
	}
	emit(start)
	if pl.refuse != nil {
		emit(event{"type": "RUN_ERROR", "message": pl.refuse.message, "code": pl.refuse.code})
		return
	}
	emit(event{"type": "MESSAGES_SNAPSHOT", "messages": pl.snapshot})
	emit(event{"type": "STATE_SNAPSHOT", "snapshot": h.state(ctx, in.ThreadID)})

	mp := newMapper(emit)
	for _, id := range pl.targets {
		mp.targets[id] = true
	}
	for _, t := range in.Tools {
		mp.clientTools[t.Name] = true
	}
	mp.subscribedFirst = pl.admitted
	maps.Copy(mp.callPart, pl.callParts)
	mp.lookupParts = func() map[string]string {
		conv, err := h.o.Core.Messages(ctx, in.ThreadID)
		if err != nil {
			return nil
		}
		return callParts(conv)
	}
	end := h.follow(ctx, in, pl, mp, sub, func() {
		if werr == nil {
			if werr = enc.keepAlive(w); werr == nil {
				werr = rc.Flush()
			}
		}
	})
	h.end(ctx, in, mp, end, emit)
	if end == endSuccess || end == endCancelled || end == endError {
		h.doneRun(in.ThreadID, in.RunID) // its turn is over
	}
	if werr != nil && !errors.Is(werr, context.Canceled) {
		h.o.Logger.Debug("agui: the client left the run", "thread", in.ThreadID, "run", in.RunID, "err", werr)
	}
}

// follow streams the run's events until it ends: from the log (the
// run's first message's delivery on, or its admission while it waits),
// then live.
func (h *Handler) follow(ctx context.Context, in *RunAgentInput, pl *plan, mp *mapper, sub *eventbus.Subscription, keepAlive func()) ending {
	var stopHandOver func()
	core := h.o.Core
	if len(pl.targets) > 0 && !pl.continued {
		first, err := core.Input(ctx, in.ThreadID, pl.targets[0])
		if err != nil {
			mp.failure = h.runError(err)
			return endError
		}
		// From the admission on: what comes before the first message's
		// delivery (another turn's end) is skipped while the run waits.
		from := max(first.AdmittedSeq-1, 0)
		mp.waiting = true
		for {
			evs, err := core.Events(ctx, in.ThreadID, from, 500)
			if err != nil {
				mp.failure = h.runError(err)
				return endError
			}
			for _, e := range evs {
				if end := mp.add(e, true); end != goOn {
					return end
				}
				from = e.Seq
			}
			if len(evs) < 500 {
				break
			}
		}
	}
	// Caught up with the log: is the turn still running?
	if end := h.settled(ctx, in.ThreadID, mp, sub); end != goOn {
		return end
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	// handOver checks, while a frontend call is open, whether the turn
	// waits on the client alone: no event says when the model call
	// returned and the step's server tools finished, so the core is asked
	// after each event and every 20 ms.
	var handOver <-chan time.Time
	handEnd := endPending
	// idleCheck asks the core again, shortly after an idle it said was
	// not the end (the session was still busy, its next turn starting or
	// the last one's end not yet marked).
	var idleCheck <-chan time.Time
	var stopIdleCheck func()
	defer func() {
		if stopIdleCheck != nil {
			stopIdleCheck()
		}
	}()
	check := func() bool {
		if !mp.clientOpen {
			return false
		}
		if ids, err := h.o.Core.WaitingClientCalls(ctx, in.ThreadID); err == nil && len(ids) > 0 {
			mp.handedOver = ids
			// The step's other events are on the bus by then: sent first.
			if end := drain(sub, mp); end != goOn {
				handEnd = end
			}
			return true
		}
		if handOver == nil {
			t := time.NewTicker(20 * time.Millisecond)
			handOver = t.C
			stopHandOver = t.Stop
		}
		return false
	}
	defer func() {
		if stopHandOver != nil {
			stopHandOver()
		}
	}()
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				mp.failure = &opencode.EventError{Type: "UNAVAILABLE", Message: "the run's stream fell behind and was stopped; run again to catch up"}
				return endError
			}
			end := mp.add(e, false)
			sub.Ack(e.Pos)
			switch {
			case end == idleSeen:
				if end := h.idle(in.ThreadID, mp, sub); end != goOn {
					return end
				}
				if idleCheck == nil {
					t := time.NewTicker(20 * time.Millisecond)
					idleCheck, stopIdleCheck = t.C, t.Stop
				}
				continue
			case end != goOn:
				return end
			case idleCheck != nil && (e.Type == opencode.EvPrompted || e.Type == opencode.EvStepStarted):
				// The idle was the last turn's: the next one runs.
				stopIdleCheck()
				idleCheck, stopIdleCheck = nil, nil
			}
			if check() {
				return handEnd
			}
		case <-idleCheck:
			if end := h.idle(in.ThreadID, mp, sub); end != goOn {
				return end
			}
		case <-handOver:
			if check() {
				return handEnd
			}
		case <-heartbeat.C:
			// A comment keeps proxies from closing a quiet stream (AG-UI
			// has no keep-alive event); the settled check covers a turn
			// whose end we cannot see.
			keepAlive()
			if end := h.settled(ctx, in.ThreadID, mp, sub); end != goOn {
				return end
			}
		case <-ctx.Done():
			return goOn // the client left: its run goes on in the core
		case <-h.o.Done:
			mp.failure = &opencode.EventError{Type: "UNAVAILABLE", Message: "the server is shutting down; run again to catch up"}
			return endError
		}
	}
}

// settled checks the session now, for a run caught up with the log: an
// ask waiting ends the run with an interrupt, frontend calls waiting with
// their IDs, an idle session (the turn is over) with the turn's outcome.
func (h *Handler) settled(ctx context.Context, thread string, mp *mapper, sub *eventbus.Subscription) ending {
	if mp.waiting {
		return goOn // the run's message waits behind another turn
	}
	for _, p := range h.o.Core.Permissions() {
		if p.SessionID == thread {
			mp.interrupt = append(mp.interrupt, permissionInterrupt(p))
		}
	}
	for _, q := range h.o.Core.Questions() {
		if q.SessionID == thread {
			mp.interrupt = append(mp.interrupt, questionInterrupt(q))
		}
	}
	if len(mp.interrupt) > 0 {
		return endInterrupt
	}
	if ids, err := h.o.Core.WaitingClientCalls(ctx, thread); err == nil && len(ids) > 0 {
		mp.handedOver = ids
		if end := drain(sub, mp); end != goOn {
			return end
		}
		return endPending // the turn waits on the client alone
	}
	if st := h.o.Core.Status()[thread]; st == "" || st == "idle" {
		// The core says idle only once the turn's last events are on the
		// bus: they are in the subscription, and are sent first.
		if end := drain(sub, mp); end != goOn {
			return end
		}
		return mp.turnEnded()
	}
	return goOn
}

// idle answers a session.status idle: the run ends (with what the
// subscription holds first) unless the session is busy again, the next
// turn having started in the same commit; goOn then.
func (h *Handler) idle(thread string, mp *mapper, sub *eventbus.Subscription) ending {
	if h.o.Core.Status()[thread] == "busy" {
		return goOn
	}
	if end := drain(sub, mp); end != goOn {
		return end
	}
	if h.o.Core.Status()[thread] == "busy" {
		return goOn // what it held started the next turn
	}
	return mp.turnEnded()
}

// drain maps what the subscription holds now, without waiting: what the
// core did before it answered a question about its state.
func drain(sub *eventbus.Subscription, mp *mapper) ending {
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				return goOn
			}
			end := mp.add(e, false)
			sub.Ack(e.Pos)
			if end != goOn && end != idleSeen {
				return end // an idle here is the caller's to judge: it asks the core
			}
		default:
			return goOn
		}
	}
}

// end writes the run's last events.
func (h *Handler) end(ctx context.Context, in *RunAgentInput, mp *mapper, end ending, emit func(event)) {
	if end == goOn {
		return // the client is gone
	}
	mp.finish()
	fin := event{"type": "RUN_FINISHED", "threadId": in.ThreadID, "runId": in.RunID}
	switch end {
	case endSuccess:
		fin["outcome"] = event{"type": "success"}
	case endPending:
		ids := slices.Sorted(slices.Values(mp.handedOver))
		fin["outcome"] = event{"type": "success", "pendingToolCallIds": ids}
	case endInterrupt:
		fin["outcome"] = event{"type": "interrupt", "interrupts": mp.interrupt}
	case endCancelled:
		fin["outcome"] = event{"type": "cancelled"}
	case endError:
		code, msg := "RUN_FAILED", "the run failed"
		if mp.failure != nil {
			msg = mp.failure.Message
			if mp.failure.Type != "" {
				code = mp.failure.Type
			}
		}
		emit(event{"type": "RUN_ERROR", "message": msg, "code": code})
		return
	}
	emit(fin)
}

// state is the session's state as AG-UI's STATE_SNAPSHOT carries it.
func (h *Handler) state(ctx context.Context, thread string) map[string]any {
	todos, err := h.o.Core.Todos(ctx, thread)
	if err != nil || todos == nil {
		todos = []opencode.Todo{}
	}
	status := h.o.Core.Status()[thread]
	if status == "" {
		status = "idle"
	}
	return map[string]any{"todos": todos, "status": status}
}
