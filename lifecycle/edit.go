package lifecycle

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Editing the stored conversation (OpenCode's DELETE message, PATCH and
// DELETE part): what the model is sent next is read again from the store.

// DeleteMessage removes a message and its parts for good (no file is
// reverted). Deleting one that is gone is no error, as in OpenCode.
func (m *Manager) DeleteMessage(ctx context.Context, sessionID, messageID string) error {
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) { err = r.deleteMessage(messageID) })
	if derr != nil {
		return derr
	}
	return err
}

// DeletePart removes one part of a message; one that is gone is no error.
func (m *Manager) DeletePart(ctx context.Context, sessionID, messageID, partID string) error {
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) { err = r.deletePart(messageID, partID) })
	if derr != nil {
		return derr
	}
	return err
}

// UpdatePart stores p over the part of its ID, or adds it to its message
// (OpenCode's upsert); the message must exist.
func (m *Manager) UpdatePart(ctx context.Context, p opencode.Part) (out opencode.Part, err error) {
	// The message is looked up here, not on the session's loop.
	rctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	_, gerr := m.store.GetMessage(rctx, p.SessionID, p.MessageID)
	cancel()
	if errors.Is(gerr, store.ErrNotFound) {
		if _, serr := m.GetSession(ctx, p.SessionID); serr != nil {
			return p, serr
		}
		return p, opencode.MessageNotFound(p.SessionID, p.MessageID)
	}
	if gerr != nil {
		return p, mapStoreErr(gerr, p.SessionID)
	}
	derr := m.do(ctx, p.SessionID, func(r *runner) { out, err = r.updatePart(p) })
	if derr != nil {
		return out, derr
	}
	return out, err
}

// editable refuses an edit of the conversation while a turn runs (its
// messages are the runner's until it ends) or of an input still waiting
// in the inbox (revoke or replace it instead).
func (r *runner) editable(messageID string) error {
	if r.busy() {
		return busyError(r.id)
	}
	if r.pendingIndex(messageID) >= 0 {
		return &opencode.Error{Code: opencode.EConflict, SessionID: r.id, MessageID: messageID,
			Message: "Message " + messageID + " is waiting in the inbox: revoke or replace it instead"}
	}
	return nil
}

func (r *runner) deleteMessage(messageID string) error {
	if err := r.editable(messageID); err != nil {
		return err
	}
	t := r.outbox()
	t.batch.DeleteMessages = append(t.batch.DeleteMessages, messageID)
	t.live(opencode.MessageRemoved{SessionID: r.id, MessageID: messageID})
	r.forgetHistory()
	return nil
}

func (r *runner) deletePart(messageID, partID string) error {
	if err := r.editable(messageID); err != nil {
		return err
	}
	t := r.outbox()
	t.batch.DeleteParts = append(t.batch.DeleteParts, partID)
	t.live(opencode.PartRemoved{SessionID: r.id, MessageID: messageID, PartID: partID})
	r.forgetHistory()
	return nil
}

func (r *runner) updatePart(p opencode.Part) (opencode.Part, error) {
	if err := r.editable(p.MessageID); err != nil {
		return p, err
	}
	r.outbox().part(p, r.m.now())
	r.forgetHistory()
	return p, nil
}

// forgetHistory drops the conversation the runner holds for the model:
// the next turn reads it from the store (ensureHistory).
func (r *runner) forgetHistory() {
	r.lazy, r.history, r.firstSnap = true, nil, ""
	r.userTurns, r.toolOutputs = 0, nil
}

// CommitRevert makes a session's revert final (v2 revert/commit): the
// messages from the revert point on are removed, as the next prompt would
// remove them. A session not reverted is left as it is.
func (m *Manager) CommitRevert(ctx context.Context, sessionID string) error {
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) {
		if r.busy() {
			err = busyError(r.id)
			return
		}
		err = r.cleanupRevert()
	})
	if derr != nil {
		return derr
	}
	return err
}
