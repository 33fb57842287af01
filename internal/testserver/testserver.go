// Package testserver starts a whole server (store, bus, lifecycle, routes)
// on a real loopback listener for black-box HTTP tests.
//
// Each server of a test that is not parallel is checked for leaks: a
// goroutine started after Start that is still running once the server is
// stopped (at the test's cleanup) fails the test (see leakCheck).
package testserver

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/internal/apitest"
	"github.com/opencode-server/opencode-server/internal/app"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/postgres"
	"github.com/opencode-server/opencode-server/store/sqlite"
	"github.com/opencode-server/opencode-server/tool"
)

// Options configure a test server. The zero value is a memory store and an
// instant scripted model.
type Options struct {
	SQLite bool // use the SQLite store in a temp dir (or DataDir)
	// Postgres, if set, is a PostgreSQL DSN: the server is one cluster
	// instance on it (store/postgres in cluster mode, fencing and all).
	Postgres string
	DataDir  string // SQLite data dir to reuse (restart tests)
	Scripted scripted.Config
	// Provider overrides the scripted model.
	Provider provider.Provider
	// Config is an opencode.json (providers, model, permission).
	Config   *config.File
	Tools    []tool.Tool
	Password string
	// AllowedHosts: --allowed-host (names besides loopback requests may
	// be addressed to).
	AllowedHosts []string
	Heartbeat    time.Duration
	IdleTimeout  time.Duration
	Clock        func() time.Time
	Directory    string
	// WrapStore wraps the store the server uses (a failing or witnessing
	// store); Server.Store stays the unwrapped one.
	WrapStore func(store.Store) store.Store
	// ModelsPath is a models.dev api.json (none: no catalog, no fetch);
	// AuthPath an auth.json (default: one in a temp dir); Env the
	// environment the server finds keys in (none by default: a test never
	// sees the machine's keys).
	ModelsPath string
	AuthPath   string
	Env        map[string]string
}

// Server is a running test server.
type Server struct {
	URL     string
	App     *app.App
	Manager *lifecycle.Manager
	Bus     *eventbus.Bus
	Store   store.Store
	Model   *scripted.Model
	// Catalog is the server's model catalog (App.Catalog).
	Catalog   *catalog.Live
	DataDir   string
	Directory string
	// AuthPath is the server's auth.json.
	AuthPath string
	srv      *http.Server
	stopped  bool
}

// Start starts a server and stops it in t.Cleanup, then checks that no
// goroutine started since outlives it (see leakCheck). A test that starts
// a server cannot call t.Parallel afterwards (it panics): call it first.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	verify := leakCheck(t)
	s := &Server{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s.URL = "http://" + ln.Addr().String()
	var cluster store.Cluster
	if o.Postgres != "" {
		pg, err := postgres.OpenCluster(context.Background(), o.Postgres, postgres.ClusterOptions{Addr: s.URL, TTL: 3 * time.Second})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		s.Store, cluster = pg, pg.Cluster()
	} else if o.SQLite {
		s.DataDir = o.DataDir
		if s.DataDir == "" {
			s.DataDir = t.TempDir()
		}
		s.Store, err = sqlite.Open(context.Background(), filepath.Join(s.DataDir, "opencode-server.db"))
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
	} else {
		s.Store = memory.New()
	}
	o.Scripted.Record = true // tests read what the model was asked
	if o.Scripted.Chunks == 0 {
		o.Scripted.Chunks = 3
	}
	s.Directory = o.Directory
	if s.Directory == "" {
		s.Directory = t.TempDir()
	}
	snapDir := s.DataDir
	if snapDir == "" {
		snapDir = t.TempDir()
	}
	st := s.Store
	if o.WrapStore != nil {
		st = o.WrapStore(st)
	}
	authPath := o.AuthPath
	if authPath == "" {
		authPath = filepath.Join(t.TempDir(), "auth.json")
	}
	s.AuthPath = authPath
	env := o.Env
	s.App, err = app.New(context.Background(), app.Options{Store: st, Directory: s.Directory, Config: o.Config,
		Scripted: o.Scripted, Provider: o.Provider, Tools: o.Tools, Password: o.Password, AllowedHosts: o.AllowedHosts, Heartbeat: o.Heartbeat, IdleTimeout: o.IdleTimeout, Clock: o.Clock, DataDir: snapDir,
		Cluster: cluster, Models: &catalog.Source{Path: o.ModelsPath, NoFetch: true}, Auth: &catalog.AuthStore{Path: authPath},
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	s.Manager, s.Bus, s.Model, s.Catalog = s.App.Manager, s.App.Bus, s.App.Model, s.App.Catalog
	h := apitest.Middleware(t, s.App.Handler) // every response is checked against api/openapi.yaml
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	// Cleanups run last-registered first: those the test registers after
	// Start (its clients, streams, stubs) have run by now.
	t.Cleanup(func() {
		s.Stop()
		if verify != nil {
			verify()
		}
	})
	return s
}

// leakEnv is set (by t.Setenv) for the test of a leak-checked server.
const leakEnv = "OPENCODE_TESTSERVER_LEAK_CHECK"

// leakCheck returns a check that no goroutine started from now on is
// still running, to call once the server is stopped; or nil where such a
// check would not be sound. goleak sees every goroutine of the process, so
// the difference between now and the end is this test's only if no other
// test runs meanwhile: true of a test that neither is parallel nor has a
// parallel parent (a parallel test runs only once the serial ones are
// done, a serial test's parallel subtests only after its body returned).
// t.Setenv tells them apart: it panics in a parallel test or one with a
// parallel parent, and once called it makes a later t.Parallel panic, so a
// test cannot become parallel after the snapshot. Parallel tests, and
// servers of a benchmark or a fuzz test (a testing.B or testing.F, whose
// server outlives many runs), are left to the package's TestMain check
// (goleak), which every package using testserver has: it catches the same
// leaks, only without naming the test.
func leakCheck(t testing.TB) func() {
	tt, ok := t.(*testing.T)
	if !ok || !serial(tt) {
		return nil
	}
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		// A goroutine ends a moment after what stopped it (the reader of a
		// closed connection sees EOF): poll, with a deadline.
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := goleak.Find(ignore)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("testserver: goroutines started during the test outlive its server: %v", err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// serial reports whether t is neither parallel nor has a parallel parent,
// and if so keeps it from becoming parallel (see leakCheck).
func serial(t *testing.T) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	t.Setenv(leakEnv, "1")
	return true
}

// Stop shuts the server down as the binary does: SSE streams end, runners
// stop, the store closes. Safe to call twice.
func (s *Server) Stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.App.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.App.Close()
	_ = s.Store.Close()
}
