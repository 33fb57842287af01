package routes

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// projects maps a directory to its project, as OpenCode scopes a request:
// the git work tree it is in, or "global" for every directory outside git
// (of, for the session list); reg is every project seen, as OpenCode's
// project table holds them (GET /project and the project, vcs and
// worktree routes).
type projects struct {
	roots sync.Map
	reg   *vcs.Projects
}

func (p *projects) of(dir string) string {
	if v, ok := p.roots.Load(dir); ok {
		return v.(string)
	}
	root := "global"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if repo, ok, err := vcs.Discover(ctx, dir); err == nil && ok && repo.InWorkTree {
		root = repo.Worktree
	}
	p.roots.Store(dir, root)
	return root
}

// mountProjects serves OpenCode's project routes: the project of the
// request's directory, every project seen, a project's name, icon and
// start command, its directories, and git init.
func (s *Server) mountProjects(r chi.Router) {
	r.Get("/project", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		if err := s.openKnown(r); err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, s.projects.reg.List())
		return nil
	}))
	r.Get("/project/current", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, _, err := s.projects.reg.Open(r.Context(), s.directory(r))
		if err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, p)
		return nil
	}))
	r.Patch("/project/{projectID}", s.h(v1, s.patchProject))
	r.Get("/project/{projectID}/directories", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		if err := s.openKnown(r); err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, s.projects.reg.Directories(chi.URLParam(r, "projectID")))
		return nil
	}))
	r.Post("/project/git/init", s.h(v1, s.gitInit))
}

// openKnown looks up the projects this server knows of: its own
// directory's, the request's and every session's (OpenCode has them in
// its database; here a project is recorded when a directory of it is
// first looked up).
func (s *Server) openKnown(r *http.Request) error {
	ctx := r.Context()
	dirs := []string{s.cfg.Directory, s.directory(r)}
	if s.m != nil {
		all, err := s.m.ListSessions(ctx)
		if err != nil {
			return err
		}
		for _, ss := range all {
			dirs = append(dirs, ss.Directory)
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if _, _, err := s.projects.reg.Open(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// projectPatch is PATCH /project/{projectID}'s body: null is "no change",
// as in OpenCode.
type projectPatch struct {
	Name *string `json:"name"`
	Icon *struct {
		URL      *string `json:"url"`
		Override *string `json:"override"`
		Color    *string `json:"color"`
	} `json:"icon"`
	Commands *struct {
		Start *string `json:"start"`
	} `json:"commands"`
}

func (s *Server) patchProject(w http.ResponseWriter, r *http.Request) error {
	var body projectPatch
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	u := vcs.Update{Name: body.Name}
	if body.Icon != nil {
		u.Icon = &vcs.Icon{URL: body.Icon.URL, Override: body.Icon.Override, Color: body.Icon.Color}
	}
	if body.Commands != nil {
		u.Commands = &vcs.Commands{Start: body.Commands.Start}
	}
	id := chi.URLParam(r, "projectID")
	if _, ok := s.projects.reg.Get(id); !ok {
		// Known to OpenCode from an earlier run: look again.
		if err := s.openKnown(r); err != nil {
			return s.gitError(r, err)
		}
	}
	p, ok, err := s.projects.reg.Update(id, u)
	if err != nil {
		return err
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "ProjectNotFoundError", "projectID": id,
			"message": "Project not found: " + id})
		return nil
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// gitInit makes the request's directory a git repository (unless its
// project is one) and answers its project, looked up again.
func (s *Server) gitInit(w http.ResponseWriter, r *http.Request) error {
	dir := s.directory(r)
	p, _, err := s.projects.reg.Open(r.Context(), dir)
	if err != nil {
		return s.gitError(r, err)
	}
	if p.VCS == "git" {
		writeJSON(w, http.StatusOK, p)
		return nil
	}
	if err := vcs.Init(r.Context(), dir); err != nil {
		return s.gitError(r, err)
	}
	s.projects.reg.Forget(dir)
	p, _, err = s.projects.reg.Open(r.Context(), dir)
	if err != nil {
		return s.gitError(r, err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// gitError maps what git could not do: a timeout is a 503 to retry, a
// directory git cannot work in (vcs.InitError) a 400, no git at all a
// 500.
func (s *Server) gitError(r *http.Request, err error) error {
	var ie *vcs.InitError
	switch {
	case errors.As(err, &ie):
		return badRequest("Query", "directory", ie.Error())
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		return &opencode.Error{Code: opencode.EUnavailable, Cause: err, Message: "git did not answer in time; retry the request"}
	}
	return err
}
