package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/sqlite"
	"github.com/opencode-server/opencode-server/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "store.db"))
	})
}

func TestDurable(t *testing.T) {
	// A data dir that does not exist yet: Open creates it.
	dir := filepath.Join(t.TempDir(), "nested", "data")
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		return open(t, filepath.Join(dir, "store.db"))
	}, dir)
}

func TestPragmas(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "p.db"))
	defer s.Close()
	got := s.Pragmas(t.Context())
	want := map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "writer_conns": "1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got["busy_timeout"] == "0" || got["busy_timeout"] == "" {
		t.Errorf("busy_timeout not set: %q", got["busy_timeout"])
	}
	if got["reader_query_only"] != "1" {
		t.Errorf("reader query_only = %q", got["reader_query_only"])
	}
}

func benchCommit(b *testing.B, perCommit int) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	defer s.Close()
	ctx := context.Background()
	const sid = "ses_bench"
	if err := s.Commit(ctx, sid, &store.Batch{Session: storetest.NewSession(sid)}); err != nil {
		b.Fatal(err)
	}
	data := json.RawMessage(`{"sessionID":"ses_bench","messageID":"msg_1","partID":"prt_1","field":"text","delta":"hello, world"}`)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		i := n
		n++
		evs := make([]*opencode.Event, perCommit)
		for k := range evs {
			evs[k] = &opencode.Event{ID: fmt.Sprintf("evt_%d_%d", i, k), Type: opencode.EvTextEnded,
				SessionID: sid, Directory: "/work", Version: 1, Data: data}
		}
		if err := s.Commit(ctx, sid, &store.Batch{Events: evs}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*perCommit)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCommitEvent commits one event per transaction.
func BenchmarkCommitEvent(b *testing.B) { benchCommit(b, 1) }

// BenchmarkCommitBatch10 commits ten events per transaction.
func BenchmarkCommitBatch10(b *testing.B) { benchCommit(b, 10) }

// BenchmarkCommitConcurrentSessions commits one event per call from 32
// sessions at once: the group committer shares transactions and fsyncs
// between them.
func BenchmarkCommitConcurrentSessions(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	defer s.Close()
	ctx := context.Background()
	const sessions = 32
	for i := range sessions {
		sid := fmt.Sprintf("ses_bench%d", i)
		if err := s.Commit(ctx, sid, &store.Batch{Session: storetest.NewSession(sid)}); err != nil {
			b.Fatal(err)
		}
	}
	data := json.RawMessage(`{"delta":"hello, world"}`)
	var next atomic.Int64
	b.SetParallelism(sessions / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		sid := fmt.Sprintf("ses_bench%d", next.Add(1)%sessions)
		for i := 0; pb.Next(); i++ {
			ev := &opencode.Event{ID: fmt.Sprintf("evt_%s_%d", sid, i), Type: opencode.EvTextEnded,
				SessionID: sid, Directory: "/work", Version: 1, Data: data}
			if err := s.Commit(ctx, sid, &store.Batch{Events: []*opencode.Event{ev}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestNoSyncGroups: a commit whose batches all may skip the fsync runs
// with synchronous=NORMAL (written to the WAL, not fsynced); the next
// commit that must be durable runs with FULL again.
func TestNoSyncGroups(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "s.db"))
	defer s.Close()
	ctx := t.Context()
	sync := func() string { return s.Pragmas(ctx)["synchronous"] }
	if err := s.Commit(ctx, "ses_n", &store.Batch{Session: storetest.NewSession("ses_n")}); err != nil {
		t.Fatal(err)
	}
	if got := sync(); got != "2" {
		t.Fatalf("after a synced commit: synchronous=%s, want 2 (FULL)", got)
	}
	msg := storetest.AssistantMessage("ses_n", "msg_n", "")
	if err := s.Commit(ctx, "ses_n", &store.Batch{NoSync: true, Messages: []opencode.Message{msg}}); err != nil {
		t.Fatal(err)
	}
	if got := sync(); got != "1" {
		t.Fatalf("after a NoSync commit: synchronous=%s, want 1 (NORMAL)", got)
	}
	yes := true
	if err := s.Commit(ctx, "ses_n", &store.Batch{Open: &yes}); err != nil {
		t.Fatal(err)
	}
	if got := sync(); got != "2" {
		t.Fatalf("a synced commit after a NoSync one: synchronous=%s, want 2 (FULL)", got)
	}
}
