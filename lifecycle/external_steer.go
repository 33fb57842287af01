package lifecycle

import (
	"context"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/opencode"
)

// Steering an external agent. A steer admitted while the agent's prompt
// runs goes to it as `_session/steering` (idleBehavior promptRequired)
// when it advertises `_meta.steering.supported`; else it waits in the
// inbox as a queued input and starts the next turn. From the moment it is
// sent until the agent answers, the input is in flight: revoke and
// replace refuse it (the agent has it), and the prompt's end waits for
// the answer, so the input is either delivered into the turn (injected)
// or stays pending and starts the next one (promptRequired): never
// stranded, never both delivered and revoked.

// steerTimeout bounds the agent's answer to a steer; one that does not
// come in time leaves the steer pending for the next turn.
const steerTimeout = 30 * time.Second

// extTurn is the steering state of an external turn.
type extTurn struct {
	// proc is the process the prompt went out on, nil until it did.
	proc *extProc
	// sending are the steers sent and not yet answered, by input ID:
	// the runner's step count when each went.
	sending map[string]int64
	// held is the prompt's end, waiting for those answers; buffered are
	// the agent's updates meanwhile: published once the steers are
	// delivered (or not), so a client sees a steer's user message before
	// the words that answer it (the agent streams them before it answers
	// the steer).
	held     *extMsg
	buffered []*extMsg
	// replaying: extReplay is handing them on (external_edits.go).
	replaying bool
	// calls are the terminals and diffs each tool call's content held, by
	// call ID (external_content.go).
	calls map[string]*extCall
	// split: a steer was sent; the agent's next words open a new
	// assistant message, after the steer's user message (the agent may
	// stream what follows the steer before its answer reaches us).
	split bool
}

// extSteered is the agent's answer to one steer.
type extSteered struct {
	id, outcome string
	err         error
}

// steer sends one steer to the prompt running on e.
func (x *externals) steer(e *extProc, blocks []acpclient.ContentBlock, messageID string) (string, error) {
	ctx, cancel := context.WithTimeout(x.m.ctx, steerTimeout)
	defer cancel()
	var res acpclient.SteeringResponse
	err := e.p.Call(ctx, acpclient.MethodSessionSteering, acpclient.SteeringRequest{SessionID: e.sessionID, Prompt: blocks,
		Meta: acpclient.SteeringMeta{Steering: acpclient.SteeringOptions{IdleBehavior: acpclient.SteerPromptRequired},
			MessageID: messageID}}, &res)
	return res.Outcome, err
}

// extBlocks are the content blocks the agent gets for inputs.
func extBlocks(inputs []*opencode.Input) []acpclient.ContentBlock {
	var blocks []acpclient.ContentBlock
	for _, in := range inputs {
		for _, p := range in.Parts {
			if p.Type == opencode.PartText && p.Text != "" && !p.Ignored {
				blocks = append(blocks, acpclient.ContentBlock{Type: "text", Text: p.Text})
			}
		}
	}
	return blocks
}

// extSteer sends the pending steers to the running external prompt once
// what admitted them is committed (a failed commit undoes an admission:
// the agent must not have seen it).
func (r *runner) extSteer() {
	tu := r.turn
	if tu == nil || tu.ext == nil || tu.ext.proc == nil || !tu.ext.proc.steering {
		return
	}
	r.outbox().then(func(int64) { r.extSend(tu) })
}

func (r *runner) extSend(tu *turn) {
	if r.turn != tu || tu.step == nil || tu.ext.held != nil {
		return // the prompt has ended: the steers start the next turn
	}
	e := tu.ext.proc
	for _, in := range r.steers() {
		if _, ok := tu.ext.sending[in.ID]; ok {
			continue
		}
		tu.ext.sending[in.ID] = r.steps
		tu.ext.split = true
		id, blocks := in.ID, extBlocks([]*opencode.Input{in})
		r.m.wg.Add(1)
		go func() {
			defer r.m.wg.Done()
			outcome, err := r.m.ext.steer(e, blocks, id)
			r.post(streamMsg{ext: &extMsg{tu: tu, steered: &extSteered{id: id, outcome: outcome, err: err}}})
		}()
	}
}

// extSteered takes the agent's answer to a steer: injected (or a turn it
// started) delivers it into this turn, where the agent's words after it
// were sent begin; anything else leaves it pending,
// for the next turn. The prompt's end, if it waited for this, goes on.
func (r *runner) extSteered(s *extSteered) {
	tu := r.turn
	sent := tu.ext.sending[s.id]
	delete(tu.ext.sending, s.id)
	if i := r.pendingIndex(s.id); i >= 0 {
		switch {
		case s.err != nil:
			r.m.log.Warn("external agent: steer not taken, it runs as the next prompt", "session", r.id,
				"message", s.id, "err", s.err)
		case s.outcome == acpclient.SteerInjected || s.outcome == acpclient.SteerStartedNewTurn:
			r.deliver([]*opencode.Input{r.pending[i]}, false)
			if st := tu.step; st.n > sent {
				// Opened after the steer went: it answers the steer.
				st.msg.ParentID = tu.parentID
				r.outbox().message(st.msg)
			}
		}
	}
	r.extReplay(tu)
}

// extSplit opens a new assistant message for what the agent says after a
// steer was sent, once the current one has no tool call running.
func (r *runner) extSplit(mid string) {
	tu := r.turn
	if tu.ext == nil || !tu.ext.split {
		return
	}
	st := tu.step
	for _, c := range st.calls {
		if !c.done {
			return
		}
	}
	tu.ext.split = false
	tu.extNext = &mid
	r.extFinish(st, "stop")
}

// extSendingInput reports whether input id is in flight to the agent.
func (r *runner) extSendingInput(id string) bool {
	if r.turn == nil || r.turn.ext == nil {
		return false
	}
	_, ok := r.turn.ext.sending[id]
	return ok
}

// sendingError is revoke's and replace's answer for an input in flight.
func sendingError(sessionID, id string) error {
	return &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id, SessionID: sessionID,
		Message: "Message " + id + " was already sent to the session's external agent"}
}

// extAborted delivers the steers in flight into the turn being aborted:
// the agent has them, so they are not revoked with the pending ones.
func (r *runner) extAborted(tu *turn) {
	if tu.ext == nil || len(tu.ext.sending) == 0 {
		return
	}
	tu.ext.buffered = nil // the aborted turn's late words are dropped
	var batch []*opencode.Input
	for _, in := range r.pending {
		if _, ok := tu.ext.sending[in.ID]; ok {
			batch = append(batch, in)
		}
	}
	clear(tu.ext.sending)
	if len(batch) > 0 {
		r.deliver(batch, false)
	}
}
