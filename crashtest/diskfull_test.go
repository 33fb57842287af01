package crashtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDiskFull: the server's data directory on a small tmpfs that fills up.
// While it is full every request is answered (a 503 for what needs a
// write), the server does not loop rebuilding the session (a handful of
// "commit failed" lines, not hundreds a second); once space is freed the
// session recovers by itself and every input acknowledged with a 2xx is
// answered. A restart on the full disk answers reads, or exits at once
// saying the disk is full (today: the store's migration cannot write).
func TestDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mounting a tmpfs (needs root): %v %s", err, out)
		}
		t.Skipf("cannot mount a size-limited tmpfs here (needs root): %v %s", err, out)
	}
	data := filepath.Join(mnt, "data")
	logPath := filepath.Join(t.TempDir(), "server.log")
	// A slow model: a turn is streaming when the disk fills, so the store
	// holds it open and every rebuild of the session has a recovery to
	// commit.
	args := []string{"--scripted-chunks", "60", "--scripted-delay", "50ms"}
	srv := startServer(t, data, logPath, args...)
	t.Cleanup(func() {
		srv.kill()
		_ = exec.Command("umount", "-l", mnt).Run()
	})
	cl := newClient(srv.url)
	defer cl.close()
	sid := newID("ses")
	if st, body, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create: %d %v %s", st, err, body)
	}
	var acked []string
	prompt := func(text string) int {
		id := newID("msg")
		st, _, err := cl.doTimeout("POST", "/session/"+sid+"/prompt_async", mustJSON(map[string]any{"messageID": id,
			"delivery": "queue", "parts": []any{map[string]any{"type": "text", "text": text}}}), 15*time.Second)
		if err != nil {
			t.Fatalf("prompt %q got no answer: %v", text, err)
		}
		if st/100 == 2 {
			acked = append(acked, id)
		}
		return st
	}
	if st := prompt("before"); st != 204 {
		t.Fatalf("prompt before the disk filled: %d", st)
	}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		var status map[string]any
		return cl.getJSON("/session/status", &status) == nil && status[sid] != nil
	}) {
		t.Fatal("the turn did not start")
	}
	// Fill the disk.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	logged := func() int {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "commit failed")
	}
	before := logged()
	// Requests while it is full: each answered, a 503 or (what fits) a 2xx.
	saw503 := false
	for i := range 20 {
		st := prompt("during " + string(rune('a'+i)))
		if st != 204 && st != 503 {
			t.Errorf("a prompt while the disk is full: %d, want 204 or 503", st)
		}
		saw503 = saw503 || st == 503
		var s map[string]any
		if err := cl.getJSON("/session/"+sid, &s); err != nil {
			t.Errorf("a read while the disk is full: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // two seconds of a full disk
	}
	if !saw503 {
		t.Error("no write failed on a full disk (did it fill?)")
	}
	if n := logged() - before; n > 20 {
		t.Errorf("%d \"commit failed\" log lines in two seconds of a full disk: the session is rebuilt in a loop", n)
	}
	// A restart on the full disk: within a bounded time it serves what it
	// can read (and answers writes, a 503 where they do not fit), or it
	// exits with an error that says why.
	srv.kill()
	restartLog := filepath.Join(t.TempDir(), "restart.log")
	t0 := time.Now()
	restarted, err := launch(t, data, restartLog, args...)
	if err != nil {
		t.Logf("the restart on the full disk exited after %v: %v", time.Since(t0), err)
		if d := time.Since(t0); d > 20*time.Second {
			t.Errorf("the restart on a full disk took %v to give up", d)
		}
		if s := strings.ToLower(tail(restartLog, 20)); !strings.Contains(s, "space") && !strings.Contains(s, "full") {
			t.Errorf("the restart on a full disk exited without saying the disk is full:\n%s", s)
		}
	} else {
		t.Logf("the restart on the full disk listens after %v", time.Since(t0))
		srv = restarted
		cl.close()
		cl = newClient(srv.url)
		if st, body, err := cl.doTimeout("GET", "/session/"+sid, nil, 10*time.Second); err != nil || st != 200 {
			t.Errorf("a read after a restart on the full disk: %d %v %s\n%s", st, err, body, tail(restartLog, 20))
		}
		if st := prompt("after the restart"); st != 204 && st != 503 {
			t.Errorf("a prompt after a restart on the full disk: %d, want 204 or 503", st)
		}
	}
	// Free the space: the session comes back by itself and every
	// acknowledged input is answered.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err != nil { // the restart gave up: start again on the freed disk
		srv = startServer(t, data, restartLog, args...)
		cl.close()
		cl = newClient(srv.url)
	}
	answered := func() int { return answeredOf(cl, sid, acked) }
	if !poll(60*time.Second, 100*time.Millisecond, func() bool { return answered() == len(acked) }) {
		t.Fatalf("%d of %d acknowledged inputs answered after the disk was freed\n%s", answered(), len(acked), tail(logPath, 30))
	}
	if st := prompt("after"); st != 204 {
		t.Errorf("a prompt after the disk was freed: %d", st)
	}
}
