//go:build !linux

package lifecycle

import "syscall"

// termProcAttr puts a terminal's command in its own process group (a
// kill takes it whole).
func termProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
