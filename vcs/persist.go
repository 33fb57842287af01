package vcs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/opencode-server/opencode-server/atomicfile"
)

// The registry on disk (OpenCode keeps its project table in its
// database): every project with its directories, written whole after
// every change (atomicfile) and read back at start.

// ProjectsFile is the registry's file name under the data directory.
const ProjectsFile = "projects.json"

// SaveError is a change the registry could not write: the change is
// undone, and the caller answers 503 (retry).
type SaveError struct {
	Path string
	Err  error
}

func (e *SaveError) Error() string {
	return fmt.Sprintf("vcs: saving the project registry %s: %v", e.Path, e.Err)
}

func (e *SaveError) Unwrap() error { return e.Err }

type savedFile struct {
	Version  int          `json:"version"`
	Seq      int          `json:"seq"`
	Projects []savedEntry `json:"projects"`
}

type savedEntry struct {
	Project     Project    `json:"project"`
	Directories []savedDir `json:"directories"`
}

type savedDir struct {
	Directory string `json:"directory"`
	Seq       int    `json:"seq"`
	Strategy  string `json:"strategy,omitempty"`
}

// LoadProjects is the registry saved at path (no file: an empty one),
// saved there after every change. A file that cannot be read or parsed is
// an error: the server does not start over an empty registry silently.
func LoadProjects(path string) (*Projects, error) {
	ps := &Projects{Path: path}
	ps.init()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ps, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vcs: reading the project registry: %w", err)
	}
	var f savedFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("vcs: the project registry %s is corrupt (move it aside to start over): %w", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("vcs: the project registry %s has unknown version %d", path, f.Version)
	}
	for _, e := range f.Projects {
		if e.Project.ID == "" {
			return nil, fmt.Errorf("vcs: the project registry %s is corrupt: a project without an id", path)
		}
		if _, dup := ps.rows[e.Project.ID]; dup {
			return nil, fmt.Errorf("vcs: the project registry %s is corrupt: project %s twice", path, e.Project.ID)
		}
		r := &row{p: e.Project}
		if r.p.Sandboxes == nil {
			r.p.Sandboxes = []string{}
		}
		for _, d := range e.Directories {
			r.dirs = append(r.dirs, dirEntry{dir: d.Directory, seq: d.Seq, strategy: d.Strategy})
		}
		ps.rows[e.Project.ID] = r
		ps.order = append(ps.order, e.Project.ID)
	}
	ps.seq = f.Seq
	return ps, nil
}

// state is a deep copy of the rows, their order and the directory
// sequence, to put back when a change cannot be saved.
type state struct {
	rows  map[string]*row
	order []string
	seq   int
}

// snapshot copies the registry; the caller holds ps.mu.
func (ps *Projects) snapshot() state {
	st := state{rows: make(map[string]*row, len(ps.rows)), order: slices.Clone(ps.order), seq: ps.seq}
	for id, r := range ps.rows {
		c := &row{p: copyOf(r.p), dirs: slices.Clone(r.dirs)}
		c.p.Icon = cloneIcon(r.p.Icon) // copyOf drops an empty icon
		st.rows[id] = c
	}
	return st
}

func cloneIcon(i *Icon) *Icon {
	if i == nil {
		return nil
	}
	c := *i
	return &c
}

// restore puts a snapshot back; the caller holds ps.mu.
func (ps *Projects) restore(st state) {
	ps.rows, ps.order, ps.seq = st.rows, st.order, st.seq
}

// save writes the registry to Path (nothing without one); the caller
// holds ps.mu.
func (ps *Projects) save() error {
	if ps.Path == "" {
		return nil
	}
	f := savedFile{Version: 1, Seq: ps.seq, Projects: []savedEntry{}}
	for _, id := range ps.order {
		r := ps.rows[id]
		e := savedEntry{Project: r.p, Directories: []savedDir{}}
		for _, d := range r.dirs {
			e.Directories = append(e.Directories, savedDir{Directory: d.dir, Seq: d.seq, Strategy: d.strategy})
		}
		f.Projects = append(f.Projects, e)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return &SaveError{Path: ps.Path, Err: err}
	}
	if err := atomicfile.Write(ps.Path, append(b, '\n'), 0o600); err != nil {
		return &SaveError{Path: ps.Path, Err: err}
	}
	return nil
}

// change runs fn under the lock and saves what it changed (when fn says
// it changed something); a save that fails puts everything back.
func (ps *Projects) change(fn func() bool) error {
	ps.init()
	if ps.Path == "" {
		fn()
		return nil
	}
	st := ps.snapshot()
	if !fn() {
		return nil
	}
	if err := ps.save(); err != nil {
		ps.restore(st)
		return err
	}
	return nil
}
