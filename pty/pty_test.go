//go:build !windows

package pty

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu sync.Mutex
	ev []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

func (r *recorder) types() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.ev {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

// waitFor polls cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newManager(t *testing.T, o Options) (*Manager, *recorder) {
	m := New(o)
	r := &recorder{}
	m.OnEvent(r.add)
	t.Cleanup(m.Close)
	return m, r
}

var idN atomic.Int64

func ids() string { return "pty_test" + strconv.FormatInt(idN.Add(1), 10) }

func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z"
}

// TestIdle: a terminal no client is attached to for Idle is removed with
// its processes; one with a client is not.
func TestIdle(t *testing.T) {
	m, r := newManager(t, Options{Idle: 200 * time.Millisecond})
	dir := t.TempDir()
	kept, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "read x"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Attach(dir, kept.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "read x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the idle terminal's removal", func() bool { return strings.Contains(r.types(), EvDeleted) })
	if _, err := m.Get(dir, idle.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("the idle terminal is still there: %v", err)
	}
	if _, err := os.Stat("/proc"); err == nil {
		waitFor(t, "the idle terminal's process to end", func() bool { return processGone(idle.PID) })
	}
	if info, err := m.Get(dir, kept.ID); err != nil || info.Status != Running {
		t.Errorf("the attached terminal: %+v %v", info, err)
	}
	c.Detach()
	waitFor(t, "the detached terminal's removal", func() bool { return strings.Count(r.types(), EvDeleted) == 2 })
}

// TestRetain: exited terminals are remembered up to Retain, the oldest
// then forgotten with pty.deleted; events come in order.
func TestRetain(t *testing.T) {
	m, r := newManager(t, Options{Retain: 1})
	dir := t.TempDir()
	var first Info
	for i := range 2 {
		info, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "exit " + strconv.Itoa(i+4)}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = info
		}
		waitFor(t, "the exit", func() bool { return strings.Count(r.types(), EvExited) == i+1 })
	}
	if got := r.types(); got != "pty.created pty.exited pty.created pty.exited pty.deleted" {
		t.Errorf("events %q", got)
	}
	r.mu.Lock()
	if e := r.ev[1]; e.ExitCode != 4 || e.Info.ID != first.ID {
		t.Errorf("exited %+v", e)
	}
	if e := r.ev[4]; e.Info.ID != first.ID {
		t.Errorf("deleted %+v, want the first", e)
	}
	r.mu.Unlock()
	if _, err := m.Get(dir, first.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("the first is remembered: %v", err)
	}
	if len(m.List(dir)) != 0 {
		t.Errorf("List has exited terminals: %+v", m.List(dir))
	}
}

// TestLaggingClient: a client that fell behind what is kept continues at
// the start of what is kept, and Next says where (the websocket sends
// the cursor then), then gets the end of the output and io.EOF.
func TestLaggingClient(t *testing.T) {
	m, _ := newManager(t, Options{Buffer: 1024})
	dir := t.TempDir()
	info, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "read x; i=0; while [ $i -lt 500 ]; do echo line$i; i=$((i+1)); done"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Attach(dir, info.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	if err := c.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	// Wait, not reading, until the process has exited: the output is
	// longer than what is kept.
	waitFor(t, "the exit", func() bool { i, _ := m.Get(dir, info.ID); return i.Status == Exited })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got strings.Builder
	first := int64(-1)
	for {
		text, at, err := c.Next(ctx, 0)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if first < 0 {
			first = at
		}
		got.Write(text)
	}
	if first <= c.Cursor {
		t.Errorf("Next continued at %d: no jump past the lost output (attached at %d)", first, c.Cursor)
	}
	if !strings.HasSuffix(got.String(), "line499\r\n") || got.Len() > 1024+1024/8 {
		t.Errorf("got %d bytes ending %q", got.Len(), got.String()[max(0, got.Len()-20):])
	}
}

// TestClosed: Close ends every terminal and its clients; Create then fails.
func TestClosed(t *testing.T) {
	m, r := newManager(t, Options{})
	dir := t.TempDir()
	info, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "trap '' HUP; read x"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Attach(dir, info.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	m.Close()
	if _, _, err := c.Next(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	if _, err := os.Stat("/proc"); err == nil && !processGone(info.PID) {
		t.Errorf("process %d (ignoring SIGHUP) runs after Close", info.PID)
	}
	if _, err := m.Create(Spec{ID: ids(), Directory: dir}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: %v", err)
	}
	if got := r.types(); got != "pty.created" {
		t.Errorf("events %q: Close publishes nothing", got)
	}
}

// TestClientCap: a terminal takes Options.Clients clients at once; the
// next Attach is ErrTooManyClients until one detaches.
func TestClientCap(t *testing.T) {
	m, _ := newManager(t, Options{Clients: 2})
	dir := t.TempDir()
	info, err := m.Create(Spec{ID: ids(), Directory: dir, Command: "/bin/sh", Args: []string{"-c", "read x"}})
	if err != nil {
		t.Fatal(err)
	}
	var cs []*Client
	for range 2 {
		c, err := m.Attach(dir, info.ID, -1)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if _, err := m.Attach(dir, info.ID, -1); !errors.Is(err, ErrTooManyClients) {
		t.Fatalf("a third client: %v, want ErrTooManyClients", err)
	}
	cs[0].Detach()
	c, err := m.Attach(dir, info.ID, -1)
	if err != nil {
		t.Fatalf("after a detach: %v", err)
	}
	c.Detach()
	cs[1].Detach()
}
