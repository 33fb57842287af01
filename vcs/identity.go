package vcs

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Global is the project of every directory outside git (and of a
// repository without a commit or a remote), as in OpenCode.
const Global = "global"

// Identity is the project a directory belongs to, found as OpenCode
// 1.18.33 finds it (Project.resolve): the nearest .git above it makes it
// a git project, identified by the hash of its origin remote's URL, else
// by the ID OpenCode cached in the repository (<git common dir>/opencode),
// else by its first root commit.
type Identity struct {
	ID string
	// Directory is the git work tree the directory is in (a linked
	// worktree's own); outside git, the file system root.
	Directory string
	Git       bool
	store     string // the repository's common git directory
	previous  string // the ID cached in store/opencode, if any
}

// Resolve finds dir's project. Only a cancelled or expired ctx is an
// error: a git that fails or is missing makes the directory global, as
// in OpenCode.
func Resolve(ctx context.Context, dir string) (Identity, error) {
	outside := Identity{ID: Global, Directory: fsRoot(dir)}
	repo, ok, err := Discover(ctx, dir)
	if err != nil && ctx.Err() != nil {
		return outside, err
	}
	if !ok || err != nil {
		return outside, nil // git failed or is missing: global, as in OpenCode
	}
	id := Identity{Directory: repo.Worktree, Git: true, store: repo.CommonDirectory}
	if b, err := os.ReadFile(filepath.Join(id.store, "opencode")); err == nil {
		id.previous = strings.TrimSpace(string(b))
	}
	id.ID = remoteID(ctx, id.Directory)
	if id.ID == "" {
		id.ID = id.previous
	}
	if id.ID == "" {
		roots, err := git(ctx, id.Directory, "rev-list", "--max-parents=0", "HEAD")
		if err != nil && ctx.Err() != nil {
			return outside, err
		}
		if l := lines(roots.text()); roots.ok() && len(l) > 0 {
			slices.Sort(l) // as JavaScript's sort: by code unit
			id.ID = l[0]
		}
	}
	if id.ID == "" {
		id.ID = Global
	}
	return id, ctx.Err()
}

// commit caches a git project's ID in its repository, as OpenCode does, so
// that it stays the same when the history or the remote changes.
func (id Identity) commit() {
	if id.Git && id.ID != Global && id.store != "" && id.previous != id.ID {
		_ = os.WriteFile(filepath.Join(id.store, "opencode"), []byte(id.ID), 0o644)
	}
}

func fsRoot(dir string) string {
	return filepath.VolumeName(dir) + string(filepath.Separator)
}

// gitPath is a path git printed, relative to cwd unless absolute.
func gitPath(cwd, name string) string {
	name = strings.TrimRight(name, "\r\n")
	if name == "" {
		return cwd
	}
	name = filepath.FromSlash(name)
	if filepath.IsAbs(name) {
		return filepath.Clean(name)
	}
	return filepath.Join(cwd, name)
}

// remoteID is the ID of a repository with an origin remote: the SHA-1 of
// "git-remote:<host>/<path>", the same for every clone of it.
func remoteID(ctx context.Context, worktree string) string {
	r, err := git(ctx, worktree, "remote", "get-url", "origin")
	if err != nil || !r.ok() {
		return ""
	}
	key := remoteKey(strings.TrimSpace(r.text()))
	if key == "" {
		return ""
	}
	sum := sha1.Sum([]byte("git-remote:" + key))
	return hex.EncodeToString(sum[:])
}

var (
	urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	scpLike   = regexp.MustCompile(`^([^@/:]+@)?([^/:]+):(.+)$`)
)

// remoteKey is "<host>/<path>" of a remote URL (https://, ssh://, or
// scp-like user@host:path), without ".git" and surrounding slashes; ""
// for a local (file:) remote or one it cannot read.
func remoteKey(remote string) string {
	if remote == "" {
		return ""
	}
	if urlScheme.MatchString(remote) {
		u, err := url.Parse(remote)
		if err == nil {
			if u.Scheme == "file" {
				return ""
			}
			return hostPath(u.Hostname(), u.EscapedPath())
		}
	}
	if m := scpLike.FindStringSubmatch(remote); m != nil {
		return hostPath(m[2], m[3])
	}
	return ""
}

func hostPath(host, path string) string {
	path = strings.TrimLeft(path, "/")
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	path = strings.TrimRight(path, "/")
	if host == "" || path == "" {
		return ""
	}
	return strings.ToLower(host) + "/" + path
}
