package vcs

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
}

// repoWith makes a git repository with one commit of files.
func repoWith(t *testing.T, files map[string]string) string {
	t.Helper()
	needGit(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	sh(t, dir, "init", "-q", "-b", "main")
	for p, c := range files {
		write(t, filepath.Join(dir, p), c)
	}
	sh(t, dir, "add", "-A")
	sh(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func sh(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, p, c string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRemoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/Foo/Bar.git":      "github.com/Foo/Bar",
		"https://GitHub.com/foo/bar/":         "github.com/foo/bar",
		"git@github.com:foo/bar.git":          "github.com/foo/bar",
		"github.com:foo/bar.git":              "", // a scheme "github.com:", no host, as JavaScript's URL reads it
		"ssh://git@example.com:2222/a/b.git/": "example.com/a/b",
		"file:///srv/repo.git":                "",
		"/srv/repo.git":                       "",
		"":                                    "",
		"https://github.com/":                 "",
	} {
		if got := remoteKey(in); got != want {
			t.Errorf("remoteKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := repoWith(t, map[string]string{"a.txt": "a\n"})
	root := sh(t, dir, "rev-list", "--max-parents=0", "HEAD")
	id, err := Resolve(context.Background(), filepath.Join(dir, "sub", "missing"))
	if err != nil || id.ID != root || id.Directory != dir || !id.Git {
		t.Fatalf("Resolve in a subdirectory = %+v, %v; want %s in %s", id, err, root, dir)
	}
	id.commit()
	if b, _ := os.ReadFile(filepath.Join(dir, ".git", "opencode")); string(b) != root {
		t.Errorf(".git/opencode = %q, want the ID cached", b)
	}
	// A remote makes the ID its URL's hash, the same for every clone.
	sh(t, dir, "remote", "add", "origin", "git@github.com:foo/bar.git")
	id, _ = Resolve(context.Background(), dir)
	sum := sha1.Sum([]byte("git-remote:github.com/foo/bar"))
	if want := hex.EncodeToString(sum[:]); id.ID != want {
		t.Errorf("with origin: ID %q, want the remote's hash %s", id.ID, want)
	}
	if id.previous != root {
		t.Errorf("previous %q, want the cached %q", id.previous, root)
	}
	out, err := Resolve(context.Background(), t.TempDir())
	if err != nil || out.ID != Global || out.Directory != "/" || out.Git {
		t.Errorf("outside git: %+v, %v", out, err)
	}
	// A repository without a commit is global, in git.
	empty := t.TempDir()
	sh(t, empty, "init", "-q")
	id, _ = Resolve(context.Background(), empty)
	if id.ID != Global || !id.Git {
		t.Errorf("no commit: %+v", id)
	}
}

func TestProjectsMigrateAndUpdate(t *testing.T) {
	dir := repoWith(t, map[string]string{"a.txt": "a\n"})
	var ps Projects
	var notified []string
	ps.Notify = func(p Project) { notified = append(notified, p.ID) }
	p, _, err := ps.Open(context.Background(), dir)
	if err != nil || p.VCS != "git" || p.Worktree != dir {
		t.Fatalf("Open: %+v %v", p, err)
	}
	name := "Demo"
	if _, ok, err := ps.Update(p.ID, Update{Name: &name}); !ok || err != nil {
		t.Fatal("Update: not found")
	}
	if _, ok, _ := ps.Update("nosuch", Update{Name: &name}); ok {
		t.Fatal("Update of an unknown project")
	}
	// A remote added later: the project moves to its new ID with its name.
	sh(t, dir, "remote", "add", "origin", "https://github.com/foo/bar")
	ps.Forget(dir)
	q, _, err := ps.Open(context.Background(), dir)
	if err != nil || q.ID == p.ID || q.Name == nil || *q.Name != "Demo" {
		t.Fatalf("after a remote: %+v %v", q, err)
	}
	if list := ps.List(); len(list) != 1 || list[0].ID != q.ID {
		t.Errorf("List after the move: %+v", list)
	}
	if len(notified) != 3 {
		t.Errorf("notified %v, want open, update, open", notified)
	}
	empty := ""
	p2, _, _ := ps.Update(q.ID, Update{Icon: &Icon{Color: &empty}})
	if p2.Icon != nil {
		t.Errorf("an icon of empty parts is answered: %+v", p2.Icon)
	}
}

func TestLocaleOrder(t *testing.T) {
	// As node's ["…"].sort((a,b)=>a.localeCompare(b)) orders them.
	want := []string{"_x", "-y", ".gitignore", "10.txt", "9.txt", "a", "A", "a b", "ä.txt", "b.txt", "README.md", "src-b", "src/a", "srcA", "z", "Z"}
	got := slices.Clone(want)
	slices.Reverse(got)
	localeSort(got, func(s string) string { return s })
	if !slices.Equal(got, want) {
		t.Errorf("order %q\nwant  %q", got, want)
	}
}

func TestSplitPatch(t *testing.T) {
	text := "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n" +
		"diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" +
		"diff --git \"a/t\\tab\" \"b/t\\tab\"\nBinary files differ\n"
	parts := splitPatch(text, false)
	if len(parts) != 3 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, want := range []string{"a.txt", "gone", "t\tab"} {
		if got := patchFileName(parts[i]); got != want {
			t.Errorf("part %d: file %q, want %q", i, got, want)
		}
	}
	if len(splitPatch(text, true)) != 2 {
		t.Error("a truncated diff keeps its last, cut, part")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{"My Feature!": "my-feature", "  --a__b--  ": "a-b", "!!!": "", "Ünï": "n"} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWorktrees(t *testing.T) {
	dir := repoWith(t, map[string]string{"a.txt": "a\n"})
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	ctx := context.Background()
	id, err := Resolve(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := CreateWorktree(ctx, id, "Feature X")
	if err != nil || wt.Name != "feature-x" || wt.Branch != "opencode/feature-x" || wt.Directory != filepath.Join(WorktreeRoot(id.ID), "feature-x") {
		t.Fatalf("CreateWorktree = %+v, %v", wt, err)
	}
	if b, _ := os.ReadFile(filepath.Join(wt.Directory, "a.txt")); string(b) != "a\n" {
		t.Errorf("the worktree is not checked out: %q", b)
	}
	again, err := CreateWorktree(ctx, id, "Feature X")
	if err != nil || !strings.HasPrefix(again.Name, "feature-x-") {
		t.Fatalf("second CreateWorktree = %+v, %v", again, err)
	}
	var ps Projects
	if found := ps.ownWorktrees(ctx, id); len(found) != 2 {
		t.Errorf("own worktrees found again: %v", found)
	}
	write(t, filepath.Join(wt.Directory, "junk.txt"), "junk")
	write(t, filepath.Join(wt.Directory, "a.txt"), "changed")
	if err := ResetWorktree(ctx, id, wt.Directory); err != nil {
		t.Fatalf("ResetWorktree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wt.Directory, "junk.txt")); err == nil {
		t.Error("reset left junk.txt")
	}
	var we *WorktreeError
	if err := ResetWorktree(ctx, id, dir); !errors.As(err, &we) || we.Message != "Cannot reset the primary workspace" {
		t.Errorf("reset of the primary: %v", err)
	}
	// A directory that is no worktree is not deleted (OpenCode deletes it).
	other := t.TempDir()
	write(t, filepath.Join(other, "keep.txt"), "keep")
	if err := RemoveWorktree(ctx, id, other); !errors.As(err, &we) || we.Name != "WorktreeRemoveFailedError" {
		t.Errorf("remove of a directory that is no worktree: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "keep.txt")); err != nil {
		t.Error("a directory that is no worktree was deleted")
	}
	if err := RemoveWorktree(ctx, id, wt.Directory); err != nil {
		t.Fatalf("RemoveWorktree: %v", err)
	}
	if _, err := os.Stat(wt.Directory); err == nil {
		t.Error("the worktree is still there")
	}
	if strings.Contains(sh(t, dir, "branch"), "opencode/feature-x\n") {
		t.Error("its branch is still there")
	}
	if err := RemoveWorktree(ctx, id, filepath.Join(dir, "nowhere")); err != nil {
		t.Errorf("remove of a directory that does not exist: %v", err)
	}
	if _, err := CreateWorktree(ctx, Identity{ID: Global}, ""); !errors.As(err, &we) || we.Name != "WorktreeNotGitError" {
		t.Errorf("outside git: %v", err)
	}
}

// TestGitTimeout: a git that does not answer is stopped at the timeout,
// and the request's context stops it too.
func TestGitTimeout(t *testing.T) {
	bin := t.TempDir()
	write(t, filepath.Join(bin, "git"), "#!/bin/sh\nexec sleep 30\n")
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	old := Timeout
	Timeout = 200 * time.Millisecond
	t.Cleanup(func() { Timeout = old })
	start := time.Now()
	_, err := git(context.Background(), t.TempDir(), "status")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("git that hangs: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	Timeout = time.Minute
	start = time.Now()
	if _, err := git(ctx, t.TempDir(), "status"); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled: %v after %v", err, time.Since(start))
	}
}

func TestStatusOutsideGit(t *testing.T) {
	tr := TreeOf(Identity{ID: Global, Directory: "/"}, t.TempDir())
	st, err := tr.Status(context.Background())
	if err != nil || len(st) != 0 || st == nil {
		t.Errorf("Status = %v, %v", st, err)
	}
	var ae *ApplyError
	if err := tr.Apply(context.Background(), "x"); !errors.As(err, &ae) || ae.Reason != "non-git" {
		t.Errorf("Apply = %v", err)
	}
}
