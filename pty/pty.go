// Package pty runs the terminals of OpenCode's terminal API (/pty): a
// shell on a pseudo-terminal (github.com/creack/pty) in a session of its
// own, its output kept in a bounded buffer with an absolute offset so a
// client that reconnects is sent exactly what it missed, resized by its
// client, and ended with every process it started (the whole session, not
// just the shell) when it is removed, when the shell exits, when it was
// left without a client for too long, and when the manager closes.
//
// What it keeps follows OpenCode 1.18.33's pty service: the last 2 MiB of
// output, the exited terminals (25 at most, for their exit codes), the
// events pty.created, pty.updated, pty.exited and pty.deleted.
package pty

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of the manager.
var (
	ErrNotFound       = errors.New("pty: no such terminal")
	ErrExited         = errors.New("pty: the terminal's process has exited")
	ErrTooMany        = errors.New("pty: too many terminals")
	ErrClosed         = errors.New("pty: the server is shutting down")
	ErrRemoved        = errors.New("pty: the terminal was removed")
	ErrTooManyClients = errors.New("pty: too many clients are attached to the terminal")
	ErrUnsupported    = errors.New("the terminal (/pty) is not supported on Windows")
)

// SpecError is a Create request that cannot be run: Field names what is
// wrong (command, cwd, args, env).
type SpecError struct {
	Field, Message string
}

func (e *SpecError) Error() string { return e.Message }

// Status values of Info.
const (
	Running = "running"
	Exited  = "exited"
)

// Info is a terminal as OpenCode's Pty schema shows it.
type Info struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Command  string   `json:"command"`
	Args     []string `json:"args"`
	Cwd      string   `json:"cwd"`
	Status   string   `json:"status"`
	PID      int      `json:"pid"`
	ExitCode *int     `json:"exitCode,omitempty"`
}

func (i Info) clone() Info {
	i.Args = append([]string{}, i.Args...)
	if i.ExitCode != nil {
		c := *i.ExitCode
		i.ExitCode = &c
	}
	return i
}

// Event types, OpenCode's.
const (
	EvCreated = "pty.created"
	EvUpdated = "pty.updated"
	EvExited  = "pty.exited"
	EvDeleted = "pty.deleted"
)

// Event is a change of a terminal: created and updated carry Info, exited
// Info.ID and ExitCode, deleted Info.ID. Directory is the one the terminal
// was created for.
type Event struct {
	Type      string
	Directory string
	Info      Info
	ExitCode  int
}

// Options configure a Manager; the zero value is OpenCode's limits.
type Options struct {
	// Max caps the terminals running at once (default 32): Create answers
	// ErrTooMany beyond.
	Max int
	// Buffer is how much output each terminal keeps for replay (default 2 MiB).
	Buffer int
	// Clients caps the clients attached to one terminal at once (default
	// 512): Attach answers ErrTooManyClients beyond.
	Clients int
	// Retain is how many exited terminals are remembered (default 25).
	Retain int
	// Idle, if positive, removes a running terminal no client has been
	// attached to for that long.
	Idle time.Duration
	// Grace is how long a removed terminal's processes have after SIGHUP
	// before SIGKILL (default 500 ms).
	Grace time.Duration
	// Env is the environment terminals start from (default os.Environ()).
	Env []string
	// Done, if set, closes the manager when it is closed.
	Done   <-chan struct{}
	Logger *slog.Logger
}

// Spec is a terminal to create. Directory scopes it (the request's
// project directory: lists and look-ups see only their directory's);
// Cwd, relative to Directory, defaults to it.
type Spec struct {
	ID, Directory string
	Command       string
	Args          []string
	Cwd, Title    string
	Env           map[string]string
	Rows, Cols    uint16 // default 24x80
}

// Size is a terminal's size in character cells.
type Size struct{ Rows, Cols uint16 }

// process is the platform's side of a terminal.
type process interface {
	Pid() int
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Resize(rows, cols uint16) error
	Signal(syscall.Signal)
	Wait() int // waits for the process; its exit code
	Close() error
}

// Manager holds the terminals.
type Manager struct {
	o Options

	pubmu    sync.Mutex // held from a state change to its event, so events keep their order
	mu       sync.Mutex
	terms    map[string]*term
	order    []*term // running, in creation order
	exited   []*term // oldest first
	closed   bool
	listen   []func(Event)
	wg       sync.WaitGroup
	watching bool
	stop     chan struct{}
}

// term is one terminal.
type term struct {
	m    *Manager
	dir  string
	info Info // under m.mu
	proc process

	clients int         // under m.mu
	idle    *time.Timer // under m.mu
	removed bool        // under m.mu: no pty.exited for it

	mu      sync.Mutex // the buffer and the end
	buf     buffer
	changed chan struct{} // closed and replaced when output arrives or it ends
	endErr  error         // io.EOF (exited), ErrRemoved, ErrClosed

	ended chan struct{} // the process and its reader are done
}

// New returns a manager. It starts no goroutine until a terminal is created.
func New(o Options) *Manager {
	if o.Max <= 0 {
		o.Max = 32
	}
	if o.Buffer <= 0 {
		o.Buffer = 2 << 20
	}
	if o.Clients <= 0 {
		o.Clients = 512
	}
	if o.Retain <= 0 {
		o.Retain = 25
	}
	if o.Grace <= 0 {
		o.Grace = 500 * time.Millisecond
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Manager{o: o, terms: map[string]*term{}, stop: make(chan struct{})}
}

// OnEvent registers f for every event, called in order, one at a time; f
// must not call the manager.
func (m *Manager) OnEvent(f func(Event)) {
	m.mu.Lock()
	m.listen = append(m.listen, f)
	m.mu.Unlock()
}

// publish calls the listeners; the caller holds pubmu.
func (m *Manager) publish(e Event) {
	m.mu.Lock()
	ls := append([]func(Event){}, m.listen...)
	m.mu.Unlock()
	for _, f := range ls {
		f(e)
	}
}

// Create starts a terminal: Spec.Command with Spec.Args, else the
// preferred shell; a login shell (bash, sh, zsh, ...) gets "-l" after its
// args, as OpenCode starts it. The environment is the manager's with
// Spec.Env over it, TERM=xterm-256color and OPENCODE_TERMINAL=1.
func (m *Manager) Create(s Spec) (Info, error) {
	if !supported {
		return Info{}, ErrUnsupported
	}
	command := s.Command
	if command == "" {
		command = Preferred()
	}
	args := append([]string{}, s.Args...)
	if shellTraits[shellName(command)].login {
		args = append(args, "-l")
	}
	cwd := s.Cwd
	if cwd == "" {
		cwd = s.Directory
	} else if !filepath.IsAbs(cwd) {
		cwd = filepath.Join(s.Directory, cwd)
	}
	if err := checkSpec(command, args, cwd, s.Env); err != nil {
		return Info{}, err
	}
	rows, cols := s.Rows, s.Cols
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	title := s.Title
	if title == "" {
		title = "Terminal " + s.ID[max(0, len(s.ID)-4):]
	}

	m.pubmu.Lock()
	defer m.pubmu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, ErrClosed
	}
	if len(m.order) >= m.o.Max {
		m.mu.Unlock()
		return Info{}, ErrTooMany
	}
	if _, dup := m.terms[s.ID]; dup || s.ID == "" {
		m.mu.Unlock()
		return Info{}, &SpecError{Field: "id", Message: "a terminal needs a new ID"}
	}
	// Started under the lock: the cap holds, and Close sees every process.
	p, err := start(command, args, cwd, m.env(s.Env), rows, cols)
	if err != nil {
		m.mu.Unlock()
		if errors.Is(err, ErrUnsupported) {
			return Info{}, err
		}
		return Info{}, &SpecError{Field: "command", Message: "Cannot start " + command + ": " + err.Error()}
	}
	t := &term{m: m, dir: s.Directory, proc: p, buf: buffer{max: m.o.Buffer}, changed: make(chan struct{}), ended: make(chan struct{}),
		info: Info{ID: s.ID, Title: title, Command: command, Args: args, Cwd: cwd, Status: Running, PID: p.Pid()}}
	m.terms[t.info.ID] = t
	m.order = append(m.order, t)
	m.idleLocked(t)
	m.watchLocked()
	info := t.info.clone()
	m.wg.Add(1)
	m.mu.Unlock()
	go t.run()
	m.publish(Event{Type: EvCreated, Directory: t.dir, Info: info.clone()})
	return info, nil
}

func (m *Manager) env(extra map[string]string) []string {
	over := map[string]string{"TERM": "xterm-256color", "OPENCODE_TERMINAL": "1"}
	for k, v := range extra {
		if _, fixed := over[k]; !fixed {
			over[k] = v
		}
	}
	out := make([]string, 0, len(m.o.Env)+len(over))
	for _, kv := range m.o.Env {
		k, _, _ := strings.Cut(kv, "=")
		if _, replaced := over[k]; !replaced {
			out = append(out, kv)
		}
	}
	for k, v := range over {
		out = append(out, k+"="+v)
	}
	return out
}

// checkSpec refuses what no process can be started with.
func checkSpec(command string, args []string, cwd string, env map[string]string) error {
	if strings.IndexByte(command, 0) >= 0 {
		return &SpecError{Field: "command", Message: "command contains a NUL byte"}
	}
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return &SpecError{Field: "args", Message: "args: an argument contains a NUL byte"}
		}
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return &SpecError{Field: "env", Message: "env: " + clip(k) + " is not a valid variable (a name without = or NUL, a value without NUL)"}
		}
	}
	if strings.IndexByte(cwd, 0) >= 0 {
		return &SpecError{Field: "cwd", Message: "cwd contains a NUL byte"}
	}
	st, err := os.Stat(cwd)
	if err != nil || !st.IsDir() {
		return &SpecError{Field: "cwd", Message: "cwd " + clip(cwd) + " is not a directory"}
	}
	if strings.ContainsRune(command, filepath.Separator) {
		if resolve(command) == "" {
			return &SpecError{Field: "command", Message: "command " + clip(command) + " is not a file"}
		}
	} else if resolve(command) == "" {
		return &SpecError{Field: "command", Message: "command " + clip(command) + " is not found on PATH"}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// watchLocked closes the manager when Options.Done is closed; started
// with the first terminal, so a manager that never runs one has no
// goroutine.
func (m *Manager) watchLocked() {
	if m.o.Done == nil || m.watching {
		return
	}
	m.watching = true
	go func() {
		select {
		case <-m.o.Done:
			m.Close()
		case <-m.stop:
		}
	}()
}

// run reads the terminal's output until the process and everything it
// left in its session are gone, then records the exit.
func (t *term) run() {
	defer t.m.wg.Done()
	read := make(chan struct{})
	go func() {
		defer close(read)
		b := make([]byte, 32<<10)
		for {
			n, err := t.proc.Read(b)
			if n > 0 {
				t.mu.Lock()
				t.buf.write(b[:n])
				t.signalLocked()
				t.mu.Unlock()
			}
			if err != nil {
				return // EIO once no process has the terminal open
			}
		}
	}()
	code := t.proc.Wait()
	select {
	case <-read:
	case <-time.After(2 * time.Second):
		// Something outside the session still holds the terminal open.
		t.m.o.Logger.Warn("pty: output still open after the process exited; closing it", "id", t.info.ID)
	}
	_ = t.proc.Close()
	<-read
	t.mu.Lock()
	t.buf.flush()
	t.mu.Unlock()
	close(t.ended)
	t.m.exit(t, code)
}

func (t *term) signalLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// end tells the clients the terminal ended (after they have read what is
// left of its output, for io.EOF).
func (t *term) end(err error) {
	t.mu.Lock()
	if t.endErr == nil {
		t.endErr = err
		t.signalLocked()
	}
	t.mu.Unlock()
}

// exit records that t's process exited: it ends its clients, and unless
// it was removed it is remembered as exited and pty.exited is published;
// the oldest exited terminals beyond Retain are forgotten (pty.deleted).
func (m *Manager) exit(t *term, code int) {
	m.pubmu.Lock()
	defer m.pubmu.Unlock()
	m.mu.Lock()
	if t.idle != nil {
		t.idle.Stop()
	}
	if t.removed {
		m.mu.Unlock()
		return
	}
	t.info.Status = Exited
	t.info.ExitCode = &code
	m.order = without(m.order, t)
	m.exited = append(m.exited, t)
	var evicted []*term
	for len(m.exited) > m.o.Retain {
		old := m.exited[0]
		m.exited = m.exited[1:]
		delete(m.terms, old.info.ID)
		old.removed = true
		evicted = append(evicted, old)
	}
	if t.clients == 0 {
		t.dropBuffer()
	}
	m.mu.Unlock()
	t.end(io.EOF)
	m.o.Logger.Info("pty: exited", "id", t.info.ID, "exitCode", code)
	m.publish(Event{Type: EvExited, Directory: t.dir, Info: Info{ID: t.info.ID}, ExitCode: code})
	for _, old := range evicted {
		m.publish(Event{Type: EvDeleted, Directory: old.dir, Info: Info{ID: old.info.ID}})
	}
}

// dropBuffer frees an exited terminal's output once no client reads it
// (nobody can attach to an exited terminal).
func (t *term) dropBuffer() {
	t.mu.Lock()
	t.buf.drop()
	t.mu.Unlock()
}

func without(ts []*term, t *term) []*term {
	for i, x := range ts {
		if x == t {
			return append(ts[:i:i], ts[i+1:]...)
		}
	}
	return ts
}

// idleLocked (re)starts t's idle timer when it has no client.
func (m *Manager) idleLocked(t *term) {
	if m.o.Idle <= 0 || t.clients > 0 || t.info.Status != Running {
		return
	}
	if t.idle != nil {
		t.idle.Stop()
	}
	id, dir := t.info.ID, t.dir
	t.idle = time.AfterFunc(m.o.Idle, func() {
		m.mu.Lock()
		still := m.terms[id] == t && t.clients == 0 && t.info.Status == Running
		m.mu.Unlock()
		if still {
			m.o.Logger.Info("pty: removing a terminal left without a client", "id", id, "idle", m.o.Idle)
			_ = m.Remove(dir, id)
		}
	})
}

// find is the terminal id of dir; the caller holds m.mu.
func (m *Manager) find(dir, id string) *term {
	t := m.terms[id]
	if t == nil || t.dir != dir {
		return nil
	}
	return t
}

// List is dir's running terminals, oldest first (OpenCode's /pty lists
// no exited one).
func (m *Manager) List(dir string) []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Info{}
	for _, t := range m.order {
		if t.dir == dir {
			out = append(out, t.info.clone())
		}
	}
	return out
}

// Get is terminal id of dir, running or exited.
func (m *Manager) Get(dir, id string) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.find(dir, id)
	if t == nil {
		return Info{}, ErrNotFound
	}
	return t.info.clone(), nil
}

// Update sets a terminal's title (unless empty) and resizes it (unless
// size is nil or it exited), then publishes pty.updated.
func (m *Manager) Update(dir, id, title string, size *Size) (Info, error) {
	m.pubmu.Lock()
	defer m.pubmu.Unlock()
	m.mu.Lock()
	t := m.find(dir, id)
	if t == nil {
		m.mu.Unlock()
		return Info{}, ErrNotFound
	}
	if title != "" {
		t.info.Title = title
	}
	if size != nil && t.info.Status == Running {
		if err := t.proc.Resize(size.Rows, size.Cols); err != nil {
			m.o.Logger.Warn("pty: resize", "id", id, "err", err)
		}
	}
	info := t.info.clone()
	m.mu.Unlock()
	m.publish(Event{Type: EvUpdated, Directory: dir, Info: info.clone()})
	return info, nil
}

// Remove ends a terminal and every process of its session (SIGHUP, then
// SIGKILL after the grace period), forgets it and publishes pty.deleted.
// It returns once the processes are gone.
func (m *Manager) Remove(dir, id string) error {
	m.mu.Lock()
	t := m.find(dir, id)
	if t == nil {
		m.mu.Unlock()
		return ErrNotFound
	}
	delete(m.terms, id)
	m.order = without(m.order, t)
	m.exited = without(m.exited, t)
	t.removed = true
	if t.idle != nil {
		t.idle.Stop()
	}
	m.mu.Unlock()
	m.o.Logger.Info("pty: removing", "id", id)
	t.terminate(m.o.Grace)
	t.end(ErrRemoved)
	m.pubmu.Lock()
	m.publish(Event{Type: EvDeleted, Directory: dir, Info: Info{ID: id}})
	m.pubmu.Unlock()
	return nil
}

// terminate ends t's session and waits for it.
func (t *term) terminate(grace time.Duration) {
	select {
	case <-t.ended:
		return
	default:
	}
	t.proc.Signal(syscall.SIGHUP)
	select {
	case <-t.ended:
		return
	case <-time.After(grace):
	}
	t.proc.Signal(syscall.SIGKILL)
	select {
	case <-t.ended:
	case <-time.After(5 * time.Second):
		t.m.o.Logger.Error("pty: a terminal's process does not end after SIGKILL", "id", t.info.ID, "pid", t.info.PID)
	}
}

// Close ends every terminal and its processes (publishing nothing: the
// server is going away) and their clients (ErrClosed), and waits for
// them. Later Creates answer ErrClosed.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return
	}
	m.closed = true
	close(m.stop)
	var all []*term
	for _, t := range m.terms {
		t.removed = true
		if t.idle != nil {
			t.idle.Stop()
		}
		all = append(all, t)
	}
	m.terms = map[string]*term{}
	m.order, m.exited = nil, nil
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.terminate(m.o.Grace)
			t.end(ErrClosed)
		}()
	}
	wg.Wait()
	m.wg.Wait()
}
