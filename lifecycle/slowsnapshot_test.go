package lifecycle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/snapshot"
)

// gitInit makes dir a git work tree.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
}

// slowGit puts a git first on PATH that, while the file it returns exists,
// sleeps the seconds that file holds on every `git add` (touching
// mark+".on" first): a snapshot of a large repository.
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
	// mark.on is touched as the sleep starts: a test can tell git is busy.
	script := "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = add ] && [ -e '" + mark + "' ]; then : > '" + mark + ".on'; sleep \"$(cat '" + mark + "')\" </dev/null >/dev/null 2>&1; break; fi\ndone\nexec '" + real + "' \"$@\"\n"
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
	gitInit(t, dir)
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

// TestPromptDuringSlowRevert: a revert's git (the snapshot of the files
// now, the restore) runs off the session's runner, so a prompt sent while
// it works over a large tree is admitted at once, is not delivered in the
// middle of it, and runs after it, with the revert made final first.
func TestPromptDuringSlowRevert(t *testing.T) {
	const delay = 2 * time.Second // per git add; a revert runs two
	mark := slowGit(t)
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	gitInit(t, dir)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()
	first := newID()
	body := `call:write {"filePath":"` + filepath.Join(dir, "new.txt") + `","content":"hello\n"} then: written`
	c.must("POST", "/session/"+sid+"/message", v1Body(first, body, ""), 200)

	if err := os.WriteFile(mark, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	reverted := make(chan int, 1)
	go func() {
		reverted <- c.do(context.Background(), "POST", "/session/"+sid+"/revert", map[string]any{"messageID": first}).Status
	}()
	checkFor(t, 20*time.Second, "the revert's git to run", func() bool {
		_, err := os.Stat(mark + ".on")
		return err == nil
	})
	next := newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(next, "after the revert", ""), 204)
	// Answered while the revert's git still runs: it did not wait behind it.
	select {
	case st := <-reverted:
		t.Fatalf("the revert (%d) ended before the prompt was answered: the prompt waited behind it", st)
	default:
	}
	for _, m := range c.messages(sid) {
		if m.Info.ID == next {
			t.Fatal("the prompt was delivered while the revert restored the files")
		}
	}
	if st := <-reverted; st != 200 {
		t.Fatalf("revert: %d", st)
	}
	os.Remove(mark)
	c.waitIdle(sid)
	msgs := c.messages(sid)
	if len(msgs) != 2 || msgs[0].Info.ID != next || msgs[1].Info.ParentID != next || msgs[1].Info.Error != nil {
		t.Errorf("want the reverted turn removed and the prompt answered after it, got %+v", msgs)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("new.txt is still there after the revert (%v)", err)
	}
}

// TestSnapshotForSlowDirectory: finding whether a directory is in a git
// work tree holds no lock across git: a git rev-parse that hangs in one
// directory does not hold up another's snapshots.
func TestSnapshotForSlowDirectory(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	slow, fast, bin := t.TempDir(), t.TempDir(), t.TempDir()
	gitInit(t, slow)
	gitInit(t, fast)
	on, release := filepath.Join(bin, "on"), filepath.Join(bin, "release")
	// The slow directory's git hangs until the test releases it: the other
	// directory's lookup must end while it still hangs (no timing).
	// (git is run in the directory, or told it with -C.)
	slowReal, err := filepath.EvalSymlinks(slow)
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nif { [ \"$1\" = -C ] && [ \"$2\" = '" + slow + "' ]; } || [ \"$(pwd -P)\" = '" + slowReal + "' ]; then : > '" + on +
		"'; while [ ! -e '" + release + "' ]; do sleep 0.05; done; fi\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	s := snapshot.New(t.TempDir())
	ctx := context.Background()
	done := make(chan bool)
	go func() { done <- s.For(ctx, slow) != nil }()
	checkFor(t, 10*time.Second, "the slow git to run", func() bool {
		_, err := os.Stat(on)
		return err == nil
	})
	fastDone := make(chan bool, 1)
	go func() { fastDone <- s.For(ctx, fast) != nil }()
	select {
	case ok := <-fastDone:
		if !ok {
			t.Error("a git work tree is not tracked")
		}
	case <-done:
		t.Error("the slow git ended before the test released it")
	case <-time.After(30 * time.Second):
		t.Error("a directory's work tree is not found while another's git hangs")
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Error("the slow directory is not tracked")
	}
}

// TestSnapshotForSeesGitInit: a directory found outside git is looked at
// again later: a `git init` after it is seen.
func TestSnapshotForSeesGitInit(t *testing.T) {
	s := snapshot.New(t.TempDir())
	dir := t.TempDir()
	ctx := context.Background()
	if s.For(ctx, dir) != nil {
		t.Fatal("a directory outside git is tracked")
	}
	gitInit(t, dir)
	checkFor(t, 20*time.Second, "the git init to be seen", func() bool { return s.For(ctx, dir) != nil })
}
