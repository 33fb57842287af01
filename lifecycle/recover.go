package lifecycle

// What a runner does when it starts: load the session, close what a crash
// or shutdown left open, and continue a cut-off turn.

import (
	"context"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// state is what a runner loads when it starts.
type state struct {
	sess     opencode.Session
	pending  []*opencode.Input
	msgs     []opencode.MessageWithParts
	lastSeq  int64
	lastUser string
	// epoch is the claim under which this instance runs the session
	// (cluster mode).
	epoch int64
	// lazy: the session has nothing to resume, so its history was not read
	// (a cold inbox, abort or edit does not need it); a turn reads it.
	lazy bool
}

func (m *Manager) load(ctx context.Context, id string) (*state, error) {
	epoch, err := m.claim(ctx, id)
	if err != nil {
		return nil, err
	}
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
	st := &state{sess: sess, pending: pending, lastSeq: last, epoch: epoch}
	if len(pending) == 0 {
		open, err := m.store.SessionOpen(ctx, id)
		if err != nil {
			return nil, mapStoreErr(err, id)
		}
		st.lazy = !open
	}
	if !st.lazy {
		// Recovery needs the history now: a turn may have been cut off.
		if st.msgs, err = m.store.ListMessages(ctx, id); err != nil {
			return nil, mapStoreErr(err, id)
		}
	}
	return st, nil
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
	if mp.Info.Role == opencode.Assistant && mp.Info.Agent == "plan" {
		r.usedPlan = true
	}
	if isCompaction(mp) {
		// The model's view starts over from the summary that follows.
		r.history = []provider.Message{{Role: "user", Content: compactionQuestion, Memo: &provider.Memo{}}}
		r.toolOutputs = nil
		return
	}
	if mp.Info.Role == opencode.User {
		r.userTurns++
	}
	var b strings.Builder
	var calls []provider.ToolCall
	var results []provider.Message
	var refs []toolRef
	for _, p := range mp.Parts {
		switch {
		case p.Type == opencode.PartText && !p.Ignored:
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		case p.Type == opencode.PartTool && p.State != nil:
			if p.Tool == "todowrite" && p.State.Status == "completed" {
				r.todos = todosOf(p.State.Input)
			}
			calls = append(calls, provider.ToolCall{ID: p.CallID, Name: p.Tool, Arguments: p.State.Input})
			out := p.State.Error
			if p.State.Output != nil {
				out = *p.State.Output
			}
			if p.State.Time != nil && p.State.Time.Compacted != nil {
				out = prunedOutput
			} else if p.State.Status == "completed" {
				// Its place in the history: after the message, then the results.
				refs = append(refs, toolRef{messageID: mp.Info.ID, partID: p.ID, tokens: len(out) / 4,
					hist: len(r.history) + 1 + len(results), turn: r.userTurns})
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
	r.toolOutputs = append(r.toolOutputs, refs...)
}

// recover closes assistant messages a crash left open: the turn is over, and
// it ended interrupted.
func (r *runner) recover(msgs []opencode.MessageWithParts) bool {
	t := r.outbox()
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
