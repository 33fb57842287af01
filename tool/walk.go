package tool

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
)

// walkFiles calls fn for every file below root (a resolved directory inside
// the session directory dir), in lexical order, skipping skipDirs. Symlinks
// are never followed into directories; a symlink to a file is reported only
// when its target lies inside dir. fn gets the file's path, its slash path
// relative to root and relative to dir. It stops at ctx cancellation.
func walkFiles(ctx context.Context, dir, root string, fn func(abs, relRoot, relDir string, info fs.FileInfo) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if p == root {
				return err
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != root && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		target := p
		if d.Type()&fs.ModeSymlink != 0 {
			t, rerr := Resolve(dir, p)
			if rerr != nil {
				return nil
			}
			target = t
		}
		info, serr := os.Stat(target)
		if serr != nil || !info.Mode().IsRegular() {
			return nil
		}
		rr, _ := filepath.Rel(root, p)
		if rr == "." {
			rr = filepath.Base(p) // root is the file itself
		}
		return fn(target, filepath.ToSlash(rr), relTo(dir, p), info)
	})
}
