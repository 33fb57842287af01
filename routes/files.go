package routes

import (
	"errors"
	"github.com/opencode-server/opencode-server/opencode"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/files"
)

// mountFiles serves the project routes of the TUI: the `@` picker, text
// search, listings, file content and git status, all in the directory the
// request addresses.
func (s *Server) mountFiles(r chi.Router) {
	r.Get("/find/file", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		limit := 10
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 200 {
				return badRequest("Query", "limit", "Expected an integer between 1 and 200 at [\"limit\"]")
			}
			limit = n
		}
		kind := q.Get("type")
		if kind != "" && kind != "file" && kind != "directory" {
			return badRequest("Query", "type", "Expected \"file\" or \"directory\" at [\"type\"]")
		}
		dirs := q.Get("dirs") != "false"
		writeJSON(w, http.StatusOK, files.Find(r.Context(), s.directory(r), q.Get("query"), dirs, kind, limit))
		return nil
	}))
	r.Get("/find", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		pattern := r.URL.Query().Get("pattern")
		if pattern == "" {
			return badRequest("Query", "pattern", "Missing key at [\"pattern\"]")
		}
		ms, err := files.Search(r.Context(), s.directory(r), pattern)
		if err != nil {
			return badRequest("Query", "pattern", "Invalid pattern: "+err.Error())
		}
		writeJSON(w, http.StatusOK, ms)
		return nil
	}))
	// Symbols come from language servers; there are none here, as in
	// OpenCode with LSP disabled.
	r.Get("/find/symbol", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, []any{}) })
	r.Get("/file", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		nodes, err := files.List(r.Context(), s.directory(r), r.URL.Query().Get("path"))
		if err != nil {
			return fileError(err)
		}
		writeJSON(w, http.StatusOK, nodes)
		return nil
	}))
	r.Get("/file/content", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p := r.URL.Query().Get("path")
		if p == "" {
			return badRequest("Query", "path", "Missing key at [\"path\"]")
		}
		c, err := files.Read(s.directory(r), p)
		if err != nil {
			return fileError(err)
		}
		writeJSON(w, http.StatusOK, c)
		return nil
	}))
	r.Get("/file/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, files.Status(r.Context(), s.directory(r)))
	})

	// The v2 file system routes the TUI's `@` picker uses.
	r.Get("/api/fs/find", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if q.Get("query") == "" && !q.Has("query") {
			return missingKey("Query", "query")
		}
		limit, err := pageLimit(r, 20)
		if err != nil {
			return err
		}
		kind := q.Get("type")
		if kind != "" && kind != "file" && kind != "directory" {
			return badRequest("Query", "type", "Expected \"file\" or \"directory\" at [\"type\"]")
		}
		found := files.Find(r.Context(), s.directory(r), q.Get("query"), true, kind, limit)
		out := make([]map[string]string, len(found))
		for i, p := range found {
			t := "file"
			if strings.HasSuffix(p, "/") {
				t = "directory"
			}
			out[i] = map[string]string{"path": p, "type": t}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": out})
		return nil
	}))
	r.Get("/api/fs/list", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		nodes, err := files.List(r.Context(), s.directory(r), r.URL.Query().Get("path"))
		if err != nil {
			return fileError(err)
		}
		sort.SliceStable(nodes, func(i, j int) bool {
			if (nodes[i].Type == "directory") != (nodes[j].Type == "directory") {
				return nodes[i].Type == "directory"
			}
			return strings.ToLower(nodes[i].Name) < strings.ToLower(nodes[j].Name)
		})
		out := make([]map[string]string, len(nodes))
		for i, n := range nodes {
			out[i] = map[string]string{"path": n.Path, "type": n.Type}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": out})
		return nil
	}))
	r.Get("/api/fs/read/*", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		b, err := files.ReadBytes(s.directory(r), chi.URLParam(r, "*"))
		if err != nil {
			return fileError(err)
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b)
		return nil
	}))
}

// fileError maps a files error: outside the project is bad input (OpenCode
// answers 500), a missing directory is not found.
func fileError(err error) error {
	switch {
	case errors.Is(err, files.ErrOutside):
		return badRequest("Query", "path", "path is outside the project directory")
	case errors.Is(err, fs.ErrNotExist):
		return &opencode.Error{Code: opencode.ENotFound, Message: "No such file or directory"}
	}
	return badRequest("Query", "path", err.Error())
}
