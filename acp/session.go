package acp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
)

// Session setup: initialize, the session's modes, models and config options,
// and session/new, session/load and session/list.

func (a *Agent) initialize(params json.RawMessage) (any, error) {
	var p struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if p.ProtocolVersion != protocolV1 {
		// 2, or one we do not speak: our latest.
		a.v2.Store(true)
		return a.initializeV2(), nil
	}
	return map[string]any{
		"protocolVersion": 1,
		"agentCapabilities": map[string]any{
			"loadSession":        true,
			"promptCapabilities": map[string]any{"image": a.defaultAccepts("image"), "audio": false, "embeddedContext": true},
			"mcpCapabilities":    map[string]any{"http": false, "sse": false},
			"sessionCapabilities": map[string]any{"list": map[string]any{}, "delete": map[string]any{},
				"resume": map[string]any{}, "close": map[string]any{}},
		},
		"authMethods": []any{},
		"agentInfo":   map[string]any{"name": "opencode-server", "title": "opencode-server", "version": a.version},
		"_meta": map[string]any{
			"steering": map[string]any{"supported": true},
			"opencode-server": map[string]any{"revoke": revokeMethod, "replace": replaceMethod,
				"messageIds": "session/prompt and _session/steering take a client-chosen msg_ ID in _meta.messageId " +
					"(else one is minted); their replies name it in _meta.messageId; it is the echoed user_message_chunk's " +
					"messageId, the revoke/replace key and the HTTP API's message ID"},
		},
	}, nil
}

func (a *Agent) isMode(id string) bool {
	for _, m := range a.modes() {
		if m["id"] == id {
			return true
		}
	}
	return false
}

// modes are the primary agents (build, plan, ...), as ACP session modes.
func (a *Agent) modes() []map[string]any {
	var out []map[string]any
	for _, ag := range a.core.Agents() {
		if ag.Mode == "subagent" {
			continue
		}
		m := map[string]any{"id": ag.Name, "name": ag.Name}
		if ag.Description != "" {
			m["description"] = ag.Description
		}
		out = append(out, m)
	}
	return out
}

func (a *Agent) modeState(s opencode.Session) map[string]any {
	cur := s.Agent
	if cur == "" {
		cur = "build"
	}
	return map[string]any{"currentModeId": cur, "availableModes": a.modes()}
}

// modelChoice is one choice of the "model" config option.
type modelChoice struct {
	ID, Name string
	Context  int64
}

// modelChoices are the catalog's models as "model" choices
// ("provider/model", "Provider · Model"), the default first.
func modelChoices(c *catalog.Catalog) []modelChoice {
	if c == nil {
		return nil
	}
	out := []modelChoice{{ID: c.Model}}
	for _, p := range c.Providers {
		for _, m := range p.Models {
			ch := modelChoice{ID: p.ID + "/" + m.ID, Name: p.Name + " · " + m.Name, Context: m.Context}
			if ch.ID == c.Model {
				out[0] = ch
				continue
			}
			out = append(out, ch)
		}
	}
	if out[0].ID == "" {
		out = out[1:]
	}
	return out
}

// sessionModel is the catalog's entry for the session's model (the
// server's default when the session names none).
func (a *Agent) sessionModel(s opencode.Session) (*catalog.Model, bool) {
	if s.Model == nil || s.Model.ProviderID == "" {
		return a.catalog.Get().Default()
	}
	return a.catalog.Get().Lookup(s.Model.ProviderID, s.Model.ID)
}

// accepts reports whether the session's model takes input of modality
// ("image", "pdf", ...; catalog.Modality of a media type); text always.
// A model the catalog does not know takes text only.
func (a *Agent) accepts(s opencode.Session, modality string) bool {
	if modality == "" || modality == "text" {
		return true
	}
	m, ok := a.sessionModel(s)
	return ok && m.Accepts(modality)
}

// defaultAccepts is accepts for the server's default model: initialize
// comes before any session, so promptCapabilities can only say that.
func (a *Agent) defaultAccepts(modality string) bool {
	m, ok := a.catalog.Get().Default()
	return ok && m.Accepts(modality)
}

// contextSize is the context window of the session's model (0: unknown).
func (a *Agent) contextSize(s opencode.Session) int64 {
	if m, ok := a.sessionModel(s); ok {
		return m.Context
	}
	return 0
}

// configOptions are the session's "mode" (its agent) and "model"
// selectors.
func (a *Agent) configOptions(s opencode.Session) []map[string]any {
	mode := a.modeState(s)
	var modes []map[string]any
	for _, m := range a.modes() {
		modes = append(modes, map[string]any{"value": m["id"], "name": m["name"]})
	}
	// v1 names an option "id", v2 "configId".
	key := "id"
	if a.v2.Load() {
		key = "configId"
	}
	out := []map[string]any{{key: "mode", "name": "Mode", "category": "mode", "type": "select",
		"currentValue": mode["currentModeId"], "options": modes}}
	if models := modelChoices(a.catalog.Get()); len(models) > 0 {
		cur := models[0].ID
		if s.Model != nil && s.Model.ProviderID != "" {
			cur = s.Model.ProviderID + "/" + s.Model.ID
		}
		var opts []map[string]any
		for _, m := range models {
			name := m.Name
			if name == "" {
				name = m.ID
			}
			opts = append(opts, map[string]any{"value": m.ID, "name": name})
		}
		out = append(out, map[string]any{key: "model", "name": "Model", "category": "model", "type": "select",
			"currentValue": cur, "options": opts})
	}
	return out
}

// setConfig is session/set_config_option: the session's agent ("mode") or
// model for its next turns.
func (a *Agent) setConfig(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
		ConfigID  string `json:"configId"`
		Value     string `json:"value"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	switch p.ConfigID {
	case "mode":
		if !a.isMode(p.Value) {
			return nil, invalid("unknown mode " + p.Value)
		}
		if err := a.core.SwitchAgent(ctx, p.SessionID, a.ids.NewMessage(), p.Value); err != nil {
			return nil, coreError(err)
		}
	case "model":
		known := false
		for _, m := range modelChoices(a.catalog.Get()) {
			known = known || m.ID == p.Value
		}
		pid, mid, ok := strings.Cut(p.Value, "/")
		if !known || !ok {
			return nil, invalid("unknown model " + p.Value)
		}
		if err := a.core.SwitchModel(ctx, p.SessionID, a.ids.NewMessage(), opencode.ModelRef{ProviderID: pid, ID: mid}); err != nil {
			return nil, coreError(err)
		}
	default:
		return nil, invalid("unknown config option " + p.ConfigID)
	}
	s, err := a.core.GetSession(ctx, p.SessionID)
	if err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"configOptions": a.configOptions(s)}, nil
}

type setupParams struct {
	SessionID  string          `json:"sessionId"`
	Cwd        string          `json:"cwd"`
	MCPServers json.RawMessage `json:"mcpServers"`
	// ReplayFrom is v2's session/resume replay ({type: "start"}).
	ReplayFrom *struct {
		Type string `json:"type"`
	} `json:"replayFrom"`
}

func (a *Agent) newSession(ctx context.Context, params json.RawMessage) (any, error) {
	var p setupParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	dir := p.Cwd
	if dir == "" {
		dir = a.dir
	}
	if !filepath.IsAbs(dir) {
		return nil, invalid("cwd must be an absolute path")
	}
	s, _, err := a.core.CreateSession(ctx, opencode.SessionOptions{ID: a.ids.NewSession(), Minted: true, Directory: dir})
	if err != nil {
		return nil, coreError(err)
	}
	if _, err := a.attach(ctx, s.ID, false); err != nil {
		return nil, err
	}
	res := map[string]any{"sessionId": s.ID, "modes": a.modeState(s), "configOptions": a.configOptions(s)}
	if a.v2.Load() {
		delete(res, "modes") // v2: the mode is a config option
	}
	// The commands follow the reply: the client knows the session from it.
	return replyThen{res: res, then: func() { a.announceCommands(s) }}, nil
}

// loadSession attaches to a stored session: with replay (session/load) the
// conversation is sent again as updates, with its stored message IDs,
// before the reply; live updates follow with no gap and no duplicate.
func (a *Agent) loadSession(ctx context.Context, params json.RawMessage, replay bool) (any, error) {
	var p setupParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	if a.v2.Load() {
		// v2's session/resume replays what replayFrom asks for (start:
		// the whole log), else nothing.
		replay = p.ReplayFrom != nil && p.ReplayFrom.Type == "start"
	}
	s, err := a.core.GetSession(ctx, p.SessionID)
	if err != nil {
		return nil, coreError(err)
	}
	if _, err := a.attach(ctx, s.ID, replay); err != nil {
		return nil, err
	}
	// The client named the session, so its commands may come first, with
	// the replay: the reply ends what session/load sends.
	a.announceCommands(s)
	if a.v2.Load() {
		return map[string]any{"configOptions": a.configOptions(s)}, nil
	}
	return map[string]any{"modes": a.modeState(s), "configOptions": a.configOptions(s)}, nil
}

func (a *Agent) listSessions(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Cwd    *string `json:"cwd"`
		Cursor *string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, invalid("invalid params: " + err.Error())
		}
	}
	all, err := a.core.ListSessions(ctx)
	if err != nil {
		return nil, coreError(err)
	}
	var list []opencode.Session
	for _, s := range all {
		if p.Cwd != nil && *p.Cwd != "" && s.Directory != *p.Cwd {
			continue
		}
		list = append(list, s)
	}
	var next string
	if a.v2.Load() {
		if list, next, err = page(list, p.Cursor); err != nil {
			return nil, err
		}
	}
	out := []map[string]any{}
	for _, s := range list {
		out = append(out, map[string]any{"sessionId": s.ID, "cwd": s.Directory, "title": s.Title,
			"updatedAt": time.UnixMilli(s.Time.Updated).UTC().Format(time.RFC3339Nano)})
	}
	res := map[string]any{"sessions": out}
	if next != "" {
		res["nextCursor"] = next
	}
	return res, nil
}

// announceCommands sends the session's slash commands
// (available_commands_update); a prompt starting with /NAME runs one.
func (a *Agent) announceCommands(s opencode.Session) {
	cmds := []map[string]any{}
	for _, c := range a.commands(s.Directory) {
		// As opencode acp lists them: no input hint ($ARGUMENTS is a
		// template placeholder, not words for a person). One that takes
		// arguments has v2's typed input (text, whose hint is required:
		// a plain word); v1's encoding drops it.
		cmd := map[string]any{"name": c.Name, "description": c.Description}
		if len(c.Hints) > 0 {
			cmd["input"] = map[string]any{"type": "text", "hint": "arguments"}
		}
		cmds = append(cmds, cmd)
	}
	_ = a.update(s.ID, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": cmds})
}
