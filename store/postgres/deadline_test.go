package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestDeadlines: a database call that cannot go on (the sessions table held
// locked by another connection, as a partition holds a call) ends at its
// deadline: a call without one at the store's (three quarters of the
// lease in a cluster), a commit at its caller's; a commit does not end
// when its caller's context is cancelled.
func TestDeadlines(t *testing.T) {
	need(t)
	ctx := context.Background()
	dsn := freshDB(t)
	const ttl = 2 * time.Second
	s, _, _ := instance(t, dsn, "http://a", ttl)
	if err := s.Commit(ctx, "ses_d", &store.Batch{Session: storetest.NewSession("ses_d"), CreateOnly: true}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, strings.TrimSuffix(dsn, " pool_max_conns=8"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// lock holds the sessions table until the returned release.
	lock := func() (release func()) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Let go after 30 s in any case: a call that ignores its deadline
		// fails the timing checks instead of hanging the test (not less:
		// on a loaded machine the cancelled commit below may take seconds
		// to reach the lock).
		if _, err := tx.Exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = '30s'`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx) }
	}
	event := func(text string) *store.Batch {
		return &store.Batch{Events: []*opencode.Event{textEvent("ses_d", "x", text)}}
	}
	timed := func(f func() error) (time.Duration, error) {
		start := time.Now()
		err := f()
		return time.Since(start), err
	}

	release := lock()
	took, err := timed(func() error { _, err := s.GetSession(ctx, "ses_d"); return err })
	if !store.Unavailable(err) || took < ttl*3/4-50*time.Millisecond || took > ttl*3/4+time.Second {
		t.Errorf("a read with no deadline of a locked table: %v after %v, want unavailable after about %v", err, took, ttl*3/4)
	}
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	took, err = timed(func() error { return s.Commit(dctx, "ses_d", event("late")) })
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !store.Unavailable(err) || took > 200*time.Millisecond+time.Second {
		t.Errorf("a commit with a 200ms deadline on a locked table: %v after %v", err, took)
	}
	release()
	if last, err := s.LastSeq(ctx, "ses_d"); err != nil || last != 0 {
		t.Fatalf("after the timed-out commit: last seq %d, %v", last, err)
	}

	// A cancelled commit waits for the lock and completes.
	waiting := func() bool {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n > 0
	}
	if !poll(5*time.Second, func() bool { return !waiting() }) {
		t.Fatal("the timed-out calls still wait for the lock")
	}
	release = lock()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Commit(cctx, "ses_d", event("kept")) }()
	// Generous: a loaded machine may take seconds to start the commit.
	if !poll(30*time.Second, waiting) {
		t.Fatal("the commit never waited for the lock")
	}
	cancel()
	if poll(100*time.Millisecond, func() bool { return len(done) > 0 }) {
		t.Fatalf("the commit ended when its caller was cancelled: %v", <-done)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the cancelled commit: %v", err)
	}
	if last, err := s.LastSeq(ctx, "ses_d"); err != nil || last != 1 {
		t.Fatalf("after the cancelled commit: last seq %d, %v", last, err)
	}
}

// poll calls f every 10ms until it returns true (true) or d passes (false).
func poll(d time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
