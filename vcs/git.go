// Package vcs answers OpenCode's project, vcs and worktree questions about
// a directory with git: which project it belongs to (OpenCode's project
// identity), what changed in its work tree (the review panel's status and
// diffs), applying a patch, and the project's git worktrees.
//
// Every git command runs with the caller's context and a timeout, in the
// directory it is about (its work tree, never a parent), with the
// environment's GIT_DIR-like variables removed so that nothing points it
// elsewhere, and with OpenCode's options (no optional locks, no fsmonitor,
// no autocrlf, unquoted paths).
package vcs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Timeout bounds one git command that reads; LongTimeout one that writes a
// work tree (a worktree's checkout, a reset, a clean, a fetch).
var (
	Timeout     = 30 * time.Second
	LongTimeout = 5 * time.Minute
)

// gitOptions are the options OpenCode gives every git command.
var gitOptions = []string{"--no-optional-locks", "-c", "core.autocrlf=false", "-c", "core.fsmonitor=false",
	"-c", "core.longpaths=true", "-c", "core.symlinks=true", "-c", "core.quotepath=false"}

// result is one git command's outcome: a non-zero code is not an error
// (many answers are "no"); err is set only when git could not run or was
// stopped (timeout, cancelled).
type result struct {
	code      int
	out       []byte
	stderr    []byte
	truncated bool
}

func (r result) ok() bool     { return r.code == 0 }
func (r result) text() string { return string(r.out) }

// message is what git said, for an error answer: its stderr, else its
// stdout, else fallback.
func (r result) message(fallback string) string {
	if len(r.stderr) > 0 {
		return string(r.stderr)
	}
	if len(r.out) > 0 {
		return string(r.out)
	}
	return fallback
}

// cmd describes one git command.
type cmd struct {
	dir    string
	args   []string
	stdin  []byte
	maxOut int // cap on stdout (0: none); beyond it the result is truncated
	long   bool
	bash   string // run this script with bash -lc instead of git
}

// env is the process environment without the variables that would point
// git at another repository or index than the directory's own.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
}

// capped is a writer that keeps at most max bytes (max 0: all).
type capped struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.max > 0 && c.buf.Len()+len(p) > c.max {
		c.truncated = true
		p = p[:max(0, c.max-c.buf.Len())]
	}
	c.buf.Write(p)
	return len(p), nil // never short: git must not see a broken pipe
}

// ErrNoGit is returned when the git binary cannot be run.
var ErrNoGit = errors.New("git is not installed")

// run runs one git command. The command is killed when ctx ends or its
// timeout passes; its output pipes are not waited on for long after that.
func run(ctx context.Context, c cmd) (result, error) {
	d := Timeout
	if c.long {
		d = LongTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	args := c.args
	if c.bash == "" {
		args = append(append([]string{}, gitOptions...), c.args...)
	}
	name := "git"
	if c.bash != "" {
		name, args = "bash", []string{"-lc", c.bash}
	}
	x := exec.CommandContext(ctx, name, args...)
	x.Dir = c.dir
	x.Env = env()
	x.WaitDelay = time.Second
	if c.stdin != nil {
		x.Stdin = bytes.NewReader(c.stdin)
	}
	stdout := &capped{max: c.maxOut}
	stderr := &capped{max: 64 << 10}
	x.Stdout, x.Stderr = stdout, stderr
	err := x.Run()
	res := result{out: stdout.buf.Bytes(), stderr: stderr.buf.Bytes(), truncated: stdout.truncated}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case errors.Is(err, exec.ErrNotFound) && c.bash == "":
		return res, ErrNoGit
	default:
		return res, err
	}
	return res, nil
}

// git runs a reading command in dir.
func git(ctx context.Context, dir string, args ...string) (result, error) {
	return run(ctx, cmd{dir: dir, args: args})
}

// lines splits output into trimmed non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimSuffix(l, "\r")); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// fields0 splits NUL-separated output, dropping empty fields.
func fields0(s string) []string {
	var out []string
	for _, f := range strings.Split(s, "\x00") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
