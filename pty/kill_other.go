//go:build !linux && !windows

package pty

import "syscall"

// killSession sends sig to the session's process group (without a
// process table to read, jobs in groups of their own are not found; they
// get the terminal's hangup when it closes).
func killSession(sid int, sig syscall.Signal) {
	_ = syscall.Kill(-sid, sig)
	_ = syscall.Kill(sid, sig)
}
