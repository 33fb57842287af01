//go:build !windows

package routes_test

// The terminal API (/pty), black-box on a real listener: real shells on
// real pseudo-terminals, the websocket through coder/websocket's client,
// the process table read from /proc.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/coder/websocket"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/pty"
)

type ptyInfo = pty.Info

func (e *env) ptyCreate(body string) ptyInfo {
	e.t.Helper()
	var p ptyInfo
	e.mustJSON("POST", "/pty", body, &p)
	if !strings.HasPrefix(p.ID, "pty_") || p.PID <= 0 || p.Status != "running" {
		e.t.Fatalf("POST /pty %s = %+v", body, p)
	}
	return p
}

// wsTerm is a websocket client of one terminal: what it received and the
// cursor it reached, counted as the web app counts it.
type wsTerm struct {
	t      *testing.T
	c      *websocket.Conn
	text   strings.Builder
	cursor int64
	metas  []int64
	closed *websocket.CloseError
}

func (e *env) ptyDial(path string, hdr http.Header) (*wsTerm, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, strings.Replace(e.ts.URL, "http", "ws", 1)+path,
		&websocket.DialOptions{HTTPClient: e.c, HTTPHeader: hdr})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(8 << 20)
	w := &wsTerm{t: e.t, c: c}
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return w, resp, nil
}

func (e *env) ptyConnect(id string, cursor string) *wsTerm {
	e.t.Helper()
	path := "/pty/" + id + "/connect"
	if cursor != "" {
		path += "?cursor=" + cursor
	}
	w, resp, err := e.ptyDial(path, nil)
	if err != nil {
		e.t.Fatalf("connect %s: %v (%v)", path, err, resp)
	}
	w.meta() // the replay, then where it ends
	return w
}

// frame reads one frame: text is appended, a control frame sets the cursor.
func (w *wsTerm) frame(ctx context.Context) error {
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			w.closed = &ce
		}
		return err
	}
	if typ == websocket.MessageBinary {
		if len(b) == 0 || b[0] != 0 {
			w.t.Fatalf("binary frame %q is not a control frame", b)
		}
		var m struct {
			Cursor *int64 `json:"cursor"`
		}
		if err := json.Unmarshal(b[1:], &m); err != nil || m.Cursor == nil {
			w.t.Fatalf("control frame %q: %v", b, err)
		}
		w.cursor = *m.Cursor
		w.metas = append(w.metas, *m.Cursor)
		return nil
	}
	w.text.Write(b)
	w.cursor += int64(len(utf16.Encode([]rune(string(b)))))
	return nil
}

// meta reads up to and including the next control frame.
func (w *wsTerm) meta() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for n := len(w.metas); len(w.metas) == n; {
		if err := w.frame(ctx); err != nil {
			w.t.Fatalf("no control frame: %v; got %q", err, w.text.String())
		}
	}
}

// until reads until the text received matches re.
func (w *wsTerm) until(re string) []string {
	w.t.Helper()
	rx := regexp.MustCompile(re)
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for {
		if m := rx.FindStringSubmatch(w.text.String()); m != nil {
			return m
		}
		if err := w.frame(ctx); err != nil {
			w.t.Fatalf("waiting for %q: %v; got %q", re, err, w.text.String())
		}
	}
}

// end reads until the server closes the socket and returns its status.
func (w *wsTerm) end() websocket.StatusCode {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	for {
		if err := w.frame(ctx); err != nil {
			if w.closed == nil {
				w.t.Fatalf("socket ended without a close frame: %v", err)
			}
			return w.closed.Code
		}
	}
}

func (w *wsTerm) send(s string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		w.t.Fatalf("send %q: %v", s, err)
	}
}

// alive reports whether pid runs: a zombie has exited (only its parent's
// wait is missing; the init of a container may never reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	return len(f) > 0 && string(f[0]) != "Z" && string(f[0]) != "X"
}

// waitGone polls until none of pids runs.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		var running []int
		for _, p := range pids {
			if alive(p) {
				running = append(running, p)
			}
		}
		if len(running) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes %v still run", what, running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func needProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the process table from /proc")
	}
}

// TestPTYEcho: a terminal in the project directory runs what the
// websocket sends and sends back what it prints.
func TestPTYEcho(t *testing.T) {
	e := start(t, testserver.Options{})
	p := e.ptyCreate(`{"command":"/bin/sh","title":"mine"}`)
	if p.Cwd != e.dir || p.Title != "mine" || p.Command != "/bin/sh" || strings.Join(p.Args, " ") != "-l" {
		t.Errorf("created %+v: want cwd %s, title mine, /bin/sh -l", p, e.dir)
	}
	w := e.ptyConnect(p.ID, "")
	w.send("echo h$((0))i; pwd\n")
	m := w.until(`h0i\r\n(/.*)\r\n`)
	if m[1] != e.dir {
		t.Errorf("pwd = %q, want %q", m[1], e.dir)
	}
	var list []ptyInfo
	e.mustJSON("GET", "/pty", "", &list)
	if len(list) != 1 || list[0].ID != p.ID {
		t.Errorf("GET /pty = %+v", list)
	}
	// Another directory sees none of it.
	e.mustJSON("GET", "/pty?directory=/tmp", "", &list)
	if len(list) != 0 {
		t.Errorf("GET /pty?directory=/tmp = %+v", list)
	}
	if st, b := e.do("GET", "/pty/"+p.ID+"?directory=/tmp", ""); st != 404 {
		t.Errorf("GET /pty/{id} of another directory = %d %s", st, b)
	}
}

// TestPTYReconnect: a client that disconnects and reconnects with the
// cursor it reached gets exactly the output it missed, no byte lost or
// twice, counted in UTF-16 units as the web app counts them.
func TestPTYReconnect(t *testing.T) {
	e := start(t, testserver.Options{})
	p := e.ptyCreate(`{"command":"/bin/sh"}`)
	a := e.ptyConnect(p.ID, "")
	a.send("echo o$((1))ne\n")
	a.until(`o1ne\r\n`)
	// While a is away, the shell prints (a watcher, attached at the end,
	// sees when); é is one unit, the emoji two.
	watcher := e.ptyConnect(p.ID, "-1")
	a.send(`sleep 0.2; printf 'missed \303\251 \360\237\230\200 %s\n' $((40+2))` + "\n")
	cursor := a.cursor
	got := a.text.String()
	_ = a.c.Close(websocket.StatusNormalClosure, "")
	watcher.until(`missed é 😀 42\r\n`)

	b := e.ptyConnect(p.ID, strconv.FormatInt(cursor, 10))
	replay := b.text.String()
	if !strings.Contains(replay, "missed é 😀 42") {
		t.Fatalf("replay from %d = %q: lacks the output printed meanwhile", cursor, replay)
	}
	if want := cursor + int64(len(utf16.Encode([]rune(replay)))); b.metas[0] != want {
		t.Errorf("control frame after the replay says %d, want %d (cursor %d + the replay)", b.metas[0], want, cursor)
	}
	b.send("PS1=; echo t$((2))wo\n") // no prompt after it: nothing comes after t2wo
	b.until(`t2wo\r\n`)
	// The shell may print after it (a loaded machine delays what it
	// echoes): the cursors below are compared once the terminal is quiet,
	// nothing printed for 300 ms.
	checkFor(t, 20*time.Second, "the terminal to be quiet", func() bool {
		w := e.ptyConnect(p.ID, "-1")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return w.frame(ctx) != nil && ctx.Err() != nil
	})

	// The whole output, replayed from 0 to a fresh client, is exactly what
	// a saw, then what b was replayed, then what b saw live.
	full := e.ptyConnect(p.ID, "0")
	whole := got + b.text.String()
	if !strings.HasPrefix(full.text.String(), whole) {
		t.Errorf("a + b's replay + b's live output is not the terminal's output:\n got %q\nwant %q", whole, full.text.String())
	}
	if full.metas[0] < b.cursor {
		t.Errorf("a fresh client's cursor %d is before b's %d", full.metas[0], b.cursor)
	}
	// -1 replays nothing; a cursor past the end nothing.
	for _, c := range []string{"-1", "999999"} {
		if w := e.ptyConnect(p.ID, c); w.text.Len() != 0 || w.metas[0] != full.metas[0] {
			t.Errorf("cursor %s: replay %q, cursor %d; want none, %d (full %q)", c, w.text.String(), w.metas[0], full.metas[0], full.text.String())
		}
	}
}

// TestPTYResize: PUT size reaches the terminal's processes.
func TestPTYResize(t *testing.T) {
	e := start(t, testserver.Options{})
	p := e.ptyCreate(`{"command":"/bin/sh"}`)
	w := e.ptyConnect(p.ID, "")
	w.send("stty size\n")
	w.until(`24 80\r\n`)
	var u ptyInfo
	e.mustJSON("PUT", "/pty/"+p.ID, `{"title":"renamed","size":{"rows":33,"cols":101}}`, &u)
	if u.Title != "renamed" || u.ID != p.ID {
		t.Errorf("PUT = %+v", u)
	}
	w.send("stty size\n")
	w.until(`33 101\r\n`)
	e.mustJSON("PUT", "/pty/"+p.ID, `{"title":""}`, &u)
	if u.Title != "renamed" {
		t.Errorf("an empty title changed it to %q", u.Title)
	}
}

// TestPTYDeleteKillsSession: DELETE ends the shell and what it started,
// a background job in a process group of its own included; the socket is
// closed normally and the terminal is gone.
func TestPTYDeleteKillsSession(t *testing.T) {
	needProc(t)
	e := start(t, testserver.Options{})
	ev := e.open("/event")
	ev.header()
	p := e.ptyCreate(`{"command":"bash","args":["--norc","--noprofile","-i"]}`)
	w := e.ptyConnect(p.ID, "")
	w.send("(trap '' HUP; exec sleep 1000) & echo child=$!\n") // a job that ignores the hangup
	child, _ := strconv.Atoi(w.until(`child=(\d+)`)[1])
	if !alive(p.PID) || !alive(child) {
		t.Fatalf("shell %d or child %d not running", p.PID, child)
	}
	if st, b := e.do("DELETE", "/pty/"+p.ID, ""); st != 200 || string(b) != "true" {
		t.Fatalf("DELETE = %d %s", st, b)
	}
	waitGone(t, "after DELETE", p.PID, child)
	if code := w.end(); code != websocket.StatusNormalClosure {
		t.Errorf("socket closed with %d, want 1000", code)
	}
	if st, b := e.do("GET", "/pty/"+p.ID, ""); st != 404 || !strings.Contains(string(b), `"_tag":"PtyNotFoundError"`) {
		t.Errorf("GET after DELETE = %d %s", st, b)
	}
	if st, _ := e.do("DELETE", "/pty/"+p.ID, ""); st != 404 {
		t.Errorf("DELETE twice = %d", st)
	}
	fs := ev.waitFor("pty.deleted", hasType("pty.deleted", 1))
	var types []string
	for _, f := range fs {
		if env := v1Envelope(t, f); strings.HasPrefix(env.Type, "pty.") {
			types = append(types, env.Type)
			if env.Type == "pty.deleted" && string(env.Properties) != `{"id":"`+p.ID+`"}` {
				t.Errorf("pty.deleted properties %s", env.Properties)
			}
		}
	}
	if strings.Join(types, " ") != "pty.created pty.deleted" {
		t.Errorf("events %v, want pty.created pty.deleted", types)
	}
}

// TestPTYExit: a terminal whose process exits is reported exited (event
// with its code, socket closed normally, 404 since, as OpenCode), and
// what the process left running in its session is ended.
func TestPTYExit(t *testing.T) {
	needProc(t)
	e := start(t, testserver.Options{})
	ev := e.open("/event")
	ev.header()
	p := e.ptyCreate(`{"command":"/bin/sh","args":["-c","(trap '' HUP; exec sleep 1000) & echo child=$!; read x; exit 3"]}`)
	w := e.ptyConnect(p.ID, "")
	child, _ := strconv.Atoi(w.until(`child=(\d+)`)[1])
	w.send("\n")
	if code := w.end(); code != websocket.StatusNormalClosure {
		t.Errorf("socket closed with %d, want 1000", code)
	}
	fs := ev.waitFor("pty.exited", hasType("pty.exited", 1))
	for _, f := range fs {
		if env := v1Envelope(t, f); env.Type == "pty.exited" {
			if want := fmt.Sprintf(`{"id":"%s","exitCode":3}`, p.ID); string(env.Properties) != want {
				t.Errorf("pty.exited %s, want %s", env.Properties, want)
			}
		}
	}
	waitGone(t, "after the shell exited", p.PID, child)
	if st, _ := e.do("GET", "/pty/"+p.ID, ""); st != 404 {
		t.Errorf("GET an exited terminal = %d, want 404", st)
	}
	if _, resp, err := e.ptyDial("/pty/"+p.ID+"/connect", nil); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Errorf("connect to an exited terminal: %v %v", err, resp)
	}
	var list []ptyInfo
	e.mustJSON("GET", "/pty", "", &list)
	if len(list) != 0 {
		t.Errorf("GET /pty lists %+v", list)
	}
}

// TestPTYShutdown: stopping the server ends every terminal's processes
// and closes their sockets with 1001.
func TestPTYShutdown(t *testing.T) {
	needProc(t)
	e := start(t, testserver.Options{})
	var pids []int
	var socks []*wsTerm
	for range 3 {
		p := e.ptyCreate(`{"command":"bash","args":["--norc","--noprofile","-i"]}`)
		w := e.ptyConnect(p.ID, "")
		w.send("(trap '' HUP; exec sleep 1000) & echo child=$!\n") // a job that ignores the hangup
		child, _ := strconv.Atoi(w.until(`child=(\d+)`)[1])
		pids = append(pids, p.PID, child)
		socks = append(socks, w)
	}
	e.ts.Stop()
	waitGone(t, "after shutdown", pids...)
	for _, w := range socks {
		if code := w.end(); code != websocket.StatusGoingAway {
			t.Errorf("socket closed with %d at shutdown, want 1001", code)
		}
	}
}

// TestPTYLimit: at most 32 terminals run at once; the 33rd is a 429, and
// removing one makes room.
func TestPTYLimit(t *testing.T) {
	e := start(t, testserver.Options{})
	var ids []string
	for range 32 {
		ids = append(ids, e.ptyCreate(`{"command":"/bin/sh","args":["-c","read x"]}`).ID)
	}
	st, b := e.do("POST", "/pty", `{"command":"/bin/sh"}`)
	if st != 429 || !strings.Contains(string(b), `"name":"TooManyRequestsError"`) {
		t.Fatalf("33rd terminal = %d %s, want 429", st, b)
	}
	if st, _ := e.do("DELETE", "/pty/"+ids[0], ""); st != 200 {
		t.Fatalf("DELETE = %d", st)
	}
	e.ptyCreate(`{"command":"/bin/sh"}`)
}

// TestPTYAuth: with a password every route wants it; the websocket also
// takes it as the web app sends it (auth_token) or a connect ticket.
func TestPTYAuth(t *testing.T) {
	e := start(t, testserver.Options{Password: "secret"})
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("opencode:secret"))
	do := func(method, path, body string, hdr map[string]string) (int, []byte) {
		req, _ := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := e.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes()
	}
	auth := map[string]string{"Authorization": basic}
	for _, r := range [][2]string{{"GET", "/pty"}, {"POST", "/pty"}, {"GET", "/pty/shells"}, {"GET", "/pty/pty_x"}, {"DELETE", "/pty/pty_x"}} {
		if st, _ := do(r[0], r[1], "{}", nil); st != 401 {
			t.Errorf("%s %s without the password = %d, want 401", r[0], r[1], st)
		}
	}
	st, b := do("POST", "/pty", `{"command":"/bin/sh"}`, auth)
	var p ptyInfo
	if st != 200 || json.Unmarshal(b, &p) != nil {
		t.Fatalf("POST /pty = %d %s", st, b)
	}
	path := "/pty/" + p.ID + "/connect"
	if _, resp, err := e.ptyDial(path, nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("websocket without credentials: %v %v", err, resp)
	}
	if _, resp, err := e.ptyDial(path+"?auth_token="+base64.StdEncoding.EncodeToString([]byte("opencode:wrong")), nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("websocket with a wrong auth_token: %v %v", err, resp)
	}
	if st, _ := do("GET", "/pty?auth_token="+base64.StdEncoding.EncodeToString([]byte("opencode:secret")), "", nil); st != 401 {
		t.Errorf("auth_token on GET /pty = %d: only the websocket takes it", st)
	}
	ok := func(w *wsTerm, _ *http.Response, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("websocket: %v", err)
		}
		w.meta()
		w.send("echo ok$((1+1))\n")
		w.until(`ok2`)
	}
	ok(e.ptyDial(path, http.Header{"Authorization": {basic}}))
	ok(e.ptyDial(path+"?auth_token="+base64.StdEncoding.EncodeToString([]byte("opencode:secret")), nil))

	// A ticket: issued behind the password to a same-site request with the
	// header, good once, for that terminal.
	if st, b := do("POST", path+"-token", "", auth); st != 403 || !strings.Contains(string(b), `"_tag":"PtyForbiddenError"`) {
		t.Errorf("connect-token without x-opencode-ticket = %d %s", st, b)
	}
	if st, _ := do("POST", path+"-token", "", map[string]string{"Authorization": basic, "x-opencode-ticket": "1", "Origin": "https://evil.example"}); st != 403 {
		t.Errorf("connect-token from another site = %d", st)
	}
	if st, _ := do("POST", path+"-token", "", map[string]string{"x-opencode-ticket": "1"}); st != 401 {
		t.Errorf("connect-token without the password = %d", st)
	}
	st, b = do("POST", path+"-token", "", map[string]string{"Authorization": basic, "x-opencode-ticket": "1", "Origin": "http://localhost:3000"})
	var tk struct {
		Ticket    string `json:"ticket"`
		ExpiresIn int    `json:"expires_in"`
	}
	if st != 200 || json.Unmarshal(b, &tk) != nil || tk.Ticket == "" || tk.ExpiresIn != 60 {
		t.Fatalf("connect-token = %d %s", st, b)
	}
	if _, resp, err := e.ptyDial("/pty/pty_other/connect?ticket="+tk.Ticket, nil); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a ticket for another terminal: %v %v", err, resp)
	}
	st, b = do("POST", path+"-token", "", map[string]string{"Authorization": basic, "x-opencode-ticket": "1"})
	if st != 200 || json.Unmarshal(b, &tk) != nil {
		t.Fatalf("connect-token = %d %s", st, b)
	}
	ok(e.ptyDial(path+"?ticket="+tk.Ticket, nil))
	if _, resp, err := e.ptyDial(path+"?ticket="+tk.Ticket, nil); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a ticket used twice: %v %v", err, resp)
	}
	if st, _ := do("GET", "/pty?ticket="+tk.Ticket, "", nil); st != 401 {
		t.Errorf("a ticket on another route = %d", st)
	}
}

// TestPTYOrigin: a page of another site cannot open a terminal's
// websocket (browsers do not apply CORS to websockets); this server's own
// page and loopback ones can.
func TestPTYOrigin(t *testing.T) {
	e := start(t, testserver.Options{})
	p := e.ptyCreate(`{"command":"/bin/sh"}`)
	path := "/pty/" + p.ID + "/connect"
	if _, resp, err := e.ptyDial(path, http.Header{"Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("websocket from another site: %v %v", err, resp)
	}
	for _, o := range []string{"http://localhost:3000", e.ts.URL} {
		w, _, err := e.ptyDial(path, http.Header{"Origin": {o}})
		if err != nil {
			t.Fatalf("websocket from %s: %v", o, err)
		}
		w.meta()
	}
}

// TestPTYBadCreate: what no process can start with is a 400 naming the field.
func TestPTYBadCreate(t *testing.T) {
	e := start(t, testserver.Options{})
	for _, c := range []struct{ body, field string }{
		{`{"command":"/nonexistent/cmd"}`, "command"},
		{`{"command":"no-such-command-here"}`, "command"},
		{`{"cwd":"/nonexistent"}`, "cwd"},
		{`{"cwd":"not-a-dir"}`, "cwd"},
		{`{"env":{"A=B":"x"}}`, "env"},
		{`{"args":["a\u0000b"]}`, "args"},
	} {
		st, b := e.do("POST", "/pty", c.body)
		if st != 400 || !strings.Contains(string(b), c.field) {
			t.Errorf("POST /pty %s = %d %s, want 400 naming %s", c.body, st, b, c.field)
		}
	}
	var list []ptyInfo
	e.mustJSON("GET", "/pty", "", &list)
	if len(list) != 0 {
		t.Errorf("a refused create left %+v", list)
	}
}

// TestPTYSocketCap: a terminal's websocket holds one of its client's
// stream slots, as an event stream does: one address may hold 64 (SSE
// streams and terminal sockets together), the 65th is a 429 in its
// route's family on /pty and /api/pty alike, and closing one frees its
// slot. Terminal sockets had no cap: each held its own copy of the
// scrollback.
func TestPTYSocketCap(t *testing.T) {
	e := start(t, testserver.Options{})
	p := e.ptyCreate(`{"command":"/bin/sh"}`)
	const maxStreams = 64
	routes := []string{"/pty/" + p.ID + "/connect", "/api/pty/" + p.ID + "/connect"}
	var open []*wsTerm
	for i := range maxStreams {
		w, resp, err := e.ptyDial(routes[i%2]+"?cursor=-1", nil)
		if err != nil {
			t.Fatalf("socket %d: %v (%v)", i+1, err, resp)
		}
		open = append(open, w)
	}
	refused := func(path string) (int, string) {
		t.Helper()
		w, resp, err := e.ptyDial(path, nil)
		if err == nil {
			_ = w.c.CloseNow()
			return http.StatusSwitchingProtocols, ""
		}
		if resp == nil {
			t.Fatalf("%s: %v", path, err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, tc := range []struct{ path, shape string }{
		{routes[0], `"name":"TooManyRequestsError"`},
		{routes[1], `"_tag":"TooManyRequestsError"`},
	} {
		if st, body := refused(tc.path); st != http.StatusTooManyRequests || !strings.Contains(body, tc.shape) {
			t.Errorf("socket %d on %s: %d %s, want 429 with %s", maxStreams+1, tc.path, st, body, tc.shape)
		}
	}
	if st, _ := e.do("GET", "/global/health", ""); st != 200 {
		t.Errorf("health while capped: %d", st)
	}
	// The slots are the event streams' too.
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/event", nil)
	if resp, err := e.c.Do(req); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("an event stream beside 64 terminal sockets: %v %v, want 429", err, resp)
	} else {
		resp.Body.Close()
	}

	// Closing one frees its slot once the server has seen it go.
	_ = open[0].c.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(waitBound)
	for {
		w, _, err := e.ptyDial(routes[0]+"?cursor=-1", nil)
		if err == nil {
			open[0] = w
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot of a closed socket was not freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
