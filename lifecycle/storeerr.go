package lifecycle

// The one mapping of store outages to the core's errors. The Manager holds
// its store and cluster only through these adapters, so every error that
// says the store is down leaves the core (to HTTP, ACP, AG-UI, the OpenAI
// door) as the same EUnavailable, whichever read or write met it; the
// front doors only read opencode.Kinds.

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// storeRetryAfter is the Retry-After of an outage, in seconds: a
// connection that broke or a read past its deadline is worth a retry soon.
const storeRetryAfter = 1

// storeErr maps one store error: an outage (store.Unavailable: cannot be
// reached, full, past a deadline) becomes EUnavailable with the store's
// error as its Cause, so errors.Is and errors.As still see it. Anything
// else passes as it is: the store's answers (ErrNotFound, ErrConflict, an
// OwnedError, ErrFenced), which the core reads and names (mapStoreErr),
// and a bug, which a front door answers as internal.
func storeErr(err error) error {
	var oe *opencode.Error
	if err == nil || errors.As(err, &oe) || !store.Unavailable(err) {
		return err
	}
	return &opencode.Error{Code: opencode.EUnavailable, Cause: err, RetryAfter: storeRetryAfter,
		Message: "The store cannot be reached or written now; retry the request"}
}

// unavailable reports whether err is the core's outage: a store outage
// (storeErr), a session stopped after a failed write, a shutdown.
func unavailable(err error) bool {
	var oe *opencode.Error
	return errors.As(err, &oe) && oe.Code == opencode.EUnavailable
}

// mappedStore is the store as the Manager holds it: every error through
// storeErr. It names its store rather than embedding it, so a method
// added to store.Store does not compile until it is mapped here.
type mappedStore struct{ s store.Store }

var _ store.Store = mappedStore{}

func (m mappedStore) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	return storeErr(m.s.Commit(ctx, sessionID, b))
}

func (m mappedStore) GetSession(ctx context.Context, id string) (opencode.Session, error) {
	s, err := m.s.GetSession(ctx, id)
	return s, storeErr(err)
}

func (m mappedStore) SessionOpen(ctx context.Context, id string) (bool, error) {
	ok, err := m.s.SessionOpen(ctx, id)
	return ok, storeErr(err)
}

func (m mappedStore) OpenSessions(ctx context.Context) ([]string, error) {
	ids, err := m.s.OpenSessions(ctx)
	return ids, storeErr(err)
}

func (m mappedStore) ListSessions(ctx context.Context) ([]opencode.Session, error) {
	all, err := m.s.ListSessions(ctx)
	return all, storeErr(err)
}

func (m mappedStore) DeleteSession(ctx context.Context, id string) error {
	return storeErr(m.s.DeleteSession(ctx, id))
}

func (m mappedStore) ListMessages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error) {
	msgs, err := m.s.ListMessages(ctx, sessionID)
	return msgs, storeErr(err)
}

func (m mappedStore) MessageSession(ctx context.Context, messageID string) (string, error) {
	id, err := m.s.MessageSession(ctx, messageID)
	return id, storeErr(err)
}

func (m mappedStore) GetMessage(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error) {
	mp, err := m.s.GetMessage(ctx, sessionID, messageID)
	return mp, storeErr(err)
}

func (m mappedStore) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	page, err := m.s.MessagesPage(ctx, sessionID, q)
	return page, storeErr(err)
}

func (m mappedStore) MessageExists(ctx context.Context, messageID string) (bool, error) {
	ok, err := m.s.MessageExists(ctx, messageID)
	return ok, storeErr(err)
}

func (m mappedStore) GetInput(ctx context.Context, id string) (*opencode.Input, error) {
	in, err := m.s.GetInput(ctx, id)
	return in, storeErr(err)
}

func (m mappedStore) InputStatus(ctx context.Context, id string) (store.InputStatus, error) {
	st, err := m.s.InputStatus(ctx, id)
	return st, storeErr(err)
}

func (m mappedStore) PendingInputs(ctx context.Context, sessionID string) ([]*opencode.Input, error) {
	ins, err := m.s.PendingInputs(ctx, sessionID)
	return ins, storeErr(err)
}

func (m mappedStore) Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	evs, err := m.s.Events(ctx, sessionID, after, limit)
	return evs, storeErr(err)
}

func (m mappedStore) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	seq, err := m.s.LastSeq(ctx, sessionID)
	return seq, storeErr(err)
}

func (m mappedStore) Close() error { return m.s.Close() }

// mappedCluster is the store's cluster side as the Manager holds it: the
// calls that read the database map their errors through storeErr; the
// rest pass through.
type mappedCluster struct{ store.Cluster }

func (c mappedCluster) Claim(ctx context.Context, sessionID string) (int64, error) {
	epoch, err := c.Cluster.Claim(ctx, sessionID)
	return epoch, storeErr(err)
}

func (c mappedCluster) Owner(ctx context.Context, sessionID string) (string, error) {
	addr, err := c.Cluster.Owner(ctx, sessionID)
	return addr, storeErr(err)
}

func (c mappedCluster) ClaimOrphans(ctx context.Context, limit int) ([]string, error) {
	ids, err := c.Cluster.ClaimOrphans(ctx, limit)
	return ids, storeErr(err)
}

func (c mappedCluster) Running(ctx context.Context) ([]string, error) {
	ids, err := c.Cluster.Running(ctx)
	return ids, storeErr(err)
}
