// Package app wires the server from its parts: configuration, providers,
// tools, lifecycle and routes. The binary and the test server both use it,
// so tests run exactly what ships.
package app

import (
	"context"
	"github.com/opencode-server/opencode-server/agui"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/api"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/mcp"
	"github.com/opencode-server/opencode-server/openai"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/pty"
	"github.com/opencode-server/opencode-server/routes"
	"github.com/opencode-server/opencode-server/snapshot"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/tool"
	"github.com/opencode-server/opencode-server/vcs"
)

// The routes ask the lifecycle core through routes.Core, which does not
// import lifecycle.
var _ routes.Core = (*lifecycle.Manager)(nil)

// Options configure an App.
type Options struct {
	Store     store.Store
	Directory string
	// Config is the merged opencode.json (nil: nothing configured).
	Config *config.File
	// Scripted shapes the built-in scripted model.
	Scripted scripted.Config
	// Provider, if set, replaces the scripted model (tests).
	Provider  provider.Provider
	Tools     []tool.Tool // nil: tool.Builtin()
	Username  string
	Password  string
	Heartbeat time.Duration
	// IdleTimeout is how long an idle session's runner stays in memory.
	IdleTimeout time.Duration
	// StoreTimeout bounds each session commit (lifecycle.Config).
	StoreTimeout time.Duration
	CORS         []string
	// AllowedHosts are the names requests may be addressed to besides the
	// loopback address (routes.Config.AllowedHosts).
	AllowedHosts []string
	// DataDir holds the snapshot repositories (step snapshots, revert);
	// empty: a temporary directory.
	DataDir string
	Clock   func() time.Time
	// Cluster makes this server one instance of several sharing Store
	// (scale-out); ForwardWindow is how long a request for a session whose
	// owner does not answer is retried (the lease TTL plus a margin).
	Cluster       store.Cluster
	ForwardWindow time.Duration
	Logger        *slog.Logger
	// Models, Auth and Getenv are where the catalog comes from: the
	// models.dev source, auth.json and the environment's keys (nil: as
	// OpenCode finds them; tests give their own).
	Models *catalog.Source
	Auth   *catalog.AuthStore
	Getenv func(string) string
	// WebDir serves a built copy of OpenCode's web app from disk at the
	// paths no API route claims; else WebURL proxies it from there (the
	// binary's default: $OPENCODE_WEB_APP_URL or https://app.opencode.ai);
	// neither: those paths are 404s.
	WebDir string
	WebURL string
}

// App is a wired server.
type App struct {
	Manager *lifecycle.Manager
	Bus     *eventbus.Bus
	Handler http.Handler
	Model   *scripted.Model
	// MCP are the connected MCP servers of the config.
	MCP *mcp.Servers
	// Commands lists a directory's slash commands (built-ins, the
	// config's, .opencode/command files), as GET /command does.
	Commands func(dir string) []command.Command
	// Catalog is the models the server serves (the scripted model and the
	// configured providers'), with their limits, cost and capabilities;
	// routes, lifecycle and ACP all read this one.
	Catalog *catalog.Live
	// PTY runs the terminals of /pty; Close ends them and their processes.
	PTY    *pty.Manager
	models *models
	done   chan struct{}
	web    http.Handler
}

// scriptedModel is the built-in scripted model's catalog entry: text only,
// 128000 tokens of context, 4096 of output.
func scriptedModel() catalog.Model {
	return catalog.Model{ID: scripted.ModelID, Name: "Scripted Model", Context: 128000, Output: 4096,
		InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}
}

type modelKey struct{ provider, model string }

// ptyIdle is how long a terminal no client is attached to keeps running
// (the web app reattaches on reload, so this is long).
const ptyIdle = time.Hour

// New wires an App and resumes the sessions the store left open.
func New(ctx context.Context, o Options) (*App, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Config == nil {
		o.Config = &config.File{}
	}
	web, err := webApp(o)
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	noClaude := os.Getenv("OPENCODE_DISABLE_CLAUDE_CODE_PROMPT") != ""
	if o.Tools == nil {
		o.Tools = append(tool.Builtin(), tool.Skill{Home: home, ConfigDir: config.GlobalDir(), NoClaude: noClaude})
	}
	servers := mcp.Start(ctx, o.Config.MCP, o.Directory, o.Logger)
	moreTools := servers.Tools
	started := false
	defer func() {
		if !started {
			servers.Close() // a failed start leaves no server process behind
		}
	}()
	a := &App{Bus: eventbus.New(), Model: scripted.New(o.Scripted), done: make(chan struct{}), MCP: servers}
	var def provider.Provider = a.Model
	if o.Provider != nil {
		def = o.Provider
	}

	// The scripted model is always there; the providers of models.dev and
	// opencode.json join it, connected by their keys.
	mods := newModels(o, def)
	a.Catalog, a.models = mods.live, mods
	cat := mods.live
	defProvider, defModel, _ := config.SplitModel(cat.Get().Model)

	rules, err := lifecycle.ParseRules(o.Config.Permission)
	if err != nil {
		return nil, err
	}
	agents, err := agent.Resolve(o.Config.Agent, append([]string{config.GlobalDir()}, agent.ProjectConfigDirs(o.Directory)...))
	if err != nil {
		return nil, err
	}
	// The project registry is saved under the data directory (OpenCode
	// keeps it in its database); without one it lives in memory.
	projects := &vcs.Projects{}
	if o.DataDir != "" {
		if projects, err = vcs.LoadProjects(filepath.Join(o.DataDir, vcs.ProjectsFile)); err != nil {
			return nil, err
		}
	}
	var projectIDs sync.Map // dir -> a git project's identity (ProjectOf)
	defClient, _ := mods.resolve(defProvider, defModel)
	a.Manager = lifecycle.New(lifecycle.Config{Store: o.Store, Bus: a.Bus, Provider: defClient,
		ProviderID: defProvider, ModelID: defModel, Directory: o.Directory, Clock: o.Clock, Logger: o.Logger,
		IdleTimeout: o.IdleTimeout, StoreTimeout: o.StoreTimeout, Snapshots: snapshot.New(o.DataDir), Cluster: o.Cluster,
		Home: home, ConfigDir: config.GlobalDir(), Instructions: o.Config.Instructions,
		Agents: agents, MoreTools: moreTools, MCPServers: externalMCP(o.Config.MCP),
		ReadResource: func(ctx context.Context, client, uri string) ([]lifecycle.ResourceContent, error) {
			cs, err := servers.ReadResource(ctx, client, uri)
			out := make([]lifecycle.ResourceContent, len(cs))
			for i, c := range cs {
				out[i] = lifecycle.ResourceContent{URI: c.URI, MimeType: c.MimeType, Text: c.Text, Blob: c.Blob}
			}
			return out, err
		},
		NoClaude: noClaude, NoProject: os.Getenv("OPENCODE_DISABLE_PROJECT_CONFIG") != "",
		Tools: o.Tools, Rules: rules,
		Resolve: mods.resolve,
		Catalog: cat,
		// The identity alone: creating a session records no project (the
		// project routes do, as OpenCode's do when a directory is opened).
		// A git project's ID is kept per directory (resolving it runs git);
		// one outside git is not, as a git init may make it a project.
		ProjectOf: func(ctx context.Context, dir string) (string, string) {
			if id, ok := projectIDs.Load(dir); ok {
				return id.(vcs.Identity).ID, id.(vcs.Identity).Directory
			}
			id, err := vcs.Resolve(ctx, dir)
			if err != nil {
				return "", ""
			}
			if id.Git {
				projectIDs.Store(dir, id)
			}
			return id.ID, id.Directory
		}})
	if err := a.Manager.Resume(ctx); err != nil {
		a.Manager.Close()
		return nil, err
	}
	a.PTY = pty.New(pty.Options{Idle: ptyIdle, Logger: o.Logger})
	a.Handler = routes.New(routes.Config{Manager: a.Manager, PTY: a.PTY, Directory: o.Directory, Username: o.Username,
		Password: o.Password, Catalog: cat, OpenAPI: api.OpenAPI, Heartbeat: o.Heartbeat, Done: a.done,
		CORS: o.CORS, AllowedHosts: o.AllowedHosts, Logger: o.Logger, Commands: o.Config.Command, References: o.Config.References, MCP: servers, ForwardWindow: o.ForwardWindow,
		Credentials: mods.auth, Reload: mods.rebuild, Publish: a.Manager.PublishLive,
		Workspaces: routes.ExperimentalFlag(o.Getenv, "OPENCODE_EXPERIMENTAL_WORKSPACES"), Web: web,
		Projects: projects, AGUI: agui.New(agui.Options{Core: a.Manager, Directory: o.Directory, Logger: o.Logger, Done: a.done}),
		OpenAI: openai.New(openai.Options{Core: a.Manager, Directory: o.Directory, Catalog: cat, Logger: o.Logger, Done: a.done})})
	a.web = web
	a.Commands = func(dir string) []command.Command { return command.List(dir, o.Config.Command, config.GlobalDir()) }
	started = true
	return a, nil
}

// Shutdown cuts SSE streams (their clients reconnect, with Last-Event-ID
// where they have it), so an http.Server's Shutdown does not wait on them.
// Call it before http.Server.Shutdown, then Close.
func (a *App) Shutdown() {
	select {
	case <-a.done:
	default:
		close(a.done)
	}
}

// Close stops every runner (running turns close as interrupted) and closes
// the model clients' idle connections. The store is the caller's to close
// afterwards.
func (a *App) Close() {
	a.Shutdown()
	a.PTY.Close()
	a.Manager.Close()
	a.MCP.Close()
	closeIdle(*a.models.clients.Load())
	if c, ok := a.web.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections() // the web app proxy's upstream connections
	}
}

// webApp is the handler of the web app o asks for (nil: none).
func webApp(o Options) (http.Handler, error) {
	switch {
	case o.WebDir != "":
		return routes.NewWebDir(o.WebDir)
	case o.WebURL != "":
		return routes.NewWebProxy(o.WebURL, o.Logger)
	}
	return nil, nil
}

// externalMCP are the config's enabled MCP servers, for external agents'
// session/new (as mcp.Start reads them: local with a command, remote
// with a url).
func externalMCP(cfg map[string]config.MCPConfig) []lifecycle.MCPServer {
	var out []lifecycle.MCPServer
	for name, c := range cfg {
		if c.Enabled != nil && !*c.Enabled {
			continue
		}
		switch {
		case c.Type == "remote" && c.URL != "":
			out = append(out, lifecycle.MCPServer{Name: name, URL: c.URL, Headers: c.Headers})
		case c.Type == "local" && len(c.Command) > 0:
			out = append(out, lifecycle.MCPServer{Name: name, Command: c.Command, Env: c.Environment})
		}
	}
	return out
}
