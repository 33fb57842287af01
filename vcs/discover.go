package vcs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// The one way this server finds the git repository a directory is in, as
// OpenCode's Project.resolve and Git.repo.discover do: the nearest .git
// entry above it (a directory, or the file of a linked worktree), then
// git asked, in the directory holding it, for the work tree's top level,
// the git directory and the common one. Every caller (the project
// identity, the project routes, the snapshots, the agent's environment)
// goes through here so that they agree on what is and is not a repository.

// Repository is a git repository as OpenCode's Git.repo.discover finds it
// from a directory: the nearest .git above it.
type Repository struct {
	Worktree, GitDirectory, CommonDirectory string
	// InWorkTree is whether the directory asked about is in the work tree
	// (git rev-parse --is-inside-work-tree): not when the repository is
	// bare or the directory is inside its git directory.
	InWorkTree bool
}

// Root is the directory holding the nearest .git entry at or above dir,
// without running git (the cheap answer the agent's environment and its
// tools want); false outside git.
func Root(dir string) (string, bool) {
	dotgit := findUp(dir, ".git")
	if dotgit == "" {
		return "", false
	}
	return filepath.Dir(dotgit), true
}

// Discover finds the repository dir is in; false outside git. An error is
// git that could not run (ErrNoGit when it is missing) or ctx ending.
func Discover(ctx context.Context, dir string) (Repository, bool, error) {
	base, ok := Root(dir)
	if !ok {
		return Repository{}, false, nil
	}
	top, err := git(ctx, base, "rev-parse", "--show-toplevel")
	if err != nil {
		return Repository{}, false, err
	}
	// Both in one run (a bare repository answers them too; it refuses
	// --show-toplevel, which is asked alone).
	dirs, err := git(ctx, base, "rev-parse", "--git-dir", "--git-common-dir")
	if err != nil {
		return Repository{}, false, err
	}
	ds := strings.Split(strings.TrimRight(dirs.text(), "\r\n"), "\n") // paths as git prints them, spaces kept
	if !dirs.ok() || len(ds) != 2 {
		return Repository{}, false, nil
	}
	r := Repository{Worktree: base, GitDirectory: gitPath(base, ds[0]), CommonDirectory: gitPath(base, ds[1])}
	if top.ok() {
		// A bare repository has no top level: git refuses the question.
		r.Worktree = gitPath(base, top.text())
		r.InWorkTree = !within(dir, r.GitDirectory)
	}
	return r, true, nil
}

// within reports whether path is dir or under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(canonical(dir), canonical(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// findUp is the nearest path dir/name, dir/../name, ... that exists.
func findUp(dir, name string) string {
	for d := filepath.Clean(dir); ; {
		p := filepath.Join(d, name)
		if _, err := os.Lstat(p); err == nil {
			return p
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}
