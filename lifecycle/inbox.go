package lifecycle

// The inbox: admission, revoke, replace, and the pending inputs a turn
// takes its steers and queued inputs from.

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/store"
)

func equalInput(prev, in *opencode.Input) bool {
	return prev.SessionID == in.SessionID && prev.Delivery == in.Delivery && sameContent(prev.Fingerprint, in)
}

// admit stores a new input durably, or returns the earlier admission of the
// same ID and content.
func (r *runner) admit(in *opencode.Input) (*opencode.Input, bool, error) {
	// An ID minted for this request is new: no earlier admission, message
	// or tombstone can hold it (the commit checks anyway), so no reads.
	if !in.Minted {
		if prev, existed, err := r.earlier(in); err != nil || existed {
			return prev, existed, err
		}
	}
	now := r.m.now()
	in.SessionID = r.id
	in.State = opencode.InputPending
	in.TimeCreated = now
	for i := range in.Parts {
		in.Parts[i].SessionID = r.id
		in.Parts[i].MessageID = in.ID
	}
	t := r.outbox()
	prompt := in.Prompt()
	in.AdmittedSeq = t.durable(opencode.PromptAdmitted{InputHeader: r.inputHeader(now, in.ID), Prompt: prompt, Delivery: in.Delivery})
	t.durable(opencode.InboxEnqueued{InputHeader: r.inputHeader(now, in.ID), Delivery: in.Delivery, Prompt: prompt})
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

// earlier looks for what already holds in's ID: the same admission
// (existed), another one, a tombstone or a message (errors).
func (r *runner) earlier(in *opencode.Input) (*opencode.Input, bool, error) {
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
	return nil, false, nil
}

// userMessage is the user message an input becomes.
func userMessage(in *opencode.Input, agent string, model opencode.MessageModel, created int64) opencode.Message {
	return opencode.Message{ID: in.ID, SessionID: in.SessionID, Role: opencode.User,
		Time: opencode.MessageTime{Created: created}, Agent: agent, Model: &opencode.MessageModel{
			ProviderID: model.ProviderID, ModelID: model.ModelID, Variant: model.Variant}, System: in.System, Tools: in.Tools}
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
	// userTurns and outputs: what the history holds for pruning.
	userTurns, outputs int
	// titling: a title request waits for the commit (see requestTitle).
	titling bool
}

func (r *runner) undoPoint() undoPoint {
	return undoPoint{lazy: r.lazy, pending: append([]*opencode.Input(nil), r.pending...), history: len(r.history),
		sess: r.sess, resume: r.resume, turn: r.turn, userTurns: r.userTurns, outputs: len(r.toolOutputs),
		titling: r.titling}
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
	r.userTurns, r.toolOutputs = s.userTurns, r.toolOutputs[:min(s.outputs, len(r.toolOutputs))]
	if s.lazy && !r.lazy {
		// The history read for the turn goes too; the next turn reads it.
		r.forgetHistory()
	}
	r.sess = s.sess
	r.resume = s.resume
	r.titling = s.titling // the failed commit's title request never went out
}

// admitError maps a failed admission commit.
func admitError(err error, id string) error {
	var pce *store.PartConflictError
	if errors.As(err, &pce) {
		return &opencode.Error{Code: opencode.EConflict, Resource: pce.ID,
			Message: "Part ID " + pce.ID + " is already in use: nothing was admitted", Cause: err}
	}
	if errors.Is(err, store.ErrConflict) {
		return &opencode.Error{Code: opencode.EConflict, Resource: "message", MessageID: id,
			Message: "Message ID " + id + " is already in use", Cause: err}
	}
	if store.Unavailable(err) {
		// The store could not be reached (an outage storeErr mapped, said
		// here of the message): the write may have been made (see
		// Manager.Admit); a retry with the same message ID is safe either
		// way.
		return &opencode.Error{Code: opencode.EUnavailable, MessageID: id, RetryAfter: storeRetryAfter,
			Message: "Message " + id + " may not have been stored; retry the request with the same message ID", Cause: err}
	}
	var oe *opencode.Error
	if errors.As(err, &oe) {
		return err
	}
	// The store refused the write: nothing was admitted; a retry with the
	// same message ID is safe.
	return &opencode.Error{Code: opencode.EUnavailable, MessageID: id,
		Message: "Message " + id + " could not be stored, nothing was admitted; retry the request", Cause: err}
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
	if r.extSendingInput(id) {
		return false, sendingError(r.id, id)
	}
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
	t := r.outbox()
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
	t := r.outbox()
	drop := map[string]bool{}
	for _, i := range idx {
		in := *r.pending[i]
		in.State = opencode.InputRevoked
		t.batch.Inputs = append(t.batch.Inputs, &in)
		t.durable(opencode.InboxCancelled{InputHeader: r.inputHeader(now, in.ID), Delivery: in.Delivery, Reason: reason})
		if in.Shown {
			t.batch.DeleteMessages = append(t.batch.DeleteMessages, in.ID)
			t.live(opencode.MessageRemoved{SessionID: r.id, MessageID: in.ID})
		}
		drop[in.ID] = true
	}
	if _, err := t.flush(); err != nil {
		return // the runner stops (see outbox.flush)
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
	if r.extSendingInput(id) {
		return nil, sendingError(r.id, id)
	}
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
	t := r.outbox()
	if delivery != nil && *delivery != in.Delivery {
		in.Delivery = *delivery
		t.durable(opencode.InboxDeliveryChanged{InputHeader: r.inputHeader(now, id), Delivery: in.Delivery})
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
				t.live(opencode.PartRemoved{SessionID: r.id, MessageID: id, PartID: old.ID})
			}
			for _, p := range parts {
				t.part(p, now)
			}
		}
		in.Parts = parts
		in.Fingerprint = fingerprint(&in)
		t.durable(opencode.InboxReplaced{InputHeader: r.inputHeader(now, id), Delivery: in.Delivery, Prompt: in.Prompt()})
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
