package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// checkTurn asserts, via GET /session/{id}/message, that the session holds a
// user message whose text contains prompt and, answering it, an assistant
// message whose text is reply and whose parts all carry its id.
func checkTurn(t *testing.T, srv *server, sessionID, prompt, reply string) {
	t.Helper()
	ms, err := srv.messages(sessionID)
	if err != nil {
		t.Fatal(err)
	}
	dump := func() string { b, _ := json.MarshalIndent(ms, "", "  "); return string(b) }
	var user *message
	for i := range ms {
		if ms[i].Info.Role == "user" && strings.Contains(ms[i].text(), prompt) {
			user = &ms[i]
			break
		}
	}
	if user == nil {
		t.Fatalf("session %s: no user message with text %q:\n%s", sessionID, prompt, dump())
	}
	var asst []message
	for _, m := range ms {
		if m.Info.Role == "assistant" {
			asst = append(asst, m)
		}
	}
	if len(asst) == 0 {
		t.Fatalf("session %s: no assistant message:\n%s", sessionID, dump())
	}
	for _, m := range ms {
		if m.Info.SessionID != sessionID {
			t.Errorf("message %s: sessionID %q, want %q", m.Info.ID, m.Info.SessionID, sessionID)
		}
		for _, p := range m.Parts {
			if p.MessageID != m.Info.ID {
				t.Errorf("%s message %s: part %s (%s) has messageID %q", m.Info.Role, m.Info.ID, p.ID, p.Type, p.MessageID)
			}
			if p.SessionID != sessionID {
				t.Errorf("%s message %s: part %s has sessionID %q", m.Info.Role, m.Info.ID, p.ID, p.SessionID)
			}
		}
	}
	a := asst[len(asst)-1]
	if a.Info.ParentID != user.Info.ID {
		t.Errorf("assistant message %s: parentID %q, want the user message %s", a.Info.ID, a.Info.ParentID, user.Info.ID)
	}
	if a.text() != reply {
		t.Errorf("assistant message %s: text %q, want %q", a.Info.ID, a.text(), reply)
	}
	if a.Info.Finish != "stop" || a.Info.Time.Completed == 0 || a.Info.Error != nil {
		t.Errorf("assistant message %s: finish %q, completed %d, error %+v; want a completed turn with finish \"stop\"",
			a.Info.ID, a.Info.Finish, a.Info.Time.Completed, a.Info.Error)
	}
	if t.Failed() {
		t.Logf("messages:\n%s", dump())
	}
}

func TestRunAttachPrintsReply(t *testing.T) {
	t.Parallel()
	reply := "E2E-REPLY-" + randomTag()
	srv := startServer(t, serverOptions{reply: reply})
	oc := newClient(t, srv.Dir)

	// Plain output.
	const prompt = "hello e2e"
	ss := runPrintsReply(t, oc, srv, prompt, reply)

	// JSON lines.
	const jsonPrompt = "hello json e2e"
	stdout, stderr, err := oc.run(t, 60*time.Second, "run", "--format", "json", "--attach", srv.URL, jsonPrompt)
	if err != nil {
		t.Fatalf("opencode run --format json --attach: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	type event struct {
		Type      string `json:"type"`
		SessionID string `json:"sessionID"`
		Part      part   `json:"part"`
	}
	var events []event
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Errorf("--format json: bad line %q: %v", line, err)
			continue
		}
		events = append(events, ev)
	}
	i := slices.IndexFunc(events, func(ev event) bool {
		return ev.Type == "text" && strings.Contains(ev.Part.Text, reply)
	})
	if i < 0 {
		t.Fatalf("--format json: no text event with the reply %q\nstdout:\n%s\nstderr:\n%s", reply, stdout, stderr)
	}
	text := events[i]
	if text.SessionID == "" || text.SessionID == ss[0].ID {
		t.Fatalf("--format json text event: sessionID %q, want a new session (first run used %s)", text.SessionID, ss[0].ID)
	}
	if text.Part.SessionID != text.SessionID || !strings.HasPrefix(text.Part.MessageID, "msg_") {
		t.Errorf("--format json text event: part sessionID %q messageID %q", text.Part.SessionID, text.Part.MessageID)
	}
	checkTurn(t, srv, text.SessionID, jsonPrompt, reply)
	ms, err := srv.messages(text.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ms, func(m message) bool { return m.Info.ID == text.Part.MessageID && m.Info.Role == "assistant" }) {
		t.Errorf("--format json text event messageID %s is not an assistant message of session %s", text.Part.MessageID, text.SessionID)
	}
}

func TestRunAttachBasicAuth(t *testing.T) {
	t.Parallel()
	const password = "secret"
	reply := "E2E-AUTH-" + randomTag()
	srv := startServer(t, serverOptions{reply: reply, password: password})

	status, body, err := srv.get("/session", false)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusUnauthorized {
		t.Fatalf("GET /session without credentials: status %d, want 401: %s", status, body)
	}

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/session", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("opencode", "wrong-"+password)
	resp, err := srv.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /session with a wrong password: status %d, want 401", resp.StatusCode)
	}

	oc := newClient(t, srv.Dir, "OPENCODE_SERVER_PASSWORD="+password)
	const prompt = "hello auth e2e"
	runPrintsReply(t, oc, srv, prompt, reply)
}

// runPrintsReply runs `opencode run --attach` once on a server with no
// sessions yet, checks it exits 0 and prints the reply, and checks the one
// session's stored turn; it returns the sessions.
func runPrintsReply(t *testing.T, oc *client, srv *server, prompt, reply string) []sessionInfo {
	t.Helper()
	stdout, stderr, err := oc.run(t, 60*time.Second, "run", "--attach", srv.URL, prompt)
	if err != nil {
		t.Fatalf("opencode run --attach: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, reply) {
		t.Fatalf("opencode run --attach stdout lacks the reply %q\nstdout:\n%s\nstderr:\n%s", reply, stdout, stderr)
	}
	ss, err := srv.sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("GET /session: %d sessions after one run, want 1: %+v", len(ss), ss)
	}
	checkTurn(t, srv, ss[0].ID, prompt, reply)
	return ss
}

// TestOneServerPerData: a second server on the same --data refuses to start
// with a clear error, instead of running the same sessions twice.
func TestOneServerPerData(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	startServer(t, serverOptions{data: data})
	bin, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--hostname", "127.0.0.1", "--port", "0", "--data", data, "--directory", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the second server did not refuse the data directory: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "in use by another process") || !strings.Contains(string(out), "one server per --data directory") {
		t.Errorf("second server's error does not say why:\n%s", out)
	}
}

// TestRunAttachBehindAllowedHost: behind a reverse proxy that sends its
// public name as the Host (nginx's `proxy_set_header Host $host`), the
// server refuses that name until --allowed-host names it; then
// `opencode run --attach` through the proxy, with a password, streams the
// reply as it does on loopback.
func TestRunAttachBehindAllowedHost(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const publicName = "opencode.example.test"
	var target atomic.Pointer[url.URL]
	proxy := &http.Server{Handler: &httputil.ReverseProxy{
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target.Load())
			pr.Out.Host = publicName
		},
	}}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })
	proxyURL := "http://" + ln.Addr().String()
	proxied := func(srv *server, password string) int {
		u, _ := url.Parse(srv.URL)
		target.Store(u)
		req, _ := http.NewRequest(http.MethodGet, proxyURL+"/session", nil)
		req.SetBasicAuth("opencode", password)
		resp, err := srv.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const password = "secret"
	plain := startServer(t, serverOptions{password: password})
	if code := proxied(plain, password); code != http.StatusForbidden {
		t.Fatalf("GET /session through a proxy named %s without --allowed-host: %d, want 403", publicName, code)
	}
	if err := plain.stop(); err != nil {
		t.Fatal(err)
	}

	reply := "E2E-PROXY-" + randomTag()
	srv := startServer(t, serverOptions{reply: reply, password: password, extra: []string{"--allowed-host", publicName}})
	if code := proxied(srv, password); code != http.StatusOK {
		t.Fatalf("GET /session through the allowed proxy: %d, want 200", code)
	}
	oc := newClient(t, srv.Dir, "OPENCODE_SERVER_PASSWORD="+password)
	stdout, stderr, err := oc.run(t, 60*time.Second, "run", "--attach", proxyURL, "hello through the proxy")
	if err != nil || !strings.Contains(stdout, reply) {
		t.Fatalf("opencode run --attach %s: %v\nstdout:\n%s\nstderr:\n%s", proxyURL, err, stdout, stderr)
	}
	checkTurn(t, srv, srv.onlySession(t, 10*time.Second), "hello through the proxy", reply)
}
