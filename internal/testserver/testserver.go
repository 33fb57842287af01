// Package testserver starts a whole server (store, bus, lifecycle, routes)
// on a real loopback listener for black-box HTTP tests.
package testserver

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

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
	Config      *config.File
	Tools       []tool.Tool
	Password    string
	Heartbeat   time.Duration
	IdleTimeout time.Duration
	Clock       func() time.Time
	Directory   string
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

// Start starts a server and stops it in t.Cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
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
		Scripted: o.Scripted, Provider: o.Provider, Tools: o.Tools, Password: o.Password, Heartbeat: o.Heartbeat, IdleTimeout: o.IdleTimeout, Clock: o.Clock, DataDir: snapDir,
		Cluster: cluster, Models: &catalog.Source{Path: o.ModelsPath, NoFetch: true}, Auth: &catalog.AuthStore{Path: authPath},
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	s.Manager, s.Bus, s.Model, s.Catalog = s.App.Manager, s.App.Bus, s.App.Model, s.App.Catalog
	h := apitest.Middleware(t, s.App.Handler) // every response is checked against api/openapi.yaml
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.Stop)
	return s
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
