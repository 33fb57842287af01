package crashtest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStartSilentDatabase: a PostgreSQL address that accepts TCP and never
// answers (a half-dead database, a partition) makes start-up fail within
// a bounded time with a clear error, not hang with no log line.
func TestStartSilentDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // accepted, never answered
			mu.Unlock()
		}
	}()
	dir := t.TempDir()
	url := "postgres://nobody@" + ln.Addr().String() + "/db?sslmode=disable"
	cmd := exec.Command(binPath, "--store", "postgres", "--postgres-url", url, "--data", dir, "--port", "0",
		"--hostname", "127.0.0.1", "--directory", dir)
	cmd.Env = append(os.Environ(), "OPENCODE_SERVER_PASSWORD=", "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	start := time.Now()
	done := make(chan struct{})
	var out []byte
	var runErr error
	go func() { out, runErr = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("start-up against a silent database still hangs after 30s:\n%s", out)
	}
	if runErr == nil {
		t.Fatalf("the server started against a silent database:\n%s", out)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("start-up took %v to give up", took)
	}
	if s := string(out); !strings.Contains(strings.ToLower(s), "postgres") {
		t.Errorf("the error does not say what failed:\n%s", s)
	}
}
