package snapshot

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
)

func write(t *testing.T, dir, p, body string) {
	t.Helper()
	os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
	if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(dir, p string) string {
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

func TestTrackRestore(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	write(t, dir, ".gitignore", "build/\n")
	write(t, dir, "a.txt", "one\n")
	write(t, dir, "src/b.txt", "two\n")
	ctx := context.Background()
	s := New(t.TempDir())
	r := s.For(ctx, dir)
	if r == nil {
		t.Fatal("a git work tree is not tracked")
	}
	if s.For(ctx, t.TempDir()) != nil {
		t.Error("a directory outside git is tracked")
	}
	before, err := r.Track(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The model's step changes files.
	write(t, dir, "a.txt", "ONE\n")
	write(t, dir, "new/c.txt", "three\n")
	os.Remove(filepath.Join(dir, "src/b.txt"))
	write(t, dir, "build/out.bin", "ignored")
	after, err := r.Track(ctx)
	if err != nil || after == before {
		t.Fatalf("after = %q, %v", after, err)
	}
	changed, err := r.Changed(ctx, before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := []opencode.FileDiff{{File: "a.txt", Additions: 1, Deletions: 1, Status: "modified"}, {File: "new/c.txt", Additions: 1, Status: "added"},
		{File: "src/b.txt", Deletions: 1, Status: "deleted"}}
	if !reflect.DeepEqual(changed, want) {
		t.Errorf("Changed = %+v, want %+v", changed, want)
	}
	if ps, err := r.Patches(ctx, before, after); err != nil || len(ps) != 3 || !strings.Contains(ps[0].Patch, "+ONE") ||
		!strings.Contains(ps[1].Patch, "+three") || !strings.HasPrefix(ps[2].Patch, "diff --git a/src/b.txt") {
		t.Errorf("Patches = %+v, %v", ps, err)
	}
	if d, _ := r.Diff(ctx, after, before); !strings.Contains(d, "-ONE") || !strings.Contains(d, "+one") {
		t.Errorf("Diff = %s", d)
	}

	// Revert: back to before; ignored files stay.
	if err := r.Restore(ctx, before); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "one\n", "src/b.txt": "two\n", "new/c.txt": "<missing>", "build/out.bin": "ignored"} {
		if got := read(dir, p); got != want {
			t.Errorf("after revert %s = %q, want %q", p, got, want)
		}
	}
	// Unrevert: forward again.
	if err := r.Restore(ctx, after); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a.txt": "ONE\n", "src/b.txt": "<missing>", "new/c.txt": "three\n"} {
		if got := read(dir, p); got != want {
			t.Errorf("after unrevert %s = %q, want %q", p, got, want)
		}
	}
	// The project's own git repository is untouched.
	if out, _ := exec.Command("git", "-C", dir, "log", "--oneline").CombinedOutput(); !strings.Contains(string(out), "does not have any commits") {
		t.Errorf("the project's repository changed: %s", out)
	}
}

// TestStaleIndexLock: a git killed half-way leaves the snapshot index's
// lock; the next process's first snapshot removes it instead of failing
// on it for good.
func TestStaleIndexLock(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	write(t, dir, "a.txt", "one\n")
	ctx := context.Background()
	data := t.TempDir()
	first, err := New(data).For(ctx, dir).Track(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lock string
	filepath.WalkDir(filepath.Join(data, "snapshot"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "index" {
			lock = p + ".lock"
		}
		return nil
	})
	if lock == "" {
		t.Fatal("no snapshot index")
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := New(data).For(ctx, dir).Track(ctx) // the next process
	if err != nil || again != first {
		t.Fatalf("after a stale lock: %q %v, want %q", again, err, first)
	}
}
