// Package postgres is a store.Store on PostgreSQL, the first piece of
// scale-out (issue 14): several servers can share one database. It holds
// the same tables as store/sqlite (rows hold the JSON of the opencode
// types, plus the columns the queries index), migrated at Open through a
// schema_version table. Each Commit is one transaction that locks the
// session's row to hand out the next gapless event seqs; a database
// sequence gives the creation positions. It uses github.com/jackc/pgx/v5.
//
// Not done yet: session ownership and fencing (the sessions.owner and
// sessions.epoch columns exist but nothing reads or writes them), change
// notification between servers (LISTEN/NOTIFY), and wiring into the
// server's configuration. Until ownership lands, two servers must not run
// the same session at once: the store serialises their commits but not
// their turns.
package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/opencode-server/opencode-server/store"
)

// Store is a store.Store backed by a PostgreSQL database.
type Store struct {
	pool      *pgxpool.Pool
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a libpq connection string
// or URL, with pgxpool's pool_* settings) and migrates its schema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{pool: pool}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close implements store.Store: it waits for the connections in use and
// closes them all.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}
