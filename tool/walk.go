package tool

import (
	"context"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// walkFiles calls fn for every file below start (a slash path relative to
// the session directory c.Dir, opened as s, from resolve), in lexical order,
// skipping skipDirs. Directories are read through the root. Symlinks are
// never followed into directories; a symlink to a file is reported only when
// its target lies inside the directory. fn gets the name to open the file
// by through the root (the link's target for a symlink; slash-separated),
// its slash path relative to start and relative to the session directory,
// and its info. It stops at ctx cancellation.
func walkFiles(ctx context.Context, s *scope, dir, start string, fn func(name, relStart, relDir string, info fs.FileInfo) error) error {
	return fs.WalkDir(s.fs(), start, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == start {
				return s.fail(start, err)
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != start && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		target := p
		if d.Type()&fs.ModeSymlink != 0 {
			// resolve, not the root, judges a link found here: it accepts
			// an absolute link that stays inside, which os.Root refuses;
			// its symlink-free answer is then opened through the root.
			_, t, rerr := resolve(dir, filepath.Join(s.real, filepath.FromSlash(p)))
			if rerr != nil {
				return nil
			}
			target = t
		}
		info, serr := s.root.Stat(s.name(target))
		if serr != nil || !info.Mode().IsRegular() {
			return nil
		}
		rr := p
		switch {
		case p == start:
			rr = path.Base(p) // start is the file itself
		case start != ".":
			rr = strings.TrimPrefix(p, start+"/")
		}
		return fn(target, rr, p, info)
	})
}
