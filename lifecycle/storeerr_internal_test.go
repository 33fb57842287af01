package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// TestStoreErr: storeErr types an outage (EUnavailable, Retry-After, the
// store's error as Cause for errors.Is/As) and passes the store's answers
// and anything else as they are, for the core to read.
func TestStoreErr(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("get session: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}),
		fmt.Errorf("commit: %w", syscall.ENOSPC),
		fmt.Errorf("read: %w", context.DeadlineExceeded),
	} {
		got := storeErr(err)
		var oe *opencode.Error
		if !errors.As(got, &oe) || oe.Code != opencode.EUnavailable || oe.RetryAfter < 1 || !errors.Is(got, err) || !storeDown(got) {
			t.Errorf("storeErr(%v) = %#v, want EUnavailable with it as the cause, retried in the background", err, got)
		}
	}
	owned := &store.OwnedError{Instance: "i", Addr: "a"}
	for _, err := range []error{nil, store.ErrNotFound, store.ErrConflict, store.ErrFenced, owned,
		&store.PartConflictError{ID: "prt_x"}, errors.New("a bug"), context.Canceled, ErrClosed} {
		if got := storeErr(err); got != err {
			t.Errorf("storeErr(%v) = %v, want it as it is", err, got)
		}
	}
}
