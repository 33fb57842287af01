package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	bashDefaultTimeout = 2 * time.Minute
	bashMaxTimeout     = 10 * time.Minute
	bashHeadBytes      = 10 * 1024 // output kept from the start
	bashTailBytes      = 20 * 1024 // output kept from the end
	bashMetaPreview    = 30 * 1024
)

// Bash runs a shell command in the session directory.
type Bash struct{}

type bashInput struct {
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout"`
	Workdir string   `json:"workdir"`
	// Description is accepted (older OpenCode versions asked for one) but
	// no longer offered, as in 1.18.33.
	Description string `json:"description"`
}

func (Bash) Name() string { return "bash" }

func (Bash) Description() string {
	return `Executes a command with bash -c in the session directory.

Usage:
- timeout is in milliseconds: 120000 (2 minutes) by default, at most 600000 (10 minutes). A command still running then is killed.
- stdout and stderr are returned together; output beyond 30 KB is truncated in the middle.
- The command runs in its own process group; when it exits, times out or is aborted, every process it started is killed, so do not rely on background processes surviving.
- workdir runs the command in that directory (inside the session directory); use it instead of cd.
- Prefer the read, write, edit, glob and grep tools over cat, sed, find and grep.`
}

func (Bash) Parameters() json.RawMessage {
	return schema([]string{"command"},
		str("command", "The command to execute"),
		num("timeout", "Optional timeout in milliseconds"),
		str("workdir", "The working directory to run the command in. Defaults to the session directory. Use this instead of 'cd' commands."),
	)
}

func (t Bash) input(c Call) (bashInput, error) {
	var in bashInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, err
	}
	if strings.TrimSpace(in.Command) == "" {
		return in, errors.New("command is required")
	}
	if in.Timeout != nil && *in.Timeout < 0 {
		return in, errors.New("timeout must not be negative")
	}
	return in, nil
}

func (t Bash) Permission(c Call) (string, []string, error) {
	in, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "bash", []string{in.Command}, nil
}

// shell returns the shell to run commands with: bash, else sh.
func shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

func (t Bash) Run(ctx context.Context, c Call) (Result, error) {
	in, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	timeout := bashDefaultTimeout
	if in.Timeout != nil && *in.Timeout > 0 {
		timeout = time.Duration(*in.Timeout * float64(time.Millisecond))
		if timeout > bashMaxTimeout {
			timeout = bashMaxTimeout
		}
	}
	dir, err := Resolve(c.Dir, in.Workdir)
	if err != nil {
		return Result{}, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("workdir %s is not a directory", in.Workdir)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}

	// Our own pipe, so that Wait does not wait for output copying: the
	// reader below ends once every process holding the write end is gone.
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	cmd := exec.Command(shell(), "-c", in.Command)
	cmd.Dir = dir
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return Result{}, err
	}
	pw.Close()
	pgid := cmd.Process.Pid

	out := &capBuffer{head: bashHeadBytes, tail: bashTailBytes}
	var sink io.Writer = out
	if c.Progress != nil {
		c.Progress(map[string]any{"output": ""})
		sink = &progressWriter{w: out, out: out, report: c.Progress}
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(sink, pr)
		pr.Close()
		close(copied)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var (
		waitErr  error
		timedOut bool
		aborted  bool
	)
	select {
	case waitErr = <-waited:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		aborted = true
	}
	// Kill the whole group: the command's leftovers after a normal exit, or
	// everything on timeout and abort.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if timedOut || aborted {
		waitErr = <-waited
	}
	// Processes that left the group (setsid) may still hold the pipe; do
	// not wait for them forever.
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
		pr.Close()
		<-copied
	}

	output := out.String()
	exit := -1
	if cmd.ProcessState != nil {
		exit = cmd.ProcessState.ExitCode()
	}
	meta := map[string]any{
		"output":    truncateRunes(output, bashMetaPreview, "\n\n..."),
		"exit":      exit,
		"truncated": out.truncated(),
	}
	// OpenCode titles a bash call with its command line.
	res := Result{Title: in.Command, Output: output, Metadata: meta}
	switch {
	case aborted:
		meta["aborted"] = true
		return res, fmt.Errorf("command aborted: %w", ctx.Err())
	case timedOut:
		// As OpenCode 1.18.33: the call completes, with what the command
		// wrote and a note in <shell_metadata>.
		meta["timeout"] = true
		if res.Output == "" {
			res.Output = "(no output)"
		}
		res.Output += fmt.Sprintf("\n\n<shell_metadata>\nshell tool terminated command after exceeding timeout %d ms. "+
			"If this command is expected to take longer and is not waiting for interactive input, retry with a larger timeout value in milliseconds.\n</shell_metadata>",
			timeout.Milliseconds())
		return res, nil
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return res, waitErr
	}
	// The exit code is in the metadata (exit), as OpenCode reports it: the
	// output is what the command wrote.
	if res.Output == "" {
		res.Output = "(no output)"
	}
	return res, nil
}

// progressInterval bounds how often a running command's output is
// reported: each report re-sends the whole preview.
const progressInterval = 100 * time.Millisecond

// progressWriter reports the output so far after writes, at most once per
// progressInterval (the final output goes out with the result anyway).
type progressWriter struct {
	w      io.Writer
	out    *capBuffer
	report func(map[string]any)
	last   time.Time
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if now := time.Now(); now.Sub(p.last) >= progressInterval {
		p.last = now
		p.report(map[string]any{"output": truncateRunes(p.out.String(), bashMetaPreview, "\n\n...")})
	}
	return n, err
}

// capBuffer keeps the first head and the last tail bytes written to it.
type capBuffer struct {
	mu      sync.Mutex
	head    int
	tail    int
	first   []byte
	ring    []byte // last bytes, at most tail
	total   int64
	dropped int64
}

func (b *capBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if room := b.head - len(b.first); room > 0 {
		k := min(room, len(p))
		b.first = append(b.first, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	b.ring = append(b.ring, p...)
	if over := len(b.ring) - b.tail; over > 0 {
		b.dropped += int64(over)
		// Compact occasionally to keep memory bounded.
		b.ring = append(b.ring[:0:0], b.ring[over:]...)
	}
	return n, nil
}

func (b *capBuffer) truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped > 0
}

func (b *capBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return string(b.first) + string(b.ring)
	}
	return fmt.Sprintf("%s\n\n... output truncated (%d bytes omitted) ...\n\n%s", b.first, b.dropped, b.ring)
}
