//go:build linux

package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestPTYSocketMemory: 300 websockets that never read, on a terminal
// with a full 2 MiB scrollback, each asking for all of it, through the
// real binary. They share the terminal's one buffer: the server's RSS
// grows by less than 50 MB (each held a copy of its own: 875 MB), and is
// back there after they close. The sockets come from five loopback
// addresses (60 each, under the 64 an address may hold); the 65th from
// one address is refused with a 429.
func TestPTYSocketMemory(t *testing.T) {
	const sockets, addrs, perAddr, limitMB = 300, 5, 64, 50
	dir := t.TempDir()
	srv := startServer(t, filepath.Join(dir, "data"), filepath.Join(dir, "run.log"), "--log-level", "warn")
	cl := newClient(srv.url)
	defer cl.close()
	pid := srv.cmd.Process.Pid

	// 3 MB of output, then a mark; the shell then waits. What is kept is
	// the last 2 MiB.
	st, b, err := cl.do("POST", "/pty", mustJSON(map[string]any{"command": "/bin/sh", "args": []string{"-c",
		`yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 3000000; echo; echo EN""D; exec sleep 600`}}))
	if err != nil || st != 200 {
		t.Fatalf("POST /pty: %d %v %s", st, err, b)
	}
	var term struct{ ID string }
	if err := json.Unmarshal(b, &term); err != nil || term.ID == "" {
		t.Fatalf("POST /pty: %s", b)
	}
	connect := strings.Replace(srv.url, "http", "ws", 1) + "/pty/" + term.ID + "/connect?cursor=0"

	// dial opens a terminal socket from a loopback address of its own.
	dialers := make([]*http.Client, addrs)
	for i := range dialers {
		d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}}
		dialers[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	dial := func(from int) (*websocket.Conn, int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, connect, &websocket.DialOptions{HTTPClient: dialers[from]})
		if err != nil {
			if resp != nil {
				return nil, resp.StatusCode, err
			}
			return nil, 0, err
		}
		return c, http.StatusSwitchingProtocols, nil
	}

	// A reader takes the whole replay: the scrollback is full.
	r, _, err := dial(0)
	if err != nil {
		t.Fatalf("the reader: %v", err)
	}
	r.SetReadLimit(1 << 20)
	var got strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	for !strings.Contains(got.String(), "END\r\n") {
		typ, b, err := r.Read(ctx)
		if err != nil {
			cancel()
			t.Fatalf("reading the output: %v after %d bytes", err, got.Len())
		}
		if typ == websocket.MessageText {
			got.Write(b)
		}
	}
	cancel()
	if got.Len() < 2<<20 {
		t.Fatalf("the reader got %d bytes, want the full 2 MiB scrollback", got.Len())
	}
	_ = r.CloseNow()

	base := procKB(t, pid, "VmRSS")
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			_ = c.CloseNow()
		}
	}()
	for i := range sockets {
		c, st, err := dial(i % addrs)
		if err != nil {
			t.Fatalf("socket %d: %d %v", i+1, st, err)
		}
		open = append(open, c) // never read
	}
	// Each socket's replay is under way (or stuck on its full socket
	// buffer) once it is open: its memory, a copy or not, is taken.
	peak := procKB(t, pid, "VmHWM")
	now := procKB(t, pid, "VmRSS")

	// The 65th socket from one address is refused.
	for i := sockets / addrs; i < perAddr; i++ {
		c, st, err := dial(0)
		if err != nil {
			t.Fatalf("socket %d from one address: %d %v", i+1, st, err)
		}
		open = append(open, c)
	}
	if c, st, _ := dial(0); st != http.StatusTooManyRequests {
		if c != nil {
			_ = c.CloseNow()
		}
		t.Errorf("socket %d from one address: %d, want 429", perAddr+1, st)
	}

	for _, c := range open {
		_ = c.CloseNow()
	}
	open = nil
	// The memory goes back once they are closed (polled: the runtime
	// returns it in the background).
	var after int
	poll(20*time.Second, 100*time.Millisecond, func() bool {
		after = procKB(t, pid, "VmRSS")
		return after-base <= limitMB<<10
	})
	mb := func(kb int) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
	t.Logf("baseline %s; with %d sockets +%s (peak +%s); after they closed +%s", mb(base), sockets, mb(now-base), mb(peak-base), mb(after-base))
	if peak-base > limitMB<<10 {
		t.Errorf("%d non-reading sockets on a full scrollback: RSS +%s at its peak, want under %d MB", sockets, mb(peak-base), limitMB)
	}
	if after-base > limitMB<<10 {
		t.Errorf("after the sockets closed: RSS +%s, want under %d MB", mb(after-base), limitMB)
	}
	// Their slots are free again.
	if !poll(10*time.Second, 50*time.Millisecond, func() bool {
		c, _, err := dial(0)
		if err == nil {
			_ = c.CloseNow()
		}
		return err == nil
	}) {
		t.Error("no socket from an address whose sockets all closed")
	}
}
