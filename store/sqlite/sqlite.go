// Package sqlite is the embedded default store: a single SQLite file in WAL
// mode, written through exactly one connection and read through a pool of
// query-only connections. It uses the pure-Go modernc.org/sqlite driver.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/opencode-server/opencode-server/store"
)

// Store is a store.Store backed by one SQLite database file.
type Store struct {
	w *sql.DB // exactly one connection; all writes
	r *sql.DB // query-only pool; all reads

	mu  sync.Mutex // serialises writers and guards ord
	ord int64      // last creation position handed out
	ws  map[string]*sql.Stmt
	// synced is the writer's synchronous mode: FULL (true, from the DSN)
	// or NORMAL for a group of NoSync batches (see commitGroup).
	synced bool

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
	s := &Store{ws: map[string]*sql.Stmt{}, jobs: make(chan *job, maxGroup), synced: true,
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
	for _, q := range writeStmts {
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
