package routes

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// AnyHost in Config.AllowedHosts (--allowed-host '*') turns the Host check
// off: for an operator whose own proxy or password guards every name.
const AnyHost = "*"

// checkHost answers only requests addressed to this server by a name of
// its own: a loopback name or address with the port it listens on, the
// address the client connected to, or a name the operator allowed
// (--allowed-host). A web page whose name an attacker re-points at
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
		fam := v1
		if isV2(r) {
			fam = v2
		}
		writeError(w, r, fam, s.log, &opencode.Error{Code: opencode.EForbidden,
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
// host) names this server. A loopback name or IP, or the IP the client
// connected to, must carry the listening port (a loopback name on another
// port is another local program's origin); an allowed name matches with
// any port unless it was given with one. An IP literal cannot be rebound,
// and the connection's own IP is this machine's: both are safe to answer.
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
	own := isLoopbackHost(host)
	if !own && local != nil {
		ip := net.ParseIP(host)
		own = ip != nil && ip.Equal(local.IP)
	}
	if !own {
		return false
	}
	if local == nil {
		return true // no listener to compare the port with (handler tests)
	}
	if port == "" {
		port = "80" // http's default: a browser leaves it out
	}
	return port == strconv.Itoa(local.Port)
}
