package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/tool"
)

// An external agent's terminals (clientCapabilities.terminal): the
// commands it runs through us, as our bash tool runs one: in the session's
// directory (a cwd outside it is refused), in their own process group,
// which a kill or the end takes whole, and dying with the server (Linux).
// They are bounded: at most maxTerminals unreleased per agent process,
// and each keeps at most termOutputMax bytes of output (the agent's
// outputByteLimit when smaller), the oldest dropped first. Every one is
// killed when its turn is aborted, and killed and reaped when its process
// stops (the session deleted, idle, a crash, shutdown): none outlives the
// server.

const (
	maxTerminals  = 16
	termOutputMax = 1 << 20
	// termKept is how many released terminals' output a tool call that
	// embeds them may still show.
	termKept = 32
	// termReap bounds the wait for a killed command to be reaped and for
	// its output pipe to close (a process that left the group may hold it).
	termReap = 5 * time.Second
)

// extTerminals are one agent process's terminals.
type extTerminals struct {
	mu sync.Mutex
	n  int
	// starting: slots taken by commands being started.
	starting int
	live     map[string]*extTerminal
	kept     map[string]string // released: their last output
	order    []string          // of kept, oldest first
	closed   bool
}

// extTerminal is one command the agent started.
type extTerminal struct {
	cmd  *exec.Cmd
	pgid int
	out  *termBuffer
	// exited is closed once the command ended, its group was killed and
	// its output read; status is how it ended (set before).
	exited chan struct{}
	status acpclient.TerminalExitStatus
}

// termBuffer keeps the last limit bytes a command printed.
type termBuffer struct {
	mu    sync.Mutex
	limit int
	// b holds at least the last limit bytes; it is cut back to them only
	// when it reaches twice that, so a chatty command's writes do not each
	// copy the whole buffer.
	b []byte
	// written counts every byte written (a watcher sees new output).
	written int64
}

func (b *termBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.written += int64(n)
	b.b = append(b.b, p...)
	if len(b.b) >= 2*b.limit {
		b.b = append(b.b[:0:0], b.b[len(b.b)-b.limit:]...)
	}
	return n, nil
}

// text is the output kept, starting at a character boundary (the cut
// may have split one), and whether some was dropped.
func (b *termBuffer) text() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.b
	truncated := b.written > int64(b.limit)
	if len(out) > b.limit {
		out = out[len(out)-b.limit:]
	}
	if truncated {
		for i := 0; i < utf8.UTFMax && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return string(out), truncated
}

// terminalError is an RPC error for the agent (invalid params).
func terminalError(format string, args ...any) error {
	return &acpclient.RPCError{Code: acpclient.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// serveTerminal answers a terminal/* request of agent process e.
func (x *externals) serveTerminal(ctx context.Context, e *extProc, method string, params json.RawMessage) (any, error) {
	ts := &e.terms
	if method == acpclient.MethodTerminalCreate {
		req, err := decodeParams[acpclient.CreateTerminalRequest](params)
		if err != nil {
			return nil, err
		}
		if line := commandLine(req); x.termDenied(e.agent, line) {
			return nil, terminalError("terminal/create: the permission rules deny the command %q", line)
		}
		return ts.create(e.dir, req)
	}
	req, err := decodeParams[acpclient.TerminalRequest](params)
	if err != nil {
		return nil, err
	}
	if method == acpclient.MethodTerminalRelease {
		if !ts.release(req.TerminalID) {
			return nil, terminalError("unknown terminal %q", req.TerminalID)
		}
		return struct{}{}, nil
	}
	t := ts.get(req.TerminalID)
	if t == nil {
		return nil, terminalError("unknown terminal %q", req.TerminalID)
	}
	switch method {
	case acpclient.MethodTerminalOutput:
		out, truncated := t.out.text()
		res := acpclient.TerminalOutputResponse{Output: out, Truncated: truncated}
		select {
		case <-t.exited:
			res.ExitStatus = &t.status
		default:
		}
		return res, nil
	case acpclient.MethodTerminalWait:
		select {
		case <-t.exited:
			return t.status, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case acpclient.MethodTerminalKill:
		t.kill()
		return struct{}{}, nil
	}
	return nil, &acpclient.RPCError{Code: acpclient.CodeMethodNotFound, Message: "method not found: " + method}
}

// commandLine is the command as our bash tool's permission sees one.
func commandLine(req acpclient.CreateTerminalRequest) string {
	if len(req.Args) == 0 {
		return req.Command
	}
	return strings.Join(append([]string{req.Command}, req.Args...), " ")
}

// termDenied: our permission rules (the defaults, the agent's, the
// config's; not a session's own, which its runner holds) deny the command
// as they would deny our bash tool's. "ask" lets it run: the agent asks
// with session/request_permission before it runs a tool, and that ask is
// ours (extPermission).
func (x *externals) termDenied(agentName, line string) bool {
	var agentRules []Rule
	if a, ok := x.m.agent(agentName); ok {
		agentRules = a.Rules
	}
	return evaluate([][]Rule{DefaultRules, agentRules, x.m.cfg.Rules}, "bash", line) == "deny"
}

// create starts the agent's command: with args, the program itself; a
// command line alone runs in our shell (as agents send one).
func (ts *extTerminals) create(dir string, req acpclient.CreateTerminalRequest) (any, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, terminalError("terminal/create: no command")
	}
	cwd := ""
	if req.Cwd != nil {
		cwd = *req.Cwd
	}
	wd, err := tool.Resolve(dir, cwd)
	if err != nil {
		return nil, terminalError("terminal/create: cwd %s: %v", cwd, err)
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		return nil, terminalError("terminal/create: cwd %s is not a directory", cwd)
	}
	limit := termOutputMax
	if req.OutputByteLimit != nil && *req.OutputByteLimit >= 0 && *req.OutputByteLimit < int64(limit) {
		limit = int(*req.OutputByteLimit)
	}
	// A slot is taken first and the command started outside the lock:
	// the runner reads terminals' output under it and must not wait for
	// a fork.
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return nil, terminalError("terminal/create: the agent is stopping")
	}
	if len(ts.live)+ts.starting >= maxTerminals {
		ts.mu.Unlock()
		return nil, terminalError("terminal/create: %d terminals are open, the most an agent may hold; release one first", maxTerminals)
	}
	ts.starting++
	ts.mu.Unlock()
	t, err := startTerminal(wd, req, limit)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.starting--
	if err != nil {
		return nil, err
	}
	if ts.closed {
		// The process stopped meanwhile: its terminals went with it.
		t.kill()
		return nil, terminalError("terminal/create: the agent is stopping")
	}
	ts.n++
	id := fmt.Sprintf("term_%d", ts.n)
	if ts.live == nil {
		ts.live = map[string]*extTerminal{}
	}
	ts.live[id] = t
	return acpclient.CreateTerminalResponse{TerminalID: id}, nil
}

// startTerminal starts a terminal's command in wd, keeping limit bytes
// of its output; a goroutine reaps it.
func startTerminal(wd string, req acpclient.CreateTerminalRequest, limit int) (*extTerminal, error) {
	var cmd *exec.Cmd
	if len(req.Args) == 0 {
		cmd = exec.Command(termShell(), "-c", req.Command)
	} else {
		cmd = exec.Command(req.Command, req.Args...)
	}
	cmd.Dir = wd
	cmd.Env = os.Environ()
	for _, e := range req.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = termProcAttr()
	// Our own pipe, as the bash tool's: Wait does not wait for the copy,
	// which ends once every holder of the write end is gone.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, terminalError("terminal/create: %v", err)
	}
	pw.Close()
	t := &extTerminal{cmd: cmd, pgid: cmd.Process.Pid, out: &termBuffer{limit: limit}, exited: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(t.out, pr)
		close(copied)
	}()
	go func() {
		err := cmd.Wait()
		// What it left behind in its group goes with it.
		_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
		select {
		case <-copied:
		case <-time.After(termReap):
		}
		pr.Close()
		t.status = exitStatus(cmd, err)
		close(t.exited)
	}()
	return t, nil
}

// exitStatus is how cmd ended: its exit code, or the signal.
func exitStatus(cmd *exec.Cmd, err error) acpclient.TerminalExitStatus {
	ps := cmd.ProcessState
	if ps == nil {
		sig := "unknown"
		if err != nil {
			sig = err.Error()
		}
		return acpclient.TerminalExitStatus{Signal: &sig}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := signalName(ws.Signal())
		return acpclient.TerminalExitStatus{Signal: &sig}
	}
	code := ps.ExitCode()
	return acpclient.TerminalExitStatus{ExitCode: &code}
}

// signalName is a signal as ACP clients name it ("SIGKILL").
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return s.String()
}

// termShell runs a command line: bash, else sh (as the bash tool).
func termShell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

func (ts *extTerminals) get(id string) *extTerminal {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.live[id]
}

// kill ends the terminal's command and its group (the terminal stays:
// its output and exit status can still be read).
func (t *extTerminal) kill() {
	select {
	case <-t.exited:
		return // reaped, group killed: its ID may be another's now
	default:
	}
	_ = syscall.Kill(-t.pgid, syscall.SIGKILL)
}

// release kills the terminal and forgets it, keeping its output for the
// tool calls that show it; false for an unknown one.
func (ts *extTerminals) release(id string) bool {
	ts.mu.Lock()
	t := ts.live[id]
	delete(ts.live, id)
	ts.mu.Unlock()
	if t == nil {
		return false
	}
	t.kill()
	select {
	case <-t.exited:
	case <-time.After(termReap):
	}
	out, _ := t.out.text()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.kept == nil {
		ts.kept = map[string]string{}
	}
	ts.kept[id] = out
	ts.order = append(ts.order, id)
	if len(ts.order) > termKept {
		delete(ts.kept, ts.order[0])
		ts.order = ts.order[1:]
	}
	return true
}

// output is what terminal id printed so far (live or released).
func (ts *extTerminals) output(id string) (string, bool) {
	ts.mu.Lock()
	t, out, ok := ts.live[id], "", false
	if t == nil {
		out, ok = ts.kept[id]
	}
	ts.mu.Unlock()
	if t != nil {
		out, _ = t.out.text()
		ok = true
	}
	return out, ok
}

// killAll kills every running command (the turn was aborted); the
// terminals stay until released or their process stops.
func (ts *extTerminals) killAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.live {
		t.kill()
	}
}

// closeAll kills every command and waits for each to be reaped (the
// process stops); no terminal is created after.
func (ts *extTerminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	live := ts.live
	ts.live = nil
	ts.mu.Unlock()
	for _, t := range live {
		t.kill()
	}
	for _, t := range live {
		select {
		case <-t.exited:
		case <-time.After(termReap):
		}
	}
}

// count is how many bytes the command has printed.
func (b *termBuffer) count() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}
