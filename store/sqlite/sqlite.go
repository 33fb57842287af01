// Package sqlite is the embedded default store: a single SQLite file in WAL
// mode, written through exactly one connection and read through a pool of
// query-only connections. It uses the pure-Go modernc.org/sqlite driver.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
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

// Read statements, prepared on the read pool.
const (
	qEvents  = `SELECT seq, id, type, version, directory, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`
	qLastSeq = `SELECT last_seq FROM sessions WHERE id = ?`
)

// Store is a store.Store backed by one SQLite database file.
type Store struct {
	w *sql.DB // exactly one connection; all writes
	r *sql.DB // query-only pool; all reads

	mu  sync.Mutex // serialises writers and guards ord
	ord int64      // last creation position handed out
	ws  map[string]*sql.Stmt

	jobs          chan *job
	closing       chan struct{}
	committerDone chan struct{}
	started       bool
	closeMu       sync.RWMutex // Commit's hand-over vs Close
	isClosed      bool

	events, lastSeq *sql.Stmt

	closeOnce sync.Once
	closeErr  error
	// lock is the flock on path+".lock" that keeps a second process out.
	lock *os.File
}

var _ store.Store = (*Store)(nil)

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path, creating its parent
// directories.
func Open(ctx context.Context, path string) (_ *Store, err error) {
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: create data dir: %w", err)
		}
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	s := &Store{ws: map[string]*sql.Stmt{}, jobs: make(chan *job, maxGroup),
		closing: make(chan struct{}), committerDone: make(chan struct{}), lock: lock}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()

	s.w, err = sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)

	var mode string
	if err = s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	if mode != "wal" {
		return nil, fmt.Errorf("sqlite: journal mode is %q, want wal", mode)
	}
	if err = s.migrate(ctx); err != nil {
		return nil, err
	}
	if err = s.w.QueryRowContext(ctx, `SELECT MAX(
		(SELECT IFNULL(MAX(ord), 0) FROM sessions),
		(SELECT IFNULL(MAX(ord), 0) FROM messages),
		(SELECT IFNULL(MAX(ord), 0) FROM parts),
		(SELECT IFNULL(MAX(ord), 0) FROM inputs))`).Scan(&s.ord); err != nil {
		return nil, fmt.Errorf("sqlite: load order: %w", err)
	}
	for _, q := range []string{qAdmitTaken, qPartTaken, qInputPart, qSessionSeq, qInputExists, qUpsertSess, qUpsertMsg,
		qMsgInSession, qUpsertPart, qDelMsgParts, qDelMsg, qDelPart, qAdmit, qTrimTombs, qUpdateInput, qAppendEvent, qSetLastSeq, qSetOpen} {
		st, perr := s.w.PrepareContext(ctx, q)
		if perr != nil {
			return nil, fmt.Errorf("sqlite: prepare: %w", perr)
		}
		s.ws[q] = st
	}

	s.r, err = sql.Open("sqlite", dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(n)
	s.r.SetMaxIdleConns(n)
	if s.events, err = s.r.PrepareContext(ctx, qEvents); err != nil {
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	if s.lastSeq, err = s.r.PrepareContext(ctx, qLastSeq); err != nil {
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	s.started = true
	go s.committer()
	return s, nil
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

// Close implements store.Store.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeMu.Lock()
		s.isClosed = true
		close(s.closing)
		s.closeMu.Unlock()
		if s.started {
			<-s.committerDone
		}
		var errs []error
		for _, st := range []*sql.Stmt{s.events, s.lastSeq} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		s.mu.Lock()
		for _, st := range s.ws {
			errs = append(errs, st.Close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		s.mu.Unlock()
		if s.lock != nil {
			errs = append(errs, s.lock.Close()) // releases the flock
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// encoded is a batch marshalled ahead of taking the writer lock.
type encoded struct {
	session  []byte
	messages [][]byte
	parts    [][]byte
	admit    [][]byte
	inputs   [][]byte
}

func encode(b *store.Batch) (*encoded, error) {
	var e encoded
	var err error
	if b.Session != nil {
		if e.session, err = json.Marshal(b.Session); err != nil {
			return nil, err
		}
	}
	enc := func(n int, f func(int) any) ([][]byte, error) {
		out := make([][]byte, n)
		for i := range out {
			if out[i], err = json.Marshal(f(i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if e.messages, err = enc(len(b.Messages), func(i int) any { return b.Messages[i] }); err != nil {
		return nil, err
	}
	if e.parts, err = enc(len(b.Parts), func(i int) any { return b.Parts[i] }); err != nil {
		return nil, err
	}
	if e.admit, err = enc(len(b.Admit), func(i int) any { return b.Admit[i] }); err != nil {
		return nil, err
	}
	if e.inputs, err = enc(len(b.Inputs), func(i int) any { return b.Inputs[i] }); err != nil {
		return nil, err
	}
	return &e, nil
}

// job is one Commit waiting for the group committer.
type job struct {
	sessionID string
	b         *store.Batch
	enc       *encoded
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
	enc, err := encode(b)
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
	for i, j := range group {
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
func (s *Store) apply(ctx context.Context, tx *sql.Tx, sessionID string, b *store.Batch, enc *encoded, ordp *int64) (int64, []int64, error) {
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
		if _, err := st(qUpsertSess).ExecContext(ctx, sessionID, ord, enc.session); err != nil {
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
			if _, err := um.ExecContext(ctx, m.ID, sessionID, ord, enc.messages[i]); err != nil {
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
			if _, err := up.ExecContext(ctx, p.ID, p.MessageID, sessionID, ord, enc.parts[i]); err != nil {
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
			if _, err := ad.ExecContext(ctx, in.ID, sessionID, ord, string(in.State), enc.admit[i]); err != nil {
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
			if _, err := ui.ExecContext(ctx, string(in.State), enc.inputs[i], in.ID); err != nil {
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
func (s *Store) MessagesPage(ctx context.Context, sessionID string, q store.PageQuery) ([]opencode.MessageWithParts, error) {
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

func decodeInput(ord int64, js []byte) (*opencode.Input, error) {
	in := new(opencode.Input)
	if err := json.Unmarshal(js, in); err != nil {
		return nil, fmt.Errorf("sqlite: decode input: %w", err)
	}
	in.Order = ord
	return in, nil
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
	return decodeInput(ord, js)
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
			in, err := decodeInput(ord, js)
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
