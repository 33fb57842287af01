//go:build !linux

package acpclient

import "syscall"

// procAttr puts the agent in its own process group (Kill ends it whole).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
