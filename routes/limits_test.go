package routes_test

// Limits on loopback: idle and slow connections, the per-client SSE stream
// cap, a stalled SSE reader, basic auth and CORS. Bounded in count and time;
// no timing thresholds beyond generous overall timeouts.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/apitest"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// limServer serves ts's handler (checked against api/openapi.yaml) on a new
// loopback listener with main.go's http.Server settings, timeouts scaled
// by mod.
func limServer(t *testing.T, ts *testserver.Server, mod func(*http.Server)) string {
	t.Helper()
	return limServe(t, ts, limListen(t, 0), mod)
}

// limListen listens on loopback; a non-zero sndbuf fixes the send buffer
// of accepted connections (no autotuning), so that a client that stops
// reading blocks the server after little data.
func limListen(t *testing.T, sndbuf int) net.Listener {
	t.Helper()
	lc := net.ListenConfig{}
	if sndbuf > 0 {
		lc.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, sndbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func limServe(t *testing.T, ts *testserver.Server, ln net.Listener, mod func(*http.Server)) string {
	t.Helper()
	srv := &http.Server{Handler: apitest.Middleware(t, ts.App.Handler),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	if mod != nil {
		mod(srv)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ts.App.Shutdown() // ends SSE streams
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	})
	return "http://" + ln.Addr().String()
}

func limClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func limDo(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) biResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
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
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return biResp{status: resp.StatusCode, header: resp.Header, body: b}
}

// limRoundTrip creates a session and runs a blocking prompt on it.
func limRoundTrip(t *testing.T, c *http.Client, base string) {
	t.Helper()
	r := limDo(t, c, "POST", base+"/session", "{}", nil)
	var s struct{ ID string }
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
		t.Fatalf("POST /session: %d %s", r.status, r.body)
	}
	r = limDo(t, c, "POST", base+"/session/"+s.ID+"/message", textPrompt(""), nil)
	if r.status != 200 {
		t.Fatalf("POST /message: %d %s", r.status, r.body)
	}
}

// TestLimitsIdleConnections: hundreds of connections that send nothing or
// dribble their headers do not keep a normal client from being served.
func TestLimitsIdleConnections(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{})
	base := limServer(t, ts, nil)
	addr := strings.TrimPrefix(base, "http://")

	const idle, dribble = 400, 100
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial idle %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	hdr := "POST /session HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nX-Pad: " + strings.Repeat("p", 200) + "\r\n"
	for range dribble {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial dribble: %v", err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(20 * time.Millisecond)
			defer tk.Stop()
			for i := 0; i < len(hdr); i++ {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
				}
				if _, err := c.Write([]byte{hdr[i]}); err != nil {
					return
				}
			}
		}()
	}

	// A normal client is served while all of them hang on.
	c := limClient(t)
	for range 3 {
		if r := limDo(t, c, "GET", base+"/global/health", "", nil); r.status != 200 {
			t.Fatalf("health: %d %s", r.status, r.body)
		}
		limRoundTrip(t, c, base)
	}
}

// TestLimitsHeaderTimeout: a connection that never finishes its headers is
// closed after ReadHeaderTimeout (10 s as in main.go).
func TestLimitsHeaderTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 10 s header timeout")
	}
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{})
	base := limServer(t, ts, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /global/health HTTP/1.1\r\nHost: " + strings.TrimPrefix(base, "http://") + "\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection with unfinished headers still open after 30 s (read %q)", b)
	}
	// net/http may answer 408 before closing; either way the conn ends.
	if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
		t.Errorf("unexpected answer to unfinished headers: %q", b)
	}
}

// TestLimitsSlowBody: a request body sent byte by byte does not hold up
// other clients, and is served once complete; nothing is admitted from a
// body cut off by ReadTimeout.
func TestLimitsSlowBody(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{})
	base := limServer(t, ts, func(s *http.Server) { s.ReadTimeout = 5 * time.Second })
	addr := strings.TrimPrefix(base, "http://")
	c := limClient(t)
	newSes := func() string {
		r := limDo(t, c, "POST", base+"/session", "{}", nil)
		var s struct{ ID string }
		if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
			t.Fatalf("POST /session: %d %s", r.status, r.body)
		}
		return s.ID
	}

	send := func(ses string, body string, every time.Duration, stopAfter int) (string, error) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /session/%s/prompt_async HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ses, addr, len(body))
		for i := 0; i < len(body) && i < stopAfter; i++ {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				break
			}
			time.Sleep(every) // the scenario: a client that sends a byte at a time
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, b), nil
	}

	// Complete, slow (about 1 s), within ReadTimeout.
	slowSes := newSes()
	body := textPrompt("")
	res := make(chan string, 1)
	go func() {
		out, err := send(slowSes, body, time.Second/time.Duration(len(body)), len(body))
		if err != nil {
			out = "error: " + err.Error()
		}
		res <- out
	}()
	limRoundTrip(t, c, base) // others are served meanwhile
	limRoundTrip(t, c, base)
	if out := <-res; !strings.HasPrefix(out, "204") {
		t.Errorf("slow complete body: %s, want 204", out)
	}

	// Stalled half way: ReadTimeout cuts it; nothing admitted.
	cutSes := newSes()
	out, err := send(cutSes, body, 10*time.Millisecond, len(body)/2)
	if err == nil && !strings.HasPrefix(out, "400") && !strings.HasPrefix(out, "408") {
		t.Errorf("stalled body: %s, want 400/408 or a closed connection", out)
	}
	bc := &biClient{t: t, ts: &testserver.Server{URL: base}, c: c}
	if a := bc.admitted(cutSes); len(a) > 0 {
		t.Errorf("stalled body admitted: %v", a)
	}
}

// limStream opens a GET stream and returns its response (body unread).
func limStream(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// TestLimitsStreamCap: one address may hold MaxStreams (64) SSE streams;
// the next gets a 429 JSON error of its family, and closing one frees a slot.
func TestLimitsStreamCap(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{})
	base := limServer(t, ts, nil)
	c := limClient(t)
	ses := (&biClient{t: t, ts: &testserver.Server{URL: base}, c: c}).newSession()

	const maxStreams = 64
	type open struct {
		cancel context.CancelFunc
		resp   *http.Response
	}
	var streams []open
	defer func() {
		for _, s := range streams {
			s.cancel()
			_ = s.resp.Body.Close()
		}
	}()
	paths := []string{"/event", "/global/event", "/api/event", "/api/session/" + ses + "/event"}
	for i := range maxStreams {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := limStream(ctx, c, base+paths[i%len(paths)])
		if err != nil {
			cancel()
			t.Fatalf("stream %d: %v", i, err)
		}
		streams = append(streams, open{cancel, resp})
		if resp.StatusCode != 200 {
			t.Fatalf("stream %d (%s): %d", i, paths[i%len(paths)], resp.StatusCode)
		}
	}
	over := func(path string) biResp {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := limStream(ctx, c, base+path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return biResp{status: resp.StatusCode, header: resp.Header, body: b}
	}
	for _, p := range paths {
		r := over(p)
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("stream %d on %s: %d, want 429: %s", maxStreams+1, p, r.status, biClip(r.body))
		}
		for _, pr := range biErrorShape(p, r, "") {
			t.Errorf("%s 429: %s", p, pr)
		}
	}
	// Other routes are not capped.
	if r := limDo(t, c, "GET", base+"/global/health", "", nil); r.status != 200 {
		t.Errorf("health while capped: %d", r.status)
	}

	// Closing one stream frees its slot (once the server notices).
	streams[0].cancel()
	_ = streams[0].resp.Body.Close()
	streams = streams[1:]
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := limStream(ctx, c, base+"/event")
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode == 200 {
			streams = append(streams, open{cancel, resp})
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		cancel()
		if time.Now().After(deadline) {
			t.Fatalf("slot not freed after closing a stream: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := over("/event"); r.status != http.StatusTooManyRequests {
		t.Errorf("after reuse: %d, want 429", r.status)
	}
}

// TestLimitsStalledSSEClient: an /event client that stops reading is cut
// off; a reading client still gets every event and blocking prompts answer.
func TestLimitsStalledSSEClient(t *testing.T) {
	t.Parallel()
	// Small socket buffers on both ends of the stalled connection: the
	// server blocks on it after a few hundred frames, then its 4096-event
	// queue overflows. The short delay paces the model so that the reading
	// client keeps up even under -race.
	const chunks, prompts = 2500, 2
	reply := strings.Repeat("0123456789", chunks*20) // 200-byte deltas
	ts := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Reply: reply, Chunks: chunks, Delay: 200 * time.Microsecond}})
	base := limServe(t, ts, limListen(t, 32<<10), nil)
	addr := strings.TrimPrefix(base, "http://")
	c := limClient(t)
	ses := (&biClient{t: t, ts: &testserver.Server{URL: base}, c: c}).newSession()
	subs := ts.Bus.Len() // the bus's subscribers before the two streams

	// The stalled client: a raw connection with a tiny receive buffer that
	// never reads after the request.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	stalled, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte("GET /event HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}

	// The reading client counts the deltas of the session (no client
	// timeout: the stream is long).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := limStream(ctx, &http.Client{Transport: c.Transport}, base+"/event")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type result struct {
		deltas int
		err    error
	}
	counted := make(chan result, 1)
	want := chunks * prompts
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		n := 0
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"type":"message.part.delta"`) && strings.Contains(line, ses) {
				n++
				if n == want {
					counted <- result{n, nil}
					return
				}
			}
		}
		counted <- result{n, fmt.Errorf("stream ended: %v", sc.Err())}
	}()
	// Both streams take the events from the first prompt on: wait until
	// the bus has them both.
	checkFor(t, 10*time.Second, "both /event streams on the bus", func() bool { return ts.Bus.Len() >= subs+2 })

	for i := range prompts {
		r := limDo(t, c, "POST", base+"/session/"+ses+"/message", textPrompt(""), nil)
		if r.status != 200 {
			t.Fatalf("prompt %d: %d %s", i, r.status, biClip(r.body))
		}
	}
	select {
	case r := <-counted:
		if r.deltas != want {
			t.Fatalf("reading client got %d of %d deltas: %v", r.deltas, want, r.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("reading client did not get all %d deltas", want)
	}

	// The stalled client's response ends: read what it was sent; a client
	// that had not been cut off would get heartbeats forever instead.
	_ = stalled.SetReadDeadline(time.Now().Add(40 * time.Second))
	br := bufio.NewReaderSize(stalled, 1<<20)
	sresp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("stalled client: %v", err)
	}
	got := 0
	sc := bufio.NewScanner(sresp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"type":"message.part.delta"`) {
			got++
		}
	}
	var ne net.Error
	if errors.As(sc.Err(), &ne) && ne.Timeout() {
		t.Fatalf("stalled client still connected after 40 s (%d deltas read): not cut off", got)
	}
	if got >= want {
		t.Errorf("stalled client received all %d deltas: it was never behind (test did not stall it)", got)
	}
	t.Logf("stalled client got %d of %d deltas before the cut-off", got, want)
}

// TestLimitsBasicAuth: with a password, requests without or with wrong
// credentials get a 401 of their family with WWW-Authenticate.
func TestLimitsBasicAuth(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{Password: "s3cret"})
	c := limClient(t)
	basic := func(u, p string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p))}
	}
	bad := []struct {
		name string
		hdr  map[string]string
	}{
		{"none", nil},
		{"wrong password", basic("opencode", "nope")},
		{"wrong user", basic("admin", "s3cret")},
		{"empty", basic("", "")},
		{"password prefix", basic("opencode", "s3cre")},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}},
		{"garbage", map[string]string{"Authorization": "Basic !!!"}},
	}
	for _, path := range []string{"/session", "/api/session", "/global/health", "/event", "/no/such/route", "/api/nope"} {
		for _, b := range bad {
			r := limDo(t, c, "GET", ts.URL+path, "", b.hdr)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s %s: %d, want 401", path, b.name, r.status)
				continue
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s %s: WWW-Authenticate %q", path, b.name, r.header.Get("WWW-Authenticate"))
			}
			for _, p := range biErrorShape(path, r, "") {
				t.Errorf("%s %s: %s", path, b.name, p)
			}
		}
	}
	// A rejected write admits nothing.
	r := limDo(t, c, "POST", ts.URL+"/session", "{}", basic("opencode", "s3cret"))
	var s struct{ ID string }
	if r.status != 200 || json.Unmarshal(r.body, &s) != nil {
		t.Fatalf("create with credentials: %d %s", r.status, r.body)
	}
	if r := limDo(t, c, "POST", ts.URL+"/session/"+s.ID+"/prompt_async", textPrompt(""), nil); r.status != 401 {
		t.Errorf("prompt without credentials: %d", r.status)
	}
	for _, path := range []string{"/session/" + s.ID + "/message", "/api/session/" + s.ID + "/history"} {
		r := limDo(t, c, "GET", ts.URL+path, "", basic("opencode", "s3cret"))
		if r.status != 200 || strings.Contains(string(r.body), `"text"`) || strings.Contains(string(r.body), "seq") {
			t.Errorf("%s after a rejected prompt: %d %s", path, r.status, biClip(r.body))
		}
	}
	for _, path := range []string{"/session", "/api/session", "/global/health"} {
		if r := limDo(t, c, "GET", ts.URL+path, "", basic("opencode", "s3cret")); r.status != 200 {
			t.Errorf("%s with credentials: %d %s", path, r.status, biClip(r.body))
		}
	}
	// Preflights come without credentials and are answered before auth.
	r = limDo(t, c, "OPTIONS", ts.URL+"/session", "", map[string]string{"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"})
	if r.status != http.StatusNoContent {
		t.Errorf("preflight with a password set: %d, want 204", r.status)
	}
}

// TestLimitsCORS: loopback origins are echoed, others get no CORS headers,
// preflights answer 204 with the allowed methods.
func TestLimitsCORS(t *testing.T) {
	t.Parallel()
	ts := testserver.Start(t, testserver.Options{})
	c := limClient(t)
	for _, o := range []string{"http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8080", "https://localhost", "http://app.localhost:1"} {
		r := limDo(t, c, "GET", ts.URL+"/global/health", "", map[string]string{"Origin": o})
		if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != o {
			t.Errorf("origin %s: %d, Access-Control-Allow-Origin %q", o, r.status, r.header.Get("Access-Control-Allow-Origin"))
		}
		if r.header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Errorf("origin %s: Access-Control-Allow-Credentials %q", o, r.header.Get("Access-Control-Allow-Credentials"))
		}
		if !strings.Contains(strings.Join(r.header.Values("Vary"), ","), "Origin") {
			t.Errorf("origin %s: no Vary: Origin", o)
		}
		r = limDo(t, c, "OPTIONS", ts.URL+"/session/ses_x/prompt_async", "", map[string]string{"Origin": o,
			"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, x-opencode-directory"})
		if r.status != http.StatusNoContent {
			t.Errorf("preflight %s: %d, want 204", o, r.status)
		}
		if m := r.header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") || !strings.Contains(m, "PATCH") || !strings.Contains(m, "DELETE") {
			t.Errorf("preflight %s: Access-Control-Allow-Methods %q", o, m)
		}
		if h := r.header.Get("Access-Control-Allow-Headers"); !strings.Contains(h, "content-type") {
			t.Errorf("preflight %s: Access-Control-Allow-Headers %q", o, h)
		}
		if r.header.Get("Access-Control-Allow-Origin") != o {
			t.Errorf("preflight %s: Access-Control-Allow-Origin %q", o, r.header.Get("Access-Control-Allow-Origin"))
		}
	}
	for _, o := range []string{"https://evil.example", "null", "http://localhost.evil.example", "http://127.0.0.1.evil.example",
		"file://", "http://10.0.0.1:4096", "chrome-extension://abc"} {
		r := limDo(t, c, "GET", ts.URL+"/global/health", "", map[string]string{"Origin": o})
		if v := r.header.Get("Access-Control-Allow-Origin"); v != "" {
			t.Errorf("foreign origin %s: Access-Control-Allow-Origin %q", o, v)
		}
		r = limDo(t, c, "OPTIONS", ts.URL+"/session", "", map[string]string{"Origin": o, "Access-Control-Request-Method": "POST"})
		if r.status < 400 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("foreign preflight %s: %d, Allow-Origin %q, Allow-Methods %q", o, r.status,
				r.header.Get("Access-Control-Allow-Origin"), r.header.Get("Access-Control-Allow-Methods"))
		}
	}
}
