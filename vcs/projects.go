package vcs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Project is OpenCode's Project: a git repository (or "global") and what
// clients set on it.
type Project struct {
	ID        string    `json:"id"`
	Worktree  string    `json:"worktree"`
	VCS       string    `json:"vcs,omitempty"`
	Name      *string   `json:"name,omitempty"`
	Icon      *Icon     `json:"icon,omitempty"`
	Commands  *Commands `json:"commands,omitempty"`
	Time      Time      `json:"time"`
	Sandboxes []string  `json:"sandboxes"`
}

// Icon is a project's icon: an image URL, the user's override of it, a
// color.
type Icon struct {
	URL      *string `json:"url,omitempty"`
	Override *string `json:"override,omitempty"`
	Color    *string `json:"color,omitempty"`
}

// Commands are a project's scripts: Start runs in each new worktree.
type Commands struct {
	Start *string `json:"start,omitempty"`
}

// Time is when a project was first and last seen (Unix ms).
type Time struct {
	Created     int64  `json:"created"`
	Updated     int64  `json:"updated"`
	Initialized *int64 `json:"initialized,omitempty"`
}

// Update is a PATCH of a project: the fields set replace the project's
// (each of the icon's separately), the others stay.
type Update struct {
	Name     *string   `json:"name"`
	Icon     *Icon     `json:"icon"`
	Commands *Commands `json:"commands"`
}

// Directory is one local directory a project was opened in.
type Directory struct {
	Directory string `json:"directory"`
	Strategy  string `json:"strategy,omitempty"`
}

// Projects is every project this server has seen, as OpenCode's project
// table holds them: a directory a request addresses is looked up once
// (as OpenCode starts one instance per directory) and its project
// recorded or refreshed. A git project's worktrees under WorktreeRoot
// are found again from git when it is first seen.
type Projects struct {
	// Path, when set, is the file the registry is saved to after every
	// change (LoadProjects reads it at start); a change that cannot be
	// saved is undone and answered with a *SaveError.
	Path string
	// Now is the clock (time.Now when nil); Notify, when set, is told of
	// every project recorded or changed (project.updated), outside the
	// lock.
	Now    func() time.Time
	Notify func(Project)

	mu    sync.Mutex
	rows  map[string]*row
	order []string            // IDs, first seen first
	seen  map[string]Identity // directory -> its project, once looked up
	seq   int
}

type row struct {
	p    Project
	dirs []dirEntry
}

type dirEntry struct {
	dir      string
	seq      int
	strategy string // the project copy strategy that made it ("": a root)
}

func (ps *Projects) now() int64 {
	if ps.Now != nil {
		return ps.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

func (ps *Projects) init() {
	if ps.rows == nil {
		ps.rows, ps.seen = map[string]*row{}, map[string]Identity{}
	}
}

func (ps *Projects) notify(p Project) {
	if ps.Notify != nil {
		ps.Notify(p)
	}
}

// copyOf is a project no one else holds a part of, as OpenCode answers
// it (an icon whose parts are all empty is no icon).
func copyOf(p Project) Project {
	p.Sandboxes = slices.Clone(p.Sandboxes)
	if p.Sandboxes == nil {
		p.Sandboxes = []string{}
	}
	if p.Name != nil {
		p.Name = ptr(*p.Name)
	}
	if i := p.Icon; i != nil {
		if empty(i.URL) && empty(i.Override) && empty(i.Color) {
			p.Icon = nil
		} else {
			c := *i
			p.Icon = &c
		}
	}
	if p.Commands != nil {
		c := *p.Commands
		p.Commands = &c
	}
	if p.Time.Initialized != nil {
		p.Time.Initialized = ptr(*p.Time.Initialized)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// Open is the project of the directory dir a request addresses, and its
// identity: looked up the first time (then recorded as OpenCode records
// it when it starts an instance there), remembered after.
func (ps *Projects) Open(ctx context.Context, dir string) (Project, Identity, error) {
	ps.mu.Lock()
	ps.init()
	if id, ok := ps.seen[dir]; ok {
		if r, ok := ps.rows[id.ID]; ok {
			p := copyOf(r.p)
			ps.mu.Unlock()
			return p, id, nil
		}
	}
	ps.mu.Unlock()
	id, err := Resolve(ctx, dir)
	if err != nil {
		return Project{}, id, err
	}
	var found []string
	if id.Git && id.ID != Global && !ps.known(id.ID) {
		found = ps.ownWorktrees(ctx, id)
	}
	p, err := ps.record(id, found)
	if err != nil {
		return Project{}, id, err
	}
	ps.mu.Lock()
	ps.seen[dir] = id
	ps.mu.Unlock()
	id.commit()
	ps.notify(p)
	return p, id, nil
}

// Forget drops what Open remembers of dir: the next Open looks again
// (after git init made it a repository).
func (ps *Projects) Forget(dir string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.init()
	delete(ps.seen, dir)
}

func (ps *Projects) known(id string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.rows[id]
	return ok
}

// ownWorktrees are the project's linked worktrees under its WorktreeRoot:
// the sandboxes an earlier run (or OpenCode) made.
func (ps *Projects) ownWorktrees(ctx context.Context, id Identity) []string {
	list, res, err := worktreeList(ctx, id.Directory)
	if err != nil || !res.ok() {
		return nil
	}
	root := canonical(WorktreeRoot(id.ID))
	var out []string
	for _, l := range list {
		if inside(root, canonical(l.path)) {
			out = append(out, l.path)
		}
	}
	return out
}

// record is OpenCode's Project.fromDirectory once the identity is known:
// the project is created or refreshed (worktree, vcs, updated), a linked
// worktree's directory becomes one of its sandboxes, sandboxes that no
// longer exist are dropped, and the directory is one of its directories.
func (ps *Projects) record(id Identity, found []string) (Project, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var p Project
	err := ps.change(func() bool {
		p = ps.recordLocked(id, found)
		return true
	})
	return p, err
}

func (ps *Projects) recordLocked(id Identity, found []string) Project {
	now := ps.now()
	vcs := ""
	if id.Git {
		vcs = "git"
	}
	worktree := id.Directory
	if id.ID == Global && !id.Git {
		worktree = fsRoot(id.Directory)
	}
	// A project whose ID changed (a remote was added since OpenCode
	// cached the root commit) keeps what it had under its new ID.
	if id.previous != "" && id.previous != id.ID && id.previous != Global {
		if old, ok := ps.rows[id.previous]; ok {
			if _, taken := ps.rows[id.ID]; !taken {
				old.p.ID = id.ID
				ps.rows[id.ID] = old
				ps.order[slices.Index(ps.order, id.previous)] = id.ID
			}
			delete(ps.rows, id.previous)
			if i := slices.Index(ps.order, id.previous); i >= 0 {
				ps.order = slices.Delete(ps.order, i, i+1)
			}
		}
	}
	r, ok := ps.rows[id.ID]
	if !ok {
		r = &row{p: Project{ID: id.ID, Worktree: worktree, Sandboxes: found, Time: Time{Created: now}}}
		ps.rows[id.ID] = r
		ps.order = append(ps.order, id.ID)
	}
	if id.ID == Global {
		r.p.Worktree = worktree
	}
	r.p.VCS = vcs
	r.p.Time.Updated = now
	if id.ID != Global && id.Directory != r.p.Worktree && !slices.Contains(r.p.Sandboxes, id.Directory) {
		r.p.Sandboxes = append(r.p.Sandboxes, id.Directory)
	}
	r.p.Sandboxes = slices.DeleteFunc(r.p.Sandboxes, func(s string) bool {
		_, err := os.Stat(s)
		return err != nil
	})
	if id.ID != Global {
		ps.addDir(r, filepath.Clean(id.Directory))
	}
	return copyOf(r.p)
}

func (ps *Projects) addDir(r *row, dir string) {
	for _, d := range r.dirs {
		if d.dir == dir {
			return
		}
	}
	ps.seq++
	r.dirs = append(r.dirs, dirEntry{dir: dir, seq: ps.seq})
}

// List is every project, first seen first.
func (ps *Projects) List() []Project {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := []Project{}
	for _, id := range ps.order {
		out = append(out, copyOf(ps.rows[id].p))
	}
	return out
}

// Get is one project.
func (ps *Projects) Get(id string) (Project, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	r, ok := ps.rows[id]
	if !ok {
		return Project{}, false
	}
	return copyOf(r.p), true
}

// Update changes a project's name, icon or commands; false when there is
// no such project, a *SaveError (and no change) when it cannot be saved.
func (ps *Projects) Update(id string, u Update) (Project, bool, error) {
	ps.mu.Lock()
	if _, ok := ps.rows[id]; !ok {
		ps.mu.Unlock()
		return Project{}, false, nil
	}
	var p Project
	if err := ps.change(func() bool {
		p = ps.updateLocked(ps.rows[id], u)
		return true
	}); err != nil {
		ps.mu.Unlock()
		return Project{}, true, err
	}
	ps.mu.Unlock()
	ps.notify(p)
	return p, true, nil
}

func (ps *Projects) updateLocked(r *row, u Update) Project {
	if u.Name != nil {
		r.p.Name = ptr(*u.Name)
	}
	if u.Icon != nil {
		icon := Icon{}
		if r.p.Icon != nil {
			icon = *r.p.Icon
		}
		if u.Icon.URL != nil {
			icon.URL = u.Icon.URL
		}
		if u.Icon.Override != nil {
			icon.Override = u.Icon.Override
		}
		if u.Icon.Color != nil {
			icon.Color = u.Icon.Color
		}
		r.p.Icon = &icon
	}
	if u.Commands != nil {
		c := *u.Commands
		r.p.Commands = &c
	}
	r.p.Time.Updated = ps.now()
	return copyOf(r.p)
}

func empty(s *string) bool { return s == nil || *s == "" }

// AddSandbox makes dir one of the project's sandboxes (a worktree made
// for it); a *SaveError (and no change) when it cannot be saved.
func (ps *Projects) AddSandbox(id, dir string) error {
	ps.mu.Lock()
	r, ok := ps.rows[id]
	if !ok || slices.Contains(r.p.Sandboxes, dir) {
		ps.mu.Unlock()
		return nil
	}
	var p Project
	err := ps.change(func() bool {
		r := ps.rows[id]
		r.p.Sandboxes = append(r.p.Sandboxes, dir)
		r.p.Time.Updated = ps.now()
		p = copyOf(r.p)
		return true
	})
	ps.mu.Unlock()
	if err == nil {
		ps.notify(p)
	}
	return err
}

// RemoveSandbox forgets one of the project's sandboxes; a *SaveError
// (and no change) when it cannot be saved.
func (ps *Projects) RemoveSandbox(id, dir string) error {
	ps.mu.Lock()
	if _, ok := ps.rows[id]; !ok {
		ps.mu.Unlock()
		return nil
	}
	var p Project
	err := ps.change(func() bool {
		r := ps.rows[id]
		r.p.Sandboxes = slices.DeleteFunc(r.p.Sandboxes, func(s string) bool { return s == dir })
		r.p.Time.Updated = ps.now()
		p = copyOf(r.p)
		return true
	})
	ps.mu.Unlock()
	if err == nil {
		ps.notify(p)
	}
	return err
}

// Sandboxes are the project's sandboxes that are directories now.
func (ps *Projects) Sandboxes(id string) []string {
	p, ok := ps.Get(id)
	out := []string{}
	if !ok {
		return out
	}
	for _, s := range p.Sandboxes {
		if fi, err := os.Stat(s); err == nil && fi.IsDir() {
			out = append(out, s)
		}
	}
	return out
}

// Directories are the directories the project was opened in, the most
// recent first.
func (ps *Projects) Directories(id string) []Directory {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := []Directory{}
	r, ok := ps.rows[id]
	if !ok {
		return out
	}
	ds := slices.Clone(r.dirs)
	slices.SortFunc(ds, func(a, b dirEntry) int { return b.seq - a.seq })
	for _, d := range ds {
		out = append(out, Directory{Directory: d.dir, Strategy: d.strategy})
	}
	return out
}
