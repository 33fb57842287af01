package lifecycle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// slowGit puts a git first on PATH that, while the file it returns exists,
// sleeps the seconds that file holds on every `git add`: a snapshot of a
// large repository.
func slowGit(t *testing.T) (mark string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	bin := t.TempDir()
	mark = filepath.Join(bin, "slow")
	// The sleep holds no pipe of the caller's, so a cancelled snapshot
	// (killed shell) returns at once.
	script := "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = add ] && [ -e '" + mark + "' ]; then sleep \"$(cat '" + mark + "')\" </dev/null >/dev/null 2>&1; break; fi\ndone\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return mark
}

// TestSlowSnapshotKeepsSessionLive: the git snapshot a step starts and ends
// with runs off the session's loop, so a steer and an abort are answered
// at once while git works over a large tree; the step still carries its
// snapshots, and the session's diff still comes out.
func TestSlowSnapshotKeepsSessionLive(t *testing.T) {
	const delay = 4 * time.Second
	mark := slowGit(t)
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()

	// A first turn at full speed: the snapshot repository exists.
	c.must("POST", "/session/"+sid+"/message", v1Body(newID(), "warm up", ""), 200)

	if err := os.WriteFile(mark, []byte("4"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(first, "first", ""), 204)
	checkFor(t, 5*time.Second, "the turn to start", func() bool {
		var st map[string]struct{ Type string }
		c.must("GET", "/session/status", nil, 200).json(t, &st)
		return st[sid].Type == "busy"
	})
	// The start snapshot is under way: a steer and an abort must not wait
	// for it.
	t0 := time.Now()
	c.promptV2(sid, newID(), "steer in", "steer")
	if d := time.Since(t0); d > delay/2 {
		t.Errorf("a steer waited %v behind the snapshot", d)
	}
	t0 = time.Now()
	c.must("POST", "/session/"+sid+"/abort", nil, 200)
	if d := time.Since(t0); d > delay/2 {
		t.Errorf("abort waited %v behind the snapshot", d)
	}
	c.waitIdle(sid)
	var aborted bool
	for _, m := range c.messages(sid) {
		if m.Info.ParentID == first && m.Info.Error != nil && m.Info.Error.Name == "MessageAbortedError" {
			aborted = true
		}
	}
	if !aborted {
		t.Errorf("the turn was not aborted: %+v", c.messages(sid))
	}

	// Slow snapshots still start and end a step that wrote a file.
	if err := os.WriteFile(mark, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := `call:write {"filePath":"` + filepath.Join(dir, "b.txt") + `","content":"b\n"} then: written`
	c.must("POST", "/session/"+sid+"/message", v1Body(newID(), body, ""), 200)
	var starts, finishes, patches int
	for _, m := range c.messages(sid) {
		for _, p := range m.Parts {
			switch p.Type {
			case "step-start":
				starts++
			case "step-finish":
				finishes++
			case "patch":
				patches++
			}
		}
	}
	if patches != 1 {
		t.Errorf("patch parts = %d, want 1 (the write step's)", patches)
	}
	var diff []struct{ File string }
	c.must("GET", "/session/"+sid+"/diff", nil, 200).json(t, &diff)
	if len(diff) != 1 || diff[0].File != "b.txt" {
		t.Errorf("session diff = %+v, want b.txt", diff)
	}
}
