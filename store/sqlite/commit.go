package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/opencode-server/opencode-server/store/internal/rows"
	"slices"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Write statements, prepared once on the single writer connection.
const (
	qAdmitTaken   = `SELECT EXISTS(SELECT 1 FROM inputs WHERE id = ?1) OR EXISTS(SELECT 1 FROM messages WHERE id = ?1)`
	qPartTaken    = `SELECT EXISTS(SELECT 1 FROM parts WHERE id = ?1) OR EXISTS(SELECT 1 FROM input_parts WHERE id = ?1)`
	qInputPart    = `INSERT OR IGNORE INTO input_parts(id, input_id, session_id) VALUES(?, ?, ?)`
	qSessionSeq   = `SELECT last_seq FROM sessions WHERE id = ?`
	qInputExists  = `SELECT EXISTS(SELECT 1 FROM inputs WHERE id = ?)`
	qUpsertSess   = `INSERT INTO sessions(id, ord, json, last_seq) VALUES(?, ?, ?, 0) ON CONFLICT(id) DO UPDATE SET json = excluded.json`
	qUpsertMsg    = `INSERT INTO messages(id, session_id, ord, json) VALUES(?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json WHERE messages.session_id = excluded.session_id`
	qMsgInSession = `SELECT EXISTS(SELECT 1 FROM messages WHERE id = ? AND session_id = ?)`
	qUpsertPart   = `INSERT INTO parts(id, message_id, session_id, ord, json) VALUES(?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET json = excluded.json WHERE parts.message_id = excluded.message_id`
	qDelMsgParts  = `DELETE FROM parts WHERE message_id = ? AND session_id = ?`
	qDelMsg       = `DELETE FROM messages WHERE id = ? AND session_id = ?`
	qDelPart      = `DELETE FROM parts WHERE id = ? AND session_id = ?`
	qAdmit        = `INSERT INTO inputs(id, session_id, ord, state, json) VALUES(?, ?, ?, ?, ?)`
	qTrimTombs    = `DELETE FROM inputs WHERE session_id = ?1 AND state = 'tombstone' AND ord <
		(SELECT ord FROM inputs WHERE session_id = ?1 AND state = 'tombstone' ORDER BY ord DESC LIMIT 1 OFFSET ?2)`
	qUpdateInput = `UPDATE inputs SET state = ?, json = ? WHERE id = ?`
	qAppendEvent = `INSERT INTO events(session_id, seq, id, type, version, directory, data) VALUES(?, ?, ?, ?, ?, ?, ?)`
	qSetLastSeq  = `UPDATE sessions SET last_seq = ? WHERE id = ?`
	qSetOpen     = `UPDATE sessions SET open = ? WHERE id = ?`
)

// writeStmts are the write statements Open prepares (into Store.ws).
var writeStmts = []string{qAdmitTaken, qPartTaken, qInputPart, qSessionSeq, qInputExists, qUpsertSess, qUpsertMsg,
	qMsgInSession, qUpsertPart, qDelMsgParts, qDelMsg, qDelPart, qAdmit, qTrimTombs, qUpdateInput, qAppendEvent, qSetLastSeq, qSetOpen}

// job is one Commit waiting for the group committer.
type job struct {
	sessionID string
	b         *store.Batch
	enc       *rows.Encoded
	done      chan error
}

// maxGroup bounds how many waiting commits share one transaction.
const maxGroup = 256

// Commit implements store.Store. Commits are group-committed: the committer
// goroutine takes every commit waiting at that moment into one transaction
// (each under its own savepoint, so each applies all or nothing) and one
// fsync, so many sessions committing at once do not queue fsync behind
// fsync.
func (s *Store) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	enc, err := rows.Encode(b)
	if err != nil {
		return fmt.Errorf("sqlite: encode batch: %w", err)
	}
	j := &job{sessionID: sessionID, b: b, enc: enc, done: make(chan error, 1)}
	// Once handed over, a commit runs to completion or fails as a whole;
	// the caller's cancellation is only honoured before that point.
	s.closeMu.RLock()
	if s.isClosed {
		s.closeMu.RUnlock()
		return errors.New("sqlite: store closed")
	}
	s.jobs <- j // the committer drains the queue before it exits
	s.closeMu.RUnlock()
	return <-j.done
}

// committer runs the group commits until the store closes.
func (s *Store) committer() {
	defer close(s.committerDone)
	for {
		var first *job
		select {
		case first = <-s.jobs:
		case <-s.closing:
			// Commits handed over just before Close still complete.
			for {
				select {
				case j := <-s.jobs:
					s.commitGroup([]*job{j})
				default:
					return
				}
			}
		}
		group := []*job{first}
	more:
		for len(group) < maxGroup {
			select {
			case j := <-s.jobs:
				group = append(group, j)
			default:
				break more
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup applies the jobs in one transaction, each under a savepoint.
func (s *Store) commitGroup(group []*job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := context.Background()
	fail := func(err error) {
		for _, j := range group {
			j.done <- err
		}
	}
	// One fsync per group, unless every batch of it may skip it.
	sync := false
	for _, j := range group {
		sync = sync || !j.b.NoSync
	}
	if sync != s.synced {
		mode := "NORMAL" // in WAL mode: written, not fsynced until a FULL commit or checkpoint
		if sync {
			mode = "FULL"
		}
		if _, err := s.w.ExecContext(ctx, "PRAGMA synchronous = "+mode); err != nil {
			fail(fmt.Errorf("sqlite: synchronous: %w", err))
			return
		}
		s.synced = sync
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("sqlite: begin: %w", err))
		return
	}
	defer tx.Rollback()
	type result struct {
		lastSeq  int64
		admitOrd []int64
		err      error
	}
	results := make([]result, len(group))
	ord := s.ord
	if len(group) == 1 {
		// One batch: the transaction is its all-or-nothing, no savepoint.
		j := group[0]
		lastSeq, admitOrd, err := s.apply(ctx, tx, j.sessionID, j.b, j.enc, &ord)
		if err != nil {
			fail(err)
			return
		}
		results[0] = result{lastSeq, admitOrd, nil}
	}
	for i, j := range group {
		if len(group) == 1 {
			break
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT batch"); err != nil {
			fail(fmt.Errorf("sqlite: savepoint: %w", err))
			return
		}
		before := ord
		lastSeq, admitOrd, err := s.apply(ctx, tx, j.sessionID, j.b, j.enc, &ord)
		if err != nil {
			ord = before
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO batch"); rerr != nil {
				fail(fmt.Errorf("sqlite: rollback to savepoint: %w", rerr))
				return
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE batch"); err != nil {
			fail(fmt.Errorf("sqlite: release savepoint: %w", err))
			return
		}
		results[i] = result{lastSeq, admitOrd, err}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("sqlite: commit: %w", err))
		return
	}
	s.ord = ord
	// Only a committed batch reports its positions back to the caller.
	for i, j := range group {
		res := results[i]
		if res.err == nil {
			for k, in := range j.b.Admit {
				in.Order = res.admitOrd[k]
			}
			for k, e := range j.b.Events {
				e.Seq = res.lastSeq + int64(k) + 1
				e.Durable = true
			}
		}
		j.done <- res.err
	}
}

// apply validates and writes one batch inside tx, advancing *ordp. It
// returns the session's last seq before the batch and the admitted inputs'
// positions.
func (s *Store) apply(ctx context.Context, tx *sql.Tx, sessionID string, b *store.Batch, enc *rows.Encoded, ordp *int64) (int64, []int64, error) {
	st := func(q string) *sql.Stmt { return tx.StmtContext(ctx, s.ws[q]) }

	// Validate everything first so the batch applies all or nothing.
	if len(b.Admit) > 0 {
		taken := st(qAdmitTaken)
		seen := make(map[string]bool, len(b.Admit))
		for _, in := range b.Admit {
			if seen[in.ID] {
				return 0, nil, store.ErrConflict
			}
			seen[in.ID] = true
			var used bool
			if err := taken.QueryRowContext(ctx, in.ID).Scan(&used); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit: %w", err)
			}
			if used {
				return 0, nil, store.ErrConflict
			}
		}
		partTaken := st(qPartTaken)
		seenPart := map[string]bool{}
		for _, in := range b.Admit {
			for _, p := range in.Parts {
				if seenPart[p.ID] {
					return 0, nil, &store.PartConflictError{ID: p.ID}
				}
				seenPart[p.ID] = true
				var used bool
				if err := partTaken.QueryRowContext(ctx, p.ID).Scan(&used); err != nil {
					return 0, nil, fmt.Errorf("sqlite: commit: %w", err)
				}
				if used {
					return 0, nil, &store.PartConflictError{ID: p.ID}
				}
			}
		}
	}
	var lastSeq int64
	exists := true
	if err := st(qSessionSeq).QueryRowContext(ctx, sessionID).Scan(&lastSeq); errors.Is(err, sql.ErrNoRows) {
		exists = false
	} else if err != nil {
		return 0, nil, fmt.Errorf("sqlite: commit: %w", err)
	}
	if !exists && b.Session == nil {
		return 0, nil, store.ErrNotFound
	}
	if exists && b.CreateOnly {
		return 0, nil, store.ErrConflict
	}
	if len(b.Inputs) > 0 {
		ie := st(qInputExists)
		admitted := make(map[string]bool, len(b.Admit))
		for _, in := range b.Admit {
			admitted[in.ID] = true
		}
		for _, in := range b.Inputs {
			if admitted[in.ID] {
				continue // admitted by this same batch (a turn started with its admission)
			}
			var ok bool
			if err := ie.QueryRowContext(ctx, in.ID).Scan(&ok); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit: %w", err)
			}
			if !ok {
				return 0, nil, store.ErrNotFound
			}
		}
	}

	// Apply. ord only moves forward; a position handed to a row that turned
	// out to exist already is simply skipped.
	ord := *ordp
	if b.Session != nil {
		ord++
		if _, err := st(qUpsertSess).ExecContext(ctx, sessionID, ord, enc.Session); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit session: %w", err)
		}
	}
	if b.Open != nil {
		open := 0
		if *b.Open {
			open = 1
		}
		if _, err := st(qSetOpen).ExecContext(ctx, open, sessionID); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit open: %w", err)
		}
	}
	if len(b.Messages) > 0 {
		um := st(qUpsertMsg)
		for i, m := range b.Messages {
			ord++
			if _, err := um.ExecContext(ctx, m.ID, sessionID, ord, enc.Messages[i]); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit message: %w", err)
			}
		}
	}
	if len(b.Parts) > 0 {
		// Checked once the batch's messages are in: a part's message is
		// stored in this session or came with the batch (a message whose
		// ID another session holds was not written above). An orphan
		// fails the batch, and the savepoint takes back what it wrote.
		mis, up := st(qMsgInSession), st(qUpsertPart)
		for i, p := range b.Parts {
			ok := p.SessionID == sessionID
			if ok {
				if err := mis.QueryRowContext(ctx, p.MessageID, sessionID).Scan(&ok); err != nil {
					return 0, nil, fmt.Errorf("sqlite: commit part: %w", err)
				}
			}
			if !ok {
				return 0, nil, &store.OrphanPartError{PartID: p.ID, MessageID: p.MessageID, SessionID: sessionID, PartSessionID: p.SessionID}
			}
			ord++
			if _, err := up.ExecContext(ctx, p.ID, p.MessageID, sessionID, ord, enc.Parts[i]); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit part: %w", err)
			}
		}
	}
	for _, id := range b.DeleteMessages {
		if _, err := st(qDelMsgParts).ExecContext(ctx, id, sessionID); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit delete: %w", err)
		}
		if _, err := st(qDelMsg).ExecContext(ctx, id, sessionID); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit delete: %w", err)
		}
	}
	for _, id := range b.DeleteParts {
		if _, err := st(qDelPart).ExecContext(ctx, id, sessionID); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit delete: %w", err)
		}
	}
	var admitOrd []int64
	if len(b.Admit) > 0 {
		ad := st(qAdmit)
		admitOrd = make([]int64, len(b.Admit))
		for i, in := range b.Admit {
			ord++
			admitOrd[i] = ord
			if _, err := ad.ExecContext(ctx, in.ID, sessionID, ord, string(in.State), enc.Admit[i]); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit admit: %w", err)
			}
			for _, p := range in.Parts {
				if _, err := st(qInputPart).ExecContext(ctx, p.ID, in.ID, sessionID); err != nil {
					return 0, nil, fmt.Errorf("sqlite: commit admit: %w", err)
				}
			}
		}
		if slices.ContainsFunc(b.Admit, func(in *opencode.Input) bool { return in.State == opencode.InputTombstone }) {
			if _, err := st(qTrimTombs).ExecContext(ctx, sessionID, store.MaxTombstones-1); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit tombstones: %w", err)
			}
		}
	}
	if len(b.Inputs) > 0 {
		ui := st(qUpdateInput)
		for i, in := range b.Inputs {
			if _, err := ui.ExecContext(ctx, string(in.State), enc.Inputs[i], in.ID); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit input: %w", err)
			}
			for _, p := range in.Parts { // a replace brings new parts
				if _, err := st(qInputPart).ExecContext(ctx, p.ID, in.ID, sessionID); err != nil {
					return 0, nil, fmt.Errorf("sqlite: commit input: %w", err)
				}
			}
		}
	}
	if len(b.Events) > 0 {
		ae := st(qAppendEvent)
		for i, e := range b.Events {
			if _, err := ae.ExecContext(ctx, sessionID, lastSeq+int64(i)+1, e.ID, e.Type, e.Version, e.Directory, []byte(e.Data)); err != nil {
				return 0, nil, fmt.Errorf("sqlite: commit event: %w", err)
			}
		}
		if _, err := st(qSetLastSeq).ExecContext(ctx, lastSeq+int64(len(b.Events)), sessionID); err != nil {
			return 0, nil, fmt.Errorf("sqlite: commit: %w", err)
		}
	}
	*ordp = ord
	return lastSeq, admitOrd, nil
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	// Children first, explicitly: cheaper than row-by-row cascades and
	// independent of the foreign-key setting.
	for _, q := range []string{
		`DELETE FROM parts WHERE session_id = ?`,
		`DELETE FROM messages WHERE session_id = ?`,
		`DELETE FROM inputs WHERE session_id = ?`,
		`DELETE FROM input_parts WHERE session_id = ?`,
		`DELETE FROM events WHERE session_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("sqlite: delete session: %w", err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	} else if n == 0 {
		return store.ErrNotFound
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	return nil
}
