package routes

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/opencode"
)

// mountCommands serves slash commands, sharing (disabled), the v2 health
// check and the global config file.
func (s *Server) mountCommands(r chi.Router) {
	r.Get("/command", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, command.List(s.directory(r), s.cfg.Commands, config.GlobalDir()))
	})
	r.Post("/session/{sessionID}/command", s.h(v1, s.runCommand))
	r.Post("/session/{sessionID}/shell", s.h(v1, s.shell))
	r.Post("/session/{sessionID}/revert", s.h(v1, s.revert))
	r.Post("/session/{sessionID}/unrevert", s.h(v1, s.unrevert))
	r.Post("/session/{sessionID}/summarize", s.h(v1, s.summarize))
	r.Post("/session/{sessionID}/fork", s.h(v1, s.fork))
	// Sharing uploads a session to a public service; this server never
	// does, as OpenCode with "share": "disabled".
	r.Post("/session/{sessionID}/share", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		if _, err := s.m.GetSession(r.Context(), id); err != nil {
			return err
		}
		return badRequest("Payload", "", "Sharing is disabled in configuration")
	}))
	r.Delete("/session/{sessionID}/share", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		sess, err := s.m.GetSession(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, sess)
		return nil
	}))
	r.Get("/api/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"healthy": true})
	})
	r.Get("/global/config", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		cfg, err := readGlobalConfig()
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, withoutSecrets(cfg))
		return nil
	}))
	r.Patch("/global/config", s.h(v1, s.patchGlobalConfig))
}

// commandBody is POST /session/{id}/command.
type commandBody struct {
	MessageID string            `json:"messageID,omitempty"`
	Agent     string            `json:"agent,omitempty"`
	Model     string            `json:"model,omitempty"`
	Command   string            `json:"command" validate:"required"`
	Arguments *string           `json:"arguments" validate:"required"`
	Variant   string            `json:"variant,omitempty"`
	Parts     []json.RawMessage `json:"parts,omitempty"`
}

// runCommand expands a command's template with the arguments and runs it
// as a prompt, answering like POST /session/{id}/message.
func (s *Server) runCommand(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b commandBody
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	cmd, ok := command.Find(s.directory(r), s.cfg.Commands, config.GlobalDir(), b.Command)
	if !ok {
		return badRequest("Payload", "command", "Command not found: \""+b.Command+"\"")
	}
	agent := b.Agent
	if agent == "" {
		agent = cmd.Agent
	}
	if agent != "" && !s.knownAgent(agent) {
		return badRequest("Payload", "agent", "Agent not found: \""+agent+"\"")
	}
	var model *opencode.MessageModel
	m := b.Model
	if m == "" {
		m = cmd.Model
	}
	if m != "" {
		pid, mid, ok := config.SplitModel(m)
		if !ok || !s.m.HasModel(pid, mid) {
			return badRequest("Payload", "model", "Model not found: "+m)
		}
		model = &opencode.MessageModel{ProviderID: pid, ModelID: mid}
	}
	mid, minted, err := s.messageIDOr(b.MessageID, "messageID")
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	parts := command.Prompt(r.Context(), cmd.Template, *b.Arguments, s.directory(r), home, s.knownAgent, s.ids.NewPart)
	if s.subtask(cmd, agent) {
		// As OpenCode: the command runs as a task call of its agent (a
		// subagent), from the session's own agent and model.
		if agent == "" {
			agent = defaultSubtaskAgent
		}
		taskModel := model
		if taskModel == nil {
			taskModel = s.sessionModel(r.Context(), id)
		}
		parts = []opencode.Part{{ID: s.ids.NewPart(), Type: opencode.PartSubtask, Agent: agent, Description: cmd.Description,
			Command: cmd.Name, Model: taskModel, Prompt: parts[0].Text}}
		agent, model = b.Agent, nil
		if b.Model != "" {
			if pid, mid, ok := config.SplitModel(b.Model); ok {
				model = &opencode.MessageModel{ProviderID: pid, ModelID: mid}
			}
		}
	}
	if len(b.Parts) > 0 {
		extra, err := s.decodeParts(b.Parts)
		if err != nil {
			return err
		}
		parts = append(parts, extra...)
	}
	in := &opencode.Input{ID: mid, Minted: minted, SessionID: id, Delivery: opencode.Steer, Parts: parts, Agent: agent, Model: model}
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return err
	}
	res, err := s.m.Wait(r.Context(), id, in.ID)
	if err != nil {
		return err
	}
	if err := s.m.CommandExecuted(detach(r.Context()), id, cmd.Name, *b.Arguments, res.Message.Info.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res.Message)
	return nil
}

// globalConfigMu serialises read-modify-write of the global config file.
var globalConfigMu sync.Mutex

// readGlobalConfig merges the global config files (config.json,
// opencode.json, opencode.jsonc), top-level keys of later files winning.
func readGlobalConfig() (map[string]any, error) {
	out := map[string]any{}
	dir := config.GlobalDir()
	for _, n := range []string{"config.json", "opencode.json", "opencode.jsonc"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		std, err := config.StripJSONC(b)
		if err == nil {
			err = json.Unmarshal(std, &m)
		}
		if err != nil {
			return nil, &opencode.Error{Code: opencode.EInvalid, Message: "the global config " + n + " is not valid JSON: " + err.Error()}
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out, nil
}

// patchGlobalConfig deep-merges the body into the global config and
// writes it to opencode.json, as OpenCode's PATCH /global/config does. The
// running server keeps the config it started with.
func (s *Server) patchGlobalConfig(w http.ResponseWriter, r *http.Request) error {
	var patch map[string]any
	if err := decodeBody(r, &patch, false); err != nil {
		return err
	}
	globalConfigMu.Lock()
	defer globalConfigMu.Unlock()
	cur, err := readGlobalConfig()
	if err != nil {
		return err
	}
	merged := mergeJSON(cur, patch)
	b, err := json.MarshalIndent(merged, "", "  ")
	if err != nil {
		return err
	}
	dir := config.GlobalDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".opencode.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "opencode.json")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, withoutSecrets(merged))
	return nil
}

// withoutSecrets is a config as an answer may show it: every provider's
// options without apiKey (OpenCode 1.18.33 shows it; README, "Secrets").
func withoutSecrets(cfg map[string]any) map[string]any {
	providers, ok := cfg["provider"].(map[string]any)
	if !ok {
		return cfg
	}
	out := make(map[string]any, len(cfg))
	for k, v := range cfg {
		out[k] = v
	}
	clean := make(map[string]any, len(providers))
	for id, p := range providers {
		pm, ok := p.(map[string]any)
		if !ok {
			clean[id] = p
			continue
		}
		pc := make(map[string]any, len(pm))
		for k, v := range pm {
			pc[k] = v
		}
		if opts, ok := pm["options"].(map[string]any); ok {
			oc := make(map[string]any, len(opts))
			for k, v := range opts {
				if k != "apiKey" {
					oc[k] = v
				}
			}
			pc["options"] = oc
		}
		clean[id] = pc
	}
	out["provider"] = clean
	return out
}

// mergeJSON merges patch into base: objects merge key by key, anything
// else replaces.
func mergeJSON(base, patch map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(patch))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range patch {
		if pm, ok := v.(map[string]any); ok {
			if bm, ok := out[k].(map[string]any); ok {
				out[k] = mergeJSON(bm, pm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// shellBody is POST /session/{id}/shell.
type shellBody struct {
	MessageID string                 `json:"messageID,omitempty"`
	Agent     string                 `json:"agent" validate:"required"`
	Model     *opencode.MessageModel `json:"model,omitempty"`
	Command   string                 `json:"command" validate:"required"`
}

// shell runs a command the user typed (`!cmd`) in the session directory;
// it is stored as OpenCode stores it (a synthetic user message, an
// assistant message with one bash tool part) and answers that message.
func (s *Server) shell(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b shellBody
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	if !s.knownAgent(b.Agent) {
		return badRequest("Payload", "agent", "Agent not found: \""+b.Agent+"\"")
	}
	if b.Model != nil && !s.m.HasModel(b.Model.ProviderID, b.Model.ModelID) {
		return badRequest("Payload", "model", "Model not found: "+b.Model.ProviderID+"/"+b.Model.ModelID)
	}
	mid, minted, err := s.messageIDOr(b.MessageID, "messageID")
	if err != nil {
		return err
	}
	in := opencode.ShellInput(id, mid, s.ids.NewPart(), b.Command, b.Agent, b.Model)
	in.Minted = minted
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return err
	}
	res, err := s.m.Wait(r.Context(), id, in.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res.Message)
	return nil
}

// defaultSubtaskAgent runs a subtask command that names no agent.
const defaultSubtaskAgent = "general"

// subtask reports whether a command runs as a subtask (OpenCode's rule: its
// agent is a subagent and it does not say subtask: false, or it says
// subtask: true).
func (s *Server) subtask(cmd command.Command, agentName string) bool {
	if cmd.Subtask {
		return true
	}
	if cmd.NoSubtask || agentName == "" {
		return false
	}
	for _, a := range s.m.Agents() {
		if a.Name == agentName {
			return a.Mode == "subagent"
		}
	}
	return false
}

// sessionModel is the model a session's next turn uses: its own, else the
// server's default.
func (s *Server) sessionModel(ctx context.Context, id string) *opencode.MessageModel {
	if sess, err := s.m.GetSession(ctx, id); err == nil && sess.Model != nil {
		return &opencode.MessageModel{ProviderID: sess.Model.ProviderID, ModelID: sess.Model.ID}
	}
	if m, ok := s.cfg.Catalog.Get().Default(); ok {
		return &opencode.MessageModel{ProviderID: m.ProviderID, ModelID: m.ID}
	}
	return nil
}
