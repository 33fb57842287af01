package lifecycle

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

const defaultAgent = "build"

// maybeStart starts a turn on an idle session with pending input: all
// pending steers, or else the oldest queued input.
func (r *runner) maybeStart() {
	if r.turn != nil || r.exit != nil {
		return
	}
	batch := r.steers()
	if len(batch) == 0 {
		for _, in := range r.pending {
			if in.Delivery == opencode.Queue {
				batch = []*opencode.Input{in}
				break
			}
		}
	}
	if len(batch) == 0 {
		r.notifyIdle()
		return
	}
	ctx, cancel := context.WithCancel(r.m.ctx)
	r.turn = &turn{ctx: ctx, cancel: cancel, agent: defaultAgent,
		model: opencode.MessageModel{ProviderID: r.m.cfg.ProviderID, ModelID: r.m.cfg.ModelID}}
	r.m.setBusy(r.id, true)
	reply := r.deliver(batch, true)
	if !reply {
		r.endTurn()
		return
	}
	r.startStep()
}

// steers returns the pending steers in admission order.
func (r *runner) steers() []*opencode.Input {
	var out []*opencode.Input
	for _, in := range r.pending {
		if in.Delivery == opencode.Steer {
			out = append(out, in)
		}
	}
	return out
}

// deliver promotes inputs into user messages of the running turn, in one
// commit, and reports whether any of them asks for a model reply.
func (r *runner) deliver(batch []*opencode.Input, first bool) bool {
	now := r.m.now()
	t := r.tx()
	reply := false
	sess := r.sess
	for _, in0 := range batch {
		in := *in0
		if in.Agent != "" {
			r.turn.agent = in.Agent
		}
		if in.Model != nil {
			r.turn.model = *in.Model
		}
		msg := opencode.Message{ID: in.ID, SessionID: r.id, Role: opencode.User,
			Time: opencode.MessageTime{Created: now}, Agent: r.turn.agent, Model: &opencode.MessageModel{
				ProviderID: r.turn.model.ProviderID, ModelID: r.turn.model.ModelID}, System: in.System, Tools: in.Tools}
		t.message(msg)
		for _, p := range in.Parts {
			t.part(p, now)
		}
		in.State = opencode.InputDelivered
		in.PromotedSeq = t.durable(opencode.EvPrompted, 1, map[string]any{"timestamp": in.TimeCreated, "sessionID": r.id,
			"messageID": in.ID, "prompt": in.Prompt(), "delivery": in.Delivery})
		t.durable(opencode.EvInboxDelivered, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": in.ID, "delivery": in.Delivery})
		t.batch.Inputs = append(t.batch.Inputs, &in)
		r.turn.delivered = append(r.turn.delivered, in.ID)
		r.turn.parentID = in.ID
		if !in.NoReply {
			reply = true
		}
		if strings.HasPrefix(sess.Title, defaultTitlePrefix) {
			if title := titleOf(in.Prompt().Text); title != "" {
				sess.Title = title
			}
		}
		r.remember(opencode.MessageWithParts{Info: msg, Parts: in.Parts})
	}
	sess.Agent = r.turn.agent
	sess.Model = &opencode.ModelRef{ID: r.turn.model.ModelID, ProviderID: r.turn.model.ProviderID}
	sess.Time.Updated = now
	t.session(sess)
	r.sess = sess
	if first {
		// The real server's order: user message and parts, session.updated,
		// then busy.
		t.live(opencode.EvSessionStatus, map[string]any{"sessionID": r.id, "status": map[string]any{"type": "busy"}})
	}
	t.mustFlush()
	delivered := map[string]bool{}
	for _, in := range batch {
		delivered[in.ID] = true
	}
	kept := r.pending[:0]
	for _, in := range r.pending {
		if !delivered[in.ID] {
			kept = append(kept, in)
		}
	}
	r.pending = kept
	return reply
}

// titleOf makes a session title from the first prompt: its first line,
// at most 50 characters.
func titleOf(text string) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if utf8.RuneCountInString(text) > 50 {
		rs := []rune(text)
		text = string(rs[:50]) + "…"
	}
	return text
}

// startStep opens one model call: a new assistant message whose ID is minted
// here, once, and a step-start part carrying it.
func (r *runner) startStep() {
	now := r.m.now()
	tu := r.turn
	r.steps++
	st := &step{n: r.steps}
	st.msg = opencode.Message{ID: identifier.NewMessage(), SessionID: r.id, Role: opencode.Assistant,
		Time: opencode.MessageTime{Created: now}, ParentID: tu.parentID, ModelID: tu.model.ModelID,
		ProviderID: tu.model.ProviderID, Mode: tu.agent, Agent: tu.agent,
		Path: opencode.MessagePath{Cwd: r.sess.Directory, Root: r.sess.Directory}}
	start := opencode.Part{ID: identifier.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartStepStart}
	st.parts = append(st.parts, start)
	tu.step = st
	t := r.tx()
	t.message(st.msg)
	t.durable(opencode.EvStepStarted, 1, map[string]any{"timestamp": now, "sessionID": r.id,
		"assistantMessageID": st.msg.ID, "agent": tu.agent,
		"model": map[string]any{"id": tu.model.ModelID, "providerID": tu.model.ProviderID}})
	t.part(start, now)
	t.mustFlush()

	req := provider.Request{SessionID: r.id, ModelID: tu.model.ModelID, System: systemPrompt,
		Messages: append([]provider.Message(nil), r.history...)}
	n := st.n
	ctx := tu.ctx
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		err := r.m.cfg.Provider.Stream(ctx, req, func(c provider.Chunk) {
			r.post(streamMsg{step: n, chunk: &c})
		})
		r.post(streamMsg{step: n, done: true, err: err})
	}()
}

const systemPrompt = "You are a coding agent served by opencode-server. Answer the user's request concisely."

func (r *runner) onStream(msg streamMsg) {
	if r.turn == nil || r.turn.step == nil || r.turn.step.n != msg.step {
		return // a model call that was aborted keeps talking for a moment
	}
	st := r.turn.step
	if msg.done {
		r.endStep(msg.err)
		return
	}
	c := msg.chunk
	switch c.Kind {
	case provider.TextDelta:
		now := r.m.now()
		if st.text == nil {
			p := opencode.Part{ID: identifier.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartText,
				Time: &opencode.PartTime{Start: now}}
			st.text = &p
			t := r.tx()
			t.durable(opencode.EvTextStarted, 1, map[string]any{"timestamp": now, "sessionID": r.id,
				"assistantMessageID": st.msg.ID, "textID": p.ID})
			t.part(p, now)
			t.mustFlush()
		}
		st.buf.WriteString(c.Text)
		// Deltas are live-only, as in OpenCode: published, never committed.
		r.m.publish(liveEvent(r.id, r.sess.Directory, opencode.EvPartDelta, map[string]any{"sessionID": r.id,
			"messageID": st.msg.ID, "partID": st.text.ID, "field": "text", "delta": c.Text}))
		r.m.publish(liveEvent(r.id, r.sess.Directory, opencode.EvTextDelta, map[string]any{"timestamp": now,
			"sessionID": r.id, "assistantMessageID": st.msg.ID, "textID": st.text.ID, "delta": c.Text}))
	case provider.Finish:
		st.finish = c
	}
}

// closeText ends the open text part, committing its full text.
func (r *runner) closeText(t *tx, st *step, now int64) {
	if st.text == nil {
		return
	}
	p := *st.text
	p.Text = st.buf.String()
	end := now
	p.Time = &opencode.PartTime{Start: st.text.Time.Start, End: &end}
	t.part(p, now)
	t.durable(opencode.EvTextEnded, 1, map[string]any{"timestamp": now, "sessionID": r.id,
		"assistantMessageID": st.msg.ID, "textID": p.ID, "text": p.Text})
	st.parts = append(st.parts, p)
	st.text = nil
}

// endStep closes the current model call: step-finish, the completed
// assistant message, then either another step or the end of the turn.
func (r *runner) endStep(err error) {
	tu := r.turn
	st := tu.step
	now := r.m.now()
	t := r.tx()
	r.closeText(t, st, now)
	if err != nil || st.finish == nil {
		msg := "model call ended without a finish"
		if err != nil {
			msg = err.Error()
		}
		st.msg.Error = &opencode.NamedError{Name: "APIError", Data: map[string]any{"message": msg, "isRetryable": false}}
		st.msg.Time.Completed = &now
		t.message(st.msg)
		t.durable(opencode.EvStepFailed, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"assistantMessageID": st.msg.ID, "error": map[string]any{"type": "unknown", "message": msg}})
		t.live(opencode.EvSessionError, map[string]any{"sessionID": r.id, "error": st.msg.Error})
		t.mustFlush()
		tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
		tu.step = nil
		r.endTurn()
		return
	}
	u := st.finish.Usage
	total := u.Input + u.Output + u.Reasoning
	tokens := opencode.Tokens{Total: &total, Input: u.Input, Output: u.Output, Reasoning: u.Reasoning,
		Cache: opencode.CacheUsage{Read: u.CacheRead}}
	fin := opencode.Part{ID: identifier.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartStepFinish,
		Reason: st.finish.Reason, Tokens: &tokens}
	t.part(fin, now)
	st.parts = append(st.parts, fin)
	st.msg.Tokens = tokens
	st.msg.Finish = st.finish.Reason
	st.msg.Time.Completed = &now
	t.message(st.msg)
	t.durable(opencode.EvStepEnded, 2, map[string]any{"timestamp": now, "sessionID": r.id,
		"assistantMessageID": st.msg.ID, "finish": st.finish.Reason, "cost": 0,
		"tokens": map[string]any{"input": u.Input, "output": u.Output, "reasoning": u.Reasoning,
			"cache": map[string]any{"read": u.CacheRead, "write": 0}}})
	r.sess.Tokens.Input += u.Input
	r.sess.Tokens.Output += u.Output
	r.sess.Tokens.Reasoning += u.Reasoning
	t.mustFlush()
	r.remember(opencode.MessageWithParts{Info: st.msg, Parts: st.parts})
	tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
	tu.step = nil

	// The boundary between model calls: steers admitted meanwhile join the
	// turn here. Checking the inbox now, on the runner that owns it, is what
	// keeps a steer that arrives as the turn ends from being stranded.
	if steers := r.steers(); len(steers) > 0 {
		if r.deliver(steers, false) {
			r.startStep()
			return
		}
	}
	r.endTurn()
}

// endTurn declares the turn finished: the session goes idle, blocking
// prompts of the turn are answered, and the next queued input starts.
func (r *runner) endTurn() {
	tu := r.turn
	now := r.m.now()
	t := r.tx()
	s := r.sess
	s.Time.Updated = now
	t.session(s)
	r.sess = s
	t.live(opencode.EvSessionStatus, map[string]any{"sessionID": r.id, "status": map[string]any{"type": "idle"}})
	t.live(opencode.EvSessionIdle, map[string]any{"sessionID": r.id})
	pos := t.mustFlush()
	tu.cancel()
	r.turn = nil
	r.m.setBusy(r.id, false)
	res := waitResult{pos: pos}
	if tu.last != nil {
		res.msg = *tu.last
	} else if n := len(tu.delivered); n > 0 {
		// A turn without a model call (noReply): the answer is the user message.
		res = r.finishedResult(tu.delivered[n-1])
		res.pos = pos
	}
	for _, id := range tu.delivered {
		r.answer(id, res)
	}
	r.maybeStart()
}

// interrupt cancels the running turn: the model call is cancelled, the
// assistant message ends with reason, the turn's pending steers are revoked.
func (r *runner) interrupt(reason string, userAbort bool) {
	tu := r.turn
	tu.cancel()
	now := r.m.now()
	if st := tu.step; st != nil {
		t := r.tx()
		r.closeText(t, st, now)
		msg := "Aborted"
		if !userAbort {
			msg = reason
		}
		st.msg.Error = &opencode.NamedError{Name: "MessageAbortedError", Data: map[string]any{"message": msg}}
		st.msg.Time.Completed = &now
		t.message(st.msg)
		t.durable(opencode.EvStepFailed, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"assistantMessageID": st.msg.ID, "error": map[string]any{"type": "unknown", "message": "Provider turn interrupted"}})
		t.live(opencode.EvSessionError, map[string]any{"sessionID": r.id, "error": st.msg.Error})
		t.mustFlush()
		tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
		tu.step = nil
	}
	if userAbort {
		// Abort is session-level: the steers aimed at this turn go with it;
		// queued inputs stay and run next.
		var idx []int
		for i, in := range r.pending {
			if in.Delivery == opencode.Steer {
				idx = append(idx, i)
			}
		}
		r.cancelPending(idx, "aborted")
		r.endTurn()
		return
	}
	// Shutdown or delete: close the turn without starting the next one;
	// pending inputs stay pending and are delivered after a restart.
	r.turn = nil
	r.m.setBusy(r.id, false)
	res := waitResult{err: &opencode.Error{Code: opencode.EUnavailable, Message: reason}}
	if tu.last != nil {
		res = waitResult{msg: *tu.last}
	}
	for _, id := range tu.delivered {
		r.answer(id, res)
	}
}

func (r *runner) notifyIdle() {
	for _, c := range r.idle {
		close(c)
	}
	r.idle = nil
}
