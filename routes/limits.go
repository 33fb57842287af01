package routes

import (
	"github.com/opencode-server/opencode-server/opencode"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// cors answers browser preflights and allows loopback origins plus the
// configured ones, like `opencode serve --cors`; other origins get no CORS
// headers (the browser then blocks the response). Preflights are answered
// before auth, as browsers send them without credentials.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		w.Header().Add("Vary", "Origin")
		if origin != "" && !s.allowedOrigin(origin, r) {
			// A page on another site may send "simple" cross-origin requests
			// (text/plain POSTs) without a preflight; they must never change
			// anything here, or any web page could drive this machine's tools.
			if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
				fam := v1
				if isV2(r) {
					fam = v2
				}
				writeError(w, r, fam, s.log, &opencode.Error{Code: opencode.EForbidden, Message: "Origin " + clip(origin) + " is not allowed"})
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, PUT, PATCH, POST, DELETE")
			if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
				h.Set("Access-Control-Allow-Headers", rh)
			}
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowedOrigin reports whether a browser page of origin may use this
// server: a --cors origin, a loopback one (any port, as `opencode serve`
// allows), or one whose host is this server's by the Host rule
// (allowedHost: the address the client connected to, an --allowed-host
// name). Never "whatever the request's Host says": under DNS rebinding
// Origin and Host are both the attacker's name.
func (s *Server) allowedOrigin(origin string, r *http.Request) bool {
	if slices.Contains(s.cfg.CORS, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if isLoopbackHost(u.Hostname()) {
		return true
	}
	hostport := u.Host
	if u.Port() == "" && u.Scheme == "https" {
		hostport = net.JoinHostPort(u.Hostname(), "443")
	}
	return s.allowedHost(hostport, localAddr(r), true)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// streamLimiter caps the streams a client address holds at once (SSE
// streams and terminal websockets, one pool), so one client cannot hold
// unbounded subscriptions (each costs a queue on the bus, or a reader of
// a terminal).
type streamLimiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newStreamLimiter(max int) *streamLimiter { return &streamLimiter{max: max, n: map[string]int{}} }

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// acquire reserves a stream slot for the request's client; release frees it.
func (l *streamLimiter) acquire(r *http.Request) (release func(), ok bool) {
	addr := clientAddr(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[addr] >= l.max {
		return nil, false
	}
	l.n[addr]++
	return func() {
		l.mu.Lock()
		if l.n[addr]--; l.n[addr] <= 0 {
			delete(l.n, addr)
		}
		l.mu.Unlock()
	}, true
}

// tooManyStreams is the answer when a client already holds MaxStreams streams.
var tooManyStreams = &opencode.Error{Code: opencode.ETooMany, Message: "too many concurrent event streams and terminal sockets from this client"}
