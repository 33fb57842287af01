package sqlite

import (
	"context"
	"fmt"
)

// schemaVersion 2 added input_parts: the part IDs of admitted inputs, so a
// part ID is unique across stored parts and pending input parts alike.
// 3 added sessions.open: the flag start-up reads instead of every history.
const schemaVersion = 3

var schema = []string{
	`CREATE TABLE IF NOT EXISTS sessions (
		id       TEXT PRIMARY KEY,
		ord      INTEGER NOT NULL,
		json     TEXT NOT NULL,
		last_seq INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE INDEX IF NOT EXISTS sessions_ord ON sessions(ord)`,
	`CREATE TABLE IF NOT EXISTS messages (
		id         TEXT PRIMARY KEY,
		session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
		ord        INTEGER NOT NULL,
		json       TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id, ord)`,
	`CREATE TABLE IF NOT EXISTS parts (
		id         TEXT PRIMARY KEY,
		message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
		session_id TEXT NOT NULL,
		ord        INTEGER NOT NULL,
		json       TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS parts_message ON parts(message_id, ord)`,
	`CREATE INDEX IF NOT EXISTS parts_session ON parts(session_id, ord)`,
	`CREATE TABLE IF NOT EXISTS inputs (
		id         TEXT PRIMARY KEY,
		session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
		ord        INTEGER NOT NULL,
		state      TEXT NOT NULL,
		json       TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS inputs_session ON inputs(session_id, state, ord)`,
	`CREATE TABLE IF NOT EXISTS input_parts (
		id         TEXT PRIMARY KEY,
		input_id   TEXT NOT NULL,
		session_id TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS input_parts_session ON input_parts(session_id)`,
	`CREATE INDEX IF NOT EXISTS inputs_state ON inputs(state)`,
	`CREATE TABLE IF NOT EXISTS events (
		session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
		seq        INTEGER NOT NULL,
		id         TEXT NOT NULL,
		type       TEXT NOT NULL,
		version    INTEGER NOT NULL,
		directory  TEXT NOT NULL,
		data       BLOB,
		PRIMARY KEY (session_id, seq)
	) WITHOUT ROWID`,
}

func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("sqlite: schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("sqlite: database schema version %d is newer than this server's %d", v, schemaVersion)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	defer tx.Rollback()
	for _, q := range schema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqlite: migrate: %w", err)
		}
	}
	if v < 3 {
		// From 2 (or a new database): the open flag. Sessions of an older
		// database are all flagged; each first start clears the flag of
		// those with nothing to resume.
		var has int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('sessions') WHERE name = 'open'`).Scan(&has); err != nil {
			return fmt.Errorf("sqlite: migrate: %w", err)
		}
		if has == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN open INTEGER NOT NULL DEFAULT 0`); err != nil {
				return fmt.Errorf("sqlite: migrate: %w", err)
			}
		}
		if v > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET open = 1`); err != nil {
				return fmt.Errorf("sqlite: migrate: %w", err)
			}
		}
	}
	if v == 1 {
		// From 1: register the parts of the inputs admitted so far.
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO input_parts(id, input_id, session_id)
			SELECT json_extract(p.value, '$.id'), inputs.id, inputs.session_id
			FROM inputs, json_each(inputs.json, '$.parts') AS p`); err != nil {
			return fmt.Errorf("sqlite: migrate input parts: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
