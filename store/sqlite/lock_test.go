package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneProcessPerDatabase: a second open of the same database (another
// process, or the same one) is refused with ErrLocked naming the holder;
// once the first closes, the database opens again.
func TestOneProcessPerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opencode-server.db")
	first, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), path)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second open: %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	// Another process sees the lock too (flock is per open file, and the
	// kernel drops it when the holder dies).
	if _, err := exec.LookPath("flock"); err == nil {
		out, err := exec.Command("flock", "-n", path+".lock", "true").CombinedOutput()
		if err == nil {
			t.Errorf("another process took the lock: %s", out)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	again.Close()
}
