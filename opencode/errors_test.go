package opencode

import (
	"errors"
	"testing"
)

func TestErrorCause(t *testing.T) {
	cause := errors.New("disk full")
	e := &Error{Code: EUnavailable, Message: "could not store", Cause: cause}
	if !errors.Is(e, cause) {
		t.Error("errors.Is does not see the cause")
	}
	if got, want := e.Error(), "unavailable: could not store: disk full"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&Error{Code: ENotFound, Message: "Session not found: ses_x"}).Error(); got != "not_found: Session not found: ses_x" {
		t.Errorf("Error() without a cause = %q", got)
	}
}
