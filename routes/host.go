package routes

import (
	"net"
	"net/http"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// AnyHost in Config.AllowedHosts (--allowed-host '*') turns the Host check
// off: for an operator whose own proxy or password guards every name.
const AnyHost = "*"

// checkHost answers only requests addressed to this server by a name of
// its own: a loopback name or address, the address the client connected
// to, or a name the operator allowed (--allowed-host). A web page whose name an attacker re-points at
// 127.0.0.1 (DNS rebinding) is same-origin to the browser, so its requests
// carry no Origin for the CORS check to refuse; the Host it sends is
// still its own name, and that is what is refused here, before any
// handler (websockets and the web app included).
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.allowedHost(r.Host, localAddr(r), false) {
			next.ServeHTTP(w, r)
			return
		}
		s.refuse(w, r, &opencode.Error{Code: opencode.EForbidden,
			Message: "Host " + clip(r.Host) + " is not allowed: this server answers its loopback address and the names given with --allowed-host"})
	})
}

// localAddr is the address the request's connection was accepted on (nil
// when the handler is called without a listener, as in unit tests).
func localAddr(r *http.Request) *net.TCPAddr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return a
}

// allowedHost reports whether hostport (a Host header, or an Origin's
// host) names this server: a loopback name or IP, the IP the client
// connected to, or an allowed name (with any port unless it was given
// with one). A loopback name or an IP literal cannot be rebound to this
// machine by someone else's DNS, so its port is not checked: a tunnel
// (`ssh -L 8080:localhost:4096`) or a TCP proxy on another local port
// passes the client's Host on, and must still be served.
// forOrigin: '*' does not make every web page's origin ours.
func (s *Server) allowedHost(hostport string, local *net.TCPAddr, forOrigin bool) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return false
	}
	for _, a := range s.cfg.AllowedHosts {
		if a == AnyHost {
			if !forOrigin {
				return true
			}
			continue
		}
		ah, ap, err := net.SplitHostPort(a)
		if err != nil {
			ah, ap = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), ""
		}
		if strings.EqualFold(strings.TrimSuffix(ah, "."), host) && (ap == "" || ap == port) {
			return true
		}
	}
	if isLoopbackHost(host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && local != nil && ip.Equal(local.IP)
}
