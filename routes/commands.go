package routes

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/atomicfile"
	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/opencode"
)

// mountCommands serves slash commands, sharing (disabled), the v2 health
// check and the global config file.
func (s *Server) mountCommands(r chi.Router) {
	r.Get("/command", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.commands(s.directory(r)))
	})
	r.Post("/session/{sessionID}/command", s.h(v1, s.runCommand))
	r.Post("/session/{sessionID}/init", s.h(v1, s.initSession))
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
	r.Patch("/config", s.h(v1, s.patchProjectConfig))
}

// commands are dir's commands, then those the external agents that ran
// there said they have (available_commands_update) that none of ours
// names: each is "/name arguments" sent to its agent.
func (s *Server) commands(dir string) []command.Command {
	list := command.List(dir, s.cfg.Commands, config.GlobalDir())
	seen := map[string]bool{}
	for _, c := range list {
		seen[c.Name] = true
	}
	for _, c := range s.m.ExternalCommands(dir) {
		if seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		list = append(list, c)
	}
	return list
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
	msg, err := s.execCommand(r, id, b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, msg)
	return nil
}

// initBody is POST /session/{id}/init.
type initBody struct {
	ModelID    string `json:"modelID" validate:"required"`
	ProviderID string `json:"providerID" validate:"required"`
	MessageID  string `json:"messageID" validate:"required"`
}

// initSession is POST /session/{id}/init, as OpenCode runs it: the /init
// command (write AGENTS.md) with the given model and message ID; true once
// its turn is answered.
func (s *Server) initSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b initBody
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	none := ""
	if _, err := s.execCommand(r, id, commandBody{Command: "init", Arguments: &none, MessageID: b.MessageID,
		Model: b.ProviderID + "/" + b.ModelID}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// execCommand runs command b in session id and returns its answer.
func (s *Server) execCommand(r *http.Request, id string, b commandBody) (opencode.MessageWithParts, error) {
	var none opencode.MessageWithParts
	i := slices.IndexFunc(s.commands(s.directory(r)), func(c command.Command) bool { return c.Name == b.Command })
	if i < 0 {
		return none, badRequest("Payload", "command", "Command not found: \""+b.Command+"\"")
	}
	cmd := s.commands(s.directory(r))[i]
	agent := b.Agent
	if agent == "" {
		agent = cmd.Agent
	}
	if agent != "" && !s.knownAgent(agent) {
		return none, badRequest("Payload", "agent", "Agent not found: \""+agent+"\"")
	}
	var model *opencode.MessageModel
	m := b.Model
	if m == "" {
		m = cmd.Model
	}
	if m != "" {
		pid, mid, ok := config.SplitModel(m)
		if !ok || !s.m.HasModel(pid, mid) {
			return none, badRequest("Payload", "model", "Model not found: "+m)
		}
		model = &opencode.MessageModel{ProviderID: pid, ModelID: mid}
	}
	mid, minted, err := s.messageIDOr(b.MessageID, "messageID")
	if err != nil {
		return none, err
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
			return none, err
		}
		parts = append(parts, extra...)
	}
	in := &opencode.Input{ID: mid, Minted: minted, SessionID: id, Delivery: opencode.Steer, Parts: parts, Agent: agent, Model: model}
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return none, err
	}
	res, err := s.m.Wait(r.Context(), id, in.ID)
	if err != nil {
		return none, err
	}
	if err := s.m.CommandExecuted(detach(r.Context()), id, cmd.Name, *b.Arguments, res.Message.Info.ID); err != nil {
		return none, err
	}
	return res.Message, nil
}

// globalConfigMu serialises read-modify-write of the global config file.
var globalConfigMu sync.Mutex

// readGlobalConfig merges the global config files (config.json,
// opencode.json, opencode.jsonc), top-level keys of later files winning.
func readGlobalConfig() (map[string]any, error) {
	return readConfigFiles(config.GlobalDir(), "config.json", "opencode.json", "opencode.jsonc")
}

// readConfigFiles reads and merges (later over earlier) the config files
// of dir that exist.
func readConfigFiles(dir string, names ...string) (map[string]any, error) {
	out := map[string]any{}
	for _, n := range names {
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
			return nil, &opencode.Error{Code: opencode.EInvalid, Message: "the config " + filepath.Join(dir, n) + " is not valid JSON: " + err.Error()}
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
	if err := writeConfigFile(filepath.Join(config.GlobalDir(), "opencode.json"), merged); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, withoutSecrets(merged))
	return nil
}

// patchProjectConfig is PATCH /config, as OpenCode 1.18.33 does it: the
// patch is merged into config.json of the request's directory, and the
// answer is the patch. (OpenCode reads that file back as its global
// config, not the project's; the running server keeps the config it
// started with, README.)
func (s *Server) patchProjectConfig(w http.ResponseWriter, r *http.Request) error {
	var patch map[string]any
	if err := decodeBody(r, &patch, false); err != nil {
		return err
	}
	dir := s.directory(r)
	globalConfigMu.Lock()
	defer globalConfigMu.Unlock()
	cur, err := readConfigFiles(dir, "config.json")
	if err != nil {
		return err
	}
	if err := writeConfigFile(filepath.Join(dir, "config.json"), mergeJSON(cur, patch)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, withoutSecrets(patch))
	return nil
}

// writeConfigFile writes a config durably (a crash leaves the old file or
// the new one, never half of it).
func writeConfigFile(path string, cfg map[string]any) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
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
