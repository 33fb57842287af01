package vcs

import (
	"context"
	"errors"
	"strings"
)

// Tree is a directory of a git project: what the review panel's routes
// are asked about.
type Tree struct {
	repo
	git bool
}

// TreeOf is the directory dir of the project id (the work tree id names);
// outside git every answer is empty.
func TreeOf(id Identity, dir string) Tree {
	return Tree{repo: repo{dir: dir, root: id.Directory}, git: id.Git}
}

// Status is what changed in the directory since HEAD, file by file in
// OpenCode's order, untracked files as added; without patches.
func (t Tree) Status(ctx context.Context) ([]FileStatus, error) {
	out := []FileStatus{}
	if !t.git {
		return out, nil
	}
	head, err := t.hasHead(ctx)
	if err != nil {
		return out, err
	}
	st, err := t.status(ctx)
	if err != nil {
		return out, err
	}
	stats := map[string]counts{}
	if head {
		if stats, err = t.stats(ctx, "HEAD"); err != nil {
			return out, err
		}
	}
	localeSort(st, func(e entry) string { return e.file })
	for _, e := range st {
		c, ok := stats[e.file]
		if !ok && e.status == "added" {
			if c, _, err = t.statUntracked(ctx, e.file); err != nil {
				return out, err
			}
		}
		out = append(out, FileStatus{File: e.file, Additions: c.add, Deletions: c.del, Status: e.status})
	}
	return out, nil
}

// ErrMode is a diff mode other than "git" and "branch".
var ErrMode = errors.New(`mode must be "git" or "branch"`)

// Diff is the directory's changes with each file's patch, with context
// lines of context (FullContext: the whole file): mode "git" against HEAD
// (untracked files as new), mode "branch" against the point where the
// current branch left the default branch (none when on it).
func (t Tree) Diff(ctx context.Context, mode string, context int) ([]FileDiff, error) {
	out := []FileDiff{}
	if mode != "git" && mode != "branch" {
		return out, ErrMode
	}
	if !t.git {
		return out, nil
	}
	if mode == "git" {
		head, err := t.hasHead(ctx)
		if err != nil || !head {
			if err != nil {
				return out, err
			}
			st, err := t.status(ctx)
			if err != nil {
				return out, err
			}
			return t.assemble(ctx, "", st, map[string]counts{}, nil, false, context)
		}
		return t.against(ctx, "HEAD", context)
	}
	def, err := t.defaultBranch(ctx)
	if err != nil || def.name == "" {
		return out, err
	}
	cur, err := t.branch(ctx)
	if err != nil || cur == def.name {
		return out, err
	}
	base, err := git(ctx, t.dir, "merge-base", def.ref, "HEAD")
	if err != nil || !base.ok() || strings.TrimSpace(base.text()) == "" {
		return out, err
	}
	return t.against(ctx, strings.TrimSpace(base.text()), context)
}

// against is the diff of the directory against ref: the tracked files
// that differ, then the untracked ones.
func (t Tree) against(ctx context.Context, ref string, context int) ([]FileDiff, error) {
	changed, err := t.names(ctx, ref)
	if err != nil {
		return []FileDiff{}, err
	}
	stats, err := t.stats(ctx, ref)
	if err != nil {
		return []FileDiff{}, err
	}
	st, err := t.status(ctx)
	if err != nil {
		return []FileDiff{}, err
	}
	list := changed
	seen := map[string]bool{}
	for _, e := range changed {
		seen[e.file] = true
	}
	for _, e := range st {
		if e.code == "??" && !seen[e.file] {
			seen[e.file] = true
			list = append(list, e)
		}
	}
	patches := map[string]string{}
	capped := false
	if len(changed) > 0 {
		text, truncated, err := t.patchAll(ctx, ref, context, maxTotalPatch)
		if err != nil {
			return []FileDiff{}, err
		}
		for i, p := range splitPatch(text, truncated) {
			f := patchFileName(p)
			if f == "" && i < len(changed) {
				f = changed[i].file
			}
			if f != "" {
				patches[f] += p
			}
		}
		capped = truncated
	}
	return t.assemble(ctx, ref, list, stats, patches, capped, context)
}

// assemble gives each file its counts and patch, in OpenCode's order, the
// patches together capped at maxTotalPatch.
func (t Tree) assemble(ctx context.Context, ref string, list []entry, stats map[string]counts, patches map[string]string,
	capped bool, context int) ([]FileDiff, error) {
	out := []FileDiff{}
	localeSort(list, func(e entry) string { return e.file })
	total, full := 0, false
	for _, e := range list {
		c, ok := stats[e.file]
		if !ok && e.status == "added" {
			var err error
			if c, _, err = t.statUntracked(ctx, e.file); err != nil {
				return out, err
			}
		}
		var patch string
		p, have := patches[e.file]
		switch {
		case full:
			patch = placeholder(e.file)
		case have:
			patch = p
		case e.code != "??" && capped:
			patch = placeholder(e.file)
		default:
			var err error
			if e.code == "??" || ref == "" {
				patch, err = t.patchUntracked(ctx, e.file, context, maxFilePatch)
			} else {
				patch, err = t.patchFile(ctx, ref, e.file, context)
			}
			if err != nil {
				return out, err
			}
			if patch == "" {
				patch = placeholder(e.file)
			}
		}
		if !full {
			if total+len(patch) > maxTotalPatch {
				patch, full = placeholder(e.file), true
			} else {
				total += len(patch)
				full = total >= maxTotalPatch
			}
		}
		out = append(out, FileDiff{File: e.file, Patch: patch, Additions: c.add, Deletions: c.del, Status: e.status})
	}
	return out, nil
}

// Raw is the directory's uncommitted changes as one patch (git diff HEAD,
// then each untracked file as a new file), what `git apply` takes back.
func (t Tree) Raw(ctx context.Context) (string, error) {
	if !t.git {
		return "", nil
	}
	head, err := t.hasHead(ctx)
	if err != nil {
		return "", err
	}
	st, err := t.status(ctx)
	if err != nil {
		return "", err
	}
	var parts []string
	if head {
		text, _, err := t.patchAll(ctx, "HEAD", 3, 0)
		if err != nil {
			return "", err
		}
		parts = append(parts, text)
	}
	for _, e := range st {
		if e.code != "??" {
			continue
		}
		p, err := t.patchUntracked(ctx, e.file, 3, 0)
		if err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "\n"), nil
}

// ApplyError is a patch that cannot be applied: Reason is "non-git" or
// "not-clean", as OpenCode's VcsApplyError says.
type ApplyError struct {
	Reason, Message string
}

func (e *ApplyError) Error() string { return e.Message }

// Apply applies patch to the directory's work tree with git apply (which
// refuses paths outside the work tree).
func (t Tree) Apply(ctx context.Context, patch string) error {
	if !t.git {
		return &ApplyError{Reason: "non-git", Message: "Patch can't be applied because the project is not git-based"}
	}
	res, err := run(ctx, cmd{dir: t.dir, args: []string{"apply", "-"}, stdin: []byte(patch), long: true})
	if err != nil {
		return err
	}
	if !res.ok() {
		return &ApplyError{Reason: "not-clean", Message: "Patch can't be applied"}
	}
	return nil
}

// Info is the directory's branch and its repository's default branch
// ("" when none: a detached HEAD, outside git).
func (t Tree) Info(ctx context.Context) (branch, defaultBranch string, err error) {
	if !t.git {
		return "", "", nil
	}
	if branch, err = t.branch(ctx); err != nil {
		return "", "", err
	}
	def, err := t.defaultBranch(ctx)
	return branch, def.name, err
}

func (r repo) branch(ctx context.Context) (string, error) {
	res, err := git(ctx, r.dir, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil || !res.ok() {
		return "", err
	}
	return strings.TrimSpace(res.text()), nil
}

// ref is a branch: its name and what to give git for it (origin/main for
// a remote's default branch).
type ref struct{ name, ref string }

// defaultBranch is the repository's default branch as OpenCode finds it:
// the remote's HEAD (origin, the only remote, upstream, or the first),
// else init.defaultBranch if it exists, else main, else master.
func (r repo) defaultBranch(ctx context.Context) (ref, error) {
	rem, err := git(ctx, r.dir, "remote")
	if err != nil {
		return ref{}, err
	}
	remotes := lines(rem.text())
	remote := ""
	switch {
	case contains(remotes, "origin"):
		remote = "origin"
	case len(remotes) == 1:
		remote = remotes[0]
	case contains(remotes, "upstream"):
		remote = "upstream"
	case len(remotes) > 0:
		remote = remotes[0]
	}
	if remote != "" {
		res, err := git(ctx, r.dir, "symbolic-ref", "refs/remotes/"+remote+"/HEAD")
		if err != nil {
			return ref{}, err
		}
		if res.ok() {
			full := strings.TrimPrefix(strings.TrimSpace(res.text()), "refs/remotes/")
			if name, ok := strings.CutPrefix(full, remote+"/"); ok && name != "" {
				return ref{name: name, ref: full}, nil
			}
		}
	}
	res, err := git(ctx, r.dir, "for-each-ref", "--format=%(refname:short)", "refs/heads")
	if err != nil {
		return ref{}, err
	}
	heads := lines(res.text())
	conf, err := git(ctx, r.dir, "config", "init.defaultBranch")
	if err != nil {
		return ref{}, err
	}
	if d := strings.TrimSpace(conf.text()); d != "" && contains(heads, d) {
		return ref{name: d, ref: d}, nil
	}
	for _, d := range []string{"main", "master"} {
		if contains(heads, d) {
			return ref{name: d, ref: d}, nil
		}
	}
	return ref{}, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
