package routes

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/vcs"
)

// mountWorktrees serves OpenCode's experimental git worktrees: a git
// project's sandboxes, each on a branch opencode/<name> in
// $XDG_DATA_HOME/opencode/worktree/<projectID>/<name>, as OpenCode makes
// them.
func (s *Server) mountWorktrees(r chi.Router) {
	r.Get("/experimental/worktree", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, _, err := s.projects.reg.Open(r.Context(), s.directory(r))
		if err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, s.projects.reg.Sandboxes(p.ID))
		return nil
	}))
	r.Post("/experimental/worktree", s.h(v1, s.createWorktree))
	r.Delete("/experimental/worktree", s.h(v1, s.removeWorktree))
	r.Post("/experimental/worktree/reset", s.h(v1, s.resetWorktree))
}

func (s *Server) createWorktree(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name         *string `json:"name"`
		StartCommand *string `json:"startCommand"`
	}
	if err := decodeBody(r, &body, true); err != nil {
		return err
	}
	p, id, err := s.projects.reg.Open(r.Context(), s.directory(r))
	if err != nil {
		return s.gitError(r, err)
	}
	name := ""
	if body.Name != nil {
		name = *body.Name
	}
	wt, err := vcs.CreateWorktree(r.Context(), id, name)
	var saveErr error
	if wt.Directory != "" {
		saveErr = s.projects.reg.AddSandbox(p.ID, wt.Directory)
	}
	if err != nil {
		return s.worktreeError(w, r, err)
	}
	if saveErr != nil {
		return saveErr
	}
	// As OpenCode starts an instance in it: the worktree is one of the
	// project's directories from now on.
	if _, _, err := s.projects.reg.Open(r.Context(), wt.Directory); err != nil {
		return s.gitError(r, err)
	}
	ready := map[string]any{"name": wt.Name}
	if wt.Branch != "" {
		ready["branch"] = wt.Branch
	}
	s.publishLive("worktree.ready", wt.Directory, ready)
	extra := ""
	if body.StartCommand != nil {
		extra = *body.StartCommand
	}
	s.startCommands(wt.Directory, p.ID, extra)
	writeJSON(w, http.StatusOK, wt)
	return nil
}

// startCommands runs the project's start command, then the worktree's
// own, in a new or reset worktree, after the answer (as OpenCode does):
// until they end or the server shuts down. A failure is only logged.
func (s *Server) startCommands(dir, projectID, extra string) {
	start := ""
	if p, ok := s.projects.reg.Get(projectID); ok && p.Commands != nil && p.Commands.Start != nil {
		start = *p.Commands.Start
	}
	if start == "" && extra == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.cfg.Done:
				cancel()
			case <-ctx.Done():
			}
		}()
		for _, c := range []struct{ kind, script string }{{"project", start}, {"worktree", extra}} {
			if err := vcs.StartCommand(ctx, dir, c.script); err != nil {
				s.log.Warn("worktree start command failed", "kind", c.kind, "directory", dir, "err", err)
				if c.kind == "project" {
					return // OpenCode runs the worktree's only after the project's succeeded
				}
			}
		}
	}()
}

// worktreeTarget is the worktree DELETE /experimental/worktree and the
// reset are about (the body's directory, relative to the request's) and
// the project of the request's directory.
func (s *Server) worktreeTarget(r *http.Request) (string, vcs.Project, vcs.Identity, error) {
	var body struct {
		Directory *string `json:"directory"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return "", vcs.Project{}, vcs.Identity{}, err
	}
	if body.Directory == nil {
		return "", vcs.Project{}, vcs.Identity{}, badRequest("Payload", "directory", `Missing key at ["directory"]`)
	}
	d := *body.Directory
	if !filepath.IsAbs(d) {
		d = filepath.Join(s.directory(r), d)
	}
	p, id, err := s.projects.reg.Open(r.Context(), s.directory(r))
	if err != nil {
		return "", p, id, s.gitError(r, err)
	}
	return filepath.Clean(d), p, id, nil
}

func (s *Server) removeWorktree(w http.ResponseWriter, r *http.Request) error {
	dir, p, id, err := s.worktreeTarget(r)
	if err != nil {
		return err
	}
	if err := vcs.RemoveWorktree(r.Context(), id, dir); err != nil {
		return s.worktreeError(w, r, err)
	}
	s.projects.reg.Forget(dir)
	if err := s.projects.reg.RemoveSandbox(p.ID, dir); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) resetWorktree(w http.ResponseWriter, r *http.Request) error {
	dir, p, id, err := s.worktreeTarget(r)
	if err != nil {
		return err
	}
	if err := vcs.ResetWorktree(r.Context(), id, dir); err != nil {
		return s.worktreeError(w, r, err)
	}
	s.startCommands(dir, p.ID, "")
	writeJSON(w, http.StatusOK, true)
	return nil
}

// worktreeError answers a failed worktree operation as OpenCode's
// WorktreeError: 400 {name, data:{message}}.
func (s *Server) worktreeError(w http.ResponseWriter, r *http.Request, err error) error {
	var we *vcs.WorktreeError
	if errors.As(err, &we) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"name": we.Name, "data": map[string]any{"message": we.Message}})
		return nil
	}
	return s.gitError(r, err)
}
