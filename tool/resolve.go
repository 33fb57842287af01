package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
//
// Resolve checks at one moment only; the tools touch the path it names only
// through an os.Root on dir (see scope), which keeps the check true when
// the file is used.
func Resolve(dir, p string) (string, error) {
	abs, _, err := resolve(dir, p)
	return abs, err
}

// resolve is Resolve that also returns the path relative to the (real)
// session directory, slash-separated ("." for the directory itself).
func resolve(dir, p string) (abs, rel string, err error) {
	base, root, err := sessionDir(dir)
	if err != nil {
		return "", "", err
	}
	if strings.ContainsRune(p, 0) {
		return "", "", fmt.Errorf("invalid path %q", p)
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

// sessionDir returns the session directory as given, made absolute and
// clean (base), and its symlink-free path (real).
func sessionDir(dir string) (base, real string, err error) {
	if dir == "" {
		return "", "", errors.New("no session directory")
	}
	base, err = filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	base = filepath.Clean(base)
	real, err = filepath.EvalSymlinks(base)
	if err != nil {
		return "", "", fmt.Errorf("session directory: %w", err)
	}
	return base, real, nil
}

// scope is the session directory opened as an *os.Root. resolve checks a
// path and names it relative to the directory (for the answers, the
// permission patterns and the error texts), but the tools then touch files
// only through the root, by that relative name: os.Root walks the name one
// component at a time from the directory's descriptor (openat with
// O_NOFOLLOW, every symlink read and checked, ".." never above the root), so
// confinement holds at the moment of use. A component swapped for a symlink
// that leads out after resolve's check is refused, not followed.
//
// Because resolve's relative name is symlink-free when checked, the root
// meets a symlink only when one appeared since; os.Root refuses absolute
// symlinks, so such a late absolute link is refused even if it points
// inside. Symlinks present at check time, absolute ones included, are
// resolved by resolve as before.
type scope struct {
	root *os.Root
	real string // the directory's symlink-free absolute path
}

// openScope opens the session directory dir as a root. The caller closes it.
func openScope(dir string) (*scope, error) {
	_, real, err := sessionDir(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("session directory: %w", err)
	}
	s := &scope{root: root, real: real}
	rootEscapeOnce.Do(func() {
		// An absolute name is refused by its spelling alone, with no file
		// system access: this yields os.Root's (unexported) escape error.
		_, err := root.Lstat(string(filepath.Separator))
		var pe *fs.PathError
		if errors.As(err, &pe) {
			rootEscape = pe.Err
		}
	})
	return s, nil
}

var (
	rootEscapeOnce sync.Once
	rootEscape     error // os.Root's "path escapes from parent"
)

// rootEscaped reports whether err is os.Root's refusal of a name that
// leads outside the root.
func rootEscaped(err error) bool {
	return rootEscape != nil && errors.Is(err, rootEscape)
}

func (s *scope) Close() error { return s.root.Close() }

// fs returns the root as an fs.FS for fs.WalkDir and fs.ReadDir (which
// sorts by name, as os.ReadDir). Unlike os.Root.FS it takes every name the
// root takes: io/fs refuses names that are not UTF-8, which a project may
// hold.
func (s *scope) fs() fs.FS { return rootFS{s.root} }

type rootFS struct{ r *os.Root }

func (f rootFS) Open(name string) (fs.File, error) { return f.r.Open(filepath.FromSlash(name)) }

func (f rootFS) Stat(name string) (fs.FileInfo, error) { return f.r.Stat(filepath.FromSlash(name)) }

func (f rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := f.r.Open(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// name turns a slash-separated relative path from resolve into a name for
// the root.
func (s *scope) name(rel string) string { return filepath.FromSlash(rel) }

// fail shapes the error of a root operation on the user-given path p as
// the tools answer: an escape found by os.Root reads like resolve's
// (ErrEscape), and a path error names the file by its absolute path and the
// operation as os.Open, os.Stat... would.
func (s *scope) fail(p string, err error) error {
	if err == nil {
		return nil
	}
	if rootEscaped(err) {
		return fmt.Errorf("%s: %w", p, ErrEscape)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		return &fs.PathError{
			Op:   strings.TrimSuffix(pe.Op, "at"),
			Path: filepath.Join(s.real, pe.Path),
			Err:  pe.Err,
		}
	}
	return err
}
