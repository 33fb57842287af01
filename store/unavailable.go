package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Unavailable reports whether err says the store could not be reached or
// could not take the write (a connection refused, reset or timed out, a
// database shutting down, a call past its deadline, a full or failing
// disk), as opposed to a bad request or a bug: the caller answers 503 and
// the client retries later.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	var sqlState interface{ SQLState() string }
	var coded interface{ Code() int }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EIO), errors.Is(err, syscall.EDQUOT):
		return true
	case errors.As(err, &ne):
		return true
	case errors.As(err, &sqlState):
		// PostgreSQL: connection exceptions (class 08), shutdowns and
		// "cannot connect now" (57P01-57P03), too many connections (53300).
		s := sqlState.SQLState()
		return strings.HasPrefix(s, "08") || s == "57P01" || s == "57P02" || s == "57P03" || s == "53300"
	case errors.As(err, &coded):
		// SQLite result codes (the primary code is the low byte): IOERR
		// (10), FULL (13), CANTOPEN (14), BUSY (5) and LOCKED (6) past the
		// busy timeout.
		switch coded.Code() & 0xff {
		case 5, 6, 10, 13, 14:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "database or disk is full") || strings.Contains(msg, "conn closed") ||
		strings.Contains(msg, "failed to connect")
}
