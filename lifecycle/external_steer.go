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
	// accepted are the steers a v2 agent accepted (session/inject) and
	// has not delivered yet: the agent's message ID -> ours. Each is
	// delivered at its user_message; revoking: at the prompt's end, the
	// ones asked back (session/revoke_inject) and not answered yet.
	accepted map[string]string
	revoking map[string]bool
}

// extSteered is the agent's answer to one steer.
type extSteered struct {
	id, outcome string
	err         error
	// agentID: a v2 agent's ID of an accepted inject; revoke: the
	// answer to its session/revoke_inject.
	agentID string
	revoke  bool
}

// outcomeAccepted is a v2 agent's acceptance of an inject (delivered
// later, at its user_message).
const outcomeAccepted = "accepted"

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
	if tu == nil || tu.ext == nil || tu.ext.proc == nil || !tu.ext.proc.steering && !tu.ext.proc.inject {
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
		if !e.inject {
			// v1: the agent may answer the steer after its words about it.
			// v2: its user_message says where it joined.
			tu.ext.split = true
		}
		id, blocks := in.ID, extBlocks([]*opencode.Input{in})
		r.m.wg.Add(1)
		go func() {
			defer r.m.wg.Done()
			s := &extSteered{id: id}
			if e.inject {
				if s.agentID, s.err = r.m.ext.inject(e, blocks, id); s.err == nil {
					s.outcome = outcomeAccepted
				}
			} else {
				s.outcome, s.err = r.m.ext.steer(e, blocks, id)
			}
			r.post(streamMsg{ext: &extMsg{tu: tu, steered: s}})
		}()
	}
}

// extSteered takes the agent's answer to a steer: injected (or a turn it
// started) delivers it into this turn, where the agent's words after it
// were sent begin; anything else leaves it pending,
// for the next turn. The prompt's end, if it waited for this, goes on.
func (r *runner) extSteered(s *extSteered) {
	tu := r.turn
	if s.revoke {
		r.extRevoked(s)
		r.extReplay(tu)
		return
	}
	sent := tu.ext.sending[s.id]
	delete(tu.ext.sending, s.id)
	if i := r.pendingIndex(s.id); i >= 0 {
		switch {
		case s.outcome == outcomeAccepted:
			r.m.log.Debug("external agent accepted a steer (session/inject): delivered at its user_message",
				"session", r.id, "message", s.id, "agentMessage", s.agentID)
			tu.ext.accepted[s.agentID] = s.id
		case acpclient.InjectReason(s.err) == acpclient.ReasonNoRunningTurn:
			r.m.log.Info("external agent: steer came after its work, it runs as the next prompt", "session", r.id, "message", s.id)
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
	if _, ok := r.turn.ext.sending[id]; ok {
		return true
	}
	for _, ours := range r.turn.ext.accepted {
		if ours == id {
			return true
		}
	}
	return false
}

// sendingError is revoke's and replace's answer for an input in flight.
func sendingError(sessionID, id string) error {
	return &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id, SessionID: sessionID,
		Message: "Message " + id + " was already sent to the session's external agent"}
}

// extAborted delivers the steers in flight into the turn being aborted:
// the agent has them, so they are not revoked with the pending ones.
func (r *runner) extAborted(tu *turn) {
	if tu.ext == nil || len(tu.ext.sending) == 0 && len(tu.ext.accepted) == 0 {
		return
	}
	tu.ext.buffered = nil // the aborted turn's late words are dropped
	accepted := map[string]bool{}
	for _, id := range tu.ext.accepted {
		accepted[id] = true
	}
	var batch []*opencode.Input
	for _, in := range r.pending {
		if _, ok := tu.ext.sending[in.ID]; ok || accepted[in.ID] {
			batch = append(batch, in)
		}
	}
	clear(tu.ext.sending)
	clear(tu.ext.accepted)
	if len(batch) > 0 {
		r.deliver(batch, false)
	}
}
