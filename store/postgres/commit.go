package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/opencode-server/opencode-server/store/internal/rows"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

const (
	qAdmitTaken   = `SELECT EXISTS(SELECT 1 FROM inputs WHERE id = $1) OR EXISTS(SELECT 1 FROM messages WHERE id = $1)`
	qPartTaken    = `SELECT EXISTS(SELECT 1 FROM parts WHERE id = $1) OR EXISTS(SELECT 1 FROM input_parts WHERE id = $1)`
	qInputPart    = `INSERT INTO input_parts(id, input_id, session_id) VALUES($1, $2, $3) ON CONFLICT (id) DO NOTHING`
	qLockSession  = `SELECT last_seq, owner, epoch FROM sessions WHERE id = $1 FOR UPDATE`
	qInputExists  = `SELECT EXISTS(SELECT 1 FROM inputs WHERE id = $1)`
	qCreateSess   = `INSERT INTO sessions(id, ord, json, owner, epoch) VALUES($1, nextval('ord_seq'), $2, $3, 1) ON CONFLICT (id) DO NOTHING RETURNING last_seq`
	qUpsertSess   = `INSERT INTO sessions(id, ord, json) VALUES($1, nextval('ord_seq'), $2) ON CONFLICT (id) DO UPDATE SET json = excluded.json RETURNING last_seq`
	qUpsertMsg    = `INSERT INTO messages(id, session_id, ord, json) VALUES($1, $2, nextval('ord_seq'), $3) ON CONFLICT (id) DO UPDATE SET json = excluded.json WHERE messages.session_id = excluded.session_id`
	qMsgInSession = `SELECT EXISTS(SELECT 1 FROM messages WHERE id = $1 AND session_id = $2)`
	qUpsertPart   = `INSERT INTO parts(id, message_id, session_id, ord, json) VALUES($1, $2, $3, nextval('ord_seq'), $4) ON CONFLICT (id) DO UPDATE SET json = excluded.json WHERE parts.message_id = excluded.message_id`
	qDelMsgParts  = `DELETE FROM parts WHERE message_id = $1 AND session_id = $2`
	qDelMsg       = `DELETE FROM messages WHERE id = $1 AND session_id = $2`
	qDelPart      = `DELETE FROM parts WHERE id = $1 AND session_id = $2`
	qAdmit        = `INSERT INTO inputs(id, session_id, ord, state, answer, no_reply, json) VALUES($1, $2, nextval('ord_seq'), $3, $4, $5, $6) RETURNING ord`
	qTrimTombs    = `DELETE FROM inputs WHERE session_id = $1 AND state = 'tombstone' AND ord <
		(SELECT ord FROM inputs WHERE session_id = $1 AND state = 'tombstone' ORDER BY ord DESC LIMIT 1 OFFSET $2)`
	qUpdateInput  = `UPDATE inputs SET state = $1, answer = $2, no_reply = $3, json = $4 WHERE id = $5`
	qAppendEvents = `INSERT INTO events(session_id, seq, id, type, version, directory, data)
		SELECT $1, $2 + e.n, e.id, e.type, e.version, e.directory, e.data
		FROM unnest($3::text[], $4::text[], $5::integer[], $6::text[], $7::bytea[])
			WITH ORDINALITY AS e(id, type, version, directory, data, n)`
	qSetLastSeq = `UPDATE sessions SET last_seq = $1 WHERE id = $2`
	qSetOpen    = `UPDATE sessions SET open = $1 WHERE id = $2`
)

// Commit implements store.Store: one transaction per batch. The session's
// row is locked first thing after validation (FOR UPDATE, or the upsert
// that writes it), so commits of one session from any number of servers
// get gapless, ordered seqs. The caller's cancellation is honoured only
// before the transaction starts: a client that hangs up mid-commit does
// not cut it short. Its deadline (the caller's, else the store's timeout)
// still ends it, so a database that stops answering fails the commit in
// bounded time. A commit whose deadline passes after its COMMIT was sent
// may have been stored all the same, as after a broken connection: the
// caller rebuilds from what is stored (lifecycle does after any failure).
func (s *Store) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	enc, err := rows.Encode(b)
	if err != nil {
		return fmt.Errorf("postgres: encode batch: %w", err)
	}
	ctx, cancel := s.detach(ctx)
	defer cancel()
	var lastSeq int64
	var admitOrd []int64
	var created bool
	var me *string // the owner a session created here gets (cluster mode)
	if s.cl != nil {
		id := s.cl.Instance()
		me = &id
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		lastSeq, admitOrd, created, err = s.apply(ctx, tx, sessionID, b, enc, me)
		return err
	})
	if err != nil {
		return conflict(err)
	}
	if created && me != nil {
		// The creator owns a new session under epoch 1.
		if _, err := s.cl.hold(*me, sessionID, 1); err != nil {
			return err
		}
	}
	for k, in := range b.Admit {
		in.Order = admitOrd[k]
	}
	for k, e := range b.Events {
		e.Seq = lastSeq + int64(k) + 1
		e.Durable = true
	}
	return nil
}

// conflict maps a unique violation that a concurrent transaction caused
// past apply's checks to the error the check would have returned.
func conflict(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" {
		return err
	}
	switch pe.ConstraintName {
	case "inputs_pkey", "sessions_pkey":
		return store.ErrConflict
	case "input_parts_pkey", "parts_pkey":
		// Detail reads `Key (id)=(prt_x) already exists.`
		id, _, _ := strings.Cut(strings.TrimPrefix(pe.Detail, "Key (id)=("), ")")
		return &store.PartConflictError{ID: id}
	}
	return err
}

func wrap(what string, err error) error { return fmt.Errorf("postgres: commit %s: %w", what, err) }

// apply validates and writes one batch inside tx. It returns the session's
// last seq before the batch, the admitted inputs' positions and whether it
// created the session (owned by me, in cluster mode). In cluster mode an
// existing session's row must name this instance as its owner under the
// epoch it claimed, else the batch fails with store.ErrFenced: the row
// lock that hands out the seqs also fences.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, sessionID string, b *store.Batch, enc *rows.Encoded, me *string) (int64, []int64, bool, error) {
	if b.NoSync {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return 0, nil, false, wrap("nosync", err)
		}
	}
	// Validate first (the transaction makes the batch all or nothing
	// anyway; checking first keeps a failed batch cheap).
	if len(b.Admit) > 0 {
		seen := make(map[string]bool, len(b.Admit))
		for _, in := range b.Admit {
			if seen[in.ID] {
				return 0, nil, false, store.ErrConflict
			}
			seen[in.ID] = true
			var used bool
			if err := tx.QueryRow(ctx, qAdmitTaken, in.ID).Scan(&used); err != nil {
				return 0, nil, false, wrap("admit", err)
			}
			if used {
				return 0, nil, false, store.ErrConflict
			}
		}
		seenPart := map[string]bool{}
		for _, in := range b.Admit {
			for _, p := range in.Parts {
				if seenPart[p.ID] {
					return 0, nil, false, &store.PartConflictError{ID: p.ID}
				}
				seenPart[p.ID] = true
				var used bool
				if err := tx.QueryRow(ctx, qPartTaken, p.ID).Scan(&used); err != nil {
					return 0, nil, false, wrap("admit", err)
				}
				if used {
					return 0, nil, false, &store.PartConflictError{ID: p.ID}
				}
			}
		}
	}
	// Lock the session row: it serialises the session's commits (and,
	// in cluster mode, fences them).
	var lastSeq, epoch int64
	var owner *string
	created := false
	switch err := tx.QueryRow(ctx, qLockSession, sessionID).Scan(&lastSeq, &owner, &epoch); {
	case errors.Is(err, pgx.ErrNoRows):
		if b.Session == nil {
			return 0, nil, false, store.ErrNotFound
		}
		q := qUpsertSess // a concurrent create of the same ID becomes a replace
		args := []any{sessionID, enc.Session}
		if b.CreateOnly || me != nil {
			// In cluster mode always an insert: a replace would skip the fence.
			q, args = qCreateSess, append(args, me)
		}
		switch err := tx.QueryRow(ctx, q, args...).Scan(&lastSeq); {
		case errors.Is(err, pgx.ErrNoRows):
			return 0, nil, false, store.ErrConflict // created meanwhile
		case err != nil:
			return 0, nil, false, wrap("session", err)
		}
		created = true
	case err != nil:
		return 0, nil, false, wrap("session", err)
	default:
		if b.CreateOnly {
			// It exists: nothing is written, whoever owns it.
			return 0, nil, false, store.ErrConflict
		}
		if s.cl != nil {
			if err := s.cl.fence(sessionID, owner, epoch); err != nil {
				return 0, nil, false, err
			}
		}
		if b.Session != nil {
			if _, err := tx.Exec(ctx, `UPDATE sessions SET json = $1 WHERE id = $2`, enc.Session, sessionID); err != nil {
				return 0, nil, false, wrap("session", err)
			}
		}
	}
	if len(b.Inputs) > 0 {
		admitted := make(map[string]bool, len(b.Admit))
		for _, in := range b.Admit {
			admitted[in.ID] = true
		}
		for _, in := range b.Inputs {
			if admitted[in.ID] {
				continue // admitted by this same batch
			}
			var ok bool
			if err := tx.QueryRow(ctx, qInputExists, in.ID).Scan(&ok); err != nil {
				return 0, nil, false, wrap("input", err)
			}
			if !ok {
				return 0, nil, false, store.ErrNotFound
			}
		}
	}

	if b.Open != nil {
		if _, err := tx.Exec(ctx, qSetOpen, *b.Open, sessionID); err != nil {
			return 0, nil, false, wrap("open", err)
		}
	}
	for i, m := range b.Messages {
		if _, err := tx.Exec(ctx, qUpsertMsg, m.ID, sessionID, enc.Messages[i]); err != nil {
			return 0, nil, false, wrap("message", err)
		}
	}
	for i, p := range b.Parts {
		// Checked once the batch's messages are in: a message whose ID
		// another session holds was not written above.
		ok := p.SessionID == sessionID
		if ok {
			if err := tx.QueryRow(ctx, qMsgInSession, p.MessageID, sessionID).Scan(&ok); err != nil {
				return 0, nil, false, wrap("part", err)
			}
		}
		if !ok {
			return 0, nil, false, &store.OrphanPartError{PartID: p.ID, MessageID: p.MessageID, SessionID: sessionID, PartSessionID: p.SessionID}
		}
		if _, err := tx.Exec(ctx, qUpsertPart, p.ID, p.MessageID, sessionID, enc.Parts[i]); err != nil {
			return 0, nil, false, wrap("part", err)
		}
	}
	for _, id := range b.DeleteMessages {
		if _, err := tx.Exec(ctx, qDelMsgParts, id, sessionID); err != nil {
			return 0, nil, false, wrap("delete", err)
		}
		if _, err := tx.Exec(ctx, qDelMsg, id, sessionID); err != nil {
			return 0, nil, false, wrap("delete", err)
		}
	}
	for _, id := range b.DeleteParts {
		if _, err := tx.Exec(ctx, qDelPart, id, sessionID); err != nil {
			return 0, nil, false, wrap("delete", err)
		}
	}
	var admitOrd []int64
	if len(b.Admit) > 0 {
		admitOrd = make([]int64, len(b.Admit))
		for i, in := range b.Admit {
			if err := tx.QueryRow(ctx, qAdmit, in.ID, sessionID, string(in.State), in.Answer, in.NoReply, enc.Admit[i]).Scan(&admitOrd[i]); err != nil {
				return 0, nil, false, wrap("admit", err)
			}
			for _, p := range in.Parts {
				if _, err := tx.Exec(ctx, qInputPart, p.ID, in.ID, sessionID); err != nil {
					return 0, nil, false, wrap("admit", err)
				}
			}
		}
		if slices.ContainsFunc(b.Admit, func(in *opencode.Input) bool { return in.State == opencode.InputTombstone }) {
			if _, err := tx.Exec(ctx, qTrimTombs, sessionID, store.MaxTombstones-1); err != nil {
				return 0, nil, false, wrap("tombstones", err)
			}
		}
	}
	for i, in := range b.Inputs {
		if _, err := tx.Exec(ctx, qUpdateInput, string(in.State), in.Answer, in.NoReply, enc.Inputs[i], in.ID); err != nil {
			return 0, nil, false, wrap("input", err)
		}
		for _, p := range in.Parts { // a replace brings new parts
			if _, err := tx.Exec(ctx, qInputPart, p.ID, in.ID, sessionID); err != nil {
				return 0, nil, false, wrap("input", err)
			}
		}
	}
	if n := len(b.Events); n > 0 {
		ids, types, dirs := make([]string, n), make([]string, n), make([]string, n)
		versions := make([]int32, n)
		data := make([][]byte, n)
		for i, e := range b.Events {
			ids[i], types[i], versions[i], dirs[i] = e.ID, e.Type, int32(e.Version), e.Directory
			if e.Data != nil {
				data[i] = []byte(e.Data)
			}
		}
		if _, err := tx.Exec(ctx, qAppendEvents, sessionID, lastSeq, ids, types, versions, dirs, data); err != nil {
			return 0, nil, false, wrap("events", err)
		}
		if _, err := tx.Exec(ctx, qSetLastSeq, lastSeq+int64(n), sessionID); err != nil {
			return 0, nil, false, wrap("events", err)
		}
	}
	return lastSeq, admitOrd, created, nil
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := s.detach(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock the row first so a concurrent commit of the session waits.
		var owner *string
		var epoch int64
		if err := tx.QueryRow(ctx, `SELECT owner, epoch FROM sessions WHERE id = $1 FOR UPDATE`, id).Scan(&owner, &epoch); errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		} else if err != nil {
			return fmt.Errorf("postgres: delete session: %w", err)
		}
		if s.cl != nil {
			if err := s.cl.fence(id, owner, epoch); err != nil {
				return err
			}
		}
		for _, q := range []string{
			`DELETE FROM parts WHERE session_id = $1`,
			`DELETE FROM messages WHERE session_id = $1`,
			`DELETE FROM inputs WHERE session_id = $1`,
			`DELETE FROM input_parts WHERE session_id = $1`,
			`DELETE FROM events WHERE session_id = $1`,
			`DELETE FROM sessions WHERE id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("postgres: delete session: %w", err)
			}
		}
		return nil
	})
	if err == nil && s.cl != nil {
		s.cl.mu.Lock()
		delete(s.cl.held, id)
		s.cl.mu.Unlock()
	}
	return err
}
