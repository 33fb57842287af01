package vcs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDiscover: the one discovery every caller uses, on the shapes a
// directory can have: a repository, a directory in it, a linked worktree,
// a bare repository, the git directory itself, no repository, no git.
func TestDiscover(t *testing.T) {
	dir := repoWith(t, map[string]string{"sub/a.txt": "a\n"})
	linked := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-linked")
	sh(t, dir, "worktree", "add", "-q", "--detach", linked, "HEAD")
	t.Cleanup(func() { os.RemoveAll(linked) })
	bare := filepath.Join(t.TempDir(), "b")
	sh(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	// A bare repository whose directory is named .git: found by the walk,
	// but it has no work tree.
	bareDot := filepath.Join(t.TempDir(), "p")
	sh(t, filepath.Dir(bareDot), "init", "-q", "--bare", filepath.Join(bareDot, ".git"))
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gitDir := filepath.Join(dir, ".git")
	for _, c := range []struct {
		name, dir string
		ok        bool
		want      Repository
		root      string // Root's answer ("" outside git)
	}{
		{"repository", dir, true, Repository{Worktree: dir, GitDirectory: gitDir, CommonDirectory: gitDir, InWorkTree: true}, dir},
		{"subdirectory", filepath.Join(dir, "sub"), true, Repository{Worktree: dir, GitDirectory: gitDir, CommonDirectory: gitDir, InWorkTree: true}, dir},
		{"missing subdirectory", filepath.Join(dir, "sub", "missing"), true, Repository{Worktree: dir, GitDirectory: gitDir, CommonDirectory: gitDir, InWorkTree: true}, dir},
		{"linked worktree", filepath.Join(linked, "sub"), true, Repository{Worktree: linked, GitDirectory: filepath.Join(gitDir, "worktrees", filepath.Base(linked)), CommonDirectory: gitDir, InWorkTree: true}, linked},
		{"inside the git directory", filepath.Join(gitDir, "refs"), true, Repository{Worktree: dir, GitDirectory: gitDir, CommonDirectory: gitDir}, dir},
		{"bare .git", bareDot, true, Repository{Worktree: bareDot, GitDirectory: filepath.Join(bareDot, ".git"), CommonDirectory: filepath.Join(bareDot, ".git")}, bareDot},
		{"bare", bare, false, Repository{}, ""},
		{"not a repository", outside, false, Repository{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := Discover(context.Background(), c.dir)
			if err != nil || ok != c.ok || got != c.want {
				t.Errorf("Discover = %+v, %v, %v; want %+v, %v", got, ok, err, c.want, c.ok)
			}
			root, ok := Root(c.dir)
			if root != c.root || ok != (c.root != "") {
				t.Errorf("Root = %q, %v; want %q", root, ok, c.root)
			}
		})
	}
	t.Run("no git", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		if _, ok, err := Discover(context.Background(), dir); ok || !errors.Is(err, ErrNoGit) {
			t.Errorf("without git: %v, %v", ok, err)
		}
		if _, ok, err := Discover(context.Background(), outside); ok || err != nil {
			t.Errorf("outside git, without git: %v, %v", ok, err)
		}
	})
}
