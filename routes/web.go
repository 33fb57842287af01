package routes

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// The web app: what answers a GET that no API route claims. `opencode
// serve` 1.18.33 serves its embedded copy of OpenCode's web app there, or,
// without one (OPENCODE_DISABLE_EMBEDDED_WEB_UI), proxies the request to
// https://app.opencode.ai; both put their Content-Security-Policy on it.
// Ours proxies (NewWebProxy) or serves a built copy from disk
// (NewWebDir); routes.Config.Web nil is neither (a JSON 404, as before).

// DefaultWebAppURL is where `opencode serve` proxies its web app from.
const DefaultWebAppURL = "https://app.opencode.ai"

// webCSP is OpenCode's Content-Security-Policy for the web app; hash, when
// set, is the base64 SHA-256 of the inline theme preload script of the
// page, the one inline script the policy allows.
func webCSP(hash string) string {
	script := "script-src 'self' 'wasm-unsafe-eval'"
	if hash != "" {
		script += " 'sha256-" + hash + "'"
	}
	return "default-src 'self'; " + script + "; style-src 'self' 'unsafe-inline'; img-src 'self' data: https: blob:; " +
		"font-src 'self' data:; media-src 'self' data:; connect-src * data: blob:"
}

var (
	scriptTagRE   = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	scriptSrcRE   = regexp.MustCompile(`(?i)\bsrc\s*=`)
	themeIDRE     = regexp.MustCompile(`(?i)\bid=(?:"oc-theme-preload-script"|'oc-theme-preload-script')`)
	scriptCloseRE = regexp.MustCompile(`(?i)</script>`)
)

// htmlCSP is the policy for page: the hash of its first inline (no src)
// <script id="oc-theme-preload-script">, as OpenCode finds it (the same
// pattern, without the lookahead RE2 lacks).
func htmlCSP(page []byte) string {
	for _, loc := range scriptTagRE.FindAllIndex(page, -1) {
		tag := page[loc[0]:loc[1]]
		if scriptSrcRE.Match(tag) || !themeIDRE.Match(tag) {
			continue
		}
		end := scriptCloseRE.FindIndex(page[loc[1]:])
		if end == nil {
			break // no later script closes either
		}
		sum := sha256.Sum256(page[loc[1] : loc[1]+end[0]])
		return webCSP(base64.StdEncoding.EncodeToString(sum[:]))
	}
	return webCSP("")
}

func isHTML(contentType string) bool { return strings.Contains(contentType, "text/html") }

// maxWebPage bounds an HTML page read whole to hash its inline script.
const maxWebPage = 16 << 20

// webPublic are the paths a browser fetches without credentials (the
// manifest and its icons): OpenCode answers them without basic auth.
var webPublic = map[string]bool{"/site.webmanifest": true, "/web-app-manifest-192x192.png": true, "/web-app-manifest-512x512.png": true}

// apiSegments are the first path segments of OpenCode 1.18.33's API (its
// OpenAPI document's paths, and /doc): an unknown path under one of them
// is an API call that gets the JSON 404, never the web app.
var apiSegments = []string{"agent", "api", "auth", "command", "config", "doc", "event", "experimental", "file", "find",
	"formatter", "global", "instance", "log", "lsp", "mcp", "path", "permission", "project", "provider", "pty",
	"question", "session", "skill", "sync", "tui", "vcs"}

// webScope decides which unclaimed requests the web app answers: GET (and
// HEAD, which the router hands on as GET) on a path whose first segment is
// not an API one (OpenCode's, and every mounted route's).
type webScope map[string]bool

func newWebScope(r chi.Routes) webScope {
	s := webScope{}
	for _, seg := range apiSegments {
		s[seg] = true
	}
	_ = chi.Walk(r, func(_, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if seg := firstSegment(route); seg != "" && !strings.ContainsAny(seg, "{*") {
			s[seg] = true
		}
		return nil
	})
	return s
}

func firstSegment(p string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return seg
}

func (s webScope) serves(r *http.Request) bool {
	return r.Method == http.MethodGet && !s[firstSegment(r.URL.Path)]
}

// serveWeb answers r with the web app when it has one and r is the web
// app's (see webScope); false: r is the caller's to answer.
func (s *Server) serveWeb(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Web == nil || !s.webScope.serves(r) {
		return false
	}
	s.cfg.Web.ServeHTTP(w, r)
	return true
}

// wasHead reports whether w is the router's writer of a HEAD answer (the
// request itself was turned into a GET), through the middlewares'
// wrappers.
func wasHead(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case headWriter:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// NewWebProxy returns the handler that proxies the web app from target
// (an http or https URL; its path, if any, is prefixed), as `opencode
// serve` proxies app.opencode.ai: the request's method (GET or HEAD),
// path and headers go upstream with Host set to target's, less the
// hop-by-hop ones, Accept-Encoding (the transport asks for gzip and
// decodes it), the x-opencode-directory and x-opencode-workspace headers
// and a websocket upgrade (the web app is plain HTTP). The answer comes
// back with its status and headers, the CSP set: on an HTML page the hash
// of its theme script, on anything else the policy without one. Unlike
// OpenCode's proxy: the query goes along (OpenCode drops it),
// Authorization (this server's password) does not, the upstream's CORS
// headers are dropped (this server sets its own), and an unreachable
// upstream is a 502 that says so (OpenCode: an empty 500).
//
// Only target's origin is ever asked: a redirect goes back to the browser,
// not followed (OpenCode's fetch follows it, so a redirect to another
// local service was fetched and its body served here), a Location on
// target under its path made relative so the browser stays on this
// server. Cookies cross in neither direction: cookies are per host, not
// per port, so the browser's cookies for this server are every local
// app's, and the upstream's would be set on all of them.
func NewWebProxy(target string, log *slog.Logger) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("web app URL %q: %w", target, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("web app URL %q: want http(s)://host[:port][/path]", target)
	}
	if log == nil {
		log = slog.Default()
	}
	u.RawQuery, u.Fragment = "", ""
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			h := pr.Out.Header
			for _, k := range []string{"Accept-Encoding", "Authorization", "Connection", "Cookie", "Upgrade", "Te", "X-Opencode-Directory", "X-Opencode-Workspace"} {
				h.Del(k)
			}
		},
		Transport: tr, // a transport, not a client: no redirect is followed
		ModifyResponse: func(res *http.Response) error {
			for k := range res.Header {
				if k := strings.ToLower(k); strings.HasPrefix(k, "access-control-") || k == "set-cookie" || k == "set-cookie2" {
					delete(res.Header, http.CanonicalHeaderKey(k))
				}
			}
			dropVaryOrigin(res.Header)
			if loc := res.Header.Get("Location"); loc != "" {
				res.Header.Set("Location", localLocation(u, res.Request.URL, loc))
			}
			if !isHTML(res.Header.Get("Content-Type")) {
				res.Header.Set("Content-Security-Policy", webCSP(""))
				return nil
			}
			page, err := io.ReadAll(io.LimitReader(res.Body, maxWebPage+1))
			res.Body.Close()
			if err != nil {
				return err
			}
			if len(page) > maxWebPage {
				return fmt.Errorf("page larger than %d bytes", maxWebPage)
			}
			res.Header.Set("Content-Security-Policy", htmlCSP(page))
			res.Body = io.NopCloser(bytes.NewReader(page))
			res.ContentLength = int64(len(page))
			res.Header.Set("Content-Length", strconv.Itoa(len(page)))
			res.Header.Del("Transfer-Encoding")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the browser went away
			}
			log.Warn("web app unreachable", "url", u.String(), "path", r.URL.Path, "err", err)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = fmt.Fprintf(w, "The web app could not be loaded from %s: %v\n"+
				"(serve a built copy with --web-dir DIR, or turn it off with --no-web)\n", u.Redacted(), err)
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return &webProxy{rp: rp, tr: tr}, nil
}

type webProxy struct {
	rp *httputil.ReverseProxy
	tr *http.Transport
}

func (p *webProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wasHead(w) {
		r = r.Clone(r.Context())
		r.Method = http.MethodHead // asked upstream as the client asked it
	}
	p.rp.ServeHTTP(w, r)
}

// CloseIdleConnections closes the kept-alive connections to the upstream.
func (p *webProxy) CloseIdleConnections() { p.tr.CloseIdleConnections() }

// dropVaryOrigin takes Origin out of h's Vary: every answer of this
// server already varies by it (the CORS middleware says so).
func dropVaryOrigin(h http.Header) {
	var keep []string
	for _, v := range h.Values("Vary") {
		var rest []string
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" && !strings.EqualFold(f, "Origin") {
				rest = append(rest, f)
			}
		}
		if len(rest) > 0 {
			keep = append(keep, strings.Join(rest, ", "))
		}
	}
	h.Del("Vary")
	for _, v := range keep {
		h.Add("Vary", v)
	}
}

// localLocation is an upstream redirect's Location (loc, of the request
// to reqURL) as the browser gets it: on target's origin under its path,
// that path on this server (relative, so the browser stays here); any
// other place as it is, for the browser to go to or not (this server
// never goes there).
func localLocation(target, reqURL *url.URL, loc string) string {
	l, err := reqURL.Parse(loc)
	if err != nil || !strings.EqualFold(l.Scheme, target.Scheme) || !strings.EqualFold(l.Host, target.Host) || l.User != nil {
		return loc
	}
	prefix := strings.TrimSuffix(target.EscapedPath(), "/")
	rest, ok := strings.CutPrefix(l.EscapedPath(), prefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return loc
	}
	if strings.HasPrefix(rest, "//") {
		return loc // relative, "//x" would be another host to the browser
	}
	if rest == "" {
		rest = "/"
	}
	if l.RawQuery != "" {
		rest += "?" + l.RawQuery
	}
	if l.Fragment != "" {
		rest += "#" + l.EscapedFragment()
	}
	return rest
}

// NewWebDir returns the handler that serves a built copy of the web app
// from dir, as `opencode serve` serves its embedded copy: a file by its
// path, anything else (a directory, a path with no file) index.html, the
// single-page app's client routes; HTML with the CSP (its theme script's
// hash), other files without one. No file outside dir is read (symlinks
// included).
func NewWebDir(dir string) (http.Handler, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("--web-dir: %w", err)
	}
	if _, err := root.Stat("index.html"); err != nil {
		root.Close()
		return nil, fmt.Errorf("--web-dir %s: no index.html: %w", dir, err)
	}
	return webDir{root}, nil
}

type webDir struct{ root *os.Root }

func (d webDir) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	f, fi, err := d.open(name)
	if err != nil {
		name = "index.html"
		f, fi, err = d.open(name)
	}
	if err != nil {
		// index.html went away after the start: OpenCode's answer then.
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Not Found"})
		return
	}
	defer f.Close()
	ct := webType(name)
	w.Header().Set("Content-Type", ct)
	if !isHTML(ct) {
		http.ServeContent(w, r, name, fi.ModTime(), f)
		return
	}
	page, err := io.ReadAll(io.LimitReader(f, maxWebPage+1))
	if err != nil || len(page) > maxWebPage {
		http.Error(w, "unreadable page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Security-Policy", htmlCSP(page))
	http.ServeContent(w, r, name, fi.ModTime(), bytes.NewReader(page))
}

// open opens a regular file of the root ("" and directories are not).
func (d webDir) open(name string) (*os.File, fs.FileInfo, error) {
	if name == "" {
		return nil, nil, fs.ErrNotExist
	}
	f, err := d.root.Open(name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errors.Join(fs.ErrNotExist, err)
	}
	return f, fi, nil
}

// webTypes are the web app's file types, as OpenCode names them (the
// system's MIME table may lack some, such as .webmanifest).
var webTypes = map[string]string{
	".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css",
	".json": "application/json", ".webmanifest": "application/manifest+json", ".svg": "image/svg+xml",
	".png": "image/png", ".ico": "image/x-icon", ".woff2": "font/woff2", ".woff": "font/woff", ".ttf": "font/ttf",
	".wasm": "application/wasm", ".txt": "text/plain", ".map": "application/json", ".webp": "image/webp",
	".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".mp3": "audio/mpeg", ".wav": "audio/wav",
	".aac": "audio/aac",
}

func webType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := webTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}
