// Command opencode-server is an OpenCode-compatible HTTP+SSE server: the
// real OpenCode clients (TUI, `opencode run --attach`, the JS SDK) point at
// it and work.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/app"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/routes"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/postgres"
	"github.com/opencode-server/opencode-server/store/sqlite"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "opencode-server:", err)
		os.Exit(1)
	}
}

type options struct {
	hostname  string
	port      int
	data      string
	storeKind string
	directory string
	logLevel  string
	config    string
	insecure  bool
	cors      []string
	// allowedHosts: --allowed-host, names besides loopback that requests
	// may be addressed to.
	allowedHosts []string
	reply        string
	chunks       int
	delay        time.Duration
	heartbeat    time.Duration
	grace        time.Duration
	// portSet: --port was given (acp serves HTTP only then).
	portSet   bool
	pgURL     string
	advertise string
	leaseTTL  time.Duration
	webDir    string
	noWeb     bool
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "opencode-server")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "opencode-server")
	}
	return filepath.Join(os.TempDir(), "opencode-server")
}

func parseFlags(args []string, stderr *os.File) (options, error) {
	var o options
	fs := flag.NewFlagSet("opencode-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.hostname, "hostname", "127.0.0.1", "address to listen on")
	fs.IntVar(&o.port, "port", 4096, "port to listen on (0 picks a free one)")
	fs.StringVar(&o.data, "data", defaultDataDir(), "data directory (holds the SQLite store)")
	fs.StringVar(&o.storeKind, "store", "sqlite", "store: sqlite, memory, or postgres (several instances share one database)")
	fs.StringVar(&o.pgURL, "postgres-url", os.Getenv("OPENCODE_SERVER_POSTGRES_URL"),
		"PostgreSQL connection URL for --store postgres (default $OPENCODE_SERVER_POSTGRES_URL)")
	fs.StringVar(&o.advertise, "advertise", "", "URL other instances forward this instance's sessions' requests to (default http://HOSTNAME:PORT)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 3*time.Second,
		"--store postgres: an instance that has not renewed its lease for this long is dead and its sessions are taken over")
	fs.StringVar(&o.directory, "directory", "", "project directory of new sessions (default: the working directory)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.config, "config", "", "opencode.json to read after the global and project ones")
	fs.BoolVar(&o.insecure, "insecure", false, "allow listening on a non-loopback address without OPENCODE_SERVER_PASSWORD")
	fs.Func("cors", "allow this browser origin (repeatable; loopback origins are always allowed)", func(v string) error {
		o.cors = append(o.cors, v)
		return nil
	})
	fs.Func("allowed-host", "answer requests addressed to this host name (or name:port) too, e.g. a reverse proxy's (repeatable; '*' turns the Host check off)", func(v string) error {
		if v == "" || strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("%q is not a host name", v)
		}
		o.allowedHosts = append(o.allowedHosts, v)
		return nil
	})
	fs.StringVar(&o.reply, "scripted-reply", "", "scripted model: reply text (default: quotes the user's prompt)")
	fs.IntVar(&o.chunks, "scripted-chunks", 5, "scripted model: number of streamed chunks")
	fs.DurationVar(&o.delay, "scripted-delay", 0, "scripted model: delay before each chunk")
	fs.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "SSE heartbeat interval")
	fs.DurationVar(&o.grace, "shutdown-grace", 10*time.Second,
		"on SIGTERM/SIGINT, how long running turns may finish before they are closed as interrupted (continued after the next start)")
	fs.StringVar(&o.webDir, "web-dir", "", "serve a built copy of OpenCode's web app from this directory (default: proxy $OPENCODE_WEB_APP_URL, else "+routes.DefaultWebAppURL+")")
	fs.BoolVar(&o.noWeb, "no-web", false, "no web app: paths no API route claims are 404s")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.noWeb && o.webDir != "" {
		return o, errors.New("--no-web and --web-dir exclude each other")
	}
	fs.Visit(func(f *flag.Flag) { o.portSet = o.portSet || f.Name == "port" })
	if o.directory == "" {
		wd, err := os.Getwd()
		if err != nil {
			return o, err
		}
		o.directory = wd
	}
	return o, nil
}

func run(ctx context.Context, args []string, stderr *os.File) error {
	if len(args) > 0 && args[0] == "acp" {
		return runACP(ctx, args[1:], stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// ln is opened before the store: with --port 0 the advertised address
	// needs the port.
	ln, err := net.Listen("tcp", net.JoinHostPort(o.hostname, strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	defer ln.Close()
	a, st, log, err := start(ctx, o, stderr, ln)
	if err != nil {
		return err
	}
	defer st.Close()
	defer a.Close()
	fmt.Fprintf(os.Stdout, "opencode server listening on http://%s\n", ln.Addr())
	return serve(o, a, ln, log)
}

// start opens the store and starts the core (app) on it; ln is where
// HTTP will be served (nil: nowhere, an ACP process without --port).
func start(ctx context.Context, o options, stderr *os.File, ln net.Listener) (*app.App, store.Store, *slog.Logger, error) {
	if err := checkExposure(o.hostname, os.Getenv("OPENCODE_SERVER_PASSWORD"), o.insecure); err != nil {
		return nil, nil, nil, err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var st store.Store
	var cluster store.Cluster
	var err error
	switch o.storeKind {
	case "sqlite":
		path := filepath.Join(o.data, "opencode-server.db")
		st, err = sqlite.Open(ctx, path)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open store %s: %w", path, err)
		}
	case "memory":
		st = memory.New()
	case "postgres":
		if o.pgURL == "" {
			return nil, nil, nil, errors.New("--store postgres needs --postgres-url or OPENCODE_SERVER_POSTGRES_URL")
		}
		if ln == nil {
			return nil, nil, nil, errors.New("--store postgres needs --port: other instances forward requests to this one")
		}
		addr := o.advertise
		if addr == "" {
			addr = "http://" + ln.Addr().String()
		}
		// Other instances forward requests addressed to the advertised host.
		if u, err := url.Parse(addr); err == nil && u.Host != "" {
			o.allowedHosts = append(o.allowedHosts, u.Host)
		}
		pg, err := postgres.OpenCluster(ctx, o.pgURL, postgres.ClusterOptions{Addr: addr, TTL: o.leaseTTL, Logger: log})
		if err != nil {
			return nil, nil, nil, err
		}
		st, cluster = pg, pg.Cluster()
	default:
		return nil, nil, nil, fmt.Errorf("--store must be sqlite, memory or postgres, not %q", o.storeKind)
	}
	paths := config.Paths(o.directory)
	if o.config != "" {
		paths = append(paths, o.config)
	}
	cfg, err := config.Load(paths...)
	if err != nil {
		st.Close()
		return nil, nil, nil, fmt.Errorf("config: %w", err)
	}
	a, err := app.New(ctx, app.Options{Store: st, Directory: o.directory, Config: cfg,
		Scripted: scripted.Config{Reply: o.reply, Chunks: o.chunks, Delay: o.delay},
		Username: os.Getenv("OPENCODE_SERVER_USERNAME"), Password: os.Getenv("OPENCODE_SERVER_PASSWORD"),
		Heartbeat: o.heartbeat, CORS: o.cors, AllowedHosts: o.allowedHosts, Logger: log, DataDir: o.data,
		Cluster: cluster, ForwardWindow: o.leaseTTL + 2*time.Second, StoreTimeout: storeTimeout(cluster != nil, o.leaseTTL),
		WebDir: o.webDir, WebURL: webURL(o)})
	if err != nil {
		st.Close()
		return nil, nil, nil, fmt.Errorf("start: %w", err)
	}
	return a, st, log, nil
}

// httpServer is the server's HTTP server (also an ACP process's with
// --port). ReadTimeout bounds a request body sent byte by byte; it does not
// limit SSE responses (writes have their own per-frame deadlines).
func httpServer(a *app.App, log *slog.Logger) *http.Server {
	return &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// serve serves HTTP on ln until SIGINT/SIGTERM, then shuts down gracefully.
func serve(o options, a *app.App, ln net.Listener, log *slog.Logger) error {
	srv := httpServer(a, log)

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		return err
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	}
	// A second signal exits at once.
	go func() {
		<-sig
		log.Warn("second signal: exiting now")
		os.Exit(1)
	}()
	sctx, cancel := context.WithTimeout(context.Background(), o.grace+10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown(sctx) }() // stops accepting at once
	// Running turns may finish within the grace period, watched live on
	// the streams still open; their blocking prompts get their answers.
	gctx, gcancel := context.WithTimeout(context.Background(), o.grace)
	a.Manager.Drain(gctx)
	gcancel()
	a.Shutdown() // cuts SSE streams (clients reconnect) so Shutdown does not wait on them
	// Runners reach a consistent point: turns still running close as
	// interrupted (and continue after the next start), blocking prompts
	// get the interrupted message, as an abort gives.
	a.Close()
	if err := <-stopped; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", "err", err)
	}
	return nil
}

// checkExposure refuses to serve a non-loopback address without a password:
// the server runs tools (bash, file edits) on this machine for whoever can
// reach it.
func checkExposure(host, password string, insecure bool) error {
	if password != "" || insecure {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %q without a password: set OPENCODE_SERVER_PASSWORD, "+
		"or pass --insecure if something else protects this address", host)
}

// storeTimeout bounds a session commit: in a cluster three quarters of
// the lease (past it another instance may own the session), else the
// manager's default.
func storeTimeout(clustered bool, lease time.Duration) time.Duration {
	if !clustered {
		return 0
	}
	return lease * 3 / 4
}

// webURL is where the web app is proxied from: $OPENCODE_WEB_APP_URL, else
// OpenCode's; none with --no-web or --web-dir.
func webURL(o options) string {
	if o.noWeb || o.webDir != "" {
		return ""
	}
	if u := os.Getenv("OPENCODE_WEB_APP_URL"); u != "" {
		return u
	}
	return routes.DefaultWebAppURL
}
