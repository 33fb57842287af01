package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/pgtest"

	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/postgres"
	"github.com/opencode-server/opencode-server/store/storetest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func need(t *testing.T) { pgtest.Need(t) }

// freshDB creates an empty database and returns its DSN.
func freshDB(t *testing.T) string {
	srv := pgtest.Need(t)
	return srv.DSN(srv.FreshDB(t)) + " pool_max_conns=8"
}

func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	need(t)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, freshDB(t)) })
}

// TestReopen: a second Open of a migrated database keeps its data and
// does not migrate again.
func TestReopen(t *testing.T) {
	need(t)
	ctx := t.Context()
	d := freshDB(t)
	s := open(t, d)
	if err := s.Commit(ctx, "ses_r", &store.Batch{Session: storetest.NewSession("ses_r")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, d)
	defer s.Close()
	if _, err := s.GetSession(ctx, "ses_r"); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
}
