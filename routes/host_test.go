//go:build !windows

package routes_test

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// hostTransport sends every request with Host set to host, as a browser
// does for a page whose name resolves to this server (DNS rebinding).
type hostTransport struct {
	host string
	rt   http.RoundTripper
}

func (h hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.rt.RoundTrip(r)
}

// hostGet sends GET path addressed to host, with the given headers.
func (e *env) hostGet(host, path string, hdr map[string]string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.ts.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s (Host %s): %v", path, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostDial opens the terminal's websocket addressed to host from origin
// ("" sends none) and returns the handshake's status.
func (e *env) hostDial(host, origin, id string, hdr map[string]string) int {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	for k, v := range hdr {
		h.Set(k, v)
	}
	c := &http.Client{Transport: hostTransport{host: host, rt: e.c.Transport}}
	conn, resp, err := websocket.Dial(ctx, strings.Replace(e.ts.URL, "http", "ws", 1)+"/pty/"+id+"/connect",
		&websocket.DialOptions{HTTPClient: c, HTTPHeader: h})
	if err == nil {
		_ = conn.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		e.t.Fatalf("dial (Host %s, Origin %s): %v", host, origin, err)
	}
	return resp.StatusCode
}

// TestHostCheck: a page whose name an attacker re-points at 127.0.0.1 is
// same-origin to the browser, so its requests carry no Origin (or its own
// name as Origin and Host); the server must refuse them by their Host,
// before any handler: file reads, the session list, the terminals and
// their websockets. Loopback names and addresses (on any port: tunnels),
// and the names of --allowed-host, are served.
func TestHostCheck(t *testing.T) {
	for _, password := range []string{"", "s3cret"} {
		t.Run("password="+password, func(t *testing.T) {
			e := start(t, testserver.Options{Password: password, AllowedHosts: []string{"oc.example.com", "proxy.example:8443"}})
			auth := map[string]string{}
			if password != "" {
				auth["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte("opencode:"+password))
			}
			const secret = "sk-the-users-key"
			if err := os.WriteFile(filepath.Join(e.dir, "auth.json"), []byte(secret), 0o600); err != nil {
				t.Fatal(err)
			}
			id := e.hostPTY(auth) // a terminal to try to drive
			port := e.ts.URL[strings.LastIndex(e.ts.URL, ":")+1:]
			paths := []string{"/file/content?path=auth.json", "/session", "/pty", "/api/session", "/global/health", "/"}

			for _, host := range []string{
				"evil.example:" + port, "evil.example", "EVIL.example:" + port,
				"127.0.0.1.evil.example:" + port, "localhost.evil.example:" + port,
				"oc.example.com.evil.example", "proxy.example:9999", "proxy.example",
				"10.1.2.3:" + port, // an address this connection was not made to
			} {
				for _, path := range paths {
					code, body := e.hostGet(host, path, auth)
					if code != http.StatusForbidden || strings.Contains(body, secret) || !strings.Contains(body, "is not allowed") {
						t.Errorf("GET %s with Host %s: %d %.200s, want 403", path, host, code, body)
					}
				}
				origin := "http://" + host
				if code := e.hostDial(host, origin, id, auth); code != http.StatusForbidden {
					t.Errorf("websocket with Host and Origin %s: %d, want 403", host, code)
				}
				if code := e.hostDial(host, "", id, auth); code != http.StatusForbidden {
					t.Errorf("websocket with Host %s, no Origin: %d, want 403", host, code)
				}
			}

			for _, host := range []string{
				"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "localhost.:" + port,
				"127.0.0.2:" + port, "[::1]:" + port, "app.localhost:" + port,
				"oc.example.com", "oc.example.com:1234", "OC.example.com", "proxy.example:8443",
				// A tunnel or TCP proxy on another local port passes its
				// own loopback Host on (ssh -L 8080:localhost:4096).
				"127.0.0.1:1", "localhost:8080", "[::1]:1", "127.0.0.1",
			} {
				for _, path := range paths[:5] {
					if code, body := e.hostGet(host, path, auth); code != http.StatusOK {
						t.Errorf("GET %s with Host %s: %d %.200s, want 200", path, host, code, body)
					}
				}
				if code, body := e.hostGet(host, "/", auth); code == http.StatusForbidden {
					t.Errorf("GET / with Host %s: %d %.200s", host, code, body)
				}
				if code := e.hostDial(host, "", id, auth); code != http.StatusSwitchingProtocols {
					t.Errorf("websocket with Host %s, no Origin: %d, want 101", host, code)
				}
			}

			// A websocket from a page needs an allowed Origin: loopback, an
			// --allowed-host name; never just "Origin equals Host".
			for _, c := range []struct {
				host, origin string
				want         int
			}{
				{"127.0.0.1:" + port, "http://127.0.0.1:" + port, 101},
				{"127.0.0.1:" + port, "http://localhost:3000", 101},
				{"oc.example.com", "https://oc.example.com", 101},
				{"proxy.example:8443", "https://proxy.example:8443", 101},
				{"127.0.0.1:" + port, "http://evil.example:" + port, 403},
				{"oc.example.com", "https://evil.example", 403},
				{"proxy.example:8443", "https://proxy.example", 403}, // https's port is 443
				{"127.0.0.1:" + port, "null", 403},
			} {
				if code := e.hostDial(c.host, c.origin, id, auth); code != c.want {
					t.Errorf("websocket Host %s Origin %s: %d, want %d", c.host, c.origin, code, c.want)
				}
			}
		})
	}
}

// TestHostCheckOff: --allowed-host '*' turns the Host check off (an
// operator's own proxy guards the names), but does not make every page's
// origin ours: a foreign Origin still gets no terminal and no write.
func TestHostCheckOff(t *testing.T) {
	e := start(t, testserver.Options{AllowedHosts: []string{"*"}})
	if code, body := e.hostGet("anything.example:1", "/session", nil); code != http.StatusOK {
		t.Errorf("GET /session with any Host: %d %s", code, body)
	}
	id := e.hostPTY(nil)
	if code := e.hostDial("anything.example:1", "http://anything.example:1", id, nil); code != http.StatusForbidden {
		t.Errorf("websocket from a foreign origin with the check off: %d, want 403", code)
	}
	req, _ := http.NewRequest("POST", e.ts.URL+"/session", strings.NewReader(`{}`))
	req.Host = "anything.example:1"
	req.Header.Set("Origin", "http://anything.example:1")
	req.Header.Set("Content-Type", "text/plain")
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST with the check off: %d, want 403", resp.StatusCode)
	}
}

// hostPTY starts a shell on a terminal (with the headers hdr) and
// returns its ID.
func (e *env) hostPTY(hdr map[string]string) string {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.ts.URL+"/pty", strings.NewReader(`{"command":"/bin/sh"}`))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := between(string(b), `"id":"`, `"`)
	if resp.StatusCode != 200 || id == "" {
		e.t.Fatalf("POST /pty: %d %s", resp.StatusCode, b)
	}
	return id
}

// between is the text of s after the first before and up to the next after.
func between(s, before, after string) string {
	_, rest, ok := strings.Cut(s, before)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, after)
	return v
}

// loopbackRequest is httptest.NewRequest addressed to 127.0.0.1 (its
// default Host, example.com, is not this server's), for handler tests
// without a listener.
func loopbackRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "127.0.0.1"
	return r
}
