package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// opencodeVersion is the OpenCode client release the tests are pinned to.
const opencodeVersion = "1.18.33"

// tmpRoot holds the built server binary and other per-run files; TestMain
// creates and removes it.
var tmpRoot string

type cleanupM struct {
	m   *testing.M
	dir string
}

func (c cleanupM) Run() int {
	defer os.RemoveAll(c.dir)
	return c.m.Run()
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "opencode-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		os.Exit(1)
	}
	tmpRoot = dir
	goleak.VerifyTestMain(cleanupM{m: m, dir: dir})
}

// skipAllowed reports whether missing prerequisites (npm, tmux) may skip the
// tests instead of failing them.
func skipAllowed() bool { return os.Getenv("OPENCODE_E2E_SKIP") == "1" }

// missing fails (or, with OPENCODE_E2E_SKIP=1, skips) the test because a
// prerequisite is unavailable.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if skipAllowed() {
		t.Skip("e2e prerequisite missing (OPENCODE_E2E_SKIP=1): " + msg)
	}
	t.Fatal("e2e prerequisite missing: " + msg + " (set OPENCODE_E2E_SKIP=1 to skip the e2e tests instead)")
}

var setup struct {
	once        sync.Once
	serverBin   string
	opencodeBin string
	err         error
	missing     string // a prerequisite is unavailable: fail or skip
}

// binaries returns the built server binary and the opencode binary, building
// and installing them on first use.
func binaries(t *testing.T) (serverBin, opencodeBin string) {
	t.Helper()
	setup.once.Do(func() {
		setup.serverBin, setup.err = buildServer()
		if setup.err != nil {
			return
		}
		setup.opencodeBin, setup.missing, setup.err = findOpencode()
	})
	if setup.err != nil {
		t.Fatal(setup.err)
	}
	if setup.missing != "" {
		missing(t, "%s", setup.missing)
	}
	return setup.serverBin, setup.opencodeBin
}

func buildServer() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("e2e: go tool not found: %w", err)
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("e2e: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("e2e: not inside a Go module (go env GOMOD is empty)")
	}
	bin := filepath.Join(tmpRoot, "opencode-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "./cmd/opencode-server")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("e2e: go build ./cmd/opencode-server: %v\n%s", err, out)
	}
	return bin, nil
}

// findOpencode returns $OPENCODE_BIN, or the opencode binary of opencode-ai
// installed with npm into the cache directory (installing it if needed).
func findOpencode() (bin, missingMsg string, err error) {
	if b := os.Getenv("OPENCODE_BIN"); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", "", fmt.Errorf("e2e: OPENCODE_BIN=%s: %w", b, err)
		}
		return b, "", nil
	}
	cache := os.Getenv("OPENCODE_E2E_CACHE")
	if cache == "" {
		uc, err := os.UserCacheDir()
		if err != nil {
			return "", "", fmt.Errorf("e2e: no user cache dir (set OPENCODE_E2E_CACHE or OPENCODE_BIN): %w", err)
		}
		cache = filepath.Join(uc, "opencode-server-e2e")
	}
	if b := installedOpencode(cache); b != "" {
		return b, "", nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Sprintf("npm not found in PATH: it is needed to install opencode-ai@%s into %s "+
			"(or set OPENCODE_BIN to an opencode %s binary)", opencodeVersion, cache, opencodeVersion), nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", fmt.Errorf("e2e: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", cache,
		"opencode-ai@"+opencodeVersion)
	cmd.Dir = cache
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("e2e: npm install opencode-ai@%s into %s: %v\n%s", opencodeVersion, cache, err, out)
	}
	if b := installedOpencode(cache); b != "" {
		return b, "", nil
	}
	return "", "", fmt.Errorf("e2e: npm installed opencode-ai@%s into %s, but neither "+
		"node_modules/opencode-linux-x64/bin/opencode nor the -baseline variant is there", opencodeVersion, cache)
}

// installedOpencode returns the opencode binary under cache if opencode-ai at
// opencodeVersion is installed there, else "".
func installedOpencode(cache string) string {
	nm := filepath.Join(cache, "node_modules")
	raw, err := os.ReadFile(filepath.Join(nm, "opencode-ai", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(raw, &pkg) != nil || pkg.Version != opencodeVersion {
		return ""
	}
	for _, p := range []string{"opencode-linux-x64", "opencode-linux-x64-baseline"} {
		b := filepath.Join(nm, p, "bin", "opencode")
		if fi, err := os.Stat(b); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return b
		}
	}
	return ""
}

// checkFor calls fn every `every` until it returns nil, failing the test with
// fn's last error when timeout passes.
func checkFor(t *testing.T, timeout, every time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(every)
	}
}

// randomTag returns a short random upper-case alphanumeric string.
func randomTag() string { return rand.Text()[:10] }

// syncBuffer is a goroutine-safe bytes.Buffer for process output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is a running opencode-server process.
type server struct {
	URL      string
	Dir      string // project directory (--directory)
	password string
	client   *http.Client
	stdout   *syncBuffer
	stderr   *syncBuffer
	stopFn   func() error
}

// stop sends the server SIGTERM and waits for it to exit (killing it after
// 10s); the test's cleanup then expects it gone. Safe to call twice.
func (s *server) stop() error { return s.stopFn() }

type serverOptions struct {
	reply    string        // --scripted-reply
	chunks   int           // --scripted-chunks (0: server default)
	delay    time.Duration // --scripted-delay
	password string        // OPENCODE_SERVER_PASSWORD
	config   string        // --config: an opencode.json (a stub model's provider)
	data     string        // --data (default: a new temp dir)
	dir      string        // --directory (default: a new temp dir)
	home     string        // HOME (default: a new temp dir)
	env      []string      // K=V replaces an inherited K; a bare K removes it
	extra    []string      // more flags, after the defaults (e.g. --store postgres)
}

var listenRE = regexp.MustCompile(`opencode server listening on (http://127\.0\.0\.1:(\d+))`)

// startServer starts the server binary on 127.0.0.1 with --port 0 and a
// SQLite store in a temp dir; it is stopped when the test ends.
func startServer(t *testing.T, o serverOptions) *server {
	t.Helper()
	bin, _ := binaries(t)
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	s := &server{Dir: o.dir, password: o.password, stdout: &syncBuffer{}, stderr: &syncBuffer{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	data, home := o.data, o.home
	if home == "" {
		home = t.TempDir()
	}
	if data == "" {
		data = t.TempDir()
	}
	args := []string{"--hostname", "127.0.0.1", "--port", "0", "--store", "sqlite", "--data", data,
		"--directory", s.Dir, "--log-level", "debug"}
	if o.reply != "" {
		args = append(args, "--scripted-reply", o.reply)
	}
	if o.chunks > 0 {
		args = append(args, "--scripted-chunks", strconv.Itoa(o.chunks))
	}
	if o.delay == 0 {
		// opencode run --attach opens GET /event and sends its blocking POST
		// at the same moment; a reply faster than the client's subscription
		// (an instant model on a loaded CI machine) would stream before the
		// client listens. A real model never answers that fast; give the
		// scripted one a human-scale pace.
		o.delay = 40 * time.Millisecond
	}
	args = append(args, "--scripted-delay", o.delay.String())
	if o.config != "" {
		args = append(args, "--config", o.config)
	}
	args = append(args, o.extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	override := map[string]bool{}
	for _, kv := range o.env {
		name, _, _ := strings.Cut(kv, "=")
		override[name] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(kv, "OPENCODE_SERVER_") && !strings.HasPrefix(kv, "HOME=") &&
			!strings.HasPrefix(kv, "XDG_") && !override[name] {
			env = append(env, kv)
		}
	}
	for _, kv := range o.env {
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home)
	if o.password != "" {
		env = append(env, "OPENCODE_SERVER_PASSWORD="+o.password)
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stopped := false
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("server did not stop within 10s of SIGTERM; killed it")
		}
	}
	s.stopFn = func() error {
		if stopped {
			return nil
		}
		stopped = true
		return stop()
	}
	t.Cleanup(func() {
		select {
		case <-exited:
			if !stopped {
				t.Errorf("server exited early: %v", waitErr)
			}
		default:
			if err := stop(); err != nil {
				t.Error(err)
			}
		}
		s.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("server stdout:\n%s\nserver stderr (tail):\n%s", s.stdout, tail(s.stderr.String(), 60))
		}
	})
	checkFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if m := listenRE.FindStringSubmatch(s.stdout.String()); m != nil {
			s.URL = m[1]
			return nil
		}
		select {
		case <-exited:
			t.Fatalf("server exited before listening: %v\nstderr:\n%s", waitErr, s.stderr)
		default:
		}
		return fmt.Errorf("no listening line on server stdout yet: %q", s.stdout.String())
	})
	return s
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// get sends GET path (with basic auth when the server has a password) and
// returns the status and body.
func (s *server) get(path string, auth bool) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if auth && s.password != "" {
		req.SetBasicAuth("opencode", s.password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// getJSON decodes the 200 response of GET path into v.
func (s *server) getJSON(path string, v any) error {
	status, body, err := s.get(path, true)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w\n%s", path, err, body)
	}
	return nil
}

type sessionInfo struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

type messageError struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data"`
}

type messageInfo struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	Role      string `json:"role"`
	ParentID  string `json:"parentID"`
	Finish    string `json:"finish"`
	Time      struct {
		Created   int64 `json:"created"`
		Completed int64 `json:"completed"`
	} `json:"time"`
	Error *messageError `json:"error"`
}

type part struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
	Text      string `json:"text"`
}

type message struct {
	Info  messageInfo `json:"info"`
	Parts []part      `json:"parts"`
}

// onlySession waits until the server has exactly one session and returns
// its ID.
func (s *server) onlySession(t *testing.T, timeout time.Duration) string {
	t.Helper()
	var id string
	checkFor(t, timeout, 100*time.Millisecond, func() error {
		ss, err := s.sessions()
		if err != nil {
			return err
		}
		if len(ss) != 1 {
			return fmt.Errorf("want 1 session, have %+v", ss)
		}
		id = ss[0].ID
		return nil
	})
	return id
}

func (s *server) sessions() ([]sessionInfo, error) {
	var ss []sessionInfo
	err := s.getJSON("/session", &ss)
	return ss, err
}

func (s *server) messages(sessionID string) ([]message, error) {
	var ms []message
	err := s.getJSON("/session/"+sessionID+"/message", &ms)
	return ms, err
}

// text is the concatenated text of m's text parts.
func (m message) text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// client is an isolated environment for running the opencode binary.
type client struct {
	bin  string
	Dir  string   // working directory (a temp project dir)
	Env  []string // complete environment
	home string
}

// newClient returns an isolated opencode environment: HOME and the XDG
// directories in a temp dir, auto-update, models fetch, share and LSP
// downloads disabled. extraEnv entries (K=V) are appended.
func newClient(t *testing.T, dir string, extraEnv ...string) *client {
	t.Helper()
	_, bin := binaries(t)
	home := t.TempDir()
	if dir == "" {
		dir = t.TempDir()
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
	}
	return &client{bin: bin, Dir: dir, Env: append(env, extraEnv...), home: home}
}

// run runs opencode with args and returns its stdout and stderr.
func (c *client) run(t *testing.T, timeout time.Duration, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdin = nil
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	t.Logf("opencode %s: %v (exit: %v)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err)
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return out.String(), errb.String(), err
}
