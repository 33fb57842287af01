package routes

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/opencode"
)

// mountIntegrations serves OpenCode's v2 listings of what a client can
// connect and use: the integrations (the providers a key can be given to)
// and their credentials, which here are auth.json's entries, and the
// agents, commands and references of the request's directory.
func (s *Server) mountIntegrations(r chi.Router) {
	r.Get("/api/integration", func(w http.ResponseWriter, r *http.Request) {
		list := []integrationV2{}
		for _, it := range s.catalog().Integrations {
			list = append(list, toIntegrationV2(it))
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
	// An unknown integration is data null, as OpenCode answers.
	r.Get("/api/integration/{integrationID}", func(w http.ResponseWriter, r *http.Request) {
		var data *integrationV2
		if it, ok := s.catalog().Integration(chi.URLParam(r, "integrationID")); ok {
			v := toIntegrationV2(*it)
			data = &v
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": data})
	})
	r.Post("/api/integration/{integrationID}/connect/key", s.h(v2, s.connectKey))
	r.Post("/api/integration/{integrationID}/connect/oauth", s.h(v2, s.connectOAuth))
	// No OAuth method is offered, so no attempt is ever started: OpenCode
	// answers an attempt it does not have with a 500 (status, complete) or
	// a 204 (cancel).
	r.Get("/api/integration/attempt/{attemptID}", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		return attemptNotFound(chi.URLParam(r, "attemptID"))
	}))
	r.Post("/api/integration/attempt/{attemptID}/complete", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		var body struct {
			Code *string `json:"code"`
		}
		if err := decodeValid(r, &body); err != nil {
			return err
		}
		return attemptNotFound(chi.URLParam(r, "attemptID"))
	}))
	r.Delete("/api/integration/attempt/{attemptID}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	r.Patch("/api/credential/{credentialID}", s.h(v2, s.renameCredential))
	r.Delete("/api/credential/{credentialID}", s.h(v2, s.removeCredential))

	r.Get("/api/agent", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": s.agentsV2()})
	})
	r.Get("/api/command", func(w http.ResponseWriter, r *http.Request) {
		list := []commandV2{}
		for _, c := range s.commands(s.directory(r)) {
			list = append(list, toCommandV2(c))
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
	r.Get("/api/reference", func(w http.ResponseWriter, r *http.Request) {
		home, _ := os.UserHomeDir()
		repos := filepath.Join(config.DataDir(), "repos")
		list := []config.ReferenceInfo{}
		for _, ref := range s.cfg.References {
			if info, ok := ref.Resolve(home, repos); ok {
				list = append(list, info)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": list})
	})
}

func (s *Server) catalog() *catalog.Catalog {
	if c := s.cfg.Catalog.Get(); c != nil {
		return c
	}
	return &catalog.Catalog{}
}

// integrationV2 is OpenCode's IntegrationInfo.
type integrationV2 struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Methods     []methodV2     `json:"methods"`
	Connections []connectionV2 `json:"connections"`
}

type methodV2 struct {
	Type  string   `json:"type"` // key, env
	Names []string `json:"names,omitempty"`
}

// The env method's names are there even when empty.
func (m methodV2) MarshalJSON() ([]byte, error) {
	if m.Type == "env" {
		names := m.Names
		if names == nil {
			names = []string{}
		}
		return json.Marshal(struct {
			Type  string   `json:"type"`
			Names []string `json:"names"`
		}{m.Type, names})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
	}{m.Type})
}

type connectionV2 struct {
	Type  string `json:"type"` // credential, env
	ID    string `json:"id,omitempty"`
	Label string `json:"label,omitempty"`
	Name  string `json:"name,omitempty"`
}

// A credential's label is there even when empty.
func (c connectionV2) MarshalJSON() ([]byte, error) {
	if c.Type == "credential" {
		return json.Marshal(struct {
			Type  string `json:"type"`
			ID    string `json:"id"`
			Label string `json:"label"`
		}{c.Type, c.ID, c.Label})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}{c.Type, c.Name})
}

func toIntegrationV2(it catalog.Integration) integrationV2 {
	out := integrationV2{ID: it.ID, Name: it.Name, Methods: []methodV2{}, Connections: []connectionV2{}}
	if it.Key {
		out.Methods = append(out.Methods, methodV2{Type: "key"})
	}
	if it.Env != nil {
		out.Methods = append(out.Methods, methodV2{Type: "env", Names: it.Env})
	}
	for _, c := range it.Connections {
		if c.Credential != "" {
			out.Connections = append(out.Connections, connectionV2{Type: "credential", ID: c.Credential, Label: c.Label})
		} else {
			out.Connections = append(out.Connections, connectionV2{Type: "env", Name: c.Env})
		}
	}
	return out
}

// connectKey is POST /api/integration/{id}/connect/key {key, label}: the
// key is stored in auth.json as PUT /auth/{id} stores it (with its label),
// and the provider is connected at once.
func (s *Server) connectKey(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "integrationID")
	var body struct {
		Key   *string `json:"key" validate:"required"`
		Label *string `json:"label"`
	}
	if err := decodeValid(r, &body); err != nil {
		return err
	}
	if *body.Key == "" {
		return badRequest("Payload", "key", "key must not be empty")
	}
	if it, ok := s.catalog().Integration(id); !ok || !it.Key {
		return badRequest("Params", "integrationID", "Key method not found: "+id)
	}
	if err := s.credentials(func(a *catalog.AuthStore) error {
		return a.Set(id, catalog.Auth{Type: "api", Key: *body.Key, Label: body.Label})
	}); err != nil {
		return err
	}
	s.integrationChanged(r, id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connectOAuth is POST /api/integration/{id}/connect/oauth: no integration
// offers an OAuth method here (OpenCode answers 500 for a method it does
// not have).
func (s *Server) connectOAuth(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		MethodID *string           `json:"methodID" validate:"required"`
		Inputs   map[string]string `json:"inputs" validate:"required"`
		Label    *string           `json:"label"`
	}
	if err := decodeValid(r, &body); err != nil {
		return err
	}
	return badRequest("Payload", "methodID", "OAuth method not found: "+chi.URLParam(r, "integrationID")+"/"+*body.MethodID)
}

func attemptNotFound(id string) error {
	return &opencode.Error{Code: opencode.ENotFound, Message: "OAuth attempt not found: " + id}
}

// renameCredential is PATCH /api/credential/{id} {label}: the label of the
// auth.json entry the ID names (an empty label, or an ID that names none,
// changes nothing: 204 as OpenCode answers).
func (s *Server) renameCredential(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Label *string `json:"label" validate:"required"`
	}
	if err := decodeValid(r, &body); err != nil {
		return err
	}
	provider, found := s.credential(chi.URLParam(r, "credentialID"))
	if found && *body.Label != "" {
		if err := s.credentials(func(a *catalog.AuthStore) error {
			_, err := a.SetLabel(provider, *body.Label)
			return err
		}); err != nil {
			return err
		}
	}
	s.credentialChanged(r, provider, found)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeCredential is DELETE /api/credential/{id}: the auth.json entry is
// removed, as DELETE /auth/{providerID} removes it.
func (s *Server) removeCredential(w http.ResponseWriter, r *http.Request) error {
	provider, found := s.credential(chi.URLParam(r, "credentialID"))
	if found {
		if err := s.credentials(func(a *catalog.AuthStore) error { return a.Remove(provider) }); err != nil {
			return err
		}
	}
	s.credentialChanged(r, provider, found)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// credential is the provider whose auth.json entry id names, and whether
// it has one.
func (s *Server) credential(id string) (string, bool) {
	provider, ok := catalog.CredentialProvider(id)
	if !ok || s.cfg.Credentials == nil {
		return provider, false
	}
	_, found := s.cfg.Credentials.All()[provider]
	return provider, found
}

// credentials changes auth.json, then makes the catalog again.
func (s *Server) credentials(change func(*catalog.AuthStore) error) error {
	if s.cfg.Credentials == nil {
		return &opencode.Error{Code: opencode.EUnavailable, Message: "credentials cannot be stored by this server"}
	}
	if err := change(s.cfg.Credentials); err != nil {
		s.log.Error("auth.json not written", "err", err)
		return &opencode.Error{Code: opencode.EUnavailable, Message: "the credential could not be stored"}
	}
	s.reload()
	return nil
}

func (s *Server) credentialChanged(r *http.Request, provider string, found bool) {
	if found {
		s.integrationChanged(r, provider)
		return
	}
	s.publishIntegration(r, "integration.updated", struct{}{})
}

// integrationChanged publishes what OpenCode publishes when an
// integration's connections change: integration.connection.updated, then
// integration.updated.
func (s *Server) integrationChanged(r *http.Request, id string) {
	s.publishIntegration(r, "integration.connection.updated", struct {
		IntegrationID string `json:"integrationID"`
	}{id})
	s.publishIntegration(r, "integration.updated", struct{}{})
}

func (s *Server) publishIntegration(r *http.Request, typ string, props any) {
	if s.cfg.Publish == nil {
		return
	}
	b, _ := json.Marshal(props)
	s.cfg.Publish(&opencode.Event{ID: s.ids.NewEvent(), Type: typ, Directory: s.directory(r), Data: b})
}

// agentV2 is OpenCode's AgentV2Info.
type agentV2 struct {
	ID          string         `json:"id"`
	Model       *modelRefV2    `json:"model,omitempty"`
	Request     requestV2      `json:"request"`
	System      string         `json:"system,omitempty"`
	Description string         `json:"description,omitempty"`
	Mode        string         `json:"mode"`
	Hidden      bool           `json:"hidden"`
	Permissions []permissionV2 `json:"permissions"`
}

type modelRefV2 struct {
	ID         string `json:"id"`
	ProviderID string `json:"providerID"`
}

type requestV2 struct {
	Headers map[string]string `json:"headers"`
	Body    map[string]any    `json:"body"`
}

type permissionV2 struct {
	Action   string `json:"action"`
	Resource string `json:"resource"`
	Effect   string `json:"effect"`
}

// agentsV2 are GET /agent's agents in the v2 shape: the prompt is the
// system, temperature and top_p are request body options (as OpenCode's
// v2 config has them), the rules are permissions.
func (s *Server) agentsV2() []agentV2 {
	agents := s.m.Agents()
	out := make([]agentV2, 0, len(agents))
	for _, a := range agents {
		v := agentV2{ID: a.Name, Description: a.Description, Mode: a.Mode,
			Request: requestV2{Headers: map[string]string{}, Body: map[string]any{}}, Permissions: []permissionV2{}}
		if a.Prompt != "" && !a.Native {
			v.System = a.Prompt
		}
		if pid, mid, ok := config.SplitModel(a.Model); ok {
			v.Model = &modelRefV2{ID: mid, ProviderID: pid}
		}
		if a.Temperature != nil {
			v.Request.Body["temperature"] = *a.Temperature
		}
		if a.TopP != nil {
			v.Request.Body["top_p"] = *a.TopP
		}
		for _, rule := range agentRules(a) {
			v.Permissions = append(v.Permissions, permissionV2{Action: rule.Permission, Resource: rule.Pattern, Effect: rule.Action})
		}
		out = append(out, v)
	}
	return out
}

// commandV2 is OpenCode's CommandV2Info.
type commandV2 struct {
	Name        string      `json:"name"`
	Template    string      `json:"template"`
	Description string      `json:"description,omitempty"`
	Agent       string      `json:"agent,omitempty"`
	Model       *modelRefV2 `json:"model,omitempty"`
	Subtask     *bool       `json:"subtask,omitempty"`
}

// toCommandV2 is a command as GET /command lists it in the v2 shape: the
// model a reference, subtask there when the command sets it.
func toCommandV2(c command.Command) commandV2 {
	v := commandV2{Name: c.Name, Template: c.Template, Description: c.Description, Agent: c.Agent}
	if pid, mid, ok := config.SplitModel(c.Model); ok {
		v.Model = &modelRefV2{ID: mid, ProviderID: pid}
	}
	if c.Subtask || c.NoSubtask {
		v.Subtask = &c.Subtask
	}
	return v
}
