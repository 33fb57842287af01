package snapshot

import (
	"os/exec"
	"runtime"
	"syscall"
)

// run runs cmd so that it dies with the server: a git left running by a
// killed server would go on rewriting the work tree while the restarted
// server rolls its restore forward. Linux sends the death signal when the
// thread that started the child exits, so the thread stays locked until
// the child is done.
func run(cmd *exec.Cmd, collect func() ([]byte, error)) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return collect()
}
