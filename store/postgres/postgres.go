// Package postgres is a store.Store on PostgreSQL, the first piece of
// scale-out (issue 14): several servers can share one database. It holds
// the same tables as store/sqlite (rows hold the JSON of the opencode
// types, plus the columns the queries index), migrated at Open through a
// schema_version table. Each Commit is one transaction that locks the
// session's row to hand out the next gapless event seqs; a database
// sequence gives the creation positions. It uses github.com/jackc/pgx/v5.
//
// Opened with OpenCluster it is one instance of several: it implements
// store.Cluster (session ownership fenced by an epoch, leases, the event
// feed between instances; see cluster.go and relay.go). Opened with Open
// it is alone and fences nothing.
package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opencode-server/opencode-server/store"
)

// Store is a store.Store backed by a PostgreSQL database.
type Store struct {
	pool      *pgxpool.Pool
	closeOnce sync.Once
	// cl is the cluster side (OpenCluster), nil for a store alone.
	cl *cluster
	// timeout bounds every database call whose context has no deadline
	// (see bound).
	timeout time.Duration
}

// defaultTimeout is a store's timeout when opened alone (the runner's
// commit deadline, lifecycle.Config.StoreTimeout, is the same); in a
// cluster it is three quarters of the lease, which is trusted no longer.
const defaultTimeout = 10 * time.Second

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a libpq connection string
// or URL, with pgxpool's pool_* settings) and migrates its schema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return open(ctx, cfg, defaultTimeout)
}

func open(ctx context.Context, cfg *pgxpool.Config, timeout time.Duration) (*Store, error) {
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// libpq's connect_timeout unset: a database that accepts TCP and
		// never answers would hold start-up (and every reconnect) forever.
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{pool: pool, timeout: timeout}
	pctx, cancel := s.bound(ctx)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// bound gives ctx the store's timeout when it has no deadline of its own:
// a database that stops answering (a partition, a server that accepts and
// never replies) fails the call within it instead of holding the caller,
// and pgx closes the connection the call was waiting on. A caller's own
// deadline, shorter or longer, is kept.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return within(ctx, s.timeout)
}

// within is ctx with deadline d from now unless it has one.
func within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// detach is bound for a write that must not be cut short by its caller's
// cancellation (a client that hangs up mid-commit): it drops the
// cancellation but keeps the caller's deadline (or takes the store's), so
// the write is still bounded in time.
func (s *Store) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	ctx = context.WithoutCancel(ctx)
	if !ok {
		return context.WithTimeout(ctx, s.timeout)
	}
	return context.WithDeadline(ctx, dl)
}

// Close implements store.Store: it waits for the connections in use and
// closes them all.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.cl != nil {
			s.cl.stop()
		}
		s.pool.Close()
	})
	return nil
}
