package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned by Open when another process holds the database:
// two servers on one data directory would each run turns of the same
// sessions and hand out the same event sequence numbers.
var ErrLocked = errors.New("database is in use by another process")

// lockFile takes an exclusive flock on path+".lock" (held for the life of
// the store, released by the kernel if the process dies) and writes our pid
// into it for the error a second process reports.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path + ".lock")
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("sqlite: %s: %w (pid %s); one server per --data directory", path, ErrLocked, holder)
		}
		return nil, fmt.Errorf("sqlite: lock: %w", err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}
