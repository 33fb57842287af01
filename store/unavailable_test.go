package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
)

type sqlStateErr string

func (e sqlStateErr) Error() string    { return "pg: " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

type codeErr int

func (e codeErr) Error() string { return fmt.Sprintf("sqlite: %d", int(e)) }
func (e codeErr) Code() int     { return int(e) }

func TestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{ErrNotFound, false},
		{ErrConflict, false},
		{errors.New("syntax error at or near"), false},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("commit: %w", syscall.ENOSPC), true},
		{sqlStateErr("08006"), true},
		{sqlStateErr("57P01"), true},
		{sqlStateErr("23505"), false},
		{codeErr(13), true},
		{codeErr(10 | 3<<8), true},
		{codeErr(19), false},
		{errors.New("sqlite: database or disk is full (13)"), true},
		{errors.New("failed to connect to `host=127.0.0.1`: dial error"), true},
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
