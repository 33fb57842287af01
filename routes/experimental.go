package routes

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/opencode"
)

// mountExperimentalSessions serves the session list across projects and
// the background-subagents switch.
func (s *Server) mountExperimentalSessions(r chi.Router) {
	r.Get("/experimental/session", s.h(v1, s.globalSessions))
	// Subagents run in the foreground here (GET /experimental/capabilities
	// says backgroundSubagents: false), so nothing is backgrounded, as
	// OpenCode answers without that feature.
	r.Post("/experimental/session/{sessionID}/background", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		if _, err := sessionID(r); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, false)
		return nil
	}))
}

// globalSession is OpenCode's GlobalSession: a session and its project.
type globalSession struct {
	opencode.Session
	Project globalProject `json:"project"`
}

type globalProject struct {
	ID       string `json:"id"`
	Worktree string `json:"worktree"`
}

// globalSessions is GET /experimental/session, as OpenCode's
// Session.listGlobal: every project's sessions, most recently updated
// first, filtered by directory (exact), roots, start (updated at or after),
// cursor (updated before), search (in the title) and archived; limit 100 by
// default, x-next-cursor when there are more.
func (s *Server) globalSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	num := func(k string) (int64, error) {
		v := q.Get(k)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return 0, badRequest("Query", k, "Expected a non-negative number at [\""+k+"\"]")
		}
		return int64(n), nil
	}
	start, err := num("start")
	if err != nil {
		return err
	}
	cursor, err := num("cursor")
	if err != nil {
		return err
	}
	limit, err := num("limit")
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = 100
	}
	flag := func(k string) (bool, error) {
		switch q.Get(k) {
		case "", "false":
			return false, nil
		case "true":
			return true, nil
		}
		return false, badRequest("Query", k, "Expected true or false at [\""+k+"\"]")
	}
	roots, err := flag("roots")
	if err != nil {
		return err
	}
	archived, err := flag("archived")
	if err != nil {
		return err
	}
	dir, search := q.Get("directory"), strings.ToLower(q.Get("search"))
	all, err := s.m.ListSessions(r.Context())
	if err != nil {
		return err
	}
	var out []globalSession
	for _, ss := range all {
		switch {
		case dir != "" && ss.Directory != dir, roots && ss.ParentID != "",
			start > 0 && ss.Time.Updated < start, cursor > 0 && ss.Time.Updated >= cursor,
			search != "" && !strings.Contains(strings.ToLower(ss.Title), search),
			!archived && ss.Time.Archived != nil:
			continue
		}
		out = append(out, globalSession{Session: ss, Project: s.projectOf(ss)})
	}
	slices.SortStableFunc(out, func(a, b globalSession) int {
		if a.Time.Updated != b.Time.Updated {
			return cmp.Compare(b.Time.Updated, a.Time.Updated)
		}
		return strings.Compare(b.ID, a.ID)
	})
	if int64(len(out)) > limit {
		out = out[:limit]
		w.Header().Set("x-next-cursor", strconv.FormatInt(out[len(out)-1].Time.Updated, 10))
	}
	if out == nil {
		out = []globalSession{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// projectOf is the project a session belongs to: its ID and work tree
// (the directory itself outside git).
func (s *Server) projectOf(ss opencode.Session) globalProject {
	root := s.projects.of(ss.Directory)
	if root == "global" {
		root = ss.Directory
	}
	return globalProject{ID: ss.ProjectID, Worktree: root}
}
