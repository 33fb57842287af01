package routes

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// The operations that need OpenCode's cloud or the internet: OpenCode
// Console orgs, OAuth logins (providers, MCP servers) and self-upgrade.
// None is offered here (no login flow, no Console account, an install this
// server cannot upgrade), so each answers as `opencode serve` 1.18.33
// answers when it has none: recorded in testdata/reference/cloud/.
func (s *Server) mountCloud(r chi.Router) {
	r.Get("/experimental/console/orgs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"orgs": []any{}})
	})
	r.Post("/experimental/console/switch", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var b struct {
			AccountID *string `json:"accountID"`
			OrgID     *string `json:"orgID"`
		}
		if err := s.requireKeys(r, &b, []string{"accountID", "orgID"}, func() []bool { return []bool{b.AccountID != nil, b.OrgID != nil} }); err != nil {
			return err
		}
		// No Console account is logged in: no org to switch to.
		writeJSON(w, http.StatusBadRequest, map[string]any{"_tag": "BadRequest"})
		return nil
	}))
	r.Post("/global/upgrade", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var b struct {
			Target *string `json:"target"`
		}
		if err := s.requireKeys(r, &b, []string{"target"}, func() []bool { return []bool{b.Target != nil} }); err != nil {
			return err
		}
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "Unknown installation method"})
		return nil
	}))
	// No provider offers an OAuth login here (GET /provider/auth is {}).
	r.Post("/provider/{providerID}/oauth/authorize", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var b struct {
			Method *float64          `json:"method"`
			Inputs map[string]string `json:"inputs"`
		}
		if err := decodeBody(r, &b, false); err != nil {
			return err
		}
		if b.Method == nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"name": "BadRequest", "data": map[string]any{}})
			return nil
		}
		writeJSON(w, http.StatusBadRequest, oauthMissing(chi.URLParam(r, "providerID")))
		return nil
	}))
	r.Post("/provider/{providerID}/oauth/callback", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		var b struct {
			Method *float64 `json:"method"`
			Code   string   `json:"code"`
		}
		if err := s.requireKeys(r, &b, []string{"method"}, func() []bool { return []bool{b.Method != nil} }); err != nil {
			return err
		}
		writeJSON(w, http.StatusBadRequest, oauthMissing(chi.URLParam(r, "providerID")))
		return nil
	}))
	// MCP OAuth: a server that is not configured is not found; one that is
	// gets OpenCode's answer for a server without OAuth.
	mcpAuth := func(needCode bool) http.HandlerFunc {
		return s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
			name := chi.URLParam(r, "name")
			if needCode {
				var b struct {
					Code *string `json:"code"`
				}
				if err := s.requireKeys(r, &b, []string{"code"}, func() []bool { return []bool{b.Code != nil} }); err != nil {
					return err
				}
			}
			if !s.hasMCP(name) {
				writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "McpServerNotFoundError", "name": name,
					"message": "MCP server not found: " + name})
				return nil
			}
			if r.Method == http.MethodDelete {
				writeJSON(w, http.StatusOK, map[string]any{"success": true}) // no credentials were stored
				return nil
			}
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "MCP server " + name + " does not support OAuth"})
			return nil
		})
	}
	r.Post("/mcp/{name}/auth", mcpAuth(false))
	r.Delete("/mcp/{name}/auth", mcpAuth(false))
	r.Post("/mcp/{name}/auth/authenticate", mcpAuth(false))
	r.Post("/mcp/{name}/auth/callback", mcpAuth(true))
}

// oauthMissing is OpenCode's answer for a provider with no OAuth method.
func oauthMissing(providerID string) map[string]any {
	return map[string]any{"name": "ProviderAuthOauthMissing", "data": map[string]any{"providerID": providerID}}
}

// hasMCP reports whether an MCP server of that name is configured.
func (s *Server) hasMCP(name string) bool {
	if s.cfg.MCP == nil {
		return false
	}
	_, ok := s.cfg.MCP.Status()[name]
	return ok
}

// requireKeys decodes the body into v and answers OpenCode's "Missing key"
// 400 for the first of keys whose present() is false.
func (s *Server) requireKeys(r *http.Request, v any, keys []string, present func() []bool) error {
	if err := decodeBody(r, v, false); err != nil {
		return err
	}
	for i, ok := range present() {
		if !ok {
			return missingKey("Payload", keys[i])
		}
	}
	return nil
}
