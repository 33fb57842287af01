// Package store defines the durable state of the server: sessions, messages,
// parts, admitted inputs and a per-session append-only event log with a
// gapless sequence. store/sqlite is the embedded default, store/memory the
// in-memory implementation, store/postgres the one several instances share
// (it also implements Cluster: ownership, fencing, the event feed); all
// pass store/storetest.
package store

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
)

// ErrNotFound is returned for a missing session, message or input.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when an admitted input's ID is already taken (by an
// input or a message), or a CreateOnly session already exists.
var ErrConflict = errors.New("conflict")

// PartConflictError is an admitted input whose part ID is already used, by
// a stored part or another input's part (or twice in the batch). It is an
// ErrConflict.
type PartConflictError struct{ ID string }

func (e *PartConflictError) Error() string { return "part ID " + e.ID + " is already in use" }

// Is makes a PartConflictError match ErrConflict.
func (e *PartConflictError) Is(target error) bool { return target == ErrConflict }

// OrphanPartError is a part of Batch.Parts that belongs to no message of
// the batch's session: its message is neither stored in that session nor in
// the batch's Messages (a message another session holds does not count,
// even listed in Messages), or the part names another session than the
// batch's. The whole batch fails
// and writes nothing.
//
// It is a programming error of the caller, not a client's conflict or a
// missing resource, so it deliberately matches neither ErrNotFound (which
// callers turn into "session not found") nor ErrConflict: it surfaces as an
// internal error.
type OrphanPartError struct {
	PartID, MessageID string
	// SessionID is the session the batch was committed for, PartSessionID
	// the one the part names.
	SessionID, PartSessionID string
}

func (e *OrphanPartError) Error() string {
	if e.PartSessionID != e.SessionID {
		return "part " + e.PartID + " of message " + e.MessageID + " names session " + e.PartSessionID +
			", not the batch's session " + e.SessionID
	}
	return "part " + e.PartID + " has no message " + e.MessageID + " in session " + e.SessionID
}

// Batch is one atomic write. Everything in it commits together or not at all,
// so a state change and the events that describe it can never disagree, even
// across a crash.
type Batch struct {
	// Session, if set, is inserted or replaced.
	Session *opencode.Session
	// CreateOnly makes Session an insert: if the session exists the batch
	// fails with ErrConflict (concurrent creates of one client-chosen ID).
	CreateOnly bool
	// Messages and Parts are inserted or replaced; a new one takes the next
	// creation position, a replaced one keeps its position. A part's
	// message must be stored in the session or come in Messages, and the
	// part must name the batch's session, else the batch fails with an
	// *OrphanPartError. (A part of a message that DeleteMessages removes
	// in the same batch is fine: it goes with its message.)
	Messages []opencode.Message
	Parts    []opencode.Part
	// Open, if set, flags the session as having work a restart must pick
	// up (a turn started) or clears the flag (its turn ended): start-up
	// reads only flagged sessions and those with pending inputs.
	Open *bool
	// DeleteMessages removes messages of the session with all their parts,
	// and DeleteParts single parts (a revoked input's shown user message, a
	// replaced input's old parts). Unknown IDs are ignored. Applied after
	// Messages and Parts.
	DeleteMessages []string
	DeleteParts    []string
	// Admit inserts new inputs (tombstones too: see MaxTombstones); an ID
	// already used by any input or message
	// fails the whole batch with ErrConflict, a part ID already used by any
	// stored part or input part with a *PartConflictError.
	Admit []*opencode.Input
	// Inputs replaces existing inputs (state, delivery, parts, seqs),
	// including ones Admit inserts in the same batch (applied after it).
	Inputs []*opencode.Input
	// Events are appended to the session's log in order; Commit sets each
	// one's Seq (last seq + 1, + 2, ...).
	Events []*opencode.Event
	// NoSync lets the commit skip the fsync: it is written (it survives
	// the process, and reads see it) but a power loss may take it, with
	// the unsynced commits before the next synced one. The lifecycle sets
	// it on the commits of a running turn that touch no input, no session
	// row and no open flag (streamed parts, step starts); admissions, inbox
	// changes and the end of a turn are synced.
	NoSync bool
}

// MaxTombstones bounds the tombstones (inputs in state
// opencode.InputTombstone: IDs revoked before they were admitted) a session
// keeps: a commit that admits one drops the session's oldest beyond it.
const MaxTombstones = 256

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return b.Session == nil && b.Open == nil && len(b.Messages) == 0 && len(b.Parts) == 0 &&
		len(b.DeleteMessages) == 0 && len(b.DeleteParts) == 0 && len(b.Admit) == 0 && len(b.Inputs) == 0 && len(b.Events) == 0
}

// InputStatus is an input without its content: see Store.InputStatus.
type InputStatus struct {
	SessionID string
	State     opencode.InputState
	// Answer is the message recorded as its answer (opencode.Input.Answer).
	Answer  string
	NoReply bool
}

// Store is the durable state. All methods are safe for concurrent use; the
// lifecycle layer guarantees one writer per session.
type Store interface {
	// Commit applies b atomically for session sessionID and assigns the
	// sequence numbers of its events.
	Commit(ctx context.Context, sessionID string, b *Batch) error

	GetSession(ctx context.Context, id string) (opencode.Session, error)
	// SessionOpen reports whether one session is flagged open (Batch.Open)
	// or has pending inputs: whether a restart must resume it.
	SessionOpen(ctx context.Context, id string) (bool, error)
	// OpenSessions lists, oldest created first, the sessions flagged open
	// (Batch.Open) or with pending inputs: what a restart must resume.
	OpenSessions(ctx context.Context) ([]string, error)
	// ListSessions returns all sessions, oldest created first.
	ListSessions(ctx context.Context) ([]opencode.Session, error)
	// DeleteSession removes a session with its messages, parts, inputs and log.
	DeleteSession(ctx context.Context, id string) error

	// ListMessages returns a session's messages with their parts in creation order.
	ListMessages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error)
	GetMessage(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error)
	// MessagesPage reads one page of a session's messages with their parts,
	// doing only that page's work. q.Desc lists newest first. With an
	// anchor (a message of the session, else ErrNotFound) the page holds
	// the messages after it in that order, or with q.Before the ones just
	// before it; the page keeps the order either way.
	MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error)
	// MessageExists reports whether any session has a message with this ID.
	MessageExists(ctx context.Context, messageID string) (bool, error)
	// MessageSession returns the session that holds a message (any
	// session), ErrNotFound if none does.
	MessageSession(ctx context.Context, messageID string) (string, error)

	// GetInput returns the input with this ID in any session.
	GetInput(ctx context.Context, id string) (*opencode.Input, error)
	// InputStatus returns what the lifecycle needs to know of an input in
	// any session without reading its parts (a prompt may be megabytes).
	InputStatus(ctx context.Context, id string) (InputStatus, error)
	// PendingInputs returns a session's pending inputs in admission order.
	PendingInputs(ctx context.Context, sessionID string) ([]*opencode.Input, error)

	// Events returns up to limit (all if limit <= 0) durable events of the
	// session with seq > after, in seq order.
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error)
	// LastSeq is the seq of the session's last event, 0 if it has none.
	LastSeq(ctx context.Context, sessionID string) (int64, error)

	Close() error
}
