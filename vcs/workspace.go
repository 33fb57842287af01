package vcs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// What OpenCode 1.18.33's workspaces, project copies and session moves do
// with git: the worktree workspace adapter's worktrees (detached, or on a
// branch the client names), the project copies of the git_worktree
// strategy, and a session's local changes carried to another directory.

// NewWorkspaceWorktree picks the worktree a new worktree workspace gets
// (OpenCode's makeWorktreeInfo({detached: true})): a random name that no
// directory under the project's WorktreeRoot has yet. branch, when set, is
// the branch CreateWorkspaceWorktree makes for it.
func NewWorkspaceWorktree(id Identity, branch string) (Worktree, error) {
	if !id.Git {
		return Worktree{}, notGit()
	}
	root := WorktreeRoot(id.ID)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Worktree{}, err
	}
	for range 26 {
		n := RandomName()
		dir := filepath.Join(root, n)
		if _, err := os.Lstat(dir); err == nil {
			continue
		}
		return Worktree{Name: n, Branch: branch, Directory: dir}, nil
	}
	return Worktree{}, &WorktreeError{Name: "WorktreeNameGenerationFailedError", Message: "Failed to generate a unique worktree name"}
}

// CreateWorkspaceWorktree adds wt to the project of id: on a new branch
// wt.Branch when it has one, else detached at HEAD; then checks its files
// out (OpenCode does that after it answered; here the answer waits, so
// the workspace's directory is whole when a client first uses it).
func CreateWorkspaceWorktree(ctx context.Context, id Identity, wt Worktree) error {
	if !id.Git {
		return notGit()
	}
	args := []string{"worktree", "add", "--no-checkout", "--detach", wt.Directory, "HEAD"}
	if wt.Branch != "" {
		args = []string{"worktree", "add", "--no-checkout", "-b", wt.Branch, wt.Directory}
	}
	res, err := run(ctx, cmd{dir: id.Directory, args: args, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return &WorktreeError{Name: "WorktreeCreateFailedError", Message: res.message("Failed to create git worktree")}
	}
	res, err = run(ctx, cmd{dir: wt.Directory, args: []string{"reset", "--hard"}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return &WorktreeError{Name: "WorktreeCreateFailedError", Message: res.message("Failed to populate worktree")}
	}
	return nil
}

// LinkedWorktrees are the git worktrees of the project whose main work
// tree is mainTree, but that one (OpenCode's Worktree.list, what the
// worktree adapter lists): each named by its directory's base name (its
// parent's when that is the project's own name), with its branch.
func LinkedWorktrees(ctx context.Context, id Identity, mainTree string) ([]Worktree, error) {
	out := []Worktree{}
	if !id.Git {
		return out, nil
	}
	list, res, err := worktreeList(ctx, id.Directory)
	if err != nil {
		return out, err
	}
	if !res.ok() {
		return out, &WorktreeError{Name: "WorktreeListFailedError", Message: res.message("Failed to read git worktrees")}
	}
	main := canonical(mainTree)
	base := strings.ToLower(filepath.Base(main))
	for _, l := range list {
		if l.path == "" {
			continue
		}
		dir := canonical(l.path)
		if dir == main {
			continue
		}
		name := strings.ToLower(filepath.Base(dir))
		if name == base {
			name = filepath.Base(filepath.Dir(dir))
		}
		out = append(out, Worktree{Name: name, Branch: strings.TrimPrefix(l.branch, "refs/heads/"), Directory: dir})
	}
	return out, nil
}

// CopyError is a git command of a project copy that failed, with what
// git said; ForceRequired when a removal failed only because the copy
// has changes (OpenCode's Git.WorktreeError).
type CopyError struct {
	Message       string
	ForceRequired bool
}

func (e *CopyError) Error() string { return e.Message }

// said is what a failed git command said, trimmed: its stderr, else its
// stdout, else fallback.
func said(res result, fallback string) string {
	if msg := strings.TrimSpace(string(res.stderr)); msg != "" {
		return msg
	}
	if msg := strings.TrimSpace(res.text()); msg != "" {
		return msg
	}
	return fallback
}

func copyFailed(res result, remove bool) error {
	msg := said(res, "Git failed")
	low := strings.ToLower(msg)
	return &CopyError{Message: msg, ForceRequired: remove && (strings.Contains(low, "contains modified or untracked files") || strings.Contains(low, "is dirty"))}
}

// AddCopy makes dir a worktree of repository r detached at HEAD (the
// git_worktree strategy of OpenCode's project copies).
func AddCopy(ctx context.Context, r Repository, dir string) error {
	res, err := run(ctx, cmd{dir: r.Worktree, args: []string{"worktree", "add", "--detach", dir, "HEAD"}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return copyFailed(res, false)
	}
	return nil
}

// RemoveCopy removes the worktree dir of repository r; without force git
// refuses one with changes.
func RemoveCopy(ctx context.Context, r Repository, dir string, force bool) error {
	args := []string{"worktree", "remove"}
	if force {
		args = append(args, "--force")
	}
	res, err := run(ctx, cmd{dir: r.CommonDirectory, args: append(args, dir), long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return copyFailed(res, true)
	}
	return nil
}

// CopyEntry is one worktree of a repository: the main one (Main) or a
// linked one, a copy.
type CopyEntry struct {
	Directory string
	Main      bool
}

// Copies lists the worktrees of repository r, the main one first.
func Copies(ctx context.Context, r Repository) ([]CopyEntry, error) {
	res, err := git(ctx, r.Worktree, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	if !res.ok() {
		return nil, copyFailed(res, false)
	}
	var out []CopyEntry
	for _, l := range strings.Split(res.text(), "\n") {
		p, ok := strings.CutPrefix(l, "worktree ")
		if !ok {
			continue
		}
		p = strings.TrimRight(p, "\r\n ")
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.Worktree, p)
		}
		out = append(out, CopyEntry{Directory: filepath.Clean(p), Main: len(out) == 0})
	}
	return out, nil
}

// ChangeError is a git command that failed carrying local changes
// (OpenCode's Git.PatchError): what git said.
type ChangeError struct{ Message string }

func (e *ChangeError) Error() string { return e.Message }

func changeFailed(res result, fallback string) error {
	return &ChangeError{Message: said(res, fallback)}
}

// relativeTo is path inside repository r as git names it ("." for its
// root).
func relativeTo(r Repository, path string) string {
	rel, err := filepath.Rel(canonical(r.Worktree), canonical(path))
	if err != nil || rel == "" {
		return "."
	}
	return filepath.ToSlash(rel)
}

// CaptureChanges is what changed under path since HEAD, as one patch
// (binary too): the tracked changes, then each untracked file as added
// (OpenCode's Git.change.capture). "" when nothing changed.
func CaptureChanges(ctx context.Context, r Repository, path string) (string, error) {
	rel := relativeTo(r, path)
	tracked, err := run(ctx, cmd{dir: r.Worktree, args: []string{"diff", "--binary", "HEAD", "--", rel}, long: true})
	if err != nil {
		return "", err
	}
	if !tracked.ok() {
		return "", changeFailed(tracked, "Failed to capture tracked changes")
	}
	untracked, err := git(ctx, r.Worktree, "ls-files", "--others", "--exclude-standard", "-z", "--", rel)
	if err != nil {
		return "", err
	}
	if !untracked.ok() {
		return "", changeFailed(untracked, "Failed to list untracked changes")
	}
	var parts []string
	if t := tracked.text(); t != "" {
		parts = append(parts, t)
	}
	for _, f := range fields0(untracked.text()) {
		res, err := run(ctx, cmd{dir: r.Worktree, args: []string{"diff", "--binary", "--no-index", "--", "/dev/null", f}, long: true})
		if err != nil {
			return "", err
		}
		if res.code != 0 && res.code != 1 {
			return "", changeFailed(res, "Failed to capture untracked change: "+f)
		}
		if t := res.text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n"), nil
}

// ApplyChanges applies a patch CaptureChanges made in the directory path.
func ApplyChanges(ctx context.Context, path, changes string) error {
	res, err := run(ctx, cmd{dir: path, args: []string{"apply", "-"}, stdin: []byte(changes), long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return changeFailed(res, "Failed to apply changes")
	}
	return nil
}

// DiscardChanges puts path back to HEAD, keeping the index, and removes
// its untracked files (not the ignored ones).
func DiscardChanges(ctx context.Context, r Repository, path string) error {
	rel := relativeTo(r, path)
	res, err := run(ctx, cmd{dir: r.Worktree, args: []string{"checkout", "--", rel}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return changeFailed(res, "Failed to restore tracked changes")
	}
	res, err = run(ctx, cmd{dir: r.Worktree, args: []string{"clean", "-fd", "--", rel}, long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return changeFailed(res, "Failed to clean untracked changes")
	}
	return nil
}

// Canonical is a path with its symbolic links resolved, when it exists.
func Canonical(p string) string { return canonical(p) }
