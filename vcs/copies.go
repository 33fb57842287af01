package vcs

import (
	"path/filepath"
	"slices"
)

// The project directories a project copy records (OpenCode's
// ProjectDirectories): each directory of a project with the copy strategy
// that made it, "" for a root (a directory the project was opened in).

// SetDirectory records dir as one of the project's directories made by
// strategy ("" a root), replacing the strategy it had (OpenCode's create
// with behavior "replace"); false when nothing changed or there is no
// such project. A new one is the most recent. A *SaveError (and no
// change) when it cannot be saved.
func (ps *Projects) SetDirectory(projectID, dir, strategy string) (bool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	changed := false
	err := ps.change(func() bool {
		r, i := ps.dirIndex(projectID, dir)
		switch {
		case r == nil:
			return false
		case i < 0:
			ps.seq++
			r.dirs = append(r.dirs, dirEntry{dir: filepath.Clean(dir), seq: ps.seq, strategy: strategy})
		case r.dirs[i].strategy == strategy:
			return false
		default:
			r.dirs[i].strategy = strategy
		}
		changed = true
		return true
	})
	if err != nil {
		return false, err
	}
	return changed, nil
}

// dirIndex is the project's row and the index of dir among its
// directories (-1: not one); no row when there is no such project. The
// caller holds ps.mu.
func (ps *Projects) dirIndex(projectID, dir string) (*row, int) {
	r, ok := ps.rows[projectID]
	if !ok {
		return nil, -1
	}
	dir = filepath.Clean(dir)
	for i := range r.dirs {
		if r.dirs[i].dir == dir {
			return r, i
		}
	}
	return r, -1
}

// RemoveDirectory forgets one of the project's directories; false when it
// had none such; a *SaveError (and no change) when it cannot be saved.
func (ps *Projects) RemoveDirectory(projectID, dir string) (bool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	changed := false
	err := ps.change(func() bool {
		r, i := ps.dirIndex(projectID, dir)
		if i < 0 {
			return false
		}
		r.dirs = slices.Delete(r.dirs, i, i+1)
		changed = true
		return true
	})
	if err != nil {
		return false, err
	}
	return changed, nil
}

// DirectoryOf is one of the project's directories; false when dir is not
// one.
func (ps *Projects) DirectoryOf(projectID, dir string) (Directory, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	r, i := ps.dirIndex(projectID, dir)
	if i < 0 {
		return Directory{}, false
	}
	return Directory{Directory: r.dirs[i].dir, Strategy: r.dirs[i].strategy}, true
}
