package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrEscape is returned (wrapped) when a path would leave the session
// directory, lexically or through a symlink.
var ErrEscape = errors.New("path escapes the session directory")

// maxLinkHops bounds how many dangling symlinks Resolve follows by hand.
const maxLinkHops = 40

// Resolve maps p to an absolute path inside dir. A relative p is joined to
// dir; an absolute p must already lie inside dir. After filepath.Clean, the
// longest existing prefix of the path is resolved with filepath.EvalSymlinks
// (a dangling symlink is followed by hand, so a write through it cannot land
// outside), and the result must still lie inside dir (itself EvalSymlinks'd).
// The returned path is the symlink-free one. An empty p means dir itself.
func Resolve(dir, p string) (string, error) {
	abs, _, err := resolve(dir, p)
	return abs, err
}

// resolve is Resolve that also returns the path relative to the (real)
// session directory, slash-separated ("." for the directory itself).
func resolve(dir, p string) (abs, rel string, err error) {
	if dir == "" {
		return "", "", errors.New("no session directory")
	}
	if strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("invalid path %q", p)
	}
	base, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	base = filepath.Clean(base)
	root, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", "", fmt.Errorf("session directory: %w", err)
	}

	var cand string
	switch {
	case p == "":
		cand = base
	case filepath.IsAbs(p):
		cand = filepath.Clean(p)
		// An absolute path may name the directory by its given or its real
		// spelling (e.g. /tmp vs /private/tmp).
		if !within(base, cand) && !within(root, cand) {
			return "", "", fmt.Errorf("%s: %w", p, ErrEscape)
		}
	default:
		cand = filepath.Join(base, p)
		if !within(base, cand) {
			return "", "", fmt.Errorf("%s: %w", p, ErrEscape)
		}
	}

	real, err := evalExisting(cand)
	if err != nil {
		return "", "", err
	}
	if !within(root, real) {
		return "", "", fmt.Errorf("%s: %w", p, ErrEscape)
	}
	r, err := filepath.Rel(root, real)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p, ErrEscape)
	}
	return real, filepath.ToSlash(r), nil
}

// evalExisting resolves symlinks in the longest existing prefix of the clean
// absolute path p and appends the missing rest. A dangling symlink met on the
// way is replaced by its target and resolution continues from there.
func evalExisting(p string) (string, error) {
	cur, rest := p, ""
	hops := 0
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if rest == "" {
				return real, nil
			}
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, lerr := os.Lstat(cur); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// cur exists but is a dangling symlink (or leads to one).
			hops++
			if hops > maxLinkHops {
				return "", fmt.Errorf("%s: too many levels of symbolic links", p)
			}
			target, rerr := os.Readlink(cur)
			if rerr != nil {
				return "", rerr
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(cur), target)
			}
			cur = filepath.Clean(target)
			continue
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", err
		}
		if rest == "" {
			rest = filepath.Base(cur)
		} else {
			rest = filepath.Join(filepath.Base(cur), rest)
		}
		cur = parent
	}
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	if p == root {
		return true
	}
	r, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r)
}

// relTo returns abs relative to the session directory's real path,
// slash-separated, or abs itself when that fails.
func relTo(dir, abs string) string {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		root = dir
	}
	r, err := filepath.Rel(root, abs)
	if err != nil {
		return abs
	}
	return filepath.ToSlash(r)
}
