package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/store"
)

// state is what a runner loads when it starts.
type state struct {
	sess     opencode.Session
	pending  []*opencode.Input
	msgs     []opencode.MessageWithParts
	lastSeq  int64
	lastUser string
	// lazy: the session has nothing to resume, so its history was not read
	// (a cold inbox, abort or edit does not need it); a turn reads it.
	lazy bool
}

func (m *Manager) load(ctx context.Context, id string) (*state, error) {
	sess, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	pending, err := m.store.PendingInputs(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	last, err := m.store.LastSeq(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	st := &state{sess: sess, pending: pending, lastSeq: last}
	if len(pending) == 0 {
		open, err := m.store.OpenSessions(ctx)
		if err != nil {
			return nil, err
		}
		st.lazy = !slices.Contains(open, id)
	}
	if !st.lazy {
		// Recovery needs the history now: a turn may have been cut off.
		if st.msgs, err = m.store.ListMessages(ctx, id); err != nil {
			return nil, mapStoreErr(err, id)
		}
	}
	return st, nil
}

// waitResult answers a blocking prompt: the last assistant message of the
// turn its input was delivered into, or an error (revoked, deleted, ...).
type waitResult struct {
	msg opencode.MessageWithParts
	pos int64
	err error
}

// streamMsg carries a provider chunk, or the end of a model call, from the
// call's goroutine to the runner. step tells stale messages (after an
// abort) from current ones.
type streamMsg struct {
	step  int64
	chunk *provider.Chunk
	done  bool
	err   error
	tool  *toolResult
	ask   *askReq
	// progress is a running tool's latest metadata.
	progress *toolProgress
}

// runner is one session's owner. Every field below is touched only by the
// loop goroutine.
type runner struct {
	m      *Manager
	id     string
	cmds   chan command
	stream chan streamMsg
	// pend is the work not yet committed (see tx).
	pend *tx
	// lazy: the history is not read yet (see state.lazy).
	lazy bool
	// failure is a commit that failed: the runner stops (fail).
	failure error
	// firstSnap is the project's files when the session's first step
	// started: session.diff is measured from it.
	firstSnap string
	// boot holds the stored messages until the loop has recovered them.
	boot []opencode.MessageWithParts
	done chan struct{}
	// exit is why the runner stopped (set before done is closed).
	exit error

	sess    opencode.Session
	lastSeq int64
	pending []*opencode.Input // the inbox, in admission order
	history []provider.Message
	turn    *turn
	steps   int64

	waiters map[string][]chan waitResult
	idle    []chan struct{}
	// approved holds the "always" answers given in this session.
	approved []Rule
	// resume is set when the session's last turn was cut off by a shutdown
	// or crash: the runner continues it once it starts, before any pending
	// input.
	resume *cutTurn
	// deleted stops the loop after the delete command.
	deleted bool
}

type turn struct {
	ctx       context.Context
	cancel    context.CancelFunc
	delivered []string          // input IDs delivered into this turn
	inputs    []*opencode.Input // the same inputs, as stored
	parentID  string            // the latest user message of the turn
	step      *step
	last      *opencode.MessageWithParts
	model     opencode.MessageModel
	agent     string
	steps     int
	// compact: the turn summarizes transcript (the conversation before it)
	// instead of answering.
	compact    bool
	transcript string
	// startSnap and endSnap are the project's files before the turn's
	// first step and after its last.
	startSnap, endSnap string
	// users are the user messages delivered into the turn.
	users []opencode.Message
}

type step struct {
	n     int64
	msg   opencode.Message
	parts []opencode.Part
	// text and reasoning are the parts being streamed, nil when none is open.
	text      *streaming
	reasoning *streaming
	finish    *provider.Chunk
	calls     []*toolRun
	// shell: the step runs a user's command, not a model call.
	shell bool
	// snapshot is the project's files when the step started ("" untracked).
	snapshot string
	// streamed is set when the model call returned; err is its error.
	streamed bool
	err      error
}

func newRunner(m *Manager, st *state) *runner {
	r := &runner{m: m, id: st.sess.ID, cmds: make(chan command, 64), stream: make(chan streamMsg, 256), boot: st.msgs,
		done: make(chan struct{}), sess: st.sess, lastSeq: st.lastSeq, pending: st.pending, lazy: st.lazy,
		waiters: map[string][]chan waitResult{}}
	return r
}

// command is a closure run on the runner goroutine; done is closed once its
// work is committed and published.
type command struct {
	f    func()
	done chan struct{}
}

// start loads the conversation, closes what a crash left open and picks up
// pending work. It runs on the loop goroutine.
func (r *runner) start() {
	msgs := r.boot
	r.boot = nil
	if r.lazy {
		r.maybeStart()
		r.flushPending()
		return
	}
	// A shown input's message is stored before it is delivered: the model
	// sees it only once it is (it is remembered then).
	waiting := map[string]bool{}
	for _, in := range r.pending {
		if in.Shown {
			waiting[in.ID] = true
		}
	}
	msgs = slices.DeleteFunc(msgs, func(mp opencode.MessageWithParts) bool { return waiting[mp.Info.ID] })
	r.firstSnap = firstSnapshot(msgs)
	for _, mp := range msgs {
		r.remember(mp)
	}
	if r.recover(msgs) || interruptedByServer(msgs) || r.m.unanswered(msgs) {
		r.resume = cutOff(msgs)
	}
	r.maybeStart()
	r.flushPending()
}

// cutTurn is a turn a shutdown or crash cut off: its latest user message,
// which the continuation answers, and the user messages (inputs) delivered
// into it, whose recorded answer becomes the continuation's.
type cutTurn struct {
	user   opencode.Message
	inputs []string
}

// cutOff finds the cut-off turn at the end of msgs: the user messages after
// the last assistant message that ended a turn (one that stopped, not one
// that called tools and not the interrupted one).
func cutOff(msgs []opencode.MessageWithParts) *cutTurn {
	var c *cutTurn
	var inputs []string
	for i := len(msgs) - 1; i >= 0; i-- {
		info := msgs[i].Info
		if info.Role == opencode.User {
			if c == nil {
				c = &cutTurn{user: info}
			}
			inputs = append(inputs, info.ID)
			continue
		}
		if c != nil && info.Error == nil && info.Finish != "" && info.Finish != "tool-calls" {
			break // the turn before
		}
		if c != nil && info.Error != nil && !isInterrupted(info) {
			break // a turn that ended in an error
		}
	}
	if c == nil {
		return nil
	}
	slices.Reverse(inputs)
	c.inputs = inputs
	return c
}

// isInterrupted reports whether an assistant message was cut off by a
// server shutdown or restart.
func isInterrupted(info opencode.Message) bool {
	if info.Role != opencode.Assistant || info.Error == nil || info.Error.Name != "MessageAbortedError" {
		return false
	}
	msg, _ := info.Error.Data["message"].(string)
	return strings.HasPrefix(msg, interruptedPrefix)
}

// ensureHistory reads the conversation of a lazily started runner, before
// its first turn needs it.
func (r *runner) ensureHistory() error {
	if !r.lazy {
		return nil
	}
	msgs, err := r.m.store.ListMessages(r.m.ctx, r.id)
	if err != nil {
		return err
	}
	r.lazy = false
	r.firstSnap = firstSnapshot(msgs)
	for _, mp := range msgs {
		r.remember(mp)
	}
	return nil
}

// interruptedByServer reports whether the last message is an assistant
// message a server shutdown or restart cut off.
func interruptedByServer(msgs []opencode.MessageWithParts) bool {
	if len(msgs) == 0 {
		return false
	}
	return isInterrupted(msgs[len(msgs)-1].Info)
}

// unanswered reports whether the last message is a user message whose turn
// never got an assistant message: a crash between its delivery and the first
// model call.
func (m *Manager) unanswered(msgs []opencode.MessageWithParts) bool {
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1].Info
	if last.Role != opencode.User {
		return false
	}
	in, err := m.store.InputStatus(context.Background(), last.ID)
	return err == nil && in.State == opencode.InputDelivered && !in.NoReply && in.Answer == ""
}

// interruptedPrefix starts the abort message of turns the server cut off.
const interruptedPrefix = "Interrupted by server"

// remember appends a stored message to the conversation sent to the model:
// a user message's text; an assistant message's text and tool calls,
// followed by the tool results.
func (r *runner) remember(mp opencode.MessageWithParts) {
	if isCompaction(mp) {
		// The model's view starts over from the summary that follows.
		r.history = []provider.Message{{Role: "user", Content: compactionQuestion, Memo: &provider.Memo{}}}
		return
	}
	var b strings.Builder
	var calls []provider.ToolCall
	var results []provider.Message
	for _, p := range mp.Parts {
		switch {
		case p.Type == opencode.PartText && !p.Ignored:
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		case p.Type == opencode.PartTool && p.State != nil:
			calls = append(calls, provider.ToolCall{ID: p.CallID, Name: p.Tool, Arguments: p.State.Input})
			out := p.State.Error
			if p.State.Output != nil {
				out = *p.State.Output
			}
			results = append(results, provider.Message{Role: "tool", Content: out, ToolCallID: p.CallID})
		}
	}
	if b.Len() == 0 && len(calls) == 0 && mp.Info.Role == opencode.Assistant {
		return
	}
	r.history = append(r.history, provider.Message{Role: string(mp.Info.Role), Content: b.String(), ToolCalls: calls, Memo: &provider.Memo{}})
	for _, res := range results {
		res.Memo = &provider.Memo{}
		r.history = append(r.history, res)
	}
}

// recover closes assistant messages a crash left open: the turn is over, and
// it ended interrupted.
func (r *runner) recover(msgs []opencode.MessageWithParts) bool {
	t := r.tx()
	closed := false
	now := r.m.now()
	for _, mp := range msgs {
		if mp.Info.Role != opencode.Assistant || mp.Info.Time.Completed != nil {
			continue
		}
		closed = true
		info := mp.Info
		info.Time.Completed = &now
		info.Error = &opencode.NamedError{Name: "MessageAbortedError", Data: map[string]any{"message": interruptedPrefix + " restart"}}
		for _, p := range mp.Parts {
			if (p.Type == opencode.PartText || p.Type == opencode.PartReasoning) && p.Time != nil && p.Time.End == nil {
				p.Time.End = &now
				t.part(p, now)
			}
		}
		t.message(info)
		t.durable(opencode.EvStepFailed, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"assistantMessageID": info.ID, "error": map[string]any{"type": "unknown", "message": "Provider turn interrupted"}})
	}
	return closed
}

func (r *runner) exitErr() error {
	if r.exit != nil {
		return r.exit
	}
	return ErrClosed
}

// streamBurst is how many queued model chunks one loop turn handles before
// it commits: a burst of chunks shares one commit.
const streamBurst = 64

func (r *runner) loop() {
	defer r.m.wg.Done()
	r.start()
	if r.failure != nil {
		r.fail()
		return
	}
	idle := time.NewTimer(r.m.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		var done chan struct{}
		var idleC <-chan time.Time
		if r.evictable() {
			idle.Reset(r.m.cfg.IdleTimeout)
			idleC = idle.C
		}
		select {
		case <-idleC:
			if r.evict() {
				return
			}
			continue
		case c := <-r.cmds:
			c.f()
			done = c.done
		case msg := <-r.stream:
			r.onStream(msg)
		burst:
			for range streamBurst {
				select {
				case msg = <-r.stream:
					r.onStream(msg)
				default:
					break burst
				}
			}
		case <-r.m.ctx.Done():
			r.shutdown(ErrClosed)
			return
		}
		r.flushPending()
		if r.failure != nil {
			r.fail() // the command's caller learns it from r.done and r.exit
			return
		}
		if done != nil {
			close(done)
		}
		if r.deleted {
			r.shutdown(opencode.SessionNotFound(r.id))
		}
		if r.exit != nil {
			return
		}
	}
}

// evictable reports whether the runner holds nothing that lives only in
// memory, so it may stop and be rebuilt from the store later.
func (r *runner) evictable() bool {
	return r.turn == nil && len(r.pending) == 0 && len(r.waiters) == 0 && len(r.idle) == 0 &&
		r.pend == nil && r.resume == nil && len(r.approved) == 0
}

// evict stops an idle runner: it leaves the registry first, so no new
// command reaches it; a command sent just before is retried by its sender
// on a new runner (see Manager.do).
func (r *runner) evict() bool {
	r.m.mu.Lock()
	if len(r.cmds) > 0 || len(r.stream) > 0 || r.m.runners[r.id] != r {
		r.m.mu.Unlock()
		return false
	}
	delete(r.m.runners, r.id)
	r.m.mu.Unlock()
	r.exit = errEvicted
	close(r.done)
	return true
}

// shutdown closes a running turn as interrupted, fails every waiter and
// stops the loop.
func (r *runner) shutdown(why error) {
	var last *opencode.MessageWithParts
	if tu := r.turn; tu != nil {
		r.interrupt(interruptedPrefix+" shutdown", false)
		last = tu.last
	}
	r.flushPending()
	if last != nil && r.failure == nil {
		// Inputs still pending stay admitted and run after the restart.
		// Their blocking prompts get what an abort gives, the interrupted
		// message, not a 503 that a client would retry with a new ID
		// (running it twice).
		for id, ws := range r.waiters {
			for _, w := range ws {
				w <- waitResult{msg: *last}
			}
			delete(r.waiters, id)
		}
	}
	r.stop(why)
}

// stop answers every waiter with why, releases WaitIdle callers, and drops
// the runner (shutdown, delete, a failed commit).
func (r *runner) stop(why error) {
	r.exit = why
	for id, ws := range r.waiters {
		for _, w := range ws {
			w <- waitResult{err: why}
		}
		delete(r.waiters, id)
	}
	for _, c := range r.idle {
		close(c)
	}
	r.idle = nil
	r.m.forget(r)
	close(r.done)
}

// fail stops the runner after a failed commit, as a database ends a
// transaction that could not commit: nothing of the failed work was
// published, the turn's model call and tools are cancelled, every waiter
// gets a 503, and the runner is dropped. The next command for the session
// starts a new runner from what is stored; its recovery closes a turn the
// store still shows open.
func (r *runner) fail() {
	err := r.failure
	r.m.log.Error("commit failed: session runner stopped", "session", r.id, "err", err)
	if r.turn != nil {
		r.turn.cancel()
		r.turn = nil
		r.m.setBusy(r.id, false)
	}
	r.rejectAsks()
	r.pend = nil
	r.stop(&opencode.Error{Code: opencode.EUnavailable, SessionID: r.id,
		Message: "Session " + r.id + " stopped after a failed write to the store; retry the request"})
}

// post hands a stream message to the runner unless it is gone.
func (r *runner) post(msg streamMsg) {
	select {
	case r.stream <- msg:
	case <-r.done:
	}
}

// ---- admission, inbox --------------------------------------------------------

func equalInput(prev, in *opencode.Input) bool {
	return prev.SessionID == in.SessionID && prev.Delivery == in.Delivery && sameContent(prev.Fingerprint, in)
}

// admit stores a new input durably, or returns the earlier admission of the
// same ID and content.
func (r *runner) admit(in *opencode.Input) (*opencode.Input, bool, error) {
	ctx := context.Background()
	if prev, err := r.m.store.GetInput(ctx, in.ID); err == nil {
		if prev.State == opencode.InputTombstone && prev.SessionID == r.id {
			return nil, false, revokedError(r.id, in.ID, "before it was admitted")
		}
		if equalInput(prev, in) {
			return prev, true, nil
		}
		return nil, false, &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: in.ID,
			Message: "Message " + in.ID + " was already admitted with different content, delivery or session"}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	if ok, err := r.m.store.MessageExists(ctx, in.ID); err != nil {
		return nil, false, err
	} else if ok {
		return nil, false, &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: in.ID,
			Message: "Message ID " + in.ID + " is already used by a message"}
	}
	now := r.m.now()
	in.SessionID = r.id
	in.State = opencode.InputPending
	in.TimeCreated = now
	for i := range in.Parts {
		in.Parts[i].SessionID = r.id
		in.Parts[i].MessageID = in.ID
	}
	t := r.tx()
	prompt := in.Prompt()
	in.AdmittedSeq = t.durable(opencode.EvPromptAdmitted, 1, map[string]any{"timestamp": now, "sessionID": r.id,
		"messageID": in.ID, "prompt": prompt, "delivery": in.Delivery})
	t.durable(opencode.EvInboxEnqueued, 1, map[string]any{"timestamp": now, "sessionID": r.id,
		"messageID": in.ID, "delivery": in.Delivery, "prompt": prompt})
	if r.turn != nil && in.Delivery == opencode.Steer {
		// Busy: OpenCode stores and announces a prompt the moment it is
		// posted (the TUI marks it QUEUED until the model sees it). Same
		// here, under the input's own ID: delivery keeps this message. A
		// steer joins the running turn at its next step, so the message
		// keeps its place in the conversation; a queued input waits for
		// later steps and is stored when delivered, in its turn's place.
		in.Shown = true
		agent, model := r.turnDefaults()
		if in.Agent != "" {
			agent = in.Agent
		}
		if in.Model != nil {
			model = *in.Model
		}
		t.message(userMessage(in, agent, model, now))
		for _, p := range in.Parts {
			t.part(p, now)
		}
	}
	t.batch.Admit = []*opencode.Input{in}
	r.pending = append(r.pending, in)
	return in, false, nil
}

// userMessage is the user message an input becomes.
func userMessage(in *opencode.Input, agent string, model opencode.MessageModel, created int64) opencode.Message {
	return opencode.Message{ID: in.ID, SessionID: in.SessionID, Role: opencode.User,
		Time: opencode.MessageTime{Created: created}, Agent: agent, Model: &opencode.MessageModel{
			ProviderID: model.ProviderID, ModelID: model.ModelID}, System: in.System, Tools: in.Tools}
}

// undoPoint is the runner state an admission may change before its commit,
// so a failed commit can undo it (see Manager.Admit).
type undoPoint struct {
	lazy    bool
	pending []*opencode.Input
	history int
	sess    opencode.Session
	resume  *cutTurn
	turn    *turn
}

func (r *runner) undoPoint() undoPoint {
	return undoPoint{lazy: r.lazy, pending: append([]*opencode.Input(nil), r.pending...), history: len(r.history),
		sess: r.sess, resume: r.resume, turn: r.turn}
}

// restore undoes what an admission started after its commit failed: the
// turn it started (and its model call) is cancelled, inbox and
// conversation go back to what they were.
func (r *runner) restore(s undoPoint) {
	if r.turn != nil && r.turn != s.turn {
		r.turn.cancel()
		r.turn = nil
		r.m.setBusy(r.id, false)
	}
	r.pending = s.pending
	// A fresh array: the cancelled model call may still read the old one.
	r.history = append([]provider.Message(nil), r.history[:s.history]...)
	if s.lazy && !r.lazy {
		// The history read for the turn goes too; the next turn reads it.
		r.lazy, r.history, r.firstSnap = true, nil, ""
	}
	r.sess = s.sess
	r.resume = s.resume
}

// admitError maps a failed admission commit.
func admitError(err error, id string) error {
	var pce *store.PartConflictError
	if errors.As(err, &pce) {
		return &opencode.Error{Code: opencode.EConflict, Resource: pce.ID,
			Message: "Part ID " + pce.ID + " is already in use: nothing was admitted"}
	}
	if errors.Is(err, store.ErrConflict) {
		return &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id,
			Message: "Message ID " + id + " is already in use"}
	}
	var oe *opencode.Error
	if errors.As(err, &oe) {
		return err
	}
	// The store could not take the write: nothing was admitted; a retry
	// with the same message ID is safe.
	return &opencode.Error{Code: opencode.EUnavailable, MessageID: id,
		Message: "Message " + id + " could not be stored, nothing was admitted; retry the request"}
}

func (r *runner) pendingIndex(id string) int {
	for i, in := range r.pending {
		if in.ID == id {
			return i
		}
	}
	return -1
}

// revoke cancels a pending input. Already revoked: true. Delivered: a
// conflict. Not yet admitted (the revoke overtook its prompt on another
// connection): a durable tombstone, so the prompt is refused when it
// arrives, and true.
func (r *runner) revoke(id string) (bool, error) {
	if i := r.pendingIndex(id); i >= 0 {
		r.cancelPending([]int{i}, "revoked")
		return true, nil
	}
	ctx := context.Background()
	in, err := r.m.store.InputStatus(ctx, id)
	if err == nil && in.SessionID != r.id {
		return true, nil
	}
	if errors.Is(err, store.ErrNotFound) {
		return r.tombstone(ctx, id)
	}
	if err != nil {
		return false, err
	}
	if in.State == opencode.InputDelivered {
		return false, &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id, SessionID: r.id,
			Message: "Message " + id + " was already delivered to the model"}
	}
	return true, nil
}

// tombstone records that id was revoked before it was admitted. An ID no
// prompt could carry, or one a message already has (an assistant's, a
// delivered input of another session), needs none: nothing can arrive
// under it for this session.
func (r *runner) tombstone(ctx context.Context, id string) (bool, error) {
	if identifier.Check(identifier.Message, id) != nil {
		return true, nil
	}
	if ok, err := r.m.store.MessageExists(ctx, id); err != nil || ok {
		return err == nil, err
	}
	t := r.tx()
	t.batch.Admit = []*opencode.Input{{ID: id, SessionID: r.id, Delivery: opencode.Queue,
		State: opencode.InputTombstone, TimeCreated: r.m.now()}}
	if _, err := t.flush(); err != nil {
		return false, err
	}
	return true, nil
}

// revokedError is the answer for an input revoked before it ran.
func revokedError(sessionID, id, when string) *opencode.Error {
	return &opencode.Error{Code: opencode.ERevoked, Resource: "message", SessionID: sessionID, MessageID: id,
		Message: "Message " + id + " was revoked " + when}
}

// cancelPending revokes the pending inputs at the given inbox indexes, in
// one commit, and answers their waiters.
func (r *runner) cancelPending(idx []int, reason string) {
	if len(idx) == 0 {
		return
	}
	now := r.m.now()
	t := r.tx()
	drop := map[string]bool{}
	for _, i := range idx {
		in := *r.pending[i]
		in.State = opencode.InputRevoked
		t.batch.Inputs = append(t.batch.Inputs, &in)
		t.durable(opencode.EvInboxCancelled, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": in.ID, "delivery": in.Delivery, "reason": reason})
		if in.Shown {
			t.batch.DeleteMessages = append(t.batch.DeleteMessages, in.ID)
			t.live(opencode.EvMessageRemoved, map[string]any{"sessionID": r.id, "messageID": in.ID})
		}
		drop[in.ID] = true
	}
	if _, err := t.flush(); err != nil {
		return // the runner stops (see tx.flush)
	}
	kept := r.pending[:0]
	for _, in := range r.pending {
		if !drop[in.ID] {
			kept = append(kept, in)
		}
	}
	r.pending = kept
	for id := range drop {
		r.answer(id, waitResult{err: revokedError(r.id, id, "before it was delivered ("+reason+")")})
	}
}

// replace changes the delivery and/or the content of a pending input.
func (r *runner) replace(id string, delivery *opencode.Delivery, parts []opencode.Part) (*opencode.Input, error) {
	i := r.pendingIndex(id)
	if i < 0 {
		in, err := r.m.store.InputStatus(context.Background(), id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && in.SessionID != r.id) {
			return nil, opencode.MessageNotFound(r.id, id)
		}
		if err != nil {
			return nil, err
		}
		if in.State == opencode.InputTombstone {
			return nil, revokedError(r.id, id, "before it was admitted")
		}
		return nil, &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id, SessionID: r.id,
			Message: "Message " + id + " is no longer pending (" + string(in.State) + ")"}
	}
	in := *r.pending[i]
	now := r.m.now()
	t := r.tx()
	if delivery != nil && *delivery != in.Delivery {
		in.Delivery = *delivery
		t.durable(opencode.EvInboxDeliveryChanged, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": id, "delivery": in.Delivery})
	}
	if parts != nil {
		for j := range parts {
			parts[j].SessionID = r.id
			parts[j].MessageID = id
		}
		if in.Shown {
			// The shown message gets the new parts in place of the old.
			for _, old := range in.Parts {
				t.batch.DeleteParts = append(t.batch.DeleteParts, old.ID)
				t.live(opencode.EvPartRemoved, map[string]any{"sessionID": r.id, "messageID": id, "partID": old.ID})
			}
			for _, p := range parts {
				t.part(p, now)
			}
		}
		in.Parts = parts
		in.Fingerprint = fingerprint(&in)
		t.durable(opencode.EvInboxReplaced, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": id, "delivery": in.Delivery, "prompt": in.Prompt()})
	}
	if len(t.batch.Events) == 0 {
		return r.pending[i], nil
	}
	t.batch.Inputs = []*opencode.Input{&in}
	if _, err := t.flush(); err != nil {
		return nil, err
	}
	r.pending[i] = &in
	return &in, nil
}

// ---- waiting ---------------------------------------------------------------

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
	in, err := r.m.store.InputStatus(context.Background(), id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && in.SessionID != r.id):
		ch <- waitResult{err: opencode.MessageNotFound(r.id, id)}
	case err != nil:
		ch <- waitResult{err: err}
	case in.State == opencode.InputRevoked:
		ch <- waitResult{err: revokedError(r.id, id, "before it was delivered")}
	case in.State == opencode.InputTombstone:
		ch <- waitResult{err: revokedError(r.id, id, "before it was admitted")}
	default:
		res := r.finishedResult(id, in.Answer)
		// The turn's events went out earlier; waiting for what is published
		// now covers them.
		res.pos = r.m.bus.Position()
		ch <- res
	}
	return ch
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
func (r *runner) recordAnswers(t *tx, tu *turn) {
	for _, in := range tu.inputs {
		c := *in
		c.Answer = c.ID
		if tu.last != nil {
			c.Answer = tu.last.Info.ID
		}
		t.batch.Inputs = append(t.batch.Inputs, &c)
	}
}

// ---- session edits ---------------------------------------------------------

func (r *runner) update(p SessionPatch) (opencode.Session, error) {
	s := r.sess
	if p.Title != nil {
		s.Title = *p.Title
	}
	if p.Metadata != nil {
		s.Metadata = p.Metadata
	}
	if p.Permission != nil {
		s.Permission = p.Permission
	}
	if p.Archived != nil {
		s.Time.Archived = p.Archived
	}
	s.Time.Updated = r.m.now()
	return r.saveSession(r.tx(), s)
}

// saveSession commits s with whatever t holds, and takes it as the
// session's state once stored.
func (r *runner) saveSession(t *tx, s opencode.Session) (opencode.Session, error) {
	t.session(s)
	if _, err := t.flush(); err != nil {
		return r.sess, err
	}
	r.sess = s
	return s, nil
}

func (r *runner) delete() error {
	if r.turn != nil {
		r.interrupt("Session deleted", false)
	}
	r.flushPending()
	if err := r.m.store.DeleteSession(context.Background(), r.id); err != nil {
		return mapStoreErr(err, r.id)
	}
	r.m.publish(liveEvent(r.id, r.sess.Directory, opencode.EvSessionDeleted, map[string]any{"sessionID": r.id, "info": r.sess}))
	if historySize(r.history) >= bigContent {
		r.m.releaseMemory()
	}
	// The loop stops once this command has answered.
	r.deleted = true
	return nil
}
