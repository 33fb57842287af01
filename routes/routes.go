// Package routes is the HTTP face of the server: it decodes and validates
// requests, mints the IDs of user messages and parts (the only place they are
// minted), calls lifecycle, and encodes OpenCode's JSON and SSE shapes.
package routes

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/pty"
	"github.com/opencode-server/opencode-server/vcs"
)

// Config wires the routes.
type Config struct {
	Manager Core
	// Directory is the project directory reported by /path and used for new sessions.
	Directory string
	// Username and Password enable HTTP basic auth when Password is set.
	Username string
	Password string
	// Catalog lists the providers and their models (nil: none).
	Catalog *catalog.Live
	// Credentials is auth.json (PUT/DELETE /auth/{providerID}); Reload
	// makes the catalog again after it or the config changed.
	Credentials *catalog.AuthStore
	Reload      func()
	// OpenAPI is the document served at /doc.
	OpenAPI []byte
	// Heartbeat is the SSE heartbeat interval (10 s when zero).
	Heartbeat time.Duration
	// Done is closed when the server shuts down; SSE streams end then.
	Done <-chan struct{}
	// CORS lists extra allowed browser origins ("https://app.example.com");
	// loopback origins are always allowed, and there is no wildcard.
	CORS []string
	// AllowedHosts are names (or name:port) besides this server's loopback
	// address that requests may be addressed to (--allowed-host: a reverse
	// proxy's name, a cluster instance's advertised host); AnyHost turns
	// the Host check off.
	AllowedHosts []string
	// Commands are opencode.json's "command" entries.
	Commands map[string]config.CommandConfig
	// References are opencode.json's "references" (GET /api/reference).
	References []config.Reference
	// MaxStreams caps the SSE streams and terminal websockets a client
	// address holds at once (default 64).
	MaxStreams int
	// ForwardWindow is how long a request for a session another instance
	// runs keeps being retried when that instance does not answer (it may
	// have died: its lease must expire and the session be claimed): the
	// lease TTL plus a margin. Zero: 5 s.
	ForwardWindow time.Duration
	Logger        *slog.Logger
	// MCP are the MCP servers (GET /mcp, connect, disconnect, add); nil:
	// none configured.
	MCP MCPServers
	// IDs mints the IDs the REST boundary gives (messages, parts,
	// sessions, events): the process-wide generator when nil.
	IDs *identifier.Generator
	// PTY runs the terminals of /pty (closed by the caller at shutdown);
	// nil: the routes run their own, closed when Done is.
	PTY *pty.Manager
	// Workspaces turns on OpenCode's experimental workspaces
	// (OPENCODE_EXPERIMENTAL_WORKSPACES: ExperimentalFlag); off, they list
	// none, as in OpenCode.
	Workspaces bool
	// Publish puts a live event no session owns (the /tui routes') on the
	// bus /event serves, on every instance; nil: those events go nowhere.
	Publish func(*opencode.Event)
	// Projects is the project registry (vcs.LoadProjects, saved under
	// the data directory); nil: one in memory.
	Projects *vcs.Projects
	// Web answers the GETs no API route claims: the web app (NewWebProxy,
	// NewWebDir); nil: they are 404s like any unknown route.
	Web http.Handler
	// AGUI serves AG-UI runs (POST /agui, POST /agui/{sessionID}; the
	// agui package) behind the same auth; nil: not mounted.
	AGUI AGUIHandler
	// OpenAI serves the OpenAI door (POST /v1/responses, GET
	// /v1/responses/{id}, POST /v1/responses/{id}/cancel, GET
	// /v1/responses/{id}/input_items, POST /v1/chat/completions, GET
	// /v1/models;
	// the openai package) behind the
	// same auth, which takes the password as a bearer token there too;
	// nil: not mounted.
	OpenAI OpenAIHandler
}

// OpenAIHandler is the OpenAI door (openai.Handler).
type OpenAIHandler interface {
	Create(w http.ResponseWriter, r *http.Request)
	Retrieve(w http.ResponseWriter, r *http.Request, id string)
	Cancel(w http.ResponseWriter, r *http.Request, id string)
	Delete(w http.ResponseWriter, r *http.Request, id string)
	InputItems(w http.ResponseWriter, r *http.Request, id string)
	Models(w http.ResponseWriter, r *http.Request)
	// Connect serves the Responses WebSocket (GET /v1/responses
	// upgraded), once the Origin and the upgrade are checked here.
	Connect(w http.ResponseWriter, r *http.Request)
	ChatCompletions(w http.ResponseWriter, r *http.Request)
	// WriteError answers an error in OpenAI's shape.
	WriteError(w http.ResponseWriter, r *http.Request, err error)
}

// mountOpenAI mounts the OpenAI door; without a handler its routes are
// unknown routes, as on a server built without the door.
func (s *Server) mountOpenAI(r chi.Router) {
	serve := func(f func(o OpenAIHandler, w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if s.cfg.OpenAI == nil {
				writeError(w, r, v1, s.log, &opencode.Error{Code: opencode.ENotFound, Message: "No route for " + r.Method + " " + r.URL.Path})
				return
			}
			f(s.cfg.OpenAI, w, r)
		}
	}
	r.Post("/v1/responses", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) { o.Create(w, r) }))
	r.Get("/v1/responses", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) {
		// The Responses WebSocket: websockets are not subject to CORS, so
		// a browser page's Origin is checked as the terminal's is, and the
		// socket holds one of the client's stream slots.
		switch {
		case !s.ptyOrigin(r):
			o.WriteError(w, r, &opencode.Error{Code: opencode.EForbidden, Message: "Origin " + clip(r.Header.Get("Origin")) + " is not allowed"})
		case !isUpgrade(r):
			o.WriteError(w, r, &opencode.Error{Code: opencode.EInvalid, Message: "GET /v1/responses is the Responses WebSocket: send an Upgrade request, or POST /v1/responses"})
		default:
			release, ok := s.streams.acquire(r)
			if !ok {
				o.WriteError(w, r, tooManyStreams)
				return
			}
			defer release()
			o.Connect(w, r)
		}
	}))
	r.Get("/v1/responses/{responseID}", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) {
		o.Retrieve(w, r, chi.URLParam(r, "responseID"))
	}))
	r.Delete("/v1/responses/{responseID}", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) {
		o.Delete(w, r, chi.URLParam(r, "responseID"))
	}))
	r.Post("/v1/responses/{responseID}/cancel", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) {
		o.Cancel(w, r, chi.URLParam(r, "responseID"))
	}))
	r.Get("/v1/responses/{responseID}/input_items", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) {
		o.InputItems(w, r, chi.URLParam(r, "responseID"))
	}))
	r.Get("/v1/models", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) { o.Models(w, r) }))
	r.Post("/v1/chat/completions", serve(func(o OpenAIHandler, w http.ResponseWriter, r *http.Request) { o.ChatCompletions(w, r) }))
}

// isOpenAI reports whether a request is the OpenAI door's, answered in
// its error shape.
func (s *Server) isOpenAI(r *http.Request) bool {
	return s.cfg.OpenAI != nil && strings.HasPrefix(r.URL.Path, "/v1/")
}

// refuse answers an error before or beside the routes (auth, the Host
// check, an unknown route or method) in the shape of the route family
// the request is addressed to.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case s.isOpenAI(r):
		s.cfg.OpenAI.WriteError(w, r, err)
	case isV2(r):
		writeError(w, r, v2, s.log, err)
	default:
		writeError(w, r, v1, s.log, err)
	}
}

// mountAGUI mounts the AG-UI runs; without a handler they are unknown
// routes, as on a server built without the front door.
func (s *Server) mountAGUI(r chi.Router) {
	serve := func(w http.ResponseWriter, r *http.Request, thread string) {
		if s.cfg.AGUI == nil {
			writeError(w, r, v1, s.log, &opencode.Error{Code: opencode.ENotFound, Message: "No route for " + r.Method + " " + r.URL.Path})
			return
		}
		s.cfg.AGUI.ServeThread(w, r, thread)
	}
	r.Post("/agui", func(w http.ResponseWriter, r *http.Request) { serve(w, r, "") })
	r.Post("/agui/{sessionID}", func(w http.ResponseWriter, r *http.Request) { serve(w, r, chi.URLParam(r, "sessionID")) })
}

// AGUIHandler is the AG-UI front door (agui.Handler): a run, its thread
// given in the path or ("") in the body.
type AGUIHandler interface {
	ServeThread(w http.ResponseWriter, r *http.Request, thread string)
}

// Server holds the handlers' dependencies.
type Server struct {
	cfg      Config
	m        Core
	ids      *identifier.Generator
	log      *slog.Logger
	streams  *streamLimiter
	routes   routeTable
	projects projects
	// workspaces are OpenCode's experimental workspaces (workspace.go).
	workspaces workspaces
	webScope   webScope
}

// New returns the router.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Username == "" {
		cfg.Username = "opencode"
	}
	if cfg.Done == nil {
		cfg.Done = make(chan struct{})
	}
	if cfg.MaxStreams == 0 {
		cfg.MaxStreams = 64
	}
	if cfg.IDs == nil {
		cfg.IDs = identifier.Default()
	}
	if cfg.Projects == nil {
		cfg.Projects = &vcs.Projects{}
	}
	s := &Server{cfg: cfg, m: cfg.Manager, ids: cfg.IDs, log: cfg.Logger, streams: newStreamLimiter(cfg.MaxStreams)}
	s.projects.reg = cfg.Projects
	r := chi.NewRouter()
	r.Use(s.accessLog, s.recoverer, s.checkHost, s.cors, s.auth, checkDirectory, s.routeWorkspace, s.forward)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		if s.serveWeb(w, r) {
			return
		}
		s.refuse(w, r, &opencode.Error{Code: opencode.ENotFound, Message: "No route for " + r.Method + " " + r.URL.Path})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		if s.serveWeb(w, r) {
			return
		}
		if allow := s.routes.allowed(r.URL.Path); allow != "" {
			w.Header().Set("Allow", allow)
		}
		s.refuse(w, r, &opencode.Error{Code: opencode.EMethod, Message: "Method " + r.Method + " not allowed on " + r.URL.Path})
	})
	s.mountV1(r)
	s.mountV2(r)
	s.mountCatalog(r)
	s.mountFiles(r)
	s.mountCommands(r)
	s.mountTUI(r)
	s.mountParts(r)
	s.mountMisc(r)
	s.mountV2Asks(r)
	s.mountCloud(r)
	s.mountV2Revert(r)
	s.mountVCS(r)
	s.mountExperimentalSessions(r)
	s.mountWorkspaces(r)
	s.mountSync(r)
	s.mountControlPlane(r)
	s.mountProjectCopies(r)
	s.mountPTY(r)
	s.mountIntegrations(r)
	s.mountAGUI(r)
	s.mountOpenAI(r)
	s.routes = newRouteTable(r)
	s.webScope = newWebScope(r)
	return router{r}
}

// routeTable is every mounted (method, path pattern), for 405's Allow:
// chi's own matching counts a mounted subrouter as allowing every method.
type routeTable []struct {
	method string
	re     *regexp.Regexp
}

func newRouteTable(r chi.Routes) routeTable {
	var t routeTable
	_ = chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/")
		}
		// A {param} (braces escaped by QuoteMeta) matches one segment.
		pat := regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(route), `[^/]+`)
		t = append(t, struct {
			method string
			re     *regexp.Regexp
		}{method, regexp.MustCompile("^" + pat + "/?$")})
		return nil
	})
	return t
}

// allowed lists the methods path has, HEAD wherever GET is.
func (t routeTable) allowed(path string) string {
	has := map[string]bool{}
	for _, e := range t {
		if e.re.MatchString(path) {
			has[e.method] = true
		}
	}
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if has[m] || (m == http.MethodHead && has[http.MethodGet]) {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

// router is the chi router, answering HEAD with the GET handler and the
// body discarded (chi has HEAD routes only where registered).
type router struct{ *chi.Mux }

func (rt router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodHead {
		rt.Mux.ServeHTTP(w, r)
		return
	}
	r2 := r.Clone(r.Context())
	r2.Method = http.MethodGet
	rt.Mux.ServeHTTP(headWriter{w}, r2)
}

// headWriter drops the body of a HEAD answer.
type headWriter struct{ http.ResponseWriter }

func (h headWriter) Write(b []byte) (int, error) { return len(b), nil }

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines) through the wrapper.
func (h headWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

func isV2(r *http.Request) bool {
	p := r.URL.Path
	return len(p) >= 5 && p[:5] == "/api/"
}

// handler adapts a handler that returns an error to http.HandlerFunc,
// mapping the error in the route family's shape.
func (s *Server) h(fam family, f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			writeError(w, r, fam, s.log, err)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are encoded; this cannot happen for valid data.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"name":"UnknownError","data":{"message":"Unexpected server error. Check server logs for details."}}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// accessLog logs every request at debug level (--log-level debug), to see
// what a client asks.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.log.Debug("request", "method", r.Method, "url", logURL(r.URL), "status", sw.status, "dur", time.Since(start))
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverer turns a panic into a 500 in the route's error shape and a log
// line, never a dropped connection with no answer.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v)
				fam := v1
				if isV2(r) {
					fam = v2
				}
				writeError(w, r, fam, s.log, &opencode.Error{Code: opencode.EInternal, Message: "panic"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// auth requires HTTP basic auth when a password is configured, comparing in
// constant time.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Password == "" {
		return next
	}
	user := []byte(s.cfg.Username)
	pass := []byte(s.cfg.Password)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Web != nil && r.Method == http.MethodGet && webPublic[r.URL.Path] {
			next.ServeHTTP(w, r) // the web app's manifest: browsers fetch it without credentials
			return
		}
		u, p, ok := r.BasicAuth()
		if !ok {
			u, p, ok = ptyQueryAuth(r) // the terminal websocket's auth_token
		}
		if !ok && s.isOpenAI(r) {
			// The OpenAI SDKs send their API key as a bearer token: the
			// password is that key.
			if tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
				u, p, ok = s.cfg.Username, tok, true
			}
		}
		uOK := subtle.ConstantTimeCompare([]byte(u), user) == 1
		pOK := subtle.ConstantTimeCompare([]byte(p), pass) == 1
		if !ok || !uOK || !pOK {
			if ptyTicketed(r) {
				next.ServeHTTP(w, r) // a terminal ticket instead of the password: the handler checks it
				return
			}
			w.Header().Set("WWW-Authenticate", `Basic realm="opencode"`)
			s.refuse(w, r, &opencode.Error{Code: opencode.EUnauthorized, Message: "Unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// directory is the project directory a request addresses: the `directory`
// query parameter or the x-opencode-directory header, else the server's.
// The SDK URL-encodes the header (non-ASCII paths cannot go in a header
// as they are), and OpenCode decodes either source once more, so do we; a
// relative path is taken from the server's directory, as OpenCode resolves
// it against its working directory.
func (s *Server) directory(r *http.Request) string {
	d := r.URL.Query().Get("directory")
	if d == "" {
		d = r.URL.Query().Get("location[directory]") // the v2 routes' form
	}
	if d == "" {
		d = r.Header.Get("x-opencode-directory")
	}
	if d == "" {
		return s.cfg.Directory
	}
	if u, err := url.PathUnescape(d); err == nil {
		d = u
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(s.cfg.Directory, d)
	}
	return filepath.Clean(d)
}

// checkDirectory refuses a request whose directory (query, v2 location or
// header) no file system path can be: a NUL byte, or bytes that are not
// UTF-8 (which JSON would silently turn into U+FFFD, a different path).
func checkDirectory(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for _, d := range []string{q.Get("directory"), q.Get("location[directory]"), r.Header.Get("x-opencode-directory")} {
			if d == "" {
				continue
			}
			if u, err := url.PathUnescape(d); err == nil {
				d = u
			}
			if strings.IndexByte(d, 0) >= 0 || !utf8.ValidString(d) {
				fam := v1
				if isV2(r) {
					fam = v2
				}
				writeError(w, r, fam, nil, badRequest("Query", "directory", "Invalid directory: it must be a UTF-8 path without NUL bytes"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func homeDir() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return "/"
	}
	return h
}

// detach keeps request values but not cancellation: work a client started
// (an admitted input) must not be undone because the client went away.
func detach(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
