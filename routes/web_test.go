package routes_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/internal/app"
	"github.com/opencode-server/opencode-server/routes"
	"github.com/opencode-server/opencode-server/store/memory"
)

// The CSPs `opencode serve` 1.18.33 answered (recorded with
// OPENCODE_DISABLE_EMBEDDED_WEB_UI=1 through a recording stand-in for
// app.opencode.ai that served webPage): on that page, and on anything else.
const (
	webPage    = `<!doctype html><html><head><script id="oc-theme-preload-script">console.log(1)</script></head><body>hi</body></html>`
	webPageCSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval' 'sha256-CihokcEcBW4atb/CW/XWsvWwbTjqwQlE9nj9ii5ww5M='; style-src 'self' 'unsafe-inline'; img-src 'self' data: https: blob:; font-src 'self' data:; media-src 'self' data:; connect-src * data: blob:"
	webCSP     = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data: https: blob:; font-src 'self' data:; media-src 'self' data:; connect-src * data: blob:"
)

// upstream is a stand-in for app.opencode.ai that records what it is asked.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.reqs = append(u.reqs, r.Clone(context.Background()))
		u.mu.Unlock()
		h := w.Header()
		h.Set("X-Custom", "yes")
		h.Set("Cache-Control", "max-age=60")
		h.Set("Set-Cookie", "a=b; Path=/")
		h.Set("Content-Security-Policy", "upstream-csp")
		h.Set("Access-Control-Allow-Origin", "https://elsewhere.example")
		h.Set("Vary", "Origin, Accept")
		switch {
		case strings.HasPrefix(r.URL.Path, "/assets/"):
			h.Set("Content-Type", "text/javascript")
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				h.Set("Content-Encoding", "gzip")
				gz := gzip.NewWriter(w)
				_, _ = io.WriteString(gz, "console.log('asset')")
				_ = gz.Close()
				return
			}
			_, _ = io.WriteString(w, "console.log('asset')")
		case r.URL.Path == "/missing":
			h.Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "nope")
		default:
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, webPage)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

// take returns the requests the upstream got since the last take.
func (u *upstream) take() []*http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.reqs
	u.reqs = nil
	return r
}

// webServer is our server (app wiring, as the binary has it) with o's web
// app settings, on an in-memory store.
func webServer(t *testing.T, o app.Options) (*httptest.Server, *http.Client) {
	t.Helper()
	st := memory.New()
	o.Store, o.Directory = st, t.TempDir()
	o.DataDir = t.TempDir()
	o.Models = &catalog.Source{NoFetch: true}
	o.Auth = &catalog.AuthStore{Path: filepath.Join(t.TempDir(), "auth.json")}
	o.Getenv = func(string) string { return "" }
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
		a.Close()
		_ = st.Close()
	})
	return srv, &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type webResp struct {
	status int
	header http.Header
	body   string
}

func webDo(t *testing.T, c *http.Client, method, url string, hdr map[string]string) webResp {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return webResp{resp.StatusCode, resp.Header, string(b)}
}

// TestWebProxy: a path no API route claims is proxied to the web app's
// URL as `opencode serve` proxies app.opencode.ai (recorded): method,
// path and headers go upstream, Host the upstream's, without the
// hop-by-hop ones, the client's Accept-Encoding, x-opencode-directory and
// the websocket upgrade; the answer comes back with its status and
// headers and OpenCode's CSP (the theme script's hash on HTML). Ours also
// passes the query, and never the password, cookies (either way) or the
// upstream's CORS headers.
func TestWebProxy(t *testing.T) {
	up := newUpstream(t)
	srv, c := webServer(t, app.Options{WebURL: up.URL, Password: "pw"})
	basic := "Basic " + "b3BlbmNvZGU6cHc=" // opencode:pw

	r := webDo(t, c, "GET", srv.URL+"/some/client/route?x=1&y=%20", map[string]string{
		"Authorization": basic, "Accept-Encoding": "br", "Cookie": "c=1", "User-Agent": "browser/1",
		"Accept-Language": "fr", "x-opencode-directory": "/tmp", "x-opencode-workspace": "w",
		"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
		"Sec-WebSocket-Version": "13", "Origin": "http://localhost:3000",
	})
	if r.status != 200 || r.body != webPage {
		t.Fatalf("GET a client route: %d %q", r.status, r.body)
	}
	if got := r.header.Get("Content-Security-Policy"); got != webPageCSP {
		t.Errorf("CSP on the page:\n got %s\nwant %s", got, webPageCSP)
	}
	for k, want := range map[string]string{"X-Custom": "yes", "Cache-Control": "max-age=60",
		"Content-Type": "text/html; charset=utf-8", "Access-Control-Allow-Origin": "http://localhost:3000"} {
		if got := r.header.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("answer header %s = %q, want %q", k, got, want)
		}
	}
	if got := strings.Join(r.header.Values("Vary"), "|"); got != "Origin|Accept" {
		t.Errorf("Vary %q, want Origin once, then the upstream's Accept", got)
	}
	reqs := up.take()
	if len(reqs) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(reqs))
	}
	in := reqs[0]
	if in.Method != "GET" || in.URL.Path != "/some/client/route" || in.URL.RawQuery != "x=1&y=%20" {
		t.Errorf("upstream got %s %s", in.Method, in.URL)
	}
	if want := strings.TrimPrefix(up.URL, "http://"); in.Host != want {
		t.Errorf("upstream Host %q, want %q", in.Host, want)
	}
	if got := r.header.Values("Set-Cookie"); len(got) != 0 {
		t.Errorf("the upstream's Set-Cookie came through: %q", got)
	}
	for k, want := range map[string]string{"User-Agent": "browser/1", "Accept-Language": "fr",
		"Origin": "http://localhost:3000", "Accept-Encoding": "gzip"} {
		if got := in.Header.Get(k); got != want {
			t.Errorf("upstream header %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"Authorization", "Cookie", "X-Opencode-Directory", "X-Opencode-Workspace", "Upgrade", "Connection", "X-Forwarded-For"} {
		if got := in.Header.Get(k); got != "" {
			t.Errorf("upstream got %s: %q", k, got)
		}
	}

	// An asset: streamed as it is, gzip decoded, with the CSP without a
	// hash; the upstream's CORS header is not passed on.
	r = webDo(t, c, "GET", srv.URL+"/assets/app-x1.js?v=3", map[string]string{"Authorization": basic})
	if r.status != 200 || r.body != "console.log('asset')" || r.header.Get("Content-Encoding") != "" {
		t.Errorf("asset: %d %q %v", r.status, r.body, r.header)
	}
	if got := r.header.Get("Content-Security-Policy"); got != webCSP {
		t.Errorf("CSP on an asset: %s", got)
	}
	if got := r.header.Values("Access-Control-Allow-Origin"); len(got) != 0 {
		t.Errorf("the upstream's CORS header came through: %q", got)
	}
	if reqs := up.take(); len(reqs) != 1 || reqs[0].URL.RequestURI() != "/assets/app-x1.js?v=3" {
		t.Errorf("upstream requests for the asset: %v", reqs)
	}

	// The upstream's status is the answer's (redirects: TestWebProxyRedirects).
	if r := webDo(t, c, "GET", srv.URL+"/missing", map[string]string{"Authorization": basic}); r.status != 404 || r.body != "nope" ||
		r.header.Get("Content-Security-Policy") != webCSP {
		t.Errorf("upstream 404: %d %q %v", r.status, r.body, r.header)
	}
	if reqs := up.take(); len(reqs) != 1 {
		t.Errorf("upstream requests: %v", reqs)
	}

	// HEAD goes upstream as HEAD; OpenCode then answers the policy
	// without a hash (there is no page to hash).
	r = webDo(t, c, "HEAD", srv.URL+"/", map[string]string{"Authorization": basic})
	if r.status != 200 || r.body != "" || r.header.Get("Content-Security-Policy") != webCSP {
		t.Errorf("HEAD /: %d %q %v", r.status, r.body, r.header)
	}
	if reqs := up.take(); len(reqs) != 1 || reqs[0].Method != "HEAD" {
		t.Errorf("upstream requests for HEAD: %v", reqs)
	}

	// Without credentials: a 401, but for the manifest and its icons
	// (browsers fetch them without credentials; so does OpenCode answer).
	if r := webDo(t, c, "GET", srv.URL+"/", nil); r.status != 401 {
		t.Errorf("GET / without credentials: %d", r.status)
	}
	if len(up.take()) != 0 {
		t.Error("an unauthenticated request reached the upstream")
	}
	for _, p := range []string{"/site.webmanifest", "/web-app-manifest-192x192.png", "/web-app-manifest-512x512.png"} {
		if r := webDo(t, c, "GET", srv.URL+p, nil); r.status != 200 {
			t.Errorf("GET %s without credentials: %d", p, r.status)
		}
	}
	up.take()
}

// TestWebProxyRedirects: only the web app's own origin is asked. An
// upstream redirect reaches the browser unfollowed (OpenCode's fetch
// followed it: a redirect to another local service had that service's
// answer served here); one to the web app's URL is made relative, so the
// browser stays on this server, anything else passes as it is and this
// server never goes there. No cookie crosses either way on a redirect.
func TestWebProxyRedirects(t *testing.T) {
	var elsewhere atomic.Int32 // requests the other local service got
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = io.WriteString(w, "another local app's secret")
	}))
	t.Cleanup(other.Close)
	var (
		mu      sync.Mutex
		cookies []string // the Cookie headers the web app got
	)
	var up *httptest.Server
	up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cookies = append(cookies, r.Header.Values("Cookie")...)
		mu.Unlock()
		to := map[string]string{
			"/app/rel":     "/app/elsewhere?q=1#top",
			"/app/dot":     "../app/",
			"/app/abs":     up.URL + "/app/x/y",
			"/app/outside": up.URL + "/other",
			"/app/twice":   up.URL + "//evil.example/",
			"/app/away":    other.URL + "/steal",
		}[r.URL.Path]
		http.SetCookie(w, &http.Cookie{Name: "up", Value: "1", Path: "/"})
		http.Redirect(w, r, to, http.StatusFound)
	}))
	t.Cleanup(up.Close)
	srv, c := webServer(t, app.Options{WebURL: up.URL + "/app"})
	for _, tc := range []struct{ path, location string }{
		{"/rel", "/elsewhere?q=1#top"},
		{"/dot", "/"},
		{"/abs", "/x/y"},
		{"/outside", up.URL + "/other"},
		{"/twice", up.URL + "//evil.example/"},
		{"/away", other.URL + "/steal"},
	} {
		r := webDo(t, c, "GET", srv.URL+tc.path, map[string]string{"Cookie": "local=secret"})
		if r.status != http.StatusFound || r.header.Get("Location") != tc.location || strings.Contains(r.body, "secret") {
			t.Errorf("GET %s: %d Location %q %q, want 302 to %q", tc.path, r.status, r.header.Get("Location"), r.body, tc.location)
		}
		if got := r.header.Values("Set-Cookie"); len(got) != 0 {
			t.Errorf("GET %s: the upstream's Set-Cookie came through: %q", tc.path, got)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests from the proxy, want none", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cookies) != 0 {
		t.Errorf("the browser's cookies went upstream: %q", cookies)
	}
}

// TestWebNotShadowing: the web app never answers what the API answers,
// nor an unknown path under an API prefix, nor any method but GET/HEAD:
// those keep their JSON answers (and reach no upstream). `opencode serve`
// 1.18.33 sends every unclaimed request, any method and path, to its web
// app (README: the rows of the table).
func TestWebNotShadowing(t *testing.T) {
	up := newUpstream(t)
	srv, c := webServer(t, app.Options{WebURL: up.URL})
	api := []struct {
		method, path string
		status       int
		body         string // a substring
	}{
		{"GET", "/global/health", 200, `"healthy":true`},
		{"GET", "/session", 200, `[]`},
		{"GET", "/doc", 200, `openapi:`},
		{"GET", "/path", 200, `"directory"`},
		{"GET", "/api/session", 200, `"data"`},
		{"GET", "/session/x/nope", 404, `{"data":{"message":"No route for GET /session/x/nope"},"name":"NotFoundError"}`},
		{"GET", "/api/nope", 404, `{"_tag":"NotFoundError","message":"No route for GET /api/nope"}`},
		{"GET", "/experimental/nope", 404, `"NotFoundError"`},
		{"POST", "/nope", 404, `{"data":{"message":"No route for POST /nope"},"name":"NotFoundError"}`},
		{"DELETE", "/", 404, `"NotFoundError"`},
		{"PUT", "/session", 405, `"MethodNotAllowedError"`},
		{"GET", "/session/nope", 400, `"BadRequest"`},
	}
	for _, tc := range api {
		r := webDo(t, c, tc.method, srv.URL+tc.path, nil)
		if r.status != tc.status || !strings.Contains(r.body, tc.body) || r.header.Get("Content-Security-Policy") != "" {
			t.Errorf("%s %s: %d %s, want %d with %s", tc.method, tc.path, r.status, r.body, tc.status, tc.body)
		}
	}
	if reqs := up.take(); len(reqs) != 0 {
		t.Errorf("API requests reached the web app: %v", reqs)
	}
	for _, p := range []string{"/", "/nope", "/L3RtcA/session/ses_1", "/favicon-v3.svg", "/sessions"} {
		if r := webDo(t, c, "GET", srv.URL+p, nil); r.status != 200 || r.body != webPage {
			t.Errorf("GET %s: %d %q, want the web app", p, r.status, r.body)
		}
	}
	if n := len(up.take()); n != 5 {
		t.Errorf("upstream got %d requests, want 5", n)
	}
}

// TestWebProxyUnreachable: a web app that cannot be reached is a 502 that
// says what to do, and the API still answers.
func TestWebProxyUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	srv, c := webServer(t, app.Options{WebURL: "http://" + addr})
	r := webDo(t, c, "GET", srv.URL+"/", nil)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "--web-dir") {
		t.Errorf("unreachable web app: %d %q", r.status, r.body)
	}
	if r := webDo(t, c, "GET", srv.URL+"/global/health", nil); r.status != 200 {
		t.Errorf("health with the web app unreachable: %d", r.status)
	}
	for _, bad := range []string{"ftp://x", "app.opencode.ai", "http://"} {
		if _, err := routes.NewWebProxy(bad, nil); err == nil {
			t.Errorf("NewWebProxy(%q) accepted", bad)
		}
	}
}

// TestWebDir: --web-dir serves a built copy from disk as `opencode serve`
// serves its embedded one: a file by its path, index.html for anything
// else (client routes, missing files, directories); HTML with the CSP,
// other files without; nothing outside the directory.
func TestWebDir(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	for name, body := range map[string]string{"index.html": webPage, "assets/app-x1.js": "console.log('asset')",
		"site.webmanifest": `{"name":"OpenCode"}`, "favicon-v3.svg": "<svg/>"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	srv, c := webServer(t, app.Options{WebDir: dir, WebURL: "http://127.0.0.1:1"})
	for _, tc := range []struct {
		path, ct, body, csp string
	}{
		{"/", "text/html", webPage, webPageCSP},
		{"/index.html", "text/html", webPage, webPageCSP},
		{"/L3RtcA/session/ses_1", "text/html", webPage, webPageCSP},
		{"/assets/", "text/html", webPage, webPageCSP},
		{"/assets/missing.js", "text/html", webPage, webPageCSP},
		{"/assets/app-x1.js", "text/javascript", "console.log('asset')", ""},
		{"/site.webmanifest", "application/manifest+json", `{"name":"OpenCode"}`, ""},
		{"/favicon-v3.svg?v=2", "image/svg+xml", "<svg/>", ""},
		{"/leak.txt", "text/html", webPage, webPageCSP},
		{"/assets/../../" + filepath.Base(filepath.Dir(outside)) + "/secret.txt", "text/html", webPage, webPageCSP},
	} {
		r := webDo(t, c, "GET", srv.URL+tc.path, nil)
		if r.status != 200 || r.body != tc.body || r.header.Get("Content-Type") != tc.ct || r.header.Get("Content-Security-Policy") != tc.csp {
			t.Errorf("GET %s: %d %q %v, want %s %q csp %q", tc.path, r.status, r.body, r.header, tc.ct, tc.body, tc.csp)
		}
	}
	if r := webDo(t, c, "HEAD", srv.URL+"/", nil); r.status != 200 || r.body != "" || r.header.Get("Content-Security-Policy") != webPageCSP {
		t.Errorf("HEAD /: %d %q %v", r.status, r.body, r.header)
	}
	if r := webDo(t, c, "GET", srv.URL+"/session/x/nope", nil); r.status != 404 || !strings.Contains(r.body, "No route") {
		t.Errorf("an API path with --web-dir: %d %q", r.status, r.body)
	}
	if _, err := routes.NewWebDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "index.html") {
		t.Errorf("a directory without index.html: %v", err)
	}
	if _, err := routes.NewWebDir(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("a directory that does not exist was accepted")
	}
}

// TestNoWeb: without a web app (--no-web) an unclaimed GET is the JSON
// 404 of any unknown route.
func TestNoWeb(t *testing.T) {
	srv, c := webServer(t, app.Options{})
	r := webDo(t, c, "GET", srv.URL+"/", nil)
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	}
	if r.status != 404 || json.Unmarshal([]byte(r.body), &e) != nil || e.Name != "NotFoundError" || e.Data.Message != "No route for GET /" {
		t.Errorf("GET / without a web app: %d %q", r.status, r.body)
	}
}
