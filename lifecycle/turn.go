package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

const defaultAgent = "build"

// maybeStart starts a turn on an idle session with pending input: all
// pending steers, or else the oldest queued input.
func (r *runner) maybeStart() {
	if r.turn != nil {
		r.extSteer() // a steer for an external agent's running prompt
		return
	}
	if r.exit != nil || r.restoring {
		return // a restore starts it when done
	}
	// A turn a shutdown or crash cut off is continued first; pending
	// steers join it at its next step, queued inputs wait for its end.
	resume := r.resume
	r.resume = nil
	var batch []*opencode.Input
	if resume == nil {
		batch = r.steers()
	}
	if len(batch) == 0 && resume == nil {
		for _, in := range r.pending {
			if in.Delivery == opencode.Queue {
				batch = []*opencode.Input{in}
				break
			}
		}
	}
	if len(batch) == 0 && resume == nil {
		r.notifyIdle()
		return
	}
	if err := r.ensureHistory(); err != nil {
		// The store cannot be read: the input stays pending, and the
		// runner stops to be retried in the background (see stalled).
		r.stalled = err
		return
	}
	ctx, cancel := context.WithCancel(r.m.ctx)
	agent, model := r.turnDefaults()
	r.turn = &turn{ctx: ctx, cancel: cancel, agent: agent, model: model}
	// Flag the session open in the commit that starts the turn: a restart
	// resumes flagged sessions without reading every history.
	open := true
	r.outbox().batch.Open = &open
	r.m.setBusy(r.id, true)
	if resume != nil {
		// Continue a turn the server cut off: same user message, a new
		// step. Its inputs are answered by the continuation: a blocking
		// prompt retried now waits for it, and their recorded answer
		// becomes its last assistant message.
		u := resume.user
		r.turn.parentID = u.ID
		if u.ID == r.compactID {
			// A compaction cut off: summarize the conversation before it
			// again.
			r.turn.compact, r.turn.transcript = true, r.compactTranscript
		}
		if u.Agent != "" {
			r.turn.agent = u.Agent
		}
		if u.Model != nil && r.m.HasModel(u.Model.ProviderID, u.Model.ModelID) {
			r.turn.model = *u.Model
		}
		for _, id := range resume.inputs {
			in, err := r.m.store.GetInput(context.Background(), id)
			if err == nil && in.SessionID == r.id && in.State == opencode.InputDelivered && !in.NoReply {
				r.turn.inputs = append(r.turn.inputs, in)
				r.turn.delivered = append(r.turn.delivered, id)
				r.turn.addClientTools(in.ClientTools)
			}
		}
		r.publishLive(r.status("busy"))
		if _, ok := r.external(r.turn); ok {
			// An external agent's cut-off turn is not asked again (its
			// session holds what it did): it ends as interrupted, its
			// inputs answered by the message the cut closed.
			r.turn.last = resume.last
			r.endTurn()
			return
		}
		r.startStep()
		return
	}
	if len(batch) == 1 && batch[0].Compact {
		// The transcript is the conversation before the request: deliver
		// starts the model's view over.
		r.turn.compact, r.turn.transcript = true, transcript(r.history)
	}
	reply := r.deliver(batch, true)
	if len(batch) == 1 && batch[0].Shell != "" {
		r.startShellStep(batch[0].Shell)
		return
	}
	if st := subtaskOf(batch); st != nil && reply {
		r.startSubtaskStep(*st)
		return
	}
	if !reply {
		r.endTurn()
		return
	}
	r.startStep()
}

// turnDefaults are the agent and model a turn starts with: the session's
// own (set at creation or by its last prompt), else the server's; a prompt
// may override them.
func (r *runner) turnDefaults() (string, opencode.MessageModel) {
	agent := defaultAgent
	model := r.m.defaultModel()
	if r.sess.Agent != "" {
		agent = r.sess.Agent
	}
	if m := r.sess.Model; m != nil && r.m.HasModel(m.ProviderID, m.ID) {
		model = opencode.MessageModel{ProviderID: m.ProviderID, ModelID: m.ID}
	}
	return agent, model
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
	t := r.outbox()
	reply := false
	sess := r.sess
	for _, in0 := range batch {
		in := *in0
		if in.Agent != "" {
			r.turn.agent = in.Agent
		}
		if in.Model != nil {
			r.turn.model = *in.Model
		} else if m, ok := r.agentModel(r.turn.agent); ok {
			// OpenCode's order: the prompt's model, the agent's, the session's.
			r.turn.model = m
		}
		if in.Variant != "" {
			r.turn.model.Variant = in.Variant
		}
		msg := userMessage(&in, r.turn.agent, r.turn.model, now)
		if in.Shown {
			// Stored and announced at admission; it stays as it was.
			msg.Time.Created = in.TimeCreated
		} else {
			t.message(msg)
			for _, p := range in.Parts {
				t.part(p, now)
			}
		}
		in.State = opencode.InputDelivered
		in.PromotedSeq = t.durable(opencode.Prompted{InputHeader: r.inputHeader(in.TimeCreated, in.ID),
			Prompt: in.Prompt(), Delivery: in.Delivery})
		t.durable(opencode.InboxDelivered{InputHeader: r.inputHeader(now, in.ID), Delivery: in.Delivery})
		t.batch.Inputs = append(t.batch.Inputs, &in)
		r.turn.delivered = append(r.turn.delivered, in.ID)
		r.turn.inputs = append(r.turn.inputs, &in)
		r.turn.parentID = in.ID
		r.turn.addClientTools(in.ClientTools)
		if !in.NoReply {
			reply = true
		}
		if in.Shell == "" && !r.titling && sess.ParentID == "" && strings.HasPrefix(sess.Title, defaultTitlePrefix) {
			if sub := subtaskOf([]*opencode.Input{&in}); sub != nil {
				// A subtask is titled by its prompt, as OpenCode does.
				r.requestTitle(provider.Message{Role: "user", Content: sub.Prompt}, in.System, r.turn.model)
			} else if first, ok := userModelMessage(in.Parts); ok {
				r.requestTitle(first, in.System, r.turn.model)
			}
		}
		r.turn.users = append(r.turn.users, msg)
		r.remember(opencode.MessageWithParts{Info: msg, Parts: in.Parts})
		if len(in.Tools) > 0 {
			// As OpenCode: the tools map becomes the session's permission,
			// so it holds for later prompts too.
			sess.Permission = toolsPermission(in.Tools)
		}
	}
	sess.Agent = r.turn.agent
	sess.Model = &opencode.ModelRef{ID: r.turn.model.ModelID, ProviderID: r.turn.model.ProviderID, Variant: "default"}
	sess.Time.Updated = now
	t.session(sess)
	r.sess = sess
	if first {
		// The real server's order: user message and parts, session.updated,
		// then busy.
		t.live(r.status("busy"))
	}
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

// startStep opens one model call: a new assistant message whose ID is minted
// here, once, and a step-start part carrying it.
func (r *runner) startStep() {
	tu := r.turn
	if a, ok := r.external(tu); ok {
		r.startExternal(a)
		return
	}
	now := r.m.now()
	r.steps++
	st := &step{n: r.steps}
	agent := tu.agent
	if tu.compact {
		agent = compactionAgent
	}
	st.msg = opencode.Message{ID: r.m.ids.NewMessage(), SessionID: r.id, Role: opencode.Assistant,
		Time: opencode.MessageTime{Created: now}, ParentID: tu.parentID, ModelID: tu.model.ModelID,
		ProviderID: tu.model.ProviderID, Mode: agent, Agent: agent, IsSummary: tu.compact,
		Path: opencode.MessagePath{Cwd: r.sess.Directory, Root: r.sess.Directory}}
	tu.step = st
	t := r.outbox()
	t.message(st.msg)
	repo := r.repo()
	if repo == nil {
		r.beginStep(st, "")
	}
	tu.steps++
	// A full slice expression: the call sees the history as it is now,
	// while the runner keeps appending to its own (no copy per step).
	msgs := r.history[:len(r.history):len(r.history)]
	if reminder := r.reminderFor(tu); reminder != "" {
		msgs = withReminder(msgs, reminder)
	}
	if r.media {
		msgs = r.m.unsupportedParts(msgs, tu.model)
	}
	if r.foreign {
		msgs = forModel(msgs, tu.model.ProviderID+"/"+tu.model.ModelID)
	}
	if tu.agent == "plan" {
		r.usedPlan = true
	}
	req := provider.Request{SessionID: r.id, ModelID: tu.model.ModelID, Messages: msgs, Tools: r.toolsFor(tu)}
	if a, ok := r.m.agent(tu.agent); ok {
		req.Temperature, req.TopP = a.Temperature, a.TopP
	}
	system := r.systemFor(tu)
	if tu.compact {
		req, system = compactionRequest(r.id, tu.model.ModelID, tu.transcript), nil
	}
	r.m.modelOptions(&req, tu.model)
	n := st.n
	ctx := tu.ctx
	prov := r.m.providerFor(tu.model)
	if !r.owned() {
		r.fenced() // no model call for a session this instance lost
		return
	}
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		if repo != nil {
			// The start snapshot, off the loop; the step begins with it,
			// ahead of the model call's first chunk.
			h := r.track(ctx, repo)
			r.post(streamMsg{then: func() {
				if r.turn == tu && tu.step == st && !st.began {
					r.beginStep(st, h)
				}
			}})
		}
		if system != nil {
			req.System = system()
		}
		err := prov.Stream(ctx, req, func(c provider.Chunk) {
			r.post(streamMsg{step: n, chunk: &c})
		})
		r.post(streamMsg{step: n, done: true, err: err})
	}()
}

// beginStep puts out a step's start: the step-start part with the
// snapshot the step starts from, and step.started.
func (r *runner) beginStep(st *step, snap string) {
	tu := r.turn
	now := r.m.now()
	st.began, st.snapshot = true, snap
	if r.firstSnap == "" {
		r.firstSnap = snap
	}
	if tu.startSnap == "" {
		tu.startSnap = snap
	}
	start := opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartStepStart,
		Snapshot: snap}
	st.parts = append(st.parts, start)
	t := r.outbox()
	t.durable(opencode.StepStarted{StepHeader: r.stepHeader(now, st.msg.ID), Agent: tu.agent,
		Model: opencode.ModelRef{ID: tu.model.ModelID, ProviderID: tu.model.ProviderID}, Snapshot: snap})
	t.part(start, now)
}

var (
	textStream = streamKind{partType: opencode.PartText,
		started: func(h opencode.StepHeader, id string) opencode.Payload {
			return opencode.TextStarted{StepHeader: h, TextID: id}
		},
		delta: func(h opencode.StepHeader, id, d string) opencode.Payload {
			return opencode.TextDelta{StepHeader: h, TextID: id, Delta: d}
		},
		ended: func(h opencode.StepHeader, id, text string) opencode.Payload {
			return opencode.TextEnded{StepHeader: h, TextID: id, Text: text}
		},
	}
	reasoningStream = streamKind{partType: opencode.PartReasoning,
		started: func(h opencode.StepHeader, id string) opencode.Payload {
			return opencode.ReasoningStarted{StepHeader: h, ReasoningID: id}
		},
		delta: func(h opencode.StepHeader, id, d string) opencode.Payload {
			return opencode.ReasoningDelta{StepHeader: h, ReasoningID: id, Delta: d}
		},
		ended: func(h opencode.StepHeader, id, text string) opencode.Payload {
			return opencode.ReasoningEnded{StepHeader: h, ReasoningID: id, Text: text}
		},
	}
)

// maybeEndStep ends the step once the model call returned and every tool
// call it made has finished.
func (r *runner) maybeEndStep() {
	st := r.turn.step
	if !st.streamed {
		return
	}
	for _, c := range st.calls {
		if !c.done {
			if !c.started {
				// The call never completed its arguments: nothing will run it.
				r.toolDone(st, &toolResult{callID: c.callID, err: toolError("tool call was not completed by the model")})
				return // toolDone calls back here
			}
			return
		}
	}
	if !st.shell && st.err == nil && st.finish != nil && st.measured == nil && r.repo() != nil {
		if !st.measuring {
			r.measureEnd(st)
		}
		return // measureEnd calls back here
	}
	r.endStep(st.err)
}

// endStep closes the current model call: step-finish, the completed
// assistant message, then either another step or the end of the turn.
func (r *runner) endStep(err error) {
	tu := r.turn
	st := tu.step
	now := r.m.now()
	t := r.outbox()
	// A finished message is published only once it is stored: a client
	// that refetches on message.updated or session.idle must find it.
	r.closeText(t, st, now)
	if !st.shell && (err != nil || st.finish == nil) {
		msg := "model call ended without a finish"
		data := map[string]any{"isRetryable": false}
		if err != nil {
			msg = err.Error()
			var ae *provider.APIError
			if errors.As(err, &ae) {
				data["isRetryable"] = ae.Retryable
				if ae.StatusCode != 0 {
					data["statusCode"] = ae.StatusCode
				}
				if ae.ResponseBody != "" {
					data["responseBody"] = ae.ResponseBody
				}
			}
		}
		data["message"] = msg
		failure := &opencode.NamedError{Name: "APIError", Data: data}
		kind := "unknown"
		if !tu.compact && provider.ContextOverflow(err) {
			// As OpenCode: the session says so (session.error) and
			// compacts; the message itself is not failed.
			kind, tu.overflowed = "context_overflow", true
			over := map[string]any{"message": msg}
			if rb, ok := data["responseBody"]; ok {
				over["responseBody"] = rb
			}
			failure = &opencode.NamedError{Name: "ContextOverflowError", Data: over}
		} else {
			st.msg.Error = failure
		}
		st.msg.Time.Completed = &now
		t.message(st.msg)
		t.durable(opencode.StepFailed{StepHeader: r.stepHeader(now, st.msg.ID), Error: opencode.EventError{Type: kind, Message: msg}})
		t.live(opencode.SessionError{SessionID: r.id, Error: failure})
		tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
		tu.step = nil
		r.endTurn()
		return
	}
	if st.shell {
		// A user's command: one tool part, no model call, no step parts.
		st.msg.Time.Completed = &now
		if st.subtask != nil {
			st.msg.Finish = "tool-calls"
		}
		t.message(st.msg)
		r.remember(opencode.MessageWithParts{Info: st.msg, Parts: st.parts})
		tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
		tu.step = nil
		if st.subtask != nil {
			// As OpenCode: the model goes on from the task's result, told
			// to sum it up when a command started it.
			if st.subtask.Command != "" {
				r.syntheticUser(t, subtaskSummarize, now)
			}
			r.startStep()
			return
		}
		r.endTurn()
		return
	}
	u := st.finish.Usage
	total := u.Input + u.Output + u.Reasoning
	in := uncachedInput(u)
	tokens := opencode.Tokens{Total: &total, Input: in, Output: u.Output, Reasoning: u.Reasoning,
		Cache: opencode.CacheUsage{Read: u.CacheRead, Write: u.CacheWrite}}
	var cost float64
	if st.ext {
		// What the agent reported: neither our model's price nor its
		// context window (automatic compaction) applies.
		cost = st.extCost
	} else {
		tu.usage = u
		cost = r.m.cost(tu.model, u)
	}
	d := snapDiffs{diff: noDiff, turnDiff: noDiff}
	if st.measured != nil {
		d = *st.measured
	}
	end, changed := d.end, d.changed
	if end != "" {
		tu.endSnap = end
	}
	fin := opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartStepFinish,
		Reason: st.finish.Reason, Tokens: &tokens, Cost: cost, Snapshot: end}
	t.part(fin, now)
	st.parts = append(st.parts, fin)
	if len(changed) > 0 {
		// OpenCode's patch part: the files this step changed, and the
		// snapshot they can be restored from.
		abs := make([]string, len(changed))
		for i, f := range changed {
			abs[i] = filepath.Join(r.sess.Directory, f)
		}
		patch := opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartPatch,
			Hash: st.snapshot, Files: abs}
		t.part(patch, now)
		st.parts = append(st.parts, patch)
	}
	st.msg.Tokens = tokens
	st.msg.Cost = cost
	st.msg.Finish = st.finish.Reason
	st.msg.Time.Completed = &now
	t.message(st.msg)
	ended := opencode.StepEnded{StepHeader: r.stepHeader(now, st.msg.ID), Finish: st.finish.Reason, Cost: cost,
		Tokens: opencode.Tokens{Input: in, Output: u.Output, Reasoning: u.Reasoning,
			Cache: opencode.CacheUsage{Read: u.CacheRead, Write: u.CacheWrite}}}
	if end != "" {
		ended.StepSnapshot = &opencode.StepSnapshot{Snapshot: end, Files: changed}
	}
	t.durable(ended)
	r.sess.Cost += cost
	r.sess.Tokens.Input += in
	r.sess.Tokens.Output += u.Output
	r.sess.Tokens.Reasoning += u.Reasoning
	r.summarize(t, r.nextSummary(), tu.users, d.diff, d.turnDiff)
	r.remember(opencode.MessageWithParts{Info: st.msg, Parts: st.parts})
	tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
	tu.step = nil
	if st.ext {
		r.extContinue(tu)
		return
	}

	// The boundary between model calls: steers admitted meanwhile join the
	// turn here. Checking the inbox now, on the runner that owns it, is what
	// keeps a steer that arrives as the turn ends from being stranded.
	more := len(st.calls) > 0 && tu.steps < maxSteps && !tu.compact && !st.blocked
	if tu.compact {
		t.live(opencode.SessionCompacted{SessionID: r.id})
	}
	if steers := r.steers(); len(steers) > 0 {
		if r.deliver(steers, false) {
			more = true
		}
	}
	if more {
		r.startStep()
		return
	}
	r.endTurn()
}

// maxSteps bounds the model calls of one turn, so a model that keeps
// calling tools cannot loop forever.
const maxSteps = 50

// endTurn declares the turn finished: the session goes idle, blocking
// prompts of the turn are answered, and the next queued input starts.
func (r *runner) endTurn() {
	tu := r.turn
	now := r.m.now()
	t := r.outbox()
	closed := false
	t.batch.Open = &closed
	s := r.sess
	s.Time.Updated = now
	t.session(s)
	r.sess = s
	t.live(r.status("idle"))
	t.live(opencode.SessionIdle{SessionID: r.id})
	r.recordAnswers(t, tu)
	tu.cancel()
	r.turn = nil
	if !tu.compact {
		r.prune(t)
		if tu.overflowed || r.m.overflow(tu.model, tu.usage) {
			r.autoCompact(t, tu.model)
		}
	}
	var res waitResult
	if tu.last != nil {
		res.msg = *tu.last
	}
	big := inputSize(tu.inputs) >= bigContent
	t.then(func(pos int64) {
		if big {
			r.m.releaseMemory()
		}
		// Idle once the turn's end is stored (GET /session/status must
		// not say idle over a conversation that still shows it running),
		// unless the next turn started in the same commit.
		if r.turn == nil {
			r.m.setBusy(r.id, false)
		}
		if tu.last == nil && len(tu.delivered) > 0 {
			// A turn without a model call (noReply): the answer is the user message.
			id := tu.delivered[len(tu.delivered)-1]
			res = r.finishedResult(id, id)
		}
		res.pos = pos
		if r.turn == nil {
			res.seq = r.lastSeq
		}
		for _, id := range tu.delivered {
			r.answer(id, res)
		}
	})
	r.maybeStart()
}

// interrupt cancels the running turn: the model call is cancelled, the
// assistant message ends with reason, the turn's pending steers are revoked.
func (r *runner) interrupt(reason string, userAbort bool) {
	tu := r.turn
	tu.cancel()
	now := r.m.now()
	r.rejectAsks()
	if st := tu.step; st != nil {
		if !st.began {
			r.beginStep(st, "") // aborted while its start snapshot was taken
		}
		t := r.outbox()
		r.closeText(t, st, now)
		r.abortTools(t, st, now)
		msg := "Aborted"
		if !userAbort {
			msg = reason
		}
		st.msg.Error = &opencode.NamedError{Name: "MessageAbortedError", Data: map[string]any{"message": msg}}
		st.msg.Time.Completed = &now
		t.message(st.msg)
		seq := r.nextSummary()
		if repo := r.repo(); repo != nil {
			// What the aborted step changed is measured off the loop and
			// summarized when it comes back.
			first, start, fallback, users := r.firstSnap, tu.startSnap, tu.endSnap, tu.users
			var d snapDiffs
			r.offLoop(func() { d = r.measure(repo, "", first, start, fallback) }, func() {
				if d.end != "" {
					tu.endSnap = d.end
				}
				r.summarize(r.outbox(), seq, users, d.diff, d.turnDiff)
			})
		} else {
			r.summarize(t, seq, tu.users, noDiff, noDiff)
		}
		t.durable(opencode.StepFailed{StepHeader: r.stepHeader(now, st.msg.ID), Error: interruptedStep})
		t.live(opencode.SessionError{SessionID: r.id, Error: st.msg.Error})
		tu.last = &opencode.MessageWithParts{Info: st.msg, Parts: st.parts}
		// What the model said before the abort stays in its view, as
		// OpenCode sends it (and as a restart reads it back).
		r.remember(*tu.last)
		tu.step = nil
	}
	if userAbort {
		// Abort is session-level: the steers aimed at this turn go with it;
		// queued inputs stay and run next.
		r.extAborted(tu)
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
	r.recordAnswers(r.outbox(), tu)
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

// notifyIdle answers WaitIdle callers once the turn's end is published.
func (r *runner) notifyIdle() {
	if len(r.idle) == 0 {
		return
	}
	idle := r.idle
	r.idle = nil
	r.outbox().then(func(int64) {
		for _, c := range idle {
			close(c)
		}
	})
}
