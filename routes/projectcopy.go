package routes

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/vcs"
)

// OpenCode 1.18.33's project copies: another working copy of a project
// made by a strategy (the one built in, git_worktree: a worktree detached
// at HEAD) in a directory the client chooses, recorded among the
// project's directories with its strategy (GET /project/{id}/directories);
// remove and refresh (the project's git worktrees recorded, directories
// that are gone forgotten). As OpenCode refreshes a project's copies when
// it first serves a directory with these routes, so do we.

// copyStrategy is the one strategy there is.
const copyStrategy = "git_worktree"

func (s *Server) mountProjectCopies(r chi.Router) {
	r.Post("/experimental/project/{projectID}/copy/generate-name", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Context *string `json:"context"`
		}
		if err := decodeBody(r, &body, false); err != nil {
			return err
		}
		// OpenCode asks the small model for a name when there is context
		// and falls back to a random one; the answer is a random one here.
		writeJSON(w, http.StatusOK, map[string]string{"name": vcs.RandomName()})
		return nil
	}))
	r.Post("/experimental/project/{projectID}/copy", s.h(v1, s.createCopy))
	r.Delete("/experimental/project/{projectID}/copy", s.h(v1, s.removeCopy))
	r.Post("/experimental/project/{projectID}/copy/refresh", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		ctx := detach(r.Context())
		s.bootCopies(ctx, r)
		if err := s.refreshCopies(ctx, chi.URLParam(r, "projectID"), s.directory(r)); err != nil {
			return s.copyFailed(w, r, err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
}

// tagged answers a bad request of the copy routes as OpenCode does: in
// the tagged shape (InvalidRequestError), while their other errors are in
// the {name, data} one.
func (s *Server) tagged(w http.ResponseWriter, r *http.Request, err error) error {
	writeError(w, r, v2, s.log, err)
	return nil
}

// copyError is OpenCode's ProjectCopyError; forceRequired is null unless
// git refused a removal (true) or failed otherwise (false).
type copyError struct {
	msg   string
	force *bool
}

func (e *copyError) Error() string { return e.msg }

func (s *Server) copyFailed(w http.ResponseWriter, r *http.Request, err error) error {
	var ce *copyError
	var ge *vcs.CopyError
	switch {
	case errors.As(err, &ce):
	case errors.As(err, &ge):
		f := ge.ForceRequired
		ce = &copyError{msg: ge.Message, force: &f}
	default:
		return s.gitError(r, err)
	}
	var force any
	if ce.force != nil {
		force = *ce.force
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"name": "ProjectCopyError", "data": map[string]any{"message": ce.msg, "forceRequired": force}})
	return nil
}

// existingDir is dir with its links resolved, when it is a directory.
func existingDir(dir string) (string, bool) {
	c := vcs.Canonical(dir)
	fi, err := os.Stat(c)
	return c, err == nil && fi.IsDir()
}

func unavailable(dir string) error {
	return &copyError{msg: "Project copy directory unavailable: " + dir}
}

// bootCopies refreshes the copies of the request's project the first time
// these routes serve its directory.
func (s *Server) bootCopies(ctx context.Context, r *http.Request) {
	dir := s.directory(r)
	s.workspaces.mu.Lock()
	if s.workspaces.booted == nil {
		s.workspaces.booted = map[string]bool{}
	}
	done := s.workspaces.booted[dir]
	s.workspaces.booted[dir] = true
	s.workspaces.mu.Unlock()
	if done {
		return
	}
	p, _, err := s.projects.reg.Open(ctx, dir)
	if err == nil {
		err = s.refreshCopies(ctx, p.ID, dir)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Warn("project copy refresh failed", "directory", dir, "err", err)
	}
}

func (s *Server) createCopy(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Strategy  *string `json:"strategy"`
		Directory *string `json:"directory"`
		Name      *string `json:"name"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return s.tagged(w, r, err)
	}
	switch {
	case body.Strategy == nil:
		return s.tagged(w, r, badRequest("Payload", "strategy", `Missing key at ["strategy"]`))
	case strings.TrimSpace(*body.Strategy) == "":
		return s.tagged(w, r, badRequest("Payload", "strategy", `Expected a value with a length of at least 1 at ["strategy"]`))
	case body.Directory == nil:
		return s.tagged(w, r, badRequest("Payload", "directory", `Missing key at ["directory"]`))
	}
	ctx := detach(r.Context())
	s.bootCopies(ctx, r)
	projectID := chi.URLParam(r, "projectID")
	if strategy := strings.TrimSpace(*body.Strategy); strategy != copyStrategy {
		return s.copyFailed(w, r, &copyError{msg: "Project copy strategy unavailable: " + strategy})
	}
	_, here, err := s.projects.reg.Open(ctx, s.directory(r))
	if err != nil {
		return s.gitError(r, err)
	}
	source, ok := existingDir(here.Directory)
	if !ok {
		return s.copyFailed(w, r, unavailable(here.Directory))
	}
	if _, ok := s.projects.reg.DirectoryOf(projectID, source); !ok {
		return s.copyFailed(w, r, &copyError{msg: "Project copy source not found: " + source})
	}
	parent := filepath.Clean(*body.Directory)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return s.copyFailed(w, r, &copyError{msg: err.Error()})
	}
	name := ""
	if body.Name != nil {
		name = *body.Name
	}
	if name == "" {
		name = vcs.RandomName()
	}
	target := filepath.Join(parent, name)
	for n := 1; exists(target); {
		if n++; n > 10 {
			return s.copyFailed(w, r, &copyError{msg: "Project copy destination already exists: " + target})
		}
		target = filepath.Join(parent, name+"-"+strconv.Itoa(n))
	}
	repo, err := copyRepo(ctx, source)
	if err != nil {
		return s.copyFailed(w, r, err)
	}
	if err := vcs.AddCopy(ctx, repo, target); err != nil {
		return s.copyFailed(w, r, err)
	}
	made, ok := existingDir(target)
	if !ok {
		return s.copyFailed(w, r, unavailable(target))
	}
	if changed, err := s.projects.reg.SetDirectory(projectID, made, copyStrategy); err != nil {
		return err
	} else if changed {
		s.publishLive("project.directories.updated", s.directory(r), map[string]string{"projectID": projectID})
	}
	writeJSON(w, http.StatusOK, map[string]string{"directory": made})
	return nil
}

// copyRepo is the repository of dir; outside git the directory is
// unavailable to the git_worktree strategy.
func copyRepo(ctx context.Context, dir string) (vcs.Repository, error) {
	repo, ok, err := vcs.Discover(ctx, dir)
	if err == nil && !ok {
		err = unavailable(dir)
	}
	return repo, err
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func (s *Server) removeCopy(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Directory *string `json:"directory"`
		Force     *bool   `json:"force"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return s.tagged(w, r, err)
	}
	switch {
	case body.Directory == nil:
		return s.tagged(w, r, badRequest("Payload", "directory", `Missing key at ["directory"]`))
	case body.Force == nil:
		return s.tagged(w, r, badRequest("Payload", "force", `Missing key at ["force"]`))
	}
	ctx := detach(r.Context())
	s.bootCopies(ctx, r)
	projectID := chi.URLParam(r, "projectID")
	dir, ok := existingDir(*body.Directory)
	if !ok {
		return s.copyFailed(w, r, unavailable(filepath.Clean(*body.Directory)))
	}
	d, ok := s.projects.reg.DirectoryOf(projectID, dir)
	if !ok || d.Strategy == "" {
		return s.copyFailed(w, r, &copyError{msg: "Invalid project copy directory: " + dir})
	}
	if d.Strategy != copyStrategy {
		return s.copyFailed(w, r, &copyError{msg: "Project copy strategy unavailable: " + d.Strategy})
	}
	repo, err := copyRepo(ctx, dir)
	if err != nil {
		return s.copyFailed(w, r, err)
	}
	if err := vcs.RemoveCopy(ctx, repo, dir, *body.Force); err != nil {
		return s.copyFailed(w, r, err)
	}
	s.projects.reg.Forget(dir)
	if changed, err := s.projects.reg.RemoveDirectory(projectID, dir); err != nil {
		return err
	} else if changed {
		s.publishLive("project.directories.updated", s.directory(r), map[string]string{"projectID": projectID})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refreshCopies records the git worktrees of the project's root
// directories among its directories (a linked one as a git_worktree copy,
// a main one as a root) and forgets the directories that are gone.
func (s *Server) refreshCopies(ctx context.Context, projectID, dir string) error {
	type found struct{ dir, strategy string }
	var roots, gone []string
	for _, d := range s.projects.reg.Directories(projectID) {
		if _, ok := existingDir(d.Directory); !ok {
			gone = append(gone, d.Directory)
		} else if d.Strategy == "" {
			roots = append(roots, d.Directory)
		}
	}
	var list []found
	at := map[string]int{}
	for _, root := range roots {
		repo, ok, err := vcs.Discover(ctx, root)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		entries, err := vcs.Copies(ctx, repo)
		if err != nil {
			return err
		}
		for _, e := range entries {
			c, ok := existingDir(e.Directory)
			if !ok {
				continue
			}
			f := found{dir: c}
			if !e.Main {
				f.strategy = copyStrategy
			}
			if i, seen := at[c]; seen {
				list[i] = f
				continue
			}
			at[c] = len(list)
			list = append(list, f)
		}
	}
	changed := false
	for _, f := range list {
		c, err := s.projects.reg.SetDirectory(projectID, f.dir, f.strategy)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	for _, g := range gone {
		c, err := s.projects.reg.RemoveDirectory(projectID, g)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if changed {
		s.publishLive("project.directories.updated", dir, map[string]string{"projectID": projectID})
	}
	return nil
}
