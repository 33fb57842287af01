package store

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
)

// ErrFenced is a commit refused because this instance no longer owns the
// session: another instance claimed it, or this instance's lease ran out
// before it could be renewed. Nothing of the batch was written; the
// session's runner must stop at once and publish nothing.
var ErrFenced = errors.New("fenced: this instance no longer owns the session")

// OwnedError is a claim refused because another live instance owns the
// session; Addr is where that instance serves HTTP.
type OwnedError struct{ Instance, Addr string }

func (e *OwnedError) Error() string {
	return "session is owned by instance " + e.Instance + " at " + e.Addr
}

// Cluster is implemented by a store that several server instances share
// (store/postgres in cluster mode). Each session has at most one owner, the
// only instance that may run it; ownership is fenced by an epoch, as
// Temporal fences a shard by its range ID: a claim bumps the epoch, and the
// store refuses (ErrFenced) a commit made under an older one. Ownership
// lasts as long as the owner's lease, which it renews; an instance whose
// lease ran out may be replaced by any other.
//
// Commit fences only sessions this instance claimed (Claim, or a
// CreateOnly batch, which makes the creator the owner).
type Cluster interface {
	// Instance names this instance's current lease (a new one after a
	// lease was lost).
	Instance() string
	// Claim makes this instance the session's owner if nobody owns it, it
	// already does, or the owner's lease expired, and returns the new
	// epoch. A session another live instance owns gives an *OwnedError, a
	// missing one ErrNotFound.
	Claim(ctx context.Context, sessionID string) (epoch int64, err error)
	// Held returns the epoch under which this instance holds the session.
	Held(sessionID string) (epoch int64, ok bool)
	// Holds reports whether this instance may still act as the session's
	// owner under epoch: it holds it under that epoch and its lease is
	// trusted (renewed within TTL minus a safety margin). A runner checks
	// it before it publishes, calls the model or runs a tool.
	Holds(sessionID string, epoch int64) bool
	// Release gives up a session held under epoch (its runner stopped);
	// any instance may claim it at once.
	Release(ctx context.Context, sessionID string, epoch int64)
	// Owner returns the address of the live instance other than this one
	// that owns the session, or "" if it is unowned, ours, or its owner's
	// lease expired (then this instance may claim it).
	Owner(ctx context.Context, sessionID string) (addr string, err error)
	// ClaimOrphans claims up to limit sessions that have work (open, or
	// with pending inputs) and no live owner, and returns them: their
	// runners must be started to close, continue and drain them.
	ClaimOrphans(ctx context.Context, limit int) ([]string, error)
	// Running lists the sessions whose turn is open (Batch.Open) that this
	// instance does not hold: what other instances run, or will continue.
	Running(ctx context.Context) ([]string, error)
	// Broadcast hands an event this instance published, after its commit,
	// to the other instances: a durable event as a doorbell (they read it
	// from the log), a live one whole. Events keep their order.
	Broadcast(e *opencode.Event)
	// Flush waits until every other live instance has written out, to
	// its streams that receive the session's events, what this instance
	// broadcast of it so far (a blocking prompt answers after that), or
	// ctx ends.
	Flush(ctx context.Context, sessionID, directory string)
	// Attach sets what the cluster calls (see Hooks). Call it once, before
	// the first claim.
	Attach(h Hooks)
	// Leave releases every session this instance holds and ends its lease
	// (a graceful shutdown: others take over at once, not after the TTL).
	Leave(ctx context.Context)
}

// Hooks are what a Cluster calls back.
type Hooks struct {
	// Deliver gets the other instances' events, in their owners' order;
	// durable ones in seq order, read from the log, with no gap.
	Deliver func(*opencode.Event)
	// Lost: this instance's lease is lost; every runner must stop (others
	// may have claimed any of their sessions).
	Lost func()
	// Reset: the event feed was interrupted and events may have been
	// missed; close the streams so clients reconnect and resume.
	Reset func()
	// Mark is called, in the feed's order, when another instance flushes
	// a session (Cluster.Flush): it returns a wait for this instance's
	// streams that receive the session's events to write out what was
	// delivered so far.
	Mark func(sessionID, directory string) func(ctx context.Context)
}
