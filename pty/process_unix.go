//go:build !windows

package pty

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	cpty "github.com/creack/pty"
)

// unixProcess is a command on a pseudo-terminal, in a session of its own
// (its pid is the session's and the process group's ID).
type unixProcess struct {
	cmd    *exec.Cmd
	master *os.File // non-blocking, so Close interrupts a Read

	mu     sync.Mutex
	reaped bool // Wait returned: the pid may be reused once its session is empty
}

const supported = true

func start(path string, args []string, dir string, env []string, rows, cols uint16) (process, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	f, err := cpty.StartWithSize(cmd, &cpty.Winsize{Rows: rows, Cols: cols})
	if err != nil {
		return nil, err
	}
	// creack/pty hands back a blocking descriptor (its ioctls call Fd),
	// whose Read no Close interrupts: a process that escaped the kill but
	// keeps the terminal open would hold the reader forever. A
	// non-blocking duplicate goes through the runtime's poller.
	syscall.ForkLock.RLock() // no fork between the dup and its close-on-exec
	fd, err := syscall.Dup(int(f.Fd()))
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	_ = f.Close()
	if err == nil {
		if err = syscall.SetNonblock(fd, true); err != nil {
			_ = syscall.Close(fd)
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return &unixProcess{cmd: cmd, master: os.NewFile(uintptr(fd), "ptmx")}, nil
}

func (p *unixProcess) Pid() int                    { return p.cmd.Process.Pid }
func (p *unixProcess) Read(b []byte) (int, error)  { return p.master.Read(b) }
func (p *unixProcess) Write(b []byte) (int, error) { return p.master.Write(b) }
func (p *unixProcess) Close() error                { return p.master.Close() }

func (p *unixProcess) Resize(rows, cols uint16) error {
	rc, err := p.master.SyscallConn()
	if err != nil {
		return err
	}
	ws := cpty.Winsize{Rows: rows, Cols: cols}
	var serr syscall.Errno
	err = rc.Control(func(fd uintptr) {
		_, _, serr = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil {
		return err
	}
	if serr != 0 {
		return serr
	}
	return nil
}

// Wait waits for the session leader, then ends what it left behind in its
// session (a background job holds the terminal open and outlives it
// otherwise). Its exit code is the shell's convention: 128+N for signal N.
func (p *unixProcess) Wait() int {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.reaped = true
	killSession(p.cmd.Process.Pid, syscall.SIGKILL)
	p.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return max(ee.ExitCode(), 0)
	}
	return 0
}

// Signal sends sig to every process of the session, the leader
// included, unless the leader was reaped (then Wait has ended the rest).
func (p *unixProcess) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return
	}
	killSession(p.cmd.Process.Pid, sig)
}
