package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/postgres"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// server is the throwaway PostgreSQL TestMain starts; startErr says why
// there is none.
var (
	serverPort int
	startErr   error
)

func TestMain(m *testing.M) {
	dir, stop, err := startServer()
	startErr = err
	code := m.Run()
	if stop != nil {
		stop()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// pgBin finds a PostgreSQL server binary.
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found", name)
}

// freePort picks a free TCP port below 32768 on 127.0.0.1.
func freePort() (int, error) {
	for range 100 {
		p := 20000 + int(time.Now().UnixNano()%12000)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free port")
}

// startServer runs initdb and pg_ctl start in a temporary directory, as
// the postgres user when the test runs as root (PostgreSQL refuses root).
func startServer() (dir string, stop func(), err error) {
	initdb, err := pgBin("initdb")
	if err != nil {
		return "", nil, err
	}
	pgctl, err := pgBin("pg_ctl")
	if err != nil {
		return "", nil, err
	}
	dir, err = os.MkdirTemp("", "pgstore")
	if err != nil {
		return "", nil, err
	}
	data := filepath.Join(dir, "data")
	var prefix []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return dir, nil, fmt.Errorf("running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return dir, nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return dir, nil, err
		}
		prefix = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		args = append(prefix, args...)
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %w\n%s", args, err, out)
		}
		return nil
	}
	if err := run(initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return dir, nil, err
	}
	port, err := freePort()
	if err != nil {
		return dir, nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -h 127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200", port, dir)
	if err := run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		return dir, nil, err
	}
	serverPort = port
	return dir, func() { _ = run(pgctl, "-D", data, "-m", "immediate", "-w", "stop") }, nil
}

func dsn(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", serverPort, db)
}

// need skips (or, under CI=true, fails) a test without a server.
func need(t *testing.T) {
	t.Helper()
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL could not be started: %v", startErr)
		}
		t.Skipf("PostgreSQL could not be started: %v", startErr)
	}
}

var dbs atomic.Int64

// freshDB creates an empty database and returns its DSN.
func freshDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	conn, err := pgx.Connect(ctx, dsn("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return dsn(name) + " pool_max_conns=8"
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
