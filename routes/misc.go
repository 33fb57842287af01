package routes

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/agent"
)

// mountMisc serves the tool and skill listings and the client's log.
func (s *Server) mountMisc(r chi.Router) {
	r.Get("/experimental/tool/ids", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.m.ToolIDs())
	})
	r.Get("/experimental/tool", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		for _, k := range []string{"provider", "model"} {
			if q.Get(k) == "" {
				return missingKey("Query", k)
			}
		}
		type toolInfo struct {
			ID          string `json:"id"`
			Description string `json:"description"`
			Parameters  any    `json:"parameters"`
		}
		out := []toolInfo{}
		for _, t := range s.m.Tools(q.Get("model")) {
			out = append(out, toolInfo{ID: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}))
	r.Get("/skill", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.skills(r))
	})
	r.Post("/log", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var b struct {
			Service string         `json:"service" validate:"required"`
			Level   string         `json:"level" validate:"required,oneof=debug info error warn"`
			Message string         `json:"message" validate:"required"`
			Extra   map[string]any `json:"extra"`
		}
		if err := decodeBody(r, &b, false); err != nil {
			return err
		}
		if err := validate.Struct(&b); err != nil {
			return validationError(err, "")
		}
		level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[b.Level]
		attrs := []any{"service", b.Service}
		for k, v := range b.Extra {
			attrs = append(attrs, k, v)
		}
		s.log.Log(r.Context(), level, b.Message, attrs...)
		writeJSON(w, http.StatusOK, true)
		return nil
	}))
}

// skillInfo is one skill of GET /skill (and /api/skill).
type skillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Location    string `json:"location"`
	Content     string `json:"content"`
}

// skills are the skills of the request's directory with their content.
func (s *Server) skills(r *http.Request) []skillInfo {
	out := []skillInfo{}
	for _, sk := range s.m.Skills(s.directory(r)) {
		body, err := agent.SkillBody(sk)
		if err != nil {
			continue // gone since it was found
		}
		out = append(out, skillInfo{Name: sk.Name, Description: sk.Description, Location: sk.Location, Content: body})
	}
	return out
}
