package routes

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
)

// The TUI exits at start if /config, /config/providers, /provider or
// /agent fail, so these always answer with valid shapes.

// modalityNames are the modalities of OpenCode's capabilities.input and
// .output objects.
var modalityNames = []string{"text", "audio", "image", "video", "pdf"}

func modalityFlags(list []string) map[string]any {
	out := make(map[string]any, len(modalityNames))
	for _, n := range modalityNames {
		out[n] = slices.Contains(list, n)
	}
	return out
}

// interleaved is capabilities.interleaved: false, true or {field}.
func interleaved(m *catalog.Model) any {
	if m.InterleavedField != "" {
		return map[string]any{"field": m.InterleavedField}
	}
	return m.Interleaved
}

// limitOf is a model's limit: context and output, input when known.
func limitOf(m *catalog.Model) map[string]any {
	l := map[string]any{"context": m.Context, "output": m.Output}
	if m.Input > 0 {
		l["input"] = m.Input
	}
	return l
}

// providerV1 is the Provider shape of /config/providers and /provider.
func providerV1(p *catalog.Provider) map[string]any {
	models := map[string]any{}
	for i := range p.Models {
		m := &p.Models[i]
		status := m.Status
		if status == "" {
			status = "active"
		}
		models[m.ID] = map[string]any{
			"id": m.ID, "providerID": p.ID, "name": m.Name, "family": m.Family,
			"api": map[string]any{"id": m.ID, "url": p.BaseURL, "npm": p.NPM},
			"capabilities": map[string]any{"temperature": m.Temperature, "reasoning": m.Reasoning, "attachment": m.Attachment,
				"toolcall": m.ToolCall, "input": modalityFlags(m.InputModalities), "output": modalityFlags(m.OutputModalities),
				"interleaved": interleaved(m)},
			"cost": map[string]any{"input": m.Cost.Input, "output": m.Cost.Output,
				"cache": map[string]any{"read": m.Cost.CacheRead, "write": m.Cost.CacheWrite}},
			"limit":  limitOf(m),
			"status": status, "options": map[string]any{}, "headers": map[string]any{}, "release_date": m.ReleaseDate,
			"variants": variantsV1(p.NPMOf(m), m),
		}
	}
	opts := map[string]any{}
	if p.BaseURL != "" && p.Configured {
		opts["baseURL"] = p.BaseURL
	}
	if len(p.Headers) > 0 {
		opts["headers"] = p.Headers
	}
	env := p.Env
	if env == nil {
		env = []string{}
	}
	return map[string]any{"id": p.ID, "name": p.Name, "source": p.Source, "env": env, "options": opts, "models": models}
}

// variantsV1 is a model's variants as an object in OpenCode's order
// (clients cycle through them in it): name -> provider options.
func variantsV1(npm string, m *catalog.Model) json.RawMessage {
	b := []byte{'{'}
	for i, v := range catalog.Variants(npm, m) {
		if i > 0 {
			b = append(b, ',')
		}
		name, _ := json.Marshal(v.Name)
		b = append(append(append(b, name...), ':'), v.Options...)
	}
	return append(b, '}')
}

// modelV2 is a model of GET /api/model (ModelV2Info).
func modelV2(p *catalog.Provider, m *catalog.Model) map[string]any {
	cost := []any{}
	if m.Cost.Set {
		cost = append(cost, map[string]any{"input": m.Cost.Input, "output": m.Cost.Output,
			"cache": map[string]any{"read": m.Cost.CacheRead, "write": m.Cost.CacheWrite}})
	}
	var released int64
	if t, err := time.Parse(time.DateOnly, m.ReleaseDate); err == nil {
		released = t.UnixMilli()
	}
	status := m.Status
	if status == "" {
		status = "active"
	}
	out := map[string]any{"id": m.ID, "providerID": p.ID, "name": m.Name,
		"api":          map[string]any{"id": m.ID, "type": "aisdk", "package": p.NPM, "url": p.BaseURL},
		"capabilities": map[string]any{"tools": m.ToolCall, "input": nonNil(m.InputModalities), "output": nonNil(m.OutputModalities)},
		"request":      map[string]any{"headers": map[string]any{}, "body": map[string]any{}}, "variants": []any{},
		"time": map[string]any{"released": released}, "cost": cost, "status": status, "enabled": true,
		"limit": limitOf(m)}
	if m.Family != "" {
		out["family"] = m.Family
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
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
		for _, r := range agentRules(a) {
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

// agentRules are an agent's rules as the lifecycle applies them: after its
// default, which allows everything.
func agentRules(a agent.Agent) []agent.Rule {
	return append([]agent.Rule{{Permission: "*", Pattern: "*", Action: "allow"}}, a.Rules...)
}

// knownAgent reports whether name is one of the server's agents.
func (s *Server) knownAgent(name string) bool {
	return slices.ContainsFunc(s.m.Agents(), func(a agent.Agent) bool { return a.Name == name })
}

func (s *Server) mountCatalog(r chi.Router) {
	cat := func() *catalog.Catalog {
		if c := s.cfg.Catalog.Get(); c != nil {
			return c
		}
		return &catalog.Catalog{}
	}
	ok := func(v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, v) }
	}
	emptyList, emptyObject := []any{}, map[string]any{}

	r.Get("/config", func(w http.ResponseWriter, r *http.Request) {
		c := cat()
		configured := map[string]any{}
		for _, p := range c.Providers {
			if !p.Configured && p.ID != scriptedProvider {
				continue
			}
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
				// Never the key: options.apiKey is a secret.
				entry["options"] = map[string]any{"baseURL": p.BaseURL}
			}
			configured[p.ID] = entry
		}
		out := map[string]any{"$schema": "https://opencode.ai/config.json", "command": emptyObject,
			"plugin": emptyList, "share": "disabled", "autoupdate": false,
			"username": "opencode", "mode": emptyObject, "agent": emptyObject, "provider": configured}
		// Only what the config says: a client with none picks from its own
		// recent models, as it does with OpenCode.
		if c.ConfiguredModel != "" {
			out["model"] = c.ConfiguredModel
		}
		if c.ConfiguredSmallModel != "" {
			out["small_model"] = c.ConfiguredSmallModel
		}
		writeJSON(w, http.StatusOK, out)
	})
	// The connected providers, with their usable models.
	r.Get("/config/providers", func(w http.ResponseWriter, r *http.Request) {
		c := cat()
		list := []any{}
		def := map[string]string{}
		for i := range c.Providers {
			p := &c.Providers[i]
			if !p.Connected {
				continue
			}
			list = append(list, providerV1(p))
			def[p.ID] = p.Default
		}
		writeJSON(w, http.StatusOK, map[string]any{"providers": list, "default": def})
	})
	// Every provider the catalog knows, and which are connected.
	r.Get("/provider", func(w http.ResponseWriter, r *http.Request) {
		c := cat()
		list := []any{}
		def := map[string]string{}
		connected := []string{}
		for i := range c.Providers {
			p := &c.Providers[i]
			list = append(list, providerV1(p))
			if p.Default != "" {
				def[p.ID] = p.Default
			}
			if p.Listed() {
				connected = append(connected, p.ID)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"all": list, "default": def, "connected": connected})
	})
	r.Put("/auth/{providerID}", s.h(v1, s.putAuth))
	r.Delete("/auth/{providerID}", s.h(v1, s.deleteAuth))
	r.Post("/instance/dispose", s.h(v1, s.dispose))
	r.Post("/global/dispose", s.h(v1, s.dispose))
	r.Get("/agent", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.agentList()) })
	r.Get("/path", func(w http.ResponseWriter, r *http.Request) {
		home := homeDir()
		writeJSON(w, http.StatusOK, map[string]any{"home": home, "state": home + "/.local/state/opencode",
			"config": home + "/.config/opencode", "worktree": "/", "directory": s.directory(r)})
	})
	r.Get("/experimental/capabilities", ok(map[string]any{"backgroundSubagents": false}))
	r.Get("/experimental/console", ok(map[string]any{"consoleManagedProviders": emptyList, "switchableOrgCount": 0}))
	for _, p := range []string{"/lsp", "/formatter"} {
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
	// No provider offers a login flow here: the TUI's connect dialog then
	// asks for an API key (PUT /auth/{providerID}).
	r.Get("/provider/auth", ok(emptyObject))
	r.Get("/experimental/resource", func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.MCP == nil {
			writeJSON(w, http.StatusOK, emptyObject)
			return
		}
		writeJSON(w, http.StatusOK, s.cfg.MCP.Resources(r.Context()))
	})

	r.Get("/api/location", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.location(r)) })
	r.Get("/api/skill", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": s.skills(r)})
	})
	r.Get("/api/provider", func(w http.ResponseWriter, r *http.Request) {
		list := []any{}
		for i, p := range cat().Providers {
			if p.Connected {
				list = append(list, providerV2(&cat().Providers[i]))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
	r.Get("/api/provider/{providerID}", func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "providerID")
		p, found := cat().Provider(id)
		if !found {
			writeJSON(w, http.StatusNotFound, map[string]any{"_tag": "ProviderNotFoundError", "providerID": id,
				"message": "Provider not found: " + id})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": providerV2(p)})
	})
	r.Get("/api/model", func(w http.ResponseWriter, r *http.Request) {
		c := cat()
		list := []any{}
		for i := range c.Providers {
			p := &c.Providers[i]
			if !p.Connected {
				continue
			}
			for j := range p.Models {
				list = append(list, modelV2(p, &p.Models[j]))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
}

// scriptedProvider is the built-in model's provider, listed in /config.
const scriptedProvider = "scripted"

// providerV2 is a provider of /api/provider (ProviderV2Info).
func providerV2(p *catalog.Provider) map[string]any {
	return map[string]any{"id": p.ID, "name": p.Name,
		"api":     map[string]any{"type": "aisdk", "package": p.NPM, "url": p.BaseURL},
		"request": map[string]any{"headers": map[string]any{}, "body": map[string]any{}}}
}

// putAuth is PUT /auth/{providerID}: store a credential in auth.json (as
// `opencode auth login` and the TUI's connect dialog do); the provider is
// connected at once.
func (s *Server) putAuth(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "providerID")
	if id == "" {
		return badRequest("Payload", "providerID", "providerID is required")
	}
	var a catalog.Auth
	if err := decodeValid(r, &a); err != nil {
		return err
	}
	if err := a.Valid(); err != nil {
		return badRequest("Payload", "type", err.Error())
	}
	if s.cfg.Credentials == nil {
		return &opencode.Error{Code: opencode.EUnavailable, Message: "credentials cannot be stored by this server"}
	}
	if err := s.cfg.Credentials.Set(id, a); err != nil {
		s.log.Error("auth.json not written", "provider", id, "err", err)
		return &opencode.Error{Code: opencode.EUnavailable, Message: "the credential could not be stored"}
	}
	s.reload()
	writeJSON(w, http.StatusOK, true)
	return nil
}

// deleteAuth is DELETE /auth/{providerID}.
func (s *Server) deleteAuth(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "providerID")
	if s.cfg.Credentials == nil {
		return &opencode.Error{Code: opencode.EUnavailable, Message: "credentials cannot be stored by this server"}
	}
	if err := s.cfg.Credentials.Remove(id); err != nil {
		s.log.Error("auth.json not written", "provider", id, "err", err)
		return &opencode.Error{Code: opencode.EUnavailable, Message: "the credential could not be removed"}
	}
	s.reload()
	writeJSON(w, http.StatusOK, true)
	return nil
}

// dispose is POST /instance/dispose (and /global/dispose): OpenCode drops
// its instances, so the next request reads config and credentials again;
// here the catalog is made again from them.
func (s *Server) dispose(w http.ResponseWriter, r *http.Request) error {
	s.reload()
	// As OpenCode starts the directory's instance again: its project is
	// looked up anew (a first commit or a remote since is seen).
	s.projects.reg.Forget(s.directory(r))
	writeJSON(w, http.StatusOK, true)
	return nil
}

func (s *Server) reload() {
	if s.cfg.Reload != nil {
		s.cfg.Reload()
	}
}
