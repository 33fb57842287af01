package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/opencode-server/opencode-server/store/internal/rows"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, id string) (opencode.Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var sess opencode.Session
	var js []byte
	err := s.pool.QueryRow(ctx, `SELECT json FROM sessions WHERE id = $1`, id).Scan(&js)
	if errors.Is(err, pgx.ErrNoRows) {
		return sess, store.ErrNotFound
	}
	if err != nil {
		return sess, fmt.Errorf("postgres: get session: %w", err)
	}
	if err := json.Unmarshal(js, &sess); err != nil {
		return sess, fmt.Errorf("postgres: decode session: %w", err)
	}
	return sess, nil
}

// OpenSessions implements store.Store: an index read, not the history.
func (s *Store) OpenSessions(ctx context.Context) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM sessions WHERE open
		OR id IN (SELECT session_id FROM inputs WHERE state = 'pending') ORDER BY ord`)
	if err != nil {
		return nil, fmt.Errorf("postgres: open sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: open sessions: %w", err)
	}
	return out, nil
}

// SessionOpen implements store.Store.
func (s *Store) SessionOpen(ctx context.Context, id string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var open bool
	err := s.pool.QueryRow(ctx, `SELECT open OR EXISTS(SELECT 1 FROM inputs WHERE session_id = $1 AND state = 'pending')
		FROM sessions WHERE id = $1`, id).Scan(&open)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, store.ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("postgres: session open: %w", err)
	}
	return open, nil
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context) ([]opencode.Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT json FROM sessions ORDER BY ord`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (opencode.Session, error) {
		var js []byte
		var sess opencode.Session
		if err := r.Scan(&js); err != nil {
			return sess, err
		}
		return sess, json.Unmarshal(js, &sess)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list sessions: %w", err)
	}
	if out == nil {
		out = []opencode.Session{}
	}
	return out, nil
}

// readTx runs f in one read-only transaction on one snapshot, with ctx
// bounded (f's context).
func (s *Store) readTx(ctx context.Context, f func(context.Context, pgx.Tx) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return f(ctx, tx) })
}

func sessionExists(ctx context.Context, tx pgx.Tx, id string) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM sessions WHERE id = $1)`, id).Scan(&ok)
	return ok, err
}

// readMessages decodes (id, json) message rows.
func readMessages(rows pgx.Rows) ([]opencode.MessageWithParts, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (opencode.MessageWithParts, error) {
		var js []byte
		var m opencode.MessageWithParts
		if err := r.Scan(&js); err != nil {
			return m, err
		}
		if err := json.Unmarshal(js, &m.Info); err != nil {
			return m, fmt.Errorf("decode message: %w", err)
		}
		return m, nil
	})
	if out == nil {
		out = []opencode.MessageWithParts{}
	}
	return out, err
}

// attachParts decodes (message_id, json) part rows onto their messages
// (in row order); a message without parts gets an empty list.
func attachParts(rows pgx.Rows, msgs []opencode.MessageWithParts) error {
	byMsg := map[string][]opencode.Part{}
	defer rows.Close()
	for rows.Next() {
		var mid string
		var js []byte
		if err := rows.Scan(&mid, &js); err != nil {
			return err
		}
		var p opencode.Part
		if err := json.Unmarshal(js, &p); err != nil {
			return fmt.Errorf("decode part: %w", err)
		}
		byMsg[mid] = append(byMsg[mid], p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range msgs {
		msgs[i].Parts = byMsg[msgs[i].Info.ID]
		if msgs[i].Parts == nil {
			msgs[i].Parts = []opencode.Part{}
		}
	}
	return nil
}

// ListMessages implements store.Store.
func (s *Store) ListMessages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error) {
	var out []opencode.MessageWithParts
	err := s.readTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		ok, err := sessionExists(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		rows, err := tx.Query(ctx, `SELECT json FROM messages WHERE session_id = $1 ORDER BY ord`, sessionID)
		if err != nil {
			return err
		}
		if out, err = readMessages(rows); err != nil {
			return err
		}
		prows, err := tx.Query(ctx, `SELECT message_id, json FROM parts WHERE session_id = $1 ORDER BY ord`, sessionID)
		if err != nil {
			return err
		}
		return attachParts(prows, out)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: list messages: %w", err)
	}
	return out, nil
}

// MessagesPage implements store.Store: it reads only the page's messages
// and their parts, seeking by the anchor's creation position.
func (s *Store) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	var out []opencode.MessageWithParts
	err := s.readTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		ok, err := sessionExists(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		// Walking newest first forward, or oldest first backward, reads
		// descending creation positions.
		down := q.Desc != q.Before
		cmp, dir := ">", "ASC"
		if down {
			cmp, dir = "<", "DESC"
		}
		query := `SELECT json FROM messages WHERE session_id = $1`
		args := []any{sessionID}
		if q.Anchor != "" {
			var ord int64
			err := tx.QueryRow(ctx, `SELECT ord FROM messages WHERE id = $1 AND session_id = $2`, q.Anchor, sessionID).Scan(&ord)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrNotFound
			}
			if err != nil {
				return err
			}
			args = append(args, ord)
			query += fmt.Sprintf(` AND ord %s $%d`, cmp, len(args))
		}
		query += ` ORDER BY ord ` + dir
		if q.Limit > 0 {
			args = append(args, q.Limit)
			query += fmt.Sprintf(` LIMIT $%d`, len(args))
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		if out, err = readMessages(rows); err != nil {
			return err
		}
		if q.Before {
			slices.Reverse(out)
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]string, len(out))
		for i, m := range out {
			ids[i] = m.Info.ID
		}
		prows, err := tx.Query(ctx, `SELECT message_id, json FROM parts WHERE message_id = ANY($1) ORDER BY ord`, ids)
		if err != nil {
			return err
		}
		return attachParts(prows, out)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: messages page: %w", err)
	}
	return out, nil
}

// GetMessage implements store.Store.
func (s *Store) GetMessage(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error) {
	var out []opencode.MessageWithParts
	err := s.readTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT json FROM messages WHERE id = $1 AND session_id = $2`, messageID, sessionID)
		if err != nil {
			return err
		}
		if out, err = readMessages(rows); err != nil {
			return err
		}
		if len(out) == 0 {
			return store.ErrNotFound
		}
		prows, err := tx.Query(ctx, `SELECT message_id, json FROM parts WHERE message_id = $1 ORDER BY ord`, messageID)
		if err != nil {
			return err
		}
		return attachParts(prows, out)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return opencode.MessageWithParts{}, err
		}
		return opencode.MessageWithParts{}, fmt.Errorf("postgres: get message: %w", err)
	}
	return out[0], nil
}

// MessageExists implements store.Store.
func (s *Store) MessageExists(ctx context.Context, messageID string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM messages WHERE id = $1)`, messageID).Scan(&ok); err != nil {
		return false, fmt.Errorf("postgres: message exists: %w", err)
	}
	return ok, nil
}

// MessageSession implements store.Store.
func (s *Store) MessageSession(ctx context.Context, messageID string) (string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var sid string
	err := s.pool.QueryRow(ctx, `SELECT session_id FROM messages WHERE id = $1`, messageID).Scan(&sid)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("postgres: message session: %w", err)
	}
	return sid, nil
}

// GetInput implements store.Store.
func (s *Store) GetInput(ctx context.Context, id string) (*opencode.Input, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ord int64
	var js []byte
	err := s.pool.QueryRow(ctx, `SELECT ord, json FROM inputs WHERE id = $1`, id).Scan(&ord, &js)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get input: %w", err)
	}
	return decodeRow(ord, js)
}

// InputStatus implements store.Store: the row's columns, no JSON read.
func (s *Store) InputStatus(ctx context.Context, id string) (store.InputStatus, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st store.InputStatus
	var state string
	err := s.pool.QueryRow(ctx, `SELECT session_id, state, answer, no_reply FROM inputs WHERE id = $1`, id).
		Scan(&st.SessionID, &state, &st.Answer, &st.NoReply)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.InputStatus{}, store.ErrNotFound
	}
	if err != nil {
		return store.InputStatus{}, fmt.Errorf("postgres: input status: %w", err)
	}
	st.State = opencode.InputState(state)
	return st, nil
}

// PendingInputs implements store.Store.
func (s *Store) PendingInputs(ctx context.Context, sessionID string) ([]*opencode.Input, error) {
	var out []*opencode.Input
	err := s.readTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT ord, json FROM inputs WHERE session_id = $1 AND state = $2 ORDER BY ord`,
			sessionID, string(opencode.InputPending))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*opencode.Input, error) {
			var ord int64
			var js []byte
			if err := r.Scan(&ord, &js); err != nil {
				return nil, err
			}
			return decodeRow(ord, js)
		})
		if err != nil {
			return err
		}
		if len(out) == 0 {
			out = nil
			ok, err := sessionExists(ctx, tx, sessionID)
			if err != nil {
				return err
			}
			if !ok {
				return store.ErrNotFound
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: pending inputs: %w", err)
	}
	return out, nil
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if after < 0 {
		after = 0
	}
	var lim *int64 // NULL: no limit
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, id, type, version, directory, data FROM events
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, lim)
	if err != nil {
		return nil, fmt.Errorf("postgres: events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*opencode.Event, error) {
		e := &opencode.Event{SessionID: sessionID, Durable: true}
		var version int32
		var data []byte
		if err := r.Scan(&e.Seq, &e.ID, &e.Type, &version, &e.Directory, &data); err != nil {
			return nil, err
		}
		e.Version = int(version)
		if data != nil {
			e.Data = json.RawMessage(data)
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: events: %w", err)
	}
	if len(out) == 0 {
		// Tell an empty log from a missing session.
		if _, err := s.LastSeq(ctx, sessionID); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return out, nil
}

// LastSeq implements store.Store.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var seq int64
	err := s.pool.QueryRow(ctx, `SELECT last_seq FROM sessions WHERE id = $1`, sessionID).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: last seq: %w", err)
	}
	return seq, nil
}

// decodeRow is an input row (see rows.DecodeInput).
func decodeRow(ord int64, js []byte) (*opencode.Input, error) {
	in, err := rows.DecodeInput(ord, js)
	if err != nil {
		return nil, fmt.Errorf("postgres: decode input: %w", err)
	}
	return in, nil
}
