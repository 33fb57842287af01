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

	"github.com/opencode-server/opencode-server/api"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/routes"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/sqlite"
)

// Options configure a test server. The zero value is a memory store and an
// instant scripted model.
type Options struct {
	SQLite   bool   // use the SQLite store in a temp dir (or DataDir)
	DataDir  string // SQLite data dir to reuse (restart tests)
	Scripted scripted.Config
	// Provider overrides the scripted model.
	Provider  provider.Provider
	Password  string
	Heartbeat time.Duration
	Clock     func() time.Time
	Directory string
}

// Server is a running test server.
type Server struct {
	URL     string
	Manager *lifecycle.Manager
	Bus     *eventbus.Bus
	Store   store.Store
	Model   *scripted.Model
	DataDir string
	srv     *http.Server
	done    chan struct{}
	stopped bool
}

// Start starts a server and stops it in t.Cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{done: make(chan struct{})}
	var err error
	if o.SQLite {
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
	if o.Scripted.Chunks == 0 {
		o.Scripted.Chunks = 3
	}
	s.Model = scripted.New(o.Scripted)
	var prov provider.Provider = s.Model
	if o.Provider != nil {
		prov = o.Provider
	}
	dir := o.Directory
	if dir == "" {
		dir = t.TempDir()
	}
	s.Bus = eventbus.New()
	s.Manager = lifecycle.New(lifecycle.Config{Store: s.Store, Bus: s.Bus, Provider: prov,
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID, Directory: dir, Clock: o.Clock})
	if err := s.Manager.Resume(context.Background()); err != nil {
		t.Fatalf("resume: %v", err)
	}
	h := routes.New(routes.Config{Manager: s.Manager, Directory: dir, Password: o.Password,
		Catalog: routes.Catalog{Model: "scripted/scripted-model", SmallModel: "scripted/scripted-model",
			Providers: []routes.ProviderInfo{{ID: scripted.ProviderID, Name: "Scripted", Source: "custom",
				Models: []routes.ModelInfo{{ID: scripted.ModelID, Name: "Scripted Model", Context: 128000, Output: 4096}}}}},
		OpenAPI: api.OpenAPI, Heartbeat: o.Heartbeat, Done: s.done})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s.URL = "http://" + ln.Addr().String()
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
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	s.Manager.Close()
	_ = s.Store.Close()
}
