package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions in order: migrations[i] brings a
// database from version i to i+1. A released migration is never edited;
// a change is a new one appended.
var migrations = [][]string{
	{ // 1: the tables of the SQLite store, plus the fencing columns.
		`CREATE SEQUENCE ord_seq`,
		`CREATE TABLE sessions (
			id       TEXT PRIMARY KEY,
			ord      BIGINT NOT NULL,
			json     TEXT NOT NULL,
			last_seq BIGINT NOT NULL DEFAULT 0,
			open     BOOLEAN NOT NULL DEFAULT FALSE,
			owner    TEXT NULL,
			epoch    BIGINT NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX sessions_ord ON sessions(ord)`,
		`CREATE INDEX sessions_open ON sessions(ord) WHERE open`,
		`CREATE TABLE messages (
			id         TEXT PRIMARY KEY,
			session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			ord        BIGINT NOT NULL,
			json       TEXT NOT NULL
		)`,
		`CREATE INDEX messages_session ON messages(session_id, ord)`,
		`CREATE TABLE parts (
			id         TEXT PRIMARY KEY,
			message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
			session_id TEXT NOT NULL,
			ord        BIGINT NOT NULL,
			json       TEXT NOT NULL
		)`,
		`CREATE INDEX parts_message ON parts(message_id, ord)`,
		`CREATE INDEX parts_session ON parts(session_id, ord)`,
		`CREATE TABLE inputs (
			id         TEXT PRIMARY KEY,
			session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			ord        BIGINT NOT NULL,
			state      TEXT NOT NULL,
			answer     TEXT NOT NULL DEFAULT '',
			no_reply   BOOLEAN NOT NULL DEFAULT FALSE,
			json       TEXT NOT NULL
		)`,
		`CREATE INDEX inputs_session ON inputs(session_id, state, ord)`,
		`CREATE INDEX inputs_state ON inputs(state)`,
		`CREATE TABLE input_parts (
			id         TEXT PRIMARY KEY,
			input_id   TEXT NOT NULL,
			session_id TEXT NOT NULL
		)`,
		`CREATE INDEX input_parts_session ON input_parts(session_id)`,
		`CREATE TABLE events (
			session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
			seq        BIGINT NOT NULL,
			id         TEXT NOT NULL,
			type       TEXT NOT NULL,
			version    INTEGER NOT NULL,
			directory  TEXT NOT NULL,
			data       BYTEA,
			PRIMARY KEY (session_id, seq)
		)`,
	},
	{ // 2: scale-out: instance leases and the spilled notifications.
		`CREATE TABLE instances (
			id         TEXT PRIMARY KEY,
			addr       TEXT NOT NULL,
			expires_at TIMESTAMPTZ NOT NULL
		)`,
		`CREATE INDEX sessions_owner ON sessions(owner) WHERE owner IS NOT NULL`,
		`CREATE TABLE relay_spill (
			id   BIGSERIAL PRIMARY KEY,
			body BYTEA NOT NULL,
			at   TIMESTAMPTZ NOT NULL DEFAULT now()
		)`,
	},
}

// schemaVersion is the version this code writes and reads.
var schemaVersion = len(migrations)

// migrateTimeout bounds a migration whose caller set no deadline: longer
// than a store call's (it may wait for another server's migration, or
// rewrite a table), but a database that stops answering still fails the
// start-up.
const migrateTimeout = time.Minute

// migrationLock is the advisory lock key that serialises servers migrating
// one database at once.
const migrationLock = 0x6f70656e636f6465 // "opencode"

func (s *Store) migrate(ctx context.Context) error {
	ctx, cancel := within(ctx, migrateTimeout)
	defer cancel()
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return fmt.Errorf("postgres: migrate lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		var v int
		err := tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v)
		if err == pgx.ErrNoRows {
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version(version) VALUES(0)`); err != nil {
				return fmt.Errorf("postgres: migrate: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("postgres: schema version: %w", err)
		}
		if v > schemaVersion {
			return fmt.Errorf("postgres: database schema version %d is newer than this server's %d", v, schemaVersion)
		}
		for ; v < schemaVersion; v++ {
			for _, q := range migrations[v] {
				if _, err := tx.Exec(ctx, q); err != nil {
					return fmt.Errorf("postgres: migrate to %d: %w", v+1, err)
				}
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE schema_version SET version = $1`, schemaVersion); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		return nil
	})
}
