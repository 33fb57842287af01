package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// binPath is the server binary built once by TestMain.
var binPath string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "crashtest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildBinary(dir); err != nil {
			fmt.Fprintln(os.Stderr, "crashtest: build:", err)
			return 1
		}
		return pgtest.Main(m) // a PostgreSQL for the scale-out tests
	}()
	os.Exit(code)
}

// buildBinary builds cmd/opencode-server (without -race, for speed) from the
// module root `go env GOMOD` names.
func buildBinary(dir string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("not inside a module")
	}
	root := filepath.Dir(gomod)
	binPath = filepath.Join(dir, "opencode-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "./cmd/opencode-server")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/opencode-server: %w\n%s", err, b)
	}
	return nil
}

// ---- the server process ------------------------------------------------------

type server struct {
	cmd     *exec.Cmd
	url     string
	logPath string
	exited  chan struct{}
	waitErr error
}

// startServer starts the binary and waits for its listening line.
func startServer(t testing.TB, dataDir, logPath string, args ...string) *server {
	t.Helper()
	s, err := launch(t, dataDir, logPath, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// launch starts the server as startServer does; err says why it did not
// come to listen (it exited first, or took over 30 s).
func launch(t testing.TB, dataDir, logPath string, args ...string) (*server, error) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"--store", "sqlite", "--data", dataDir, "--port", "0", "--hostname", "127.0.0.1",
		"--directory", dataDir, "--log-level", "debug"}, args...)
	cmd := exec.Command(binPath, all...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD=", "XDG_CONFIG_HOME="+filepath.Join(dataDir, "config"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "opencode server listening on "); ok && !sent {
				urlc <- strings.TrimSpace(u)
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	t.Cleanup(func() { s.kill() })
	select {
	case u := <-urlc:
		s.url = u
	case <-s.exited:
		return s, fmt.Errorf("server exited before listening: %v\n%s", s.waitErr, tail(logPath, 40))
	case <-time.After(30 * time.Second):
		s.kill()
		return s, fmt.Errorf("server did not print its listening line within 30s\n%s", tail(logPath, 40))
	}
	return s, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

func (s *server) signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// waitExit waits up to d for the process to exit and returns its exit code
// (-1 for a signal death), or ok=false on a timeout.
func (s *server) waitExit(d time.Duration) (code int, ok bool) {
	select {
	case <-s.exited:
	case <-time.After(d):
		return 0, false
	}
	if s.waitErr == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return ee.ExitCode(), true
	}
	return -1, true
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return "--- " + path + "\n" + strings.Join(lines, "\n")
}

// errorLines returns the ERROR/WARN lines of a server log (panics included).
func errorLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			out = append(out, l)
		}
	}
	return out
}

// ---- HTTP ------------------------------------------------------------------------

type client struct {
	base string
	hc   *http.Client
}

func newClient(base string) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
	}
	return &client{base: base, hc: &http.Client{Transport: tr}}
}

func (c *client) close() { c.hc.Transport.(*http.Transport).CloseIdleConnections() }

// reqTimeout bounds every ordinary request.
const reqTimeout = 15 * time.Second

// do sends one request. err != nil means no answer (the outcome is unknown).
func (c *client) do(method, path string, body []byte) (int, []byte, error) {
	return c.doTimeout(method, path, body, reqTimeout)
}

func (c *client) doTimeout(method, path string, body []byte, d time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, b, err
	}
	return resp.StatusCode, b, nil
}

// getJSON GETs path and decodes a 200 answer into v.
func (c *client) getJSON(path string, v any) error {
	st, b, err := c.do("GET", path, nil)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, st, clip(b))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: decode: %v: %s", path, err, clip(b))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- IDs -----------------------------------------------------------------------

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

var idMu sync.Mutex
var idCounter uint64 = uint64(time.Now().UnixMilli()) << 12

// newID returns prefix + "_" + 12 hex digits of a counter + 14 random base62.
func newID(prefix string) string {
	idMu.Lock()
	idCounter++
	n := idCounter
	idMu.Unlock()
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('_')
	fmt.Fprintf(&b, "%012x", n&(1<<48-1))
	for range 14 {
		b.WriteByte(base62[rand.IntN(len(base62))])
	}
	return b.String()
}

// ---- durable history -----------------------------------------------------------

// event is the part of a durable event payload the checks read.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Durable struct {
		AggregateID string `json:"aggregateID"`
		Seq         int64  `json:"seq"`
		Version     int    `json:"version"`
	} `json:"durable"`
	Data struct {
		MessageID          string `json:"messageID"`
		AssistantMessageID string `json:"assistantMessageID"`
		Delivery           string `json:"delivery"`
		Reason             string `json:"reason"`
		Timestamp          int64  `json:"timestamp"`
		Prompt             *struct {
			Text string `json:"text"`
		} `json:"prompt"`
	} `json:"data"`
}

// history is a session's durable log as fetched: raw payload bytes and
// their decoded form, index i holding seq i+1.
type history struct {
	raw []json.RawMessage
	evs []event
}

func (h *history) lastSeq() int64 { return int64(len(h.evs)) }

// fetchHistory pages GET /api/session/{id}/history after h's last seq with
// the given page size and appends to h, checking that pages are gapless,
// consecutive, of the session, and that hasMore is consistent. problems are
// returned as strings; err is a transport failure.
func (c *client) fetchHistory(sid string, h *history, limit int) (problems []string, err error) {
	for pages := 0; ; pages++ {
		if pages > 100000 {
			return append(problems, "history paging does not end"), nil
		}
		after := h.lastSeq()
		path := fmt.Sprintf("/api/session/%s/history?after=%d&limit=%d", sid, after, limit)
		st, b, err := c.do("GET", path, nil)
		if err != nil {
			return problems, err
		}
		if st != http.StatusOK {
			return problems, fmt.Errorf("GET %s: %d %s", path, st, clip(b))
		}
		var page struct {
			Data    []json.RawMessage `json:"data"`
			HasMore *bool             `json:"hasMore"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return problems, fmt.Errorf("GET %s: decode: %v", path, err)
		}
		if page.HasMore == nil {
			problems = append(problems, fmt.Sprintf("GET %s: no hasMore", path))
			return problems, nil
		}
		if *page.HasMore && len(page.Data) != limit {
			problems = append(problems, fmt.Sprintf("GET %s: hasMore=true with %d events (limit %d)", path, len(page.Data), limit))
		}
		if len(page.Data) > limit {
			problems = append(problems, fmt.Sprintf("GET %s: %d events over limit %d", path, len(page.Data), limit))
		}
		for _, raw := range page.Data {
			var e event
			if err := json.Unmarshal(raw, &e); err != nil {
				problems = append(problems, fmt.Sprintf("GET %s: undecodable event %s", path, clip(raw)))
				return problems, nil
			}
			want := h.lastSeq() + 1
			if e.Durable.Seq != want {
				problems = append(problems, fmt.Sprintf("session %s: history after=%d returned seq %d where seq %d was expected (gap or disorder): %s",
					sid, after, e.Durable.Seq, want, clip(raw)))
				return problems, nil
			}
			if e.Durable.AggregateID != sid {
				problems = append(problems, fmt.Sprintf("session %s: event seq %d has aggregateID %q", sid, e.Durable.Seq, e.Durable.AggregateID))
			}
			h.raw = append(h.raw, append(json.RawMessage(nil), raw...))
			h.evs = append(h.evs, e)
		}
		if !*page.HasMore {
			return problems, nil
		}
		if len(page.Data) == 0 {
			problems = append(problems, fmt.Sprintf("GET %s: hasMore=true with an empty page", path))
			return problems, nil
		}
	}
}

// sseFrame is one frame of /api/session/{id}/event.
type sseFrame struct {
	id   string
	data []byte
}

// readSSE reads frames from an event stream body and calls f for each, until
// f returns false or the stream ends. It returns the read error (io.EOF for
// a clean end).
func readSSE(body io.Reader, f func(sseFrame) bool) error {
	br := bufio.NewReaderSize(body, 1<<16)
	var cur sseFrame
	var have bool
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if have {
				if !f(cur) {
					return nil
				}
			}
			cur, have = sseFrame{}, false
		case strings.HasPrefix(line, "id: "):
			cur.id, have = line[4:], true
		case strings.HasPrefix(line, "data: "):
			cur.data, have = append(cur.data, line[6:]...), true
		}
	}
}

// sseSeq returns the seq of a durable frame's id line.
func sseSeq(fr sseFrame) int64 {
	n, err := strconv.ParseInt(fr.id, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// ---- messages (v1) -----------------------------------------------------------

type v1Message struct {
	Info struct {
		ID        string `json:"id"`
		SessionID string `json:"sessionID"`
		Role      string `json:"role"`
		ParentID  string `json:"parentID"`
		Time      struct {
			Created   int64  `json:"created"`
			Completed *int64 `json:"completed"`
		} `json:"time"`
		Error *struct {
			Name string         `json:"name"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	} `json:"info"`
	Parts []struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

func (m v1Message) text() string {
	var ts []string
	for _, p := range m.Parts {
		if p.Type == "text" {
			ts = append(ts, p.Text)
		}
	}
	return strings.Join(ts, "\n")
}

// poll calls f every interval until it returns true or d passes.
func poll(d, interval time.Duration, f func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// answeredOf counts the inputs among ids that have a completed assistant
// answer in the session (read from what is stored: GET .../message), -1
// when the read fails.
func answeredOf(cl *client, sid string, ids []string) int {
	var msgs []struct {
		Info struct {
			Role, ParentID string
			Time           struct{ Completed *int64 }
		}
	}
	if cl.getJSON("/session/"+sid+"/message", &msgs) != nil {
		return -1
	}
	done := map[string]bool{}
	for _, m := range msgs {
		if m.Info.Role == "assistant" && m.Info.Time.Completed != nil {
			done[m.Info.ParentID] = true
		}
	}
	n := 0
	for _, id := range ids {
		if done[id] {
			n++
		}
	}
	return n
}

// clusterDirs makes a test's directory and the project directory its
// instances share.
func clusterDirs(t *testing.T) (dir, project string) {
	t.Helper()
	dir = t.TempDir()
	project = filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, project
}

// startInstances starts the named instances on PostgreSQL database url,
// each with its data and NAME.log under dir, serving project, with args
// added; their clients are closed when the test ends.
func startInstances(t *testing.T, dir, project, url string, names []string, args ...string) ([]*server, []*client) {
	t.Helper()
	var srvs []*server
	var cls []*client
	for _, n := range names {
		srv := startServer(t, filepath.Join(dir, n), filepath.Join(dir, n+".log"), append([]string{"--store", "postgres",
			"--postgres-url", url, "--lease-ttl", clusterTTL.String(), "--directory", project}, args...)...)
		cl := newClient(srv.url)
		t.Cleanup(cl.close)
		srvs, cls = append(srvs, srv), append(cls, cl)
	}
	return srvs, cls
}
