// Package pgtest starts a throwaway PostgreSQL server for tests: initdb and
// pg_ctl into a temporary directory (as the postgres user when the tests
// run as root, since PostgreSQL refuses root), listening on 127.0.0.1 only,
// on a port below 32768. A test that needs it calls Need: it skips without
// a server, and fails instead when CI=true.
package pgtest

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
)

// Server is a running throwaway PostgreSQL.
type Server struct {
	Port    int
	dir     string
	stop    func()
	restart func() error
}

// Restart stops the server at once (as a crash would) and starts it again
// on the same port and data, as a database restart does to its clients.
func (s *Server) Restart() error { return s.restart() }

var (
	current  *Server
	startErr error
	dbs      atomic.Int64
)

// Main runs a package's tests with a server started around them (call it
// from TestMain); the server is removed afterwards.
func Main(m *testing.M) int {
	s, err := Start()
	current, startErr = s, err
	code := m.Run()
	if s != nil {
		s.Stop()
	}
	return code
}

// Need skips (or, under CI=true, fails) a test when Main could not start
// a server, and returns the server otherwise.
func Need(t testing.TB) *Server {
	t.Helper()
	if current == nil {
		err := startErr
		if err == nil {
			err = errors.New("pgtest.Main was not called")
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL could not be started: %v", err)
		}
		t.Skipf("PostgreSQL could not be started: %v", err)
	}
	return current
}

// StartFor starts a server for one test (stopped at its end): it skips
// without one, or fails under CI=true.
func StartFor(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL could not be started: %v", err)
		}
		t.Skipf("PostgreSQL could not be started: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// DSN is the connection string of one database of the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", s.Port, db)
}

// URL is the same as a postgres:// URL (what --postgres-url takes).
func (s *Server) URL(db string) string { return URLAt(s.Addr(), db) }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URLAt is URL for a server reached at addr (host:port), such as a proxy
// in front of it.
func URLAt(addr, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

// FreshDB creates an empty database and returns its name.
func (s *Server) FreshDB(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return name
}

// Stop stops the server and removes its files.
func (s *Server) Stop() {
	if s.stop != nil {
		s.stop()
	}
	os.RemoveAll(s.dir)
}

// bin finds a PostgreSQL server binary.
func bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) > 0 {
		return matches[len(matches)-1], nil
	}
	return "", fmt.Errorf("%s not found (install Debian's postgresql package)", name)
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

// Start runs initdb and pg_ctl start in a temporary directory.
func Start() (*Server, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := bin("pg_ctl")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	data := filepath.Join(dir, "data")
	var prefix []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("running as root and no postgres user: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			return fail(err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
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
		return fail(err)
	}
	var lastErr error
	for range 3 { // a port taken between the probe and the start: another
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		opts := fmt.Sprintf("-p %d -k %s -h 127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=300", port, dir)
		if lastErr = run(pgctl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); lastErr == nil {
			return &Server{Port: port, dir: dir, stop: func() { _ = run(pgctl, "-D", data, "-m", "immediate", "-w", "stop") },
				restart: func() error {
					// -l: the new postmaster must not hold our output pipe.
					return run(pgctl, "-D", data, "-l", filepath.Join(dir, "log"), "-m", "immediate", "-w", "-t", "60", "restart")
				}}, nil
		}
	}
	return fail(lastErr)
}
