package acpclient

import "syscall"

// procAttr puts the agent in its own process group (Kill ends it whole),
// and has the kernel kill it when the server dies, kill -9 included: no
// agent outlives it. (The signal follows the forking thread, and the Go
// runtime does not end its threads.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
