package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// mountVCS serves the review panel's routes: the branch, what changed
// since HEAD (status, diffs with patches, one raw patch) and applying a
// patch, all in the directory the request addresses, and the worktree
// routes (worktree.go).
func (s *Server) mountVCS(r chi.Router) {
	// As OpenCode's GlobalBus: on /global/event only.
	s.projects.reg.Notify = func(p vcs.Project) { s.publishLive("project.updated", "global", p) }
	s.mountProjects(r)
	s.mountWorktrees(r)
	r.Get("/vcs", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		t, err := s.tree(r)
		if err != nil {
			return err
		}
		branch, def, err := t.Info(r.Context())
		if err != nil {
			return s.gitError(r, err)
		}
		// null when there is none, as OpenCode answers.
		writeJSON(w, http.StatusOK, map[string]any{"branch": orNull(branch), "default_branch": orNull(def)})
		return nil
	}))
	r.Get("/vcs/status", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		t, err := s.tree(r)
		if err != nil {
			return err
		}
		st, err := t.Status(r.Context())
		if err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, st)
		return nil
	}))
	r.Get("/vcs/diff", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		mode, err := diffMode(q["mode"])
		if err != nil {
			return err
		}
		context := vcs.FullContext
		if v, ok := q["context"]; ok {
			if context, err = diffContext(v); err != nil {
				return err
			}
		}
		t, err := s.tree(r)
		if err != nil {
			return err
		}
		d, err := t.Diff(r.Context(), mode, context)
		if err != nil {
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, d)
		return nil
	}))
	r.Get("/vcs/diff/raw", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		t, err := s.tree(r)
		if err != nil {
			return err
		}
		text, err := t.Raw(r.Context())
		if err != nil {
			return s.gitError(r, err)
		}
		w.Header().Set("Content-Type", "text/x-diff; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(text)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(text))
		return nil
	}))
	r.Post("/vcs/apply", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Patch *string `json:"patch"`
		}
		if err := decodeBody(r, &body, false); err != nil {
			return err
		}
		if body.Patch == nil {
			return badRequest("Payload", "patch", `Missing key at ["patch"]`)
		}
		t, err := s.tree(r)
		if err != nil {
			return err
		}
		if err := t.Apply(r.Context(), *body.Patch); err != nil {
			if ae, ok := err.(*vcs.ApplyError); ok {
				writeJSON(w, http.StatusBadRequest, map[string]any{"name": "VcsApplyError",
					"data": map[string]any{"message": ae.Message, "reason": ae.Reason}})
				return nil
			}
			return s.gitError(r, err)
		}
		writeJSON(w, http.StatusOK, map[string]any{"applied": true})
		return nil
	}))
}

// publishLive puts an event no session owns on the bus, in directory dir.
func (s *Server) publishLive(typ, dir string, props any) {
	if s.cfg.Publish == nil {
		return
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify writes "<", ">" and "&"
	if err := enc.Encode(props); err != nil {
		s.log.Error("encode event", "type", typ, "err", err)
		return
	}
	s.cfg.Publish(&opencode.Event{ID: s.ids.NewEvent(), Type: typ, Directory: dir, Data: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
}

// tree is the request's directory in its project.
func (s *Server) tree(r *http.Request) (vcs.Tree, error) {
	dir := s.directory(r)
	_, id, err := s.projects.reg.Open(r.Context(), dir)
	if err != nil {
		return vcs.Tree{}, s.gitError(r, err)
	}
	return vcs.TreeOf(id, dir), nil
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// diffMode is the mode query parameter: required, "git" or "branch".
func diffMode(v []string) (string, error) {
	switch {
	case len(v) == 0:
		return "", badRequest("Query", "mode", `Missing key at ["mode"]`)
	case len(v) > 1 || (v[0] != "git" && v[0] != "branch"):
		return "", badRequest("Query", "mode", `Expected "git" | "branch", got `+quoteAll(v)+` at ["mode"]`)
	}
	return v[0], nil
}

func quoteAll(v []string) string {
	if len(v) == 1 {
		return strconv.Quote(v[0])
	}
	q := make([]string, len(v))
	for i, s := range v {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// diffContext is the context query parameter: a non-negative integer,
// read as JavaScript's Number reads it ("" is 0, "1e1" is 10), as
// OpenCode reads it; more than git takes is the whole file.
func diffContext(v []string) (int, error) {
	if len(v) > 1 {
		return 0, badRequest("Query", "context", `Expected a single value at ["context"]`)
	}
	f, ok := jsNumber(v[0])
	switch {
	case !ok:
		return 0, badRequest("Query", "context", `Expected an integer, got NaN at ["context"]`)
	case math.IsInf(f, 0) || f != math.Trunc(f):
		return 0, badRequest("Query", "context", "Expected an integer, got "+jsFormat(f)+` at ["context"]`)
	case f < 0:
		return 0, badRequest("Query", "context", "Expected a value greater than or equal to 0, got "+jsFormat(f)+` at ["context"]`)
	case f > vcs.FullContext:
		return vcs.FullContext, nil
	}
	return int(f), nil
}

var decimal = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// jsNumber is JavaScript's Number(s); false for NaN.
func jsNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, true
	}
	lower := strings.ToLower(s)
	for _, p := range []struct {
		prefix string
		base   int
	}{{"0x", 16}, {"0o", 8}, {"0b", 2}} {
		if rest, ok := strings.CutPrefix(lower, p.prefix); ok {
			n, err := strconv.ParseUint(rest, p.base, 64)
			return float64(n), err == nil
		}
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	if !decimal.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil || errors.Is(err, strconv.ErrRange)
}

// jsFormat writes a number as JavaScript does (near enough for errors).
func jsFormat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
