package crashtest

// Crash tests of a revert's file restore and of a compaction: the server is
// killed with SIGKILL while either runs and must recover a consistent state
// from its data directory.

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// ---- a project and its files -----------------------------------------------

// tree is a project's files: relative path -> hash of mode and content.
// Directories are not in it (git does not track empty ones), nor is .git.
type tree map[string]string

func hashTree(t testing.TB, root string) tree {
	t.Helper()
	tr, err := readTree(root)
	if err != nil {
		t.Fatalf("hashing %s: %v", root, err)
	}
	return tr
}

// readTree hashes every file under root; an error means the files changed
// while they were read (or cannot be read).
func readTree(root string) (tree, error) {
	out := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := sha256.New()
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "symlink %s", target)
		} else {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%o ", fi.Mode().Perm()&0o111)
			h.Write(b)
		}
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%x", h.Sum(nil))
		return nil
	})
	return out, err
}

// touch sets every file's modification time to now (content unchanged).
func touch(t testing.TB, root string) {
	t.Helper()
	now := time.Now()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			return os.Chtimes(p, now, now)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sum is one hash of the whole tree (every path and content).
func (tr tree) sum() string {
	keys := make([]string, 0, len(tr))
	for k := range tr {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\n", k, tr[k])
	}
	return fmt.Sprintf("%x", h.Sum(nil))[:16]
}

// diff describes how got differs from want: files missing, extra and
// with other content (the first few of each).
func (tr tree) diff(want tree) string {
	var missing, extra, changed []string
	for k, v := range want {
		g, ok := tr[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case g != v:
			changed = append(changed, k)
		}
	}
	for k := range tr {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	few := func(s []string) string {
		sort.Strings(s)
		if len(s) > 5 {
			return fmt.Sprintf("%d (%s …)", len(s), strings.Join(s[:5], ", "))
		}
		return fmt.Sprintf("%d %v", len(s), s)
	}
	return fmt.Sprintf("missing %s, extra %s, other content %s", few(missing), few(extra), few(changed))
}

// gitProject makes dir a git work tree (snapshots are taken only there)
// with dirs×perDir files of about size bytes each: d00/f000.txt, ...
func gitProject(t testing.TB, dir string, dirs, perDir, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	line := strings.Repeat("the quick brown fox jumps over the lazy dog ", 2) + "\n"
	for d := range dirs {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range perDir {
			var b strings.Builder
			fmt.Fprintf(&b, "file d%02d/f%03d\n", d, f)
			for b.Len() < size {
				b.WriteString(line)
			}
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", f)), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// stubConfig writes an opencode.json whose default model is the stub's.
func stubConfig(t testing.TB, dir, stubURL string) string {
	t.Helper()
	cfg := filepath.Join(dir, "opencode.json")
	if err := os.WriteFile(cfg, []byte(`{"model":"stub/stub-model","permission":{"bash":"allow","edit":"allow","external_directory":"allow"},`+
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible",`+
		`"options":{"baseURL":"`+stubURL+`","apiKey":"k"},"models":{"stub-model":{"tool_call":true}}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// sessionState is the part of GET /session/{id} these tests read.
type sessionState struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
	Revert    *struct {
		MessageID string `json:"messageID"`
		Snapshot  string `json:"snapshot"`
	} `json:"revert"`
}

// storedMessage is a v1 message with what the compaction test reads.
type storedMessage struct {
	Info struct {
		ID       string          `json:"id"`
		Role     string          `json:"role"`
		ParentID string          `json:"parentID"`
		Summary  json.RawMessage `json:"summary"`
		Time     struct {
			Completed *int64 `json:"completed"`
		} `json:"time"`
		Error *struct {
			Name string `json:"name"`
		} `json:"error"`
	} `json:"info"`
	Parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"parts"`
}

func (m storedMessage) isSummary() bool { return string(m.Info.Summary) == "true" }

func (m storedMessage) text() string {
	var ts []string
	for _, p := range m.Parts {
		if p.Type == "text" {
			ts = append(ts, p.Text)
		}
	}
	return strings.Join(ts, "")
}

func createSession(t testing.TB, cl *client) string {
	t.Helper()
	sid := newID("ses")
	if st, body, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create session: %d %v %s", st, err, body)
	}
	return sid
}

// promptBlocking sends a v1 prompt and waits for the turn's answer.
func promptBlocking(t testing.TB, cl *client, sid, msgID, text string, d time.Duration) {
	t.Helper()
	st, body, err := cl.doTimeout("POST", "/session/"+sid+"/message", mustJSON(map[string]any{"messageID": msgID,
		"parts": []any{map[string]any{"type": "text", "text": text}}}), d)
	if err != nil || st != 200 {
		t.Fatalf("prompt %s: %d %v %s", msgID, st, err, clip(body))
	}
}

func idle(cl *client, sid string) bool {
	var status map[string]any
	return cl.getJSON("/session/status", &status) == nil && status[sid] == nil
}

// ---- processes ----------------------------------------------------------------

// proc is a process the server started (its git commands), named by pid
// and start time (so a reused pid is not taken for it).
type proc struct {
	pid   int
	start string
	cmd   string
}

func (p proc) String() string { return fmt.Sprintf("%d %q", p.pid, p.cmd) }

// alive reports whether p still runs (a zombie is not running).
func (p proc) alive() bool {
	st, ok := procStat(p.pid)
	return ok && st.start == p.start && st.state != "Z"
}

type procStatus struct {
	ppid         int
	state, start string
}

// procStat reads /proc/pid/stat: pid (comm) state ppid ... starttime
// (field 22); comm may hold spaces and parentheses.
func procStat(pid int) (procStatus, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatus{}, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStatus{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStatus{}, false
	}
	pp, _ := strconv.Atoi(f[1])
	return procStatus{ppid: pp, state: f[0], start: f[19]}, true
}

// descendants lists the processes under pid.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	stats := map[int]procStatus{}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := procStat(n); ok {
				stats[n] = st
			}
		}
	}
	var out []proc
	for n, st := range stats {
		for p, depth := st.ppid, 0; p > 1 && depth < 64; p, depth = stats[p].ppid, depth+1 {
			if p == pid {
				cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(n) + "/cmdline")
				out = append(out, proc{pid: n, start: st.start, cmd: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
				break
			}
		}
	}
	return out
}

// runsChild reports whether a child process of pid has sub in its
// command line (read from /proc/pid/task/*/children).
func runsChild(pid int, sub string) bool {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + c + "/cmdline")
			if strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), sub) {
				return true
			}
		}
	}
	return false
}

// newServerPid finds a server binary started by this test process (me)
// other than old (0: none yet).
func newServerPid(me string, old int) int {
	tasks, _ := filepath.Glob("/proc/" + me + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(c)
			if n == old {
				continue
			}
			if cmd, _ := os.ReadFile("/proc/" + c + "/cmdline"); strings.HasPrefix(string(cmd), binPath+"\x00") {
				return n
			}
		}
	}
	return 0
}

// killServer kills the server with SIGKILL and returns the processes it
// had started. With children, they are killed with it, as a service
// manager or a container runtime kills a whole cgroup (or as a power loss
// ends them); without, only the server dies, as when it crashes or the
// kernel's OOM killer picks it, and its children are left stopped, for
// throttle to let them run on as orphans.
func (s *server) killServer(children bool) []proc {
	select {
	case <-s.exited:
		return nil
	default:
	}
	pid := s.cmd.Process.Pid
	// Stopped, it starts nothing new while its children are listed.
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := descendants(pid)
	for _, c := range kids {
		if children {
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
		} else {
			_ = syscall.Kill(c.pid, syscall.SIGSTOP) // throttle lets it go on
		}
	}
	s.kill()
	return kids
}

// throttle keeps procs (left stopped by killServer) stopped until the
// next server this test starts (not old) runs a git command of its own, its
// recovery, or until started is closed (it listens), whichever comes first;
// then it lets them go on slowly, as on a loaded machine (stopped 20 ms of
// every 25), until they end or stop is called: they run on at full speed
// then.
func throttle(procs []proc, old int, started <-chan struct{}) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if len(procs) == 0 {
			return
		}
		defer func() {
			for _, p := range procs {
				if p.alive() {
					_ = syscall.Kill(p.pid, syscall.SIGCONT)
				}
			}
		}()
		me := strconv.Itoa(os.Getpid())
	wait:
		for next := 0; ; {
			select {
			case <-done:
				return
			case <-started:
				break wait
			case <-time.After(200 * time.Microsecond):
			}
			if next == 0 {
				next = newServerPid(me, old)
			} else if runsChild(next, "--git-dir") {
				break wait
			}
		}
		sig := func(s syscall.Signal) (n int) {
			for _, p := range procs {
				if p.alive() {
					_ = syscall.Kill(p.pid, s)
					n++
				}
			}
			return n
		}
		for {
			if sig(syscall.SIGCONT) == 0 {
				return
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			sig(syscall.SIGSTOP)
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// ---- SIGKILL during a revert -----------------------------------------------

// TestKillDuringRevert: a turn's bash call changes about 2,000 files of a
// git project (modifies 1,000, adds 500, deletes 500); the session is then
// reverted to before that turn (POST /session/{id}/revert) and the server
// is killed with SIGKILL during the revert, five times: 50 and 250 ms
// after the request, while the revert's first snapshot (git add) runs,
// while its git checkout-index rewrites the files, and half-way through
// its restore (from its restore intent on). After each restart on the same
// data directory the session and the files agree, checked again and again
// until every process the killed server started has ended, and once more
// then: either the session is reverted and the project is exactly as
// before the turn, or it is not and the project is exactly as the turn
// left it (every file's path and content compared). The restarted server
// logs no error, every revert and unrevert after a restart works, and an
// unrevert brings back exactly the files the turn left.
//
// Only the server is killed here, as when it crashes or the OOM killer
// picks it: the git command it was running goes on as an orphan, slowed
// down as on a loaded machine, so that it is still at work while the
// restarted server recovers.
func TestKillDuringRevert(t *testing.T) { killDuringRevert(t, false) }

// TestKillDuringRevertWithChildren is TestKillDuringRevert with the git
// commands the server runs killed with it, as a service manager or a
// container runtime kills a whole cgroup: what a git command killed
// half-way leaves in the snapshot repository must not break the next
// snapshot, revert or restore.
func TestKillDuringRevertWithChildren(t *testing.T) { killDuringRevert(t, true) }

func killDuringRevert(t *testing.T, children bool) {
	begin := time.Now()
	root := t.TempDir()
	project := filepath.Join(root, "project")
	dataDir := filepath.Join(root, "data")
	logDir := filepath.Join(root, "logs")
	for _, d := range []string{dataDir, logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitProject(t, project, 20, 100, 4096)
	before := hashTree(t, project)

	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(2))
	cfg := stubConfig(t, root, stub.URL())
	var logs []string
	start := func() (*server, *client) {
		logPath := filepath.Join(logDir, fmt.Sprintf("run-%02d.log", len(logs)))
		logs = append(logs, logPath)
		srv := startServer(t, dataDir, logPath, "--directory", project, "--config", cfg)
		return srv, newClient(srv.url)
	}
	defer func() {
		if t.Failed() {
			for _, l := range logs[max(0, len(logs)-2):] {
				t.Logf("server log:\n%s", tail(l, 25))
			}
		}
	}()

	srv, cl := start()
	defer func() { srv.kill(); cl.close() }()
	sid := createSession(t, cl)
	var sess sessionState
	if err := cl.getJSON("/session/"+sid, &sess); err != nil {
		t.Fatal(err)
	}
	if sess.Directory != project {
		t.Fatalf("session directory %q, want the project %q", sess.Directory, project)
	}
	intent := filepath.Join(dataDir, "snapshot", "intent", sid+".json")

	// One turn: a bash call that changes ~2,000 files.
	script := `set -e
for f in d0[0-9]/*.txt; do echo "changed by the turn" >> "$f"; done
for d in 0 1 2 3 4; do mkdir -p n$d; for i in $(seq 1 100); do printf 'new file %s %s\n' $d $i > n$d/g$i.txt; done; done
rm -f d1[5-9]/*.txt
echo done`
	args, _ := json.Marshal(map[string]any{"command": script, "timeout": 120000})
	turnMsg := newID("msg")
	promptBlocking(t, cl, sid, turnMsg, "call:bash "+string(args)+" then: files changed", 60*time.Second)
	after := hashTree(t, project)
	if after.sum() == before.sum() {
		t.Fatalf("the turn changed no files (bash did not run?)")
	}
	t.Logf("the turn (at %v): %s", time.Since(begin).Round(time.Millisecond), after.diff(before))

	// state reads the session's revert and the files: problem says how
	// they disagree ("" when they agree).
	state := func(cl *client) (reverted bool, problem string) {
		var s sessionState
		if err := cl.getJSON("/session/"+sid, &s); err != nil {
			return false, err.Error()
		}
		now, err := readTree(project)
		switch {
		case err != nil:
			return s.Revert != nil, fmt.Sprintf("the project's files change under the server (%v)", err)
		case s.Revert != nil && s.Revert.MessageID != turnMsg:
			return true, fmt.Sprintf("session reverted to %s, want %s", s.Revert.MessageID, turnMsg)
		case s.Revert != nil && now.sum() != before.sum():
			return true, fmt.Sprintf("the session is reverted but the files are not as before the reverted message: %s (against the turn's files: %s)",
				now.diff(before), now.diff(after))
		case s.Revert == nil && now.sum() != after.sum():
			return false, fmt.Sprintf("the session is not reverted but the files are not as the turn left them: %s (against the files before the turn: %s)",
				now.diff(after), now.diff(before))
		}
		return s.Revert != nil, ""
	}
	check := func(what string, cl *client) (reverted bool) {
		t.Helper()
		reverted, problem := state(cl)
		if problem != "" {
			t.Fatalf("%s: %s", what, problem)
		}
		return reverted
	}
	unrevert := func(what string, cl *client) {
		t.Helper()
		if st, body, err := cl.doTimeout("POST", "/session/"+sid+"/unrevert", nil, 60*time.Second); err != nil || st != 200 {
			t.Fatalf("%s: unrevert: %d %v %s\n%v", what, st, err, clip(body), errorLines(logs[len(logs)-1]))
		}
		var s sessionState
		if err := cl.getJSON("/session/"+sid, &s); err != nil {
			t.Fatal(err)
		}
		if s.Revert != nil {
			t.Fatalf("%s: the session is still reverted after an unrevert", what)
		}
		if now := hashTree(t, project); now.sum() != after.sum() {
			t.Fatalf("%s: after the unrevert the files are not as the turn left them: %s", what, now.diff(after))
		}
	}
	type answer struct {
		status int
		body   []byte
		err    error
		at     time.Duration
	}
	// revert starts one revert; its answer (status 0: none) comes on the
	// channel.
	revert := func(cl *client) (time.Time, chan answer) {
		ch := make(chan answer, 1)
		t0 := time.Now()
		go func() {
			st, body, err := cl.doTimeout("POST", "/session/"+sid+"/revert", mustJSON(map[string]any{"messageID": turnMsg}), 60*time.Second)
			if err != nil {
				st = 0
			}
			ch <- answer{st, body, err, time.Since(t0)}
		}()
		return t0, ch
	}
	// waitIntent waits for the revert's restore intent to appear; answered
	// is set when the revert was answered first (a is its answer).
	waitIntent := func(what string, ch chan answer) (a answer, answered bool) {
		if !poll(30*time.Second, 500*time.Microsecond, func() bool {
			if _, err := os.Stat(intent); err == nil {
				return true
			}
			select {
			case a = <-ch:
				answered = true
			default:
			}
			return answered
		}) {
			t.Fatalf("%s: the revert neither wrote its restore intent (%s) nor was answered within 30s", what, intent)
		}
		return a, answered
	}

	// Without a crash first: how long a revert takes here, and its
	// restore (from its intent to its answer).
	t0, ch := revert(cl)
	a, answered := waitIntent("uninterrupted revert", ch)
	if answered {
		t.Fatalf("the revert was answered (%d %v %s) without a restore intent at %s", a.status, a.err, clip(a.body), intent)
	}
	toIntent := time.Since(t0)
	a = <-ch
	if a.status != 200 {
		t.Fatalf("revert: %d %s", a.status, clip(a.body))
	}
	restore := a.at - toIntent
	if !check("uninterrupted revert", cl) {
		t.Fatal("the revert answered 200 but the session is not reverted")
	}
	unrevert("uninterrupted revert", cl)
	t.Logf("an uninterrupted revert took %v, its restore (from the intent on) %v",
		a.at.Round(time.Millisecond), restore.Round(time.Millisecond))

	// waitGit waits until the server runs a git command whose arguments
	// hold sub (after the intent, when afterIntent); answered is set when
	// the revert was answered first (a is its answer).
	waitGit := func(what, sub string, afterIntent bool, ch chan answer) (a answer, answered bool) {
		if !poll(30*time.Second, 200*time.Microsecond, func() bool {
			select {
			case a = <-ch:
				answered = true
				return true
			default:
			}
			if afterIntent {
				if _, err := os.Stat(intent); err != nil {
					return false
				}
			}
			return runsChild(srv.cmd.Process.Pid, sub)
		}) {
			t.Fatalf("%s: the revert ran no git %s and was not answered within 30s", what, sub)
		}
		return a, answered
	}

	type try struct {
		// after is what the kill waits for: "request" (the delay is
		// counted from the revert's request), "intent" (from its restore
		// intent, written just before the files change), or "add" or
		// "checkout-index" (the kill comes while the revert runs that git
		// command; the delay is ignored).
		after string
		delay time.Duration
	}
	tries := []try{
		{"request", 50 * time.Millisecond}, {"request", 250 * time.Millisecond},
		{"add", 0}, {"checkout-index", 0}, {"intent", restore / 2},
	}
	var cut, finished, orphans int
	for i, tr := range tries {
		what := fmt.Sprintf("try %d (killed %v after the %s)", i+1, tr.delay.Round(time.Millisecond), tr.after)
		switch tr.after {
		case "add":
			what = fmt.Sprintf("try %d (killed while the revert's git add runs)", i+1)
			// Every file touched (same content): the revert's first
			// snapshot re-reads them all, so its git add runs long enough
			// to be caught.
			touch(t, project)
		case "checkout-index":
			what = fmt.Sprintf("try %d (killed while the revert's git checkout-index runs)", i+1)
		}
		_, ch := revert(cl)
		var a answer
		answered := false
		switch tr.after {
		case "request":
			time.Sleep(tr.delay)
		case "intent":
			if a, answered = waitIntent(what, ch); !answered {
				time.Sleep(tr.delay)
			}
		case "add":
			a, answered = waitGit(what, " add --all", false, ch)
		case "checkout-index":
			a, answered = waitGit(what, " checkout-index", true, ch)
		}
		kids := srv.killServer(children)
		var running []proc
		for _, k := range kids {
			if !children && k.alive() {
				running = append(running, k)
			}
		}
		if len(running) > 0 {
			orphans++
		}
		// They go on, slowly, once the restarted server recovers: still at
		// work then.
		started := make(chan struct{})
		stopThrottle := throttle(running, srv.cmd.Process.Pid, started)
		t.Cleanup(stopThrottle)
		cl.close()
		if !answered {
			a = <-ch
		}
		if a.status != 0 && a.status != 200 {
			t.Fatalf("%s: revert: %d %s\n%v", what, a.status, clip(a.body), errorLines(logs[len(logs)-1]))
		}
		if a.status == 0 {
			cut++
		}

		srv, cl = start()
		close(started)
		if strings.Contains(readFile(logs[len(logs)-1]), "finished an interrupted revert") {
			finished++
		}
		atRestart := what + ", at the restart"
		if len(running) > 0 {
			atRestart += fmt.Sprintf(" (processes the killed server started still running: %v)", running)
		}
		reverted := check(atRestart, cl)
		if a.status == 200 && !reverted {
			t.Fatalf("%s: the revert was answered 200 before the kill, but after the restart the session is not reverted", what)
		}
		// What the killed server left running goes on: the files must
		// agree with the session all the while and once it has ended.
		checks := 0
		if !poll(30*time.Second, time.Millisecond, func() bool {
			gone := true
			for _, k := range running {
				gone = gone && !k.alive()
			}
			again, problem := state(cl)
			checks++
			if problem == "" && again != reverted {
				problem = fmt.Sprintf("the session's revert changed from %v to %v without a request", reverted, again)
			}
			if problem != "" {
				t.Fatalf("%s, %d checks after the restart (processes the killed server started still running: %v): %s", what, checks, running, problem)
			}
			return gone
		}) {
			t.Fatalf("%s: processes of the killed server still run after 30s: %v", what, running)
		}
		stopThrottle()
		for _, l := range errorLines(logs[len(logs)-1]) {
			t.Errorf("%s: the restarted server logged an error: %s", what, l)
		}
		t.Logf("%s: answered %v, %d processes of the killed server ran on (%v); after the restart reverted=%v (%d checks; at %v)",
			what, a.status != 0, len(running), running, reverted, checks, time.Since(begin).Round(time.Millisecond))
		if t.Failed() {
			return
		}
		// Every revert and unrevert works after the restart.
		if reverted {
			unrevert(what, cl)
		}
	}
	t.Logf("coverage: %d of %d reverts were cut off by the kill, %d restarts finished an interrupted revert, %d kills left git running (children killed too: %v)",
		cut, len(tries), finished, orphans, children)
	if finished == 0 {
		t.Errorf("no restart finished an interrupted revert: no kill hit the restore")
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// ---- SIGKILL during a compaction ---------------------------------------------

// summaryText is what the stub answers a compaction request with: long,
// streamed slowly, so a kill finds it half-written.
var summaryText = "## Objective\nSUMMARY-MARK-31337 keep the three facts. " + strings.Repeat("The facts are recorded above and stay. ", 12) + "END-OF-SUMMARY-31337"

// isCompactionRequest tells a compaction's model call from a turn's: its
// single user message carries the conversation.
func isCompactionRequest(r stubmodel.Request) bool {
	for _, m := range r.Messages {
		if m.Role == "user" && strings.Contains(m.Content, "<conversation>") {
			return true
		}
	}
	return false
}

func decodeStubRequests(t testing.TB, stub *stubmodel.Server) []stubmodel.Request {
	t.Helper()
	var out []stubmodel.Request
	for _, b := range stub.Requests() {
		var r stubmodel.Request
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("stub request: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// conversationOf lists a request's messages as role: content, the system
// prompt left out.
func conversationOf(r stubmodel.Request) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != "system" {
			out = append(out, m.Role+": "+m.Content)
		}
	}
	return out
}

// TestKillDuringCompaction: a session with three turns of recognizable
// texts is compacted (POST /session/{id}/summarize) and the server is
// killed with SIGKILL while the compaction's model call streams (0.1 s
// and 1 s into the stub's 2 s answer). After the restart on the same data directory the compaction
// is redone from the stored transcript without any client request: the
// model gets a compaction request holding the earlier conversation, the
// session gets a complete summary (an assistant message with summary:
// true) and goes idle; a later prompt (and one after another restart)
// reaches the model with the summary as its context, not with "What did
// we do so far?" alone.
func TestKillDuringCompaction(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	dataDir := filepath.Join(root, "data")
	for _, d := range []string{project, dataDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub := stubmodel.NewServer(t, func(r stubmodel.Request) stubmodel.Response {
		if isCompactionRequest(r) {
			return stubmodel.Response{Text: summaryText, Chunks: 40, Delay: 50 * time.Millisecond}
		}
		return stubmodel.Echo(r)
	})
	cfg := stubConfig(t, root, stub.URL())
	var logs []string
	start := func() (*server, *client) {
		logPath := filepath.Join(root, fmt.Sprintf("run-%02d.log", len(logs)))
		logs = append(logs, logPath)
		srv := startServer(t, dataDir, logPath, "--directory", project, "--config", cfg)
		return srv, newClient(srv.url)
	}
	defer func() {
		if t.Failed() {
			for _, l := range logs[max(0, len(logs)-2):] {
				t.Logf("server log:\n%s", tail(l, 25))
			}
		}
	}()
	srv, cl := start()
	defer func() { srv.kill(); cl.close() }()

	messages := func(sid string) []storedMessage {
		var msgs []storedMessage
		if err := cl.getJSON("/session/"+sid+"/message", &msgs); err != nil {
			return nil
		}
		return msgs
	}
	// Killed early in the model's answer, and half-way through it (the
	// stub takes 2 s). Deltas are not stored: the cut-off summary message
	// is stored empty either way.
	for _, killAfter := range []time.Duration{100 * time.Millisecond, time.Second} {
		what := fmt.Sprintf("killed %v into the compaction's model call", killAfter)
		sid := createSession(t, cl)
		tag := sid[len(sid)-6:]
		facts := []string{"alpha-kiwi-" + tag + " is the first fact", "bravo-mango-" + tag + " is the second fact",
			"charlie-papaya-" + tag + " is the third fact"}
		for _, f := range facts {
			promptBlocking(t, cl, sid, newID("msg"), f, 30*time.Second)
		}
		compactions := func() []stubmodel.Request {
			var out []stubmodel.Request
			for _, r := range decodeStubRequests(t, stub) {
				if isCompactionRequest(r) && strings.Contains(r.Messages[len(r.Messages)-1].Content, facts[0]) {
					out = append(out, r)
				}
			}
			return out
		}

		answered := make(chan int, 1)
		go func() {
			st, _, err := cl.doTimeout("POST", "/session/"+sid+"/summarize", mustJSON(map[string]any{"providerID": "stub", "modelID": "stub-model"}), 60*time.Second)
			if err != nil {
				st = 0
			}
			answered <- st
		}()
		if !poll(20*time.Second, time.Millisecond, func() bool { return len(compactions()) == 1 }) {
			t.Fatalf("%s: the compaction's model call never came", what)
		}
		time.Sleep(killAfter)
		srv.kill()
		cl.close()
		if st := <-answered; st != 0 {
			t.Fatalf("%s: the summarize request was answered (%d) before the kill: the kill came too late", what, st)
		}
		if n := len(compactions()); n != 1 {
			t.Fatalf("%s: %d compaction model calls before the kill, want 1", what, n)
		}

		srv, cl = start()
		// Redone without a request: a second compaction call, then idle
		// with a complete summary.
		var summary *storedMessage
		if !poll(30*time.Second, 20*time.Millisecond, func() bool {
			if !idle(cl, sid) {
				return false
			}
			summary = nil
			for _, m := range messages(sid) {
				if m.Info.Role == "assistant" && m.isSummary() && m.Info.Error == nil && m.Info.Time.Completed != nil {
					summary = &m
				}
			}
			return summary != nil
		}) {
			var got []string
			for _, m := range messages(sid) {
				got = append(got, fmt.Sprintf("%s summary=%s error=%v completed=%v %q", m.Info.Role, m.Info.Summary, m.Info.Error, m.Info.Time.Completed != nil, clip([]byte(m.text()))))
			}
			t.Fatalf("%s: after the restart the session did not get a complete summary and go idle: idle=%v, messages:\n%s",
				what, idle(cl, sid), strings.Join(got, "\n"))
		}
		if summary.text() != summaryText {
			t.Errorf("%s: the summary after the restart is %q, want the model's whole answer %q", what, summary.text(), summaryText)
		}
		cs := compactions()
		if len(cs) != 2 {
			t.Fatalf("%s: %d compaction model calls in all, want 2 (the cut-off one, the redone one)", what, len(cs))
		}
		redo := cs[1].Messages[len(cs[1].Messages)-1].Content
		for _, f := range facts {
			if !strings.Contains(redo, f) || !strings.Contains(redo, "You said: "+f) {
				t.Errorf("%s: the redone compaction's request lacks the earlier conversation %q (and its answer): %s", what, f, clip([]byte(redo)))
			}
		}
		if strings.Contains(redo, "SUMMARY-MARK") {
			t.Errorf("%s: the redone compaction's request holds the cut-off summary: %s", what, clip([]byte(redo)))
		}
		var shown []string
		for _, m := range messages(sid) {
			if m.Info.Role == "assistant" && m.isSummary() {
				shown = append(shown, fmt.Sprintf("error=%v completed=%v text=%d bytes", m.Info.Error, m.Info.Time.Completed != nil, len(m.text())))
			}
		}
		t.Logf("%s: summary messages after the restart: %v", what, shown)

		// A later prompt, and one after another restart (the model's view
		// rebuilt from what is stored), start from the summary.
		later := func(label, text string) {
			t.Helper()
			n := len(decodeStubRequests(t, stub))
			promptBlocking(t, cl, sid, newID("msg"), text, 30*time.Second)
			reqs := decodeStubRequests(t, stub)[n:]
			var req *stubmodel.Request
			for i := range reqs {
				if !isCompactionRequest(reqs[i]) && strings.Contains(reqs[i].LastUserText(), text) {
					req = &reqs[i]
				}
			}
			if req == nil {
				t.Fatalf("%s: %s: the model got no request for %q", what, label, text)
			}
			conv := conversationOf(*req)
			withSummary := 0
			for _, m := range req.Messages {
				if m.Role == "assistant" && strings.Contains(m.Content, "END-OF-SUMMARY-31337") {
					withSummary++
				}
			}
			if withSummary == 0 {
				t.Errorf("%s: %s: the model's context for %q does not hold the summary: %q", what, label, text, conv)
			}
			if len(conv) <= 2 {
				t.Errorf("%s: %s: the model's context for %q is only %q", what, label, text, conv)
			}
			t.Logf("%s: %s: the model's context: %d messages, %d with the whole summary: %q", what, label, len(conv), withSummary, conv)
		}
		later("a prompt after the restart", "delta-lime-"+tag+" what next?")
		srv.kill()
		cl.close()
		srv, cl = start()
		later("a prompt after one more restart", "echo-plum-"+tag+" and now?")
		for _, l := range logs[len(logs)-2:] {
			for _, e := range errorLines(l) {
				t.Errorf("%s: a restarted server logged an error: %s", what, e)
			}
		}
	}
}
