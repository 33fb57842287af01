package routes

import (
	"net/http"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/agent"
)

// Catalog is what the server offers: providers with their models, and the
// default model. The TUI exits at start if /config, /config/providers,
// /provider or /agent fail, so these always answer with valid shapes.
type Catalog struct {
	Providers []ProviderInfo
	// Model and SmallModel are "providerID/modelID".
	Model      string
	SmallModel string
}

// ProviderInfo is one provider.
type ProviderInfo struct {
	ID      string
	Name    string
	NPM     string
	BaseURL string
	// Source is OpenCode's provider source: "config" or "custom".
	Source string
	Models []ModelInfo
}

// ModelInfo is one model of a provider.
type ModelInfo struct {
	ID       string
	Name     string
	Context  int64
	Output   int64
	ToolCall bool
}

func (c Catalog) defaultModelOf(providerID string) string {
	if p, m, ok := strings.Cut(c.Model, "/"); ok && p == providerID {
		return m
	}
	for _, p := range c.Providers {
		if p.ID == providerID && len(p.Models) > 0 {
			return p.Models[0].ID
		}
	}
	return ""
}

var modalities = map[string]bool{"text": true, "audio": false, "image": false, "video": false, "pdf": false}

// providerV1 is the Provider shape of /config/providers and /provider.
func (c Catalog) providerV1(p ProviderInfo) map[string]any {
	models := map[string]any{}
	for _, m := range p.Models {
		models[m.ID] = map[string]any{
			"id": m.ID, "providerID": p.ID, "name": m.Name, "family": "",
			"api":          map[string]any{"id": m.ID, "url": p.BaseURL, "npm": p.NPM},
			"capabilities": map[string]any{"temperature": false, "reasoning": false, "attachment": false, "toolcall": m.ToolCall, "input": modalities, "output": modalities, "interleaved": false},
			"cost":         map[string]any{"input": 0, "output": 0, "cache": map[string]any{"read": 0, "write": 0}},
			"limit":        map[string]any{"context": m.Context, "output": m.Output},
			"status":       "active", "options": map[string]any{}, "headers": map[string]any{}, "release_date": "", "variants": map[string]any{},
		}
	}
	opts := map[string]any{}
	if p.BaseURL != "" {
		opts["baseURL"] = p.BaseURL
	}
	return map[string]any{"id": p.ID, "name": p.Name, "source": p.Source, "env": []string{}, "options": opts, "models": models}
}

func (s *Server) location(r *http.Request) map[string]any {
	return map[string]any{"directory": s.directory(r), "project": map[string]any{"id": "global", "directory": "/"}}
}

// agentList is GET /agent: the server's agents in OpenCode's Agent shape,
// with the rules the lifecycle applies to each (after its defaults).
func (s *Server) agentList() []map[string]any {
	agents := s.m.Agents()
	out := make([]map[string]any, 0, len(agents))
	for _, a := range agents {
		rules := make([]map[string]any, 0, len(a.Rules)+1)
		rules = append(rules, map[string]any{"permission": "*", "pattern": "*", "action": "allow"})
		for _, r := range a.Rules {
			rules = append(rules, map[string]any{"permission": r.Permission, "pattern": r.Pattern, "action": r.Action})
		}
		item := map[string]any{"name": a.Name, "description": a.Description, "mode": a.Mode, "native": a.Native,
			"permission": rules, "options": map[string]any{}}
		if a.Prompt != "" && !a.Native {
			item["prompt"] = a.Prompt
		}
		if pid, mid, ok := strings.Cut(a.Model, "/"); ok {
			item["model"] = map[string]any{"providerID": pid, "modelID": mid}
		}
		if a.Temperature != nil {
			item["temperature"] = *a.Temperature
		}
		if a.TopP != nil {
			item["topP"] = *a.TopP
		}
		out = append(out, item)
	}
	return out
}

// knownAgent reports whether name is one of the server's agents.
func (s *Server) knownAgent(name string) bool {
	return slices.ContainsFunc(s.m.Agents(), func(a agent.Agent) bool { return a.Name == name })
}

func (s *Server) mountCatalog(r chi.Router) {
	c := s.cfg.Catalog
	ok := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, v) }
	}
	emptyList, emptyObject := []any{}, map[string]any{}

	r.Get("/config", func(w http.ResponseWriter, r *http.Request) {
		providers := map[string]any{}
		for _, p := range c.Providers {
			models := map[string]any{}
			for _, m := range p.Models {
				models[m.ID] = map[string]any{"name": m.Name, "tool_call": m.ToolCall,
					"limit": map[string]any{"context": m.Context, "output": m.Output}}
			}
			entry := map[string]any{"name": p.Name, "models": models}
			if p.NPM != "" {
				entry["npm"] = p.NPM
			}
			if p.BaseURL != "" {
				entry["options"] = map[string]any{"baseURL": p.BaseURL}
			}
			providers[p.ID] = entry
		}
		writeJSON(w, http.StatusOK, map[string]any{"$schema": "https://opencode.ai/config.json", "command": emptyObject,
			"plugin": emptyList, "share": "disabled", "autoupdate": false, "model": c.Model, "small_model": c.SmallModel,
			"username": "opencode", "mode": emptyObject, "agent": emptyObject, "provider": providers})
	})
	r.Get("/config/providers", func(w http.ResponseWriter, r *http.Request) {
		list := []any{}
		def := map[string]string{}
		for _, p := range c.Providers {
			list = append(list, c.providerV1(p))
			def[p.ID] = c.defaultModelOf(p.ID)
		}
		writeJSON(w, http.StatusOK, map[string]any{"providers": list, "default": def})
	})
	r.Get("/provider", func(w http.ResponseWriter, r *http.Request) {
		list := []any{}
		def := map[string]string{}
		connected := []string{}
		for _, p := range c.Providers {
			list = append(list, c.providerV1(p))
			def[p.ID] = c.defaultModelOf(p.ID)
			connected = append(connected, p.ID)
		}
		writeJSON(w, http.StatusOK, map[string]any{"all": list, "default": def, "connected": connected})
	})
	r.Get("/agent", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.agentList()) })
	r.Get("/path", func(w http.ResponseWriter, r *http.Request) {
		home := homeDir()
		writeJSON(w, http.StatusOK, map[string]any{"home": home, "state": home + "/.local/state/opencode",
			"config": home + "/.config/opencode", "worktree": "/", "directory": s.directory(r)})
	})
	r.Get("/project/current", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"id": "global", "worktree": "/", "time": map[string]any{"created": 0, "updated": 0}, "sandboxes": emptyList})
	})
	// No VCS information: OpenCode's VcsInfo has only optional strings.
	r.Get("/vcs", ok(map[string]any{}))
	r.Get("/experimental/capabilities", ok(map[string]any{"backgroundSubagents": false}))
	r.Get("/experimental/console", ok(map[string]any{"consoleManagedProviders": emptyList, "switchableOrgCount": 0}))
	for _, p := range []string{"/lsp", "/formatter", "/experimental/workspace", "/experimental/workspace/status",
		"/project/global/directories"} {
		r.Get(p, ok(emptyList))
	}
	r.Get("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.MCP == nil {
			writeJSON(w, http.StatusOK, emptyObject)
			return
		}
		writeJSON(w, http.StatusOK, s.cfg.MCP.Status())
	})
	r.Post("/mcp", s.h(v1, s.mcpAdd))
	r.Post("/mcp/{name}/connect", s.h(v1, s.mcpToggle))
	r.Post("/mcp/{name}/disconnect", s.h(v1, s.mcpToggle))
	for _, p := range []string{"/experimental/resource", "/provider/auth"} {
		r.Get(p, ok(emptyObject))
	}

	r.Get("/api/location", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.location(r)) })
	for _, p := range []string{"/api/agent", "/api/integration", "/api/reference", "/api/command", "/api/skill"} {
		r.Get(p, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": emptyList})
		})
	}
	r.Get("/api/provider", func(w http.ResponseWriter, r *http.Request) {
		list := []any{}
		for _, p := range c.Providers {
			list = append(list, map[string]any{"id": p.ID, "name": p.Name,
				"api":     map[string]any{"type": "aisdk", "package": p.NPM, "url": p.BaseURL},
				"request": map[string]any{"headers": emptyObject, "body": emptyObject}})
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
	r.Get("/api/model", func(w http.ResponseWriter, r *http.Request) {
		list := []any{}
		for _, p := range c.Providers {
			for _, m := range p.Models {
				list = append(list, map[string]any{"id": m.ID, "providerID": p.ID, "name": m.Name,
					"api":          map[string]any{"id": m.ID, "type": "aisdk", "package": p.NPM, "url": p.BaseURL},
					"capabilities": map[string]any{"tools": m.ToolCall, "input": []string{"text"}, "output": []string{"text"}},
					"request":      map[string]any{"headers": emptyObject, "body": emptyObject}, "variants": emptyList,
					"time": map[string]any{"released": 0}, "cost": emptyList, "status": "active", "enabled": true,
					"limit": map[string]any{"context": m.Context, "output": m.Output}})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
}
