package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/opencode-server/opencode-server/store/internal/rows"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Read statements, prepared on the read pool.
const (
	qEvents  = `SELECT seq, id, type, version, directory, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`
	qLastSeq = `SELECT last_seq FROM sessions WHERE id = ?`
)

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, id string) (opencode.Session, error) {
	var sess opencode.Session
	var js []byte
	err := s.r.QueryRowContext(ctx, `SELECT json FROM sessions WHERE id = ?`, id).Scan(&js)
	if errors.Is(err, sql.ErrNoRows) {
		return sess, store.ErrNotFound
	}
	if err != nil {
		return sess, fmt.Errorf("sqlite: get session: %w", err)
	}
	if err := json.Unmarshal(js, &sess); err != nil {
		return sess, fmt.Errorf("sqlite: decode session: %w", err)
	}
	return sess, nil
}

// OpenSessions implements store.Store: an index read, not the history.
func (s *Store) OpenSessions(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM sessions WHERE open = 1
		OR id IN (SELECT session_id FROM inputs WHERE state = 'pending') ORDER BY ord`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open sessions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: open sessions: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// SessionOpen implements store.Store: one row and the session's inputs
// index, whatever the size of the store.
func (s *Store) SessionOpen(ctx context.Context, id string) (bool, error) {
	var open bool
	err := s.r.QueryRowContext(ctx, `SELECT open = 1 OR EXISTS(SELECT 1 FROM inputs WHERE session_id = ?1 AND state = 'pending')
		FROM sessions WHERE id = ?1`, id).Scan(&open)
	if errors.Is(err, sql.ErrNoRows) {
		return false, store.ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: session open: %w", err)
	}
	return open, nil
}

// ListSessions implements store.Store.
func (s *Store) ListSessions(ctx context.Context) ([]opencode.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT json FROM sessions ORDER BY ord`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	out := []opencode.Session{}
	for rows.Next() {
		var js []byte
		if err := rows.Scan(&js); err != nil {
			return nil, fmt.Errorf("sqlite: list sessions: %w", err)
		}
		var sess opencode.Session
		if err := json.Unmarshal(js, &sess); err != nil {
			return nil, fmt.Errorf("sqlite: decode session: %w", err)
		}
		out = append(out, sess)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	return out, nil
}

// sessionExists reports whether the session exists, using q (a tx or the pool).
func sessionExists(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (bool, error) {
	var ok bool
	err := q.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM sessions WHERE id = ?)`, id).Scan(&ok)
	return ok, err
}

// readTx runs f in one read transaction, so multi-query reads see one snapshot.
func (s *Store) readTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return f(tx)
}

func decodeParts(rows *sql.Rows, byMsg map[string][]opencode.Part) error {
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
	return rows.Err()
}

// attachParts decodes part rows onto their messages (in row order); a
// message without parts gets an empty list.
func attachParts(rows *sql.Rows, msgs []opencode.MessageWithParts) error {
	byMsg := map[string][]opencode.Part{}
	if err := decodeParts(rows, byMsg); err != nil {
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
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		ok, err := sessionExists(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if !ok {
			return store.ErrNotFound
		}
		rows, err := tx.QueryContext(ctx, `SELECT json FROM messages WHERE session_id = ? ORDER BY ord`, sessionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []opencode.MessageWithParts{}
		for rows.Next() {
			var js []byte
			if err := rows.Scan(&js); err != nil {
				return err
			}
			var m opencode.Message
			if err := json.Unmarshal(js, &m); err != nil {
				return fmt.Errorf("decode message: %w", err)
			}
			out = append(out, opencode.MessageWithParts{Info: m})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		prows, err := tx.QueryContext(ctx, `SELECT message_id, json FROM parts WHERE session_id = ? ORDER BY ord`, sessionID)
		if err != nil {
			return err
		}
		return attachParts(prows, out)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: list messages: %w", err)
	}
	return out, nil
}

// MessagesPage implements store.Store: it reads only the page's messages
// and their parts, seeking by the anchor's creation position.
func (s *Store) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	var out []opencode.MessageWithParts
	err := s.readTx(ctx, func(tx *sql.Tx) error {
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
		query := `SELECT id, json FROM messages WHERE session_id = ?`
		args := []any{sessionID}
		if q.Anchor != "" {
			var ord int64
			err := tx.QueryRowContext(ctx, `SELECT ord FROM messages WHERE id = ? AND session_id = ?`, q.Anchor, sessionID).Scan(&ord)
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			if err != nil {
				return err
			}
			query += ` AND ord ` + cmp + ` ?`
			args = append(args, ord)
		}
		query += ` ORDER BY ord ` + dir
		if q.Limit > 0 {
			query += ` LIMIT ?`
			args = append(args, q.Limit)
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []opencode.MessageWithParts{}
		var ids []any
		for rows.Next() {
			var id string
			var js []byte
			if err := rows.Scan(&id, &js); err != nil {
				return err
			}
			var m opencode.Message
			if err := json.Unmarshal(js, &m); err != nil {
				return fmt.Errorf("decode message: %w", err)
			}
			out = append(out, opencode.MessageWithParts{Info: m})
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if q.Before {
			slices.Reverse(out)
		}
		if len(ids) == 0 {
			return nil
		}
		prows, err := tx.QueryContext(ctx, `SELECT message_id, json FROM parts WHERE message_id IN (?`+
			strings.Repeat(",?", len(ids)-1)+`) ORDER BY ord`, ids...)
		if err != nil {
			return err
		}
		return attachParts(prows, out)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: messages page: %w", err)
	}
	return out, nil
}

// GetMessage implements store.Store.
func (s *Store) GetMessage(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error) {
	var out opencode.MessageWithParts
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var js []byte
		err := tx.QueryRowContext(ctx, `SELECT json FROM messages WHERE id = ? AND session_id = ?`, messageID, sessionID).Scan(&js)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(js, &out.Info); err != nil {
			return fmt.Errorf("decode message: %w", err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT message_id, json FROM parts WHERE message_id = ? ORDER BY ord`, messageID)
		if err != nil {
			return err
		}
		byMsg := map[string][]opencode.Part{}
		if err := decodeParts(rows, byMsg); err != nil {
			return err
		}
		out.Parts = byMsg[messageID]
		if out.Parts == nil {
			out.Parts = []opencode.Part{}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return opencode.MessageWithParts{}, err
		}
		return opencode.MessageWithParts{}, fmt.Errorf("sqlite: get message: %w", err)
	}
	return out, nil
}

// MessageExists implements store.Store.
func (s *Store) MessageExists(ctx context.Context, messageID string) (bool, error) {
	var ok bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS(SELECT 1 FROM messages WHERE id = ?)`, messageID).Scan(&ok); err != nil {
		return false, fmt.Errorf("sqlite: message exists: %w", err)
	}
	return ok, nil
}

// MessageSession implements store.Store.
func (s *Store) MessageSession(ctx context.Context, messageID string) (string, error) {
	var sid string
	err := s.r.QueryRowContext(ctx, `SELECT session_id FROM messages WHERE id = ?`, messageID).Scan(&sid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: message session: %w", err)
	}
	return sid, nil
}

// GetInput implements store.Store.
func (s *Store) GetInput(ctx context.Context, id string) (*opencode.Input, error) {
	var ord int64
	var js []byte
	err := s.r.QueryRowContext(ctx, `SELECT ord, json FROM inputs WHERE id = ?`, id).Scan(&ord, &js)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get input: %w", err)
	}
	return decodeRow(ord, js)
}

// InputStatus implements store.Store. SQLite reads the two fields out of
// the row's JSON; no part is decoded in Go.
func (s *Store) InputStatus(ctx context.Context, id string) (store.InputStatus, error) {
	var st store.InputStatus
	var state string
	err := s.r.QueryRowContext(ctx, `SELECT session_id, state, coalesce(json_extract(json, '$.answer'), ''),
		coalesce(json_extract(json, '$.noReply'), 0) FROM inputs WHERE id = ?`, id).Scan(&st.SessionID, &state, &st.Answer, &st.NoReply)
	if errors.Is(err, sql.ErrNoRows) {
		return store.InputStatus{}, store.ErrNotFound
	}
	if err != nil {
		return store.InputStatus{}, fmt.Errorf("sqlite: input status: %w", err)
	}
	st.State = opencode.InputState(state)
	return st, nil
}

// PendingInputs implements store.Store.
func (s *Store) PendingInputs(ctx context.Context, sessionID string) ([]*opencode.Input, error) {
	var out []*opencode.Input
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT ord, json FROM inputs WHERE session_id = ? AND state = ? ORDER BY ord`,
			sessionID, string(opencode.InputPending))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ord int64
			var js []byte
			if err := rows.Scan(&ord, &js); err != nil {
				return err
			}
			in, err := decodeRow(ord, js)
			if err != nil {
				return err
			}
			out = append(out, in)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
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
		return nil, fmt.Errorf("sqlite: pending inputs: %w", err)
	}
	return out, nil
}

// Events implements store.Store.
func (s *Store) Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	if after < 0 {
		after = 0
	}
	lim := int64(limit)
	if limit <= 0 {
		lim = -1
	}
	rows, err := s.events.QueryContext(ctx, sessionID, after, lim)
	if err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	defer rows.Close()
	var out []*opencode.Event
	for rows.Next() {
		e := &opencode.Event{SessionID: sessionID, Durable: true}
		var data []byte
		if err := rows.Scan(&e.Seq, &e.ID, &e.Type, &e.Version, &e.Directory, &data); err != nil {
			return nil, fmt.Errorf("sqlite: events: %w", err)
		}
		if data != nil {
			e.Data = json.RawMessage(data)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: events: %w", err)
	}
	if len(out) == 0 {
		// Tell an empty log from a missing session.
		if _, err := s.LastSeq(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LastSeq implements store.Store.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	err := s.lastSeq.QueryRowContext(ctx, sessionID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: last seq: %w", err)
	}
	return seq, nil
}

// decodeRow is an input row (see rows.DecodeInput).
func decodeRow(ord int64, js []byte) (*opencode.Input, error) {
	in, err := rows.DecodeInput(ord, js)
	if err != nil {
		return nil, fmt.Errorf("sqlite: decode input: %w", err)
	}
	return in, nil
}
