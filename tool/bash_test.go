package tool

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBash(t *testing.T) {
	dir, _ := setup(t)
	tests := []struct {
		name    string
		input   map[string]any
		has     []string
		exit    int
		maxLen  int
		wantErr string
	}{
		{name: "echo", input: map[string]any{"command": "echo hello; pwd", "description": "say hello"},
			has: []string{"hello\n", "session"}},
		{name: "stderr interleaved", input: map[string]any{"command": "echo out; echo err >&2; echo out2"},
			has: []string{"out\nerr\nout2\n"}},
		// The exit code is in the metadata; the output is what the command wrote (OpenCode's).
		{name: "exit code", input: map[string]any{"command": "echo bad; exit 3"}, has: []string{"bad\n"}, exit: 3},
		{name: "no output", input: map[string]any{"command": "true"}, has: []string{"(no output)"}},
		{name: "bash features", input: map[string]any{"command": "a=(x y z); echo ${#a[@]}"}, has: []string{"3\n"}},
		{name: "relative files", input: map[string]any{"command": "cat hello.txt | wc -l"}, has: []string{"3"}},
		{name: "huge output", input: map[string]any{"command": "yes | head -c 10000000"},
			has: []string{"output truncated", "y\ny\n"}, maxLen: 31 * 1024},
		{name: "background leftovers do not block", input: map[string]any{"command": "sleep 1000 & echo started"},
			has: []string{"started"}},
		{name: "timeout", input: map[string]any{"command": "echo before; sleep 1000", "timeout": 200},
			has: []string{"before\n\n\n<shell_metadata>\nshell tool terminated command after exceeding timeout 200 ms."}, exit: -1},
		{name: "empty command", input: map[string]any{"command": " "}, wantErr: "command is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := run(t, "bash", dir, tt.input)
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
			} else {
				must(t, err)
				if res.Metadata["exit"] != tt.exit {
					t.Errorf("exit = %v; want %d", res.Metadata["exit"], tt.exit)
				}
			}
			for _, s := range tt.has {
				if !strings.Contains(res.Output, s) {
					t.Errorf("output lacks %q:\n%.300s", s, res.Output)
				}
			}
			if tt.maxLen > 0 && len(res.Output) > tt.maxLen {
				t.Errorf("output is %d bytes; want <= %d", len(res.Output), tt.maxLen)
			}
		})
	}
}

// groupAlive reports whether a live (non-zombie) process is in group pgid.
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func waitGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for groupAlive(t, pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still alive", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPID(t *testing.T, p string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			must(t, err)
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBashAbort(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := Bash{}.Run(ctx, Call{Dir: dir, Input: in(t, map[string]any{
			"command": "echo $$ > pid; sleep 1000 & sleep 1000; wait",
		})})
		done <- out{res, err}
	}()
	pgid := readPID(t, pidFile)
	if !groupAlive(t, pgid) {
		t.Fatal("group not running")
	}
	start := time.Now()
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", o.err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("abort took %v", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	waitGone(t, pgid)
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	res, err := Bash{}.Run(context.Background(), Call{Dir: dir, Input: in(t, map[string]any{
		"command": "echo $$ > pid; sleep 1000 & sleep 1000", "timeout": 200,
	})})
	if err != nil || !strings.Contains(res.Output, "<shell_metadata>") {
		t.Fatalf("err = %v, output %q", err, res.Output)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("timeout took %v", el)
	}
	if res.Metadata["timeout"] != true {
		t.Errorf("metadata = %v", res.Metadata)
	}
	waitGone(t, readPID(t, filepath.Join(dir, "pid")))
}

func TestBashAlreadyCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Bash{}.Run(ctx, Call{Dir: t.TempDir(), Input: in(t, map[string]any{"command": "echo hi"})})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// TestBashWorkdir: workdir runs the command in a directory inside the
// session directory; one outside, or a file, is refused.
func TestBashWorkdir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644)
	res, err := run(t, "bash", dir, map[string]any{"command": "pwd", "workdir": "sub"})
	if err != nil || !strings.HasSuffix(strings.TrimSpace(res.Output), "/sub") {
		t.Errorf("workdir sub: %q %v", res.Output, err)
	}
	for _, wd := range []string{"..", "/", "f.txt", "missing"} {
		if _, err := run(t, "bash", dir, map[string]any{"command": "pwd", "workdir": wd}); err == nil {
			t.Errorf("workdir %q was accepted", wd)
		}
	}
}
