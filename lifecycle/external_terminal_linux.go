package lifecycle

import "syscall"

// termProcAttr puts a terminal's command in its own process group (a
// kill takes it whole) and has the kernel kill it when the server dies,
// kill -9 included, as the agents' own processes (acpclient).
func termProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
