package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/store"
)

// streamMsg carries a provider chunk, or the end of a model call, from the
// call's goroutine to the runner. step tells stale messages (after an
// abort) from current ones.
type streamMsg struct {
	// then is work done off the loop coming back to it (see offLoop).
	then func()
	// question is a question tool's call asking the user.
	question *questionAsk
	// title is the answer of the session's title request.
	title *string
	step  int64
	chunk *provider.Chunk
	done  bool
	err   error
	tool  *toolResult
	ask   *askReq
	// progress is a running tool's latest metadata.
	progress *toolProgress
	// ext is an external agent's news (see external.go).
	ext *extMsg
}

// runner is one session's owner. Every field below is touched only by the
// loop goroutine.
type runner struct {
	m      *Manager
	id     string
	cmds   chan command
	stream chan streamMsg
	// cut ends a burst of model chunks early (see delta).
	cut bool
	// pend is the work not yet committed (see outbox).
	pend *outbox
	// lazy: the history is not read yet (see state.lazy).
	lazy bool
	// failure is a commit that failed: the runner stops (fail).
	failure error
	// stalled is a read that failed (the history a turn needs): the
	// runner stops once the command it came in is answered, and is
	// retried in the background as after a failed commit, so pending
	// input is not left for the next request.
	stalled error
	// firstSnap is the project's files when the session's first step
	// started: session.diff is measured from it.
	firstSnap string
	// away counts work running off the loop (offLoop) that still has to come
	// back to it (the runner is not evictable meanwhile).
	away int
	// restoring: a revert or unrevert restores the files off the loop (no
	// turn starts meanwhile); finalize: an input admitted meanwhile makes
	// the revert final once it is done.
	restoring, finalize bool
	// sumSeq orders summaries measured off the loop: one measured before a
	// newer one already applied is dropped (see summarize).
	sumSeq, sumApplied int
	// boot holds the stored messages until the loop has recovered them.
	boot []opencode.MessageWithParts
	done chan struct{}
	// exit is why the runner stopped (set before done is closed).
	exit error

	sess    opencode.Session
	lastSeq int64
	// epoch is the claim this runner runs under (cluster mode, see owned).
	epoch   int64
	pending []*opencode.Input // the inbox, in admission order
	history []provider.Message
	// media: the history may hold files (images, PDFs), which a model
	// that does not read them gets as OpenCode's error text instead.
	media bool
	// foreign: the history may hold assistant messages with reasoning or
	// provider metadata, which another model gets converted (forModel).
	foreign bool
	// compactID and compactTranscript are the latest compaction request
	// replayed from the store and the conversation before it, until a
	// later user message: a compaction a restart cut off is redone from
	// it, not from the (reset) model view.
	compactID, compactTranscript string
	turn                         *turn
	steps                        int64

	waiters map[string][]chan waitResult
	idle    []chan struct{}
	// approved holds the "always" answers given in this session.
	approved []Rule
	// toolOutputs are the completed tool outputs in the model's view and
	// userTurns the user messages it holds (pruning, see prune).
	toolOutputs []toolRef
	userTurns   int
	// usedPlan: a turn of this session ran the plan agent; build steps
	// then carry the mode-switch reminder.
	usedPlan bool
	// todos is the session's todo list: the input of its latest completed
	// todowrite call (remembered from the history, so it survives restarts).
	todos []opencode.Todo
	// extCostSeen is the external agent's cumulative session cost at its
	// last usage_update (a message's cost is what it added).
	extCostSeen float64
	// titling: the session's title request is under way.
	titling bool
	// resume is set when the session's last turn was cut off by a shutdown
	// or crash: the runner continues it once it starts, before any pending
	// input.
	resume *cutTurn
	// deleted stops the loop after the delete command.
	deleted bool
	// clientAnswers are the results ToolResult gave client tool calls
	// (retries of them are answered as done), oldest first in
	// clientAnswerOrder; bounded by maxClientAnswers.
	clientAnswers     map[string]clientAnswer
	clientAnswerOrder []string
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
	compact bool
	// overflowed: a model call failed because the prompt did not fit
	// the model's context window; the turn ends and a compaction follows.
	overflowed bool
	transcript string
	// startSnap and endSnap are the project's files before the turn's
	// first step and after its last.
	startSnap, endSnap string
	// usage is the last step's reported usage (automatic compaction).
	usage provider.Usage
	// users are the user messages delivered into the turn.
	users []opencode.Message
	// clientTools are the client tools its inputs brought, offered in
	// every model call of the turn (see clienttool.go).
	clientTools []opencode.ClientTool
	// extNext is the external agent's next message ID when its messageId
	// changed: the step ending opens that message (see extMessage).
	extNext *string
	// ext is an external turn's steering state (external_steer.go).
	ext *extTurn
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
	// subtask: the step (a shell step) runs a subtask part's task call;
	// a model call follows it.
	subtask *opencode.Part
	// snapshot is the project's files when the step started ("" untracked).
	snapshot string
	// began: the step's start (step-start part, step.started) is out; in a
	// tracked project it waits for the start snapshot, taken off the loop.
	began bool
	// measuring and measured: the step's end snapshot and diffs, taken off
	// the loop before the step ends (tracked projects only).
	measuring bool
	measured  *snapDiffs
	// streamed is set when the model call returned; err is its error.
	streamed bool
	err      error
	// blocked: the user rejected a call (or dismissed a question) without
	// a word; the turn ends with the step.
	blocked bool
	// ext: an external agent's message, not a model call; extID is the
	// agent's ID of it and extMeta the parts' metadata that keeps it.
	ext     bool
	extID   string
	extMeta json.RawMessage
	// extUsed and extCost: the agent's last usage_update during this
	// message (its context, and the cost it added); extChars is how much
	// text and reasoning it streamed.
	extUsed  int64
	extCost  float64
	extChars int
}

func newRunner(m *Manager, st *state) *runner {
	r := &runner{m: m, id: st.sess.ID, cmds: make(chan command, 64), stream: make(chan streamMsg, 256), boot: st.msgs,
		done: make(chan struct{}), sess: st.sess, lastSeq: st.lastSeq, epoch: st.epoch, pending: st.pending, lazy: st.lazy,
		waiters: map[string][]chan waitResult{}}
	return r
}

// command is a closure run on the runner goroutine; done is closed once its
// work is committed and published.
type command struct {
	f    func()
	done chan struct{}
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
	if r.failure == nil {
		r.failure = r.stalled
	}
	if r.failure != nil {
		r.fail()
		return
	}
	r.m.recovered(r.id)
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
				if r.cut {
					break burst
				}
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
		r.cut = false
		r.flushPending()
		if r.failure != nil {
			r.fail() // the command's caller learns it from r.done and r.exit
			return
		}
		if done != nil {
			close(done)
		}
		if r.stalled != nil {
			// What the command did is stored; its caller has its answer.
			r.failure = r.stalled
			r.fail()
			return
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
		r.pend == nil && r.resume == nil && len(r.approved) == 0 && !r.titling && r.away == 0
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
	if cl := r.m.cl; cl != nil {
		// Nothing of it lives in memory: any instance may take it.
		cl.Release(context.Background(), r.id, r.epoch)
		r.releasedExternal()
	}
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
	fenced := errors.Is(err, store.ErrFenced)
	if fenced {
		r.m.log.Warn("session taken over by another instance: runner stopped", "session", r.id)
		r.fencedOut()
	}
	if r.turn != nil {
		r.turn.cancel()
		r.turn = nil
	}
	// Also when the failed commit was the one that ended the turn (it
	// would have cleared busy once stored): before any waiter hears.
	r.m.setBusy(r.id, false)
	r.rejectAsks()
	r.pend = nil
	// Noted before the runner leaves the registry (see noteFailure); its
	// retry scheduled after, so it starts a new runner, not this one.
	var note failureNote
	if !fenced {
		note = r.m.noteFailure(r.id, err)
	}
	r.stop(&opencode.Error{Code: opencode.EUnavailable, SessionID: r.id,
		Message: "Session " + r.id + " stopped after a failed write to the store; retry the request", Cause: err})
	if !fenced {
		r.m.retryLater(r.id, r.epoch, note)
	}
}

// post hands a stream message to the runner unless it is gone.
func (r *runner) post(msg streamMsg) {
	select {
	case r.stream <- msg:
	case <-r.done:
	}
}
