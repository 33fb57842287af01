package acpclient

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"
)

// Spec is how an agent is started: opencode.json's agent.<name>.acp.
type Spec struct {
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Process is a running agent and the connection to it.
type Process struct {
	*Conn
	cmd    *exec.Cmd
	exited chan struct{}
	// exitErr is how the process ended (set before exited is closed).
	exitErr error
}

// Start runs spec in dir (its own process group, so Kill takes whatever it
// started too) and connects to its stdio. Each line it writes to stderr is
// logged at info level on log.
func Start(spec Spec, dir string, log *slog.Logger, h Handlers) (*Process, error) {
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Dir = dir
	env := os.Environ()
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 4096), 1<<20)
		for sc.Scan() {
			log.Info(sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	p.Conn = NewConn(stdout, stdin, h)
	go func() {
		<-p.Conn.Done() // stdout read to its end before Wait closes it
		<-logged
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the agent's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process ended and its output was read.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is how the process ended, once Exited is closed: nil for a
// clean exit, else the exit status or signal.
func (p *Process) ExitErr() error { return p.exitErr }

// Kill ends the agent's whole process group and waits (at most a few
// seconds: a process outside the group may still hold its stdout) for it
// to be reaped.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// Why says how a process that stopped answering ended: its exit status,
// or "" while it still runs (waiting a moment for it to be reaped).
func (p *Process) Why() string {
	select {
	case <-p.exited:
	case <-time.After(time.Second):
		return ""
	}
	var ee *exec.ExitError
	switch {
	case p.exitErr == nil:
		return "exited"
	case errors.As(p.exitErr, &ee):
		return ee.String()
	}
	return p.exitErr.Error()
}
