package acp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// Core is what the ACP agent needs of the lifecycle (lifecycle.Manager).
type Core interface {
	CreateSession(ctx context.Context, opts opencode.SessionOptions) (opencode.Session, bool, error)
	GetSession(ctx context.Context, id string) (opencode.Session, error)
	ListSessions(ctx context.Context) ([]opencode.Session, error)
	DeleteSession(ctx context.Context, id string) error
	Admit(ctx context.Context, in *opencode.Input) (*opencode.Input, bool, error)
	AdmitIfRunning(ctx context.Context, in *opencode.Input) (*opencode.Input, bool, bool, error)
	Wait(ctx context.Context, sessionID, messageID string) (opencode.Result, error)
	Abort(ctx context.Context, sessionID string) error
	Revoke(ctx context.Context, sessionID, messageID string) (bool, error)
	Input(ctx context.Context, sessionID, messageID string) (*opencode.Input, error)
	Inbox(ctx context.Context, sessionID string) ([]*opencode.Input, error)
	Replace(ctx context.Context, sessionID, messageID string, delivery *opencode.Delivery, parts []opencode.Part) (*opencode.Input, error)
	SwitchAgent(ctx context.Context, sessionID, messageID, agent string) error
	SwitchModel(ctx context.Context, sessionID, messageID string, model opencode.ModelRef) error
	Agents() []agent.Agent
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error)
	Subscribe(buf int, filter func(*opencode.Event) bool) *eventbus.Subscription
	// SessionStatus and Permissions are read when a cut stream resumes:
	// a turn's end and its asks are live events, not in the log.
	SessionStatus(ctx context.Context) (map[string]string, error)
	Permissions() []opencode.PermissionRequest
	ReplyPermission(ctx context.Context, requestID, reply string) error
	Flushed(ctx context.Context, res opencode.Result, sessionID string)
}

// Options configure Serve.
type Options struct {
	Core Core
	// Directory is the cwd of sessions whose request names none.
	Directory string
	Version   string
	IDs       *identifier.Generator
	Logger    *slog.Logger
	// Commands lists the slash commands of a directory (command.List
	// with the config's); nil: the built-in ones.
	Commands func(dir string) []command.Command
	// Catalog is the server's models: the choices of the "model" config
	// option (the default first), their context windows (usage_update's
	// size) and input modalities (promptCapabilities). nil: no model
	// option, sizes unknown, text only.
	Catalog *catalog.Live
	// Sent, if set, sees every frame written (tests).
	Sent func([]byte)
}

// Serve speaks ACP on r/w until r ends (the client closed stdin).
func Serve(ctx context.Context, r io.Reader, w io.Writer, o Options) error {
	if o.IDs == nil {
		o.IDs = identifier.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	life, end := context.WithCancel(context.WithoutCancel(ctx))
	if o.Commands == nil {
		o.Commands = func(dir string) []command.Command { return command.List(dir, nil, "") }
	}
	a := &Agent{core: o.Core, dir: o.Directory, version: o.Version, ids: o.IDs, log: o.Logger, sessions: map[string]*attached{},
		life: life, commands: o.Commands, catalog: o.Catalog}
	a.conn = newConn(r, w, a.handle, o.Logger)
	a.conn.sent = o.Sent
	defer a.detachAll()
	// The input ended (or ctx): requests still waiting stop waiting.
	go func() {
		select {
		case <-ctx.Done():
		case <-a.conn.eof:
		case <-a.conn.broken:
		}
		end()
	}()
	defer end()
	return a.conn.serve(ctx)
}

// Agent is one ACP connection's agent side.
type Agent struct {
	core    Core
	conn    *conn
	dir     string
	version string
	ids     *identifier.Generator
	log     *slog.Logger
	// life ends with the connection.
	life     context.Context
	commands func(dir string) []command.Command
	catalog  *catalog.Live
	// v2: the client negotiated ACP v2 (initialize); else v1.
	v2 atomic.Bool

	mu       sync.Mutex
	sessions map[string]*attached
}

// attached is a session this connection follows: its updates stream to the
// client, and its prompt requests are answered at their turns' ends.
type attached struct {
	id string
	// done is closed when the stream ends; quit, closed by detach, tells a
	// stream resuming after a cut to stop.
	done, quit chan struct{}
	// mu guards sub (replaced when a cut one is resumed), runs and asks.
	mu  sync.Mutex
	sub *eventbus.Subscription
	// runs are the connection's session/prompt requests not answered yet,
	// in admission order: the first is the one running (or next to run).
	runs []*promptRun
	// asks cancel our session/request_permission calls by request ID;
	// askers are their goroutines (detach waits for them).
	asks   map[string]context.CancelFunc
	askers sync.WaitGroup
	// gate is held by the stream while it writes an event's updates, and
	// by a v2 admission from before the core admits until its reply is
	// written: the reply comes before the message's user_message.
	gate sync.Mutex
	// cancelAsked: session/cancel was sent while work ran (v2: the idle
	// that ends it says cancelled).
	cancelAsked atomic.Bool
}

// promptRun is one session/prompt request: its input, and the steers
// injected into its turn (the reply waits for them: one turn settles
// once, at its real end).
type promptRun struct {
	id     string
	steers []string
	// cancelled: session/cancel stopped its turn; a steer that comes
	// after belongs to the next turn, never to this one's reply.
	cancelled bool
}

func invalid(msg string) error { return &rpcError{Code: codeInvalidParams, Message: msg} }

// decode reads params into v strictly enough to say what is wrong.
func decode(params json.RawMessage, v any) error {
	if len(params) == 0 {
		return invalid("missing params")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return invalid("invalid params: " + err.Error())
	}
	return nil
}

// coreError maps a core error to JSON-RPC by the JSON-RPC column of the
// one error table (opencode.Kinds); a code without one (EInternal) is an
// internal error: conn.reply logs its cause and answers a generic -32603,
// never its text. A store that cannot
// be reached now, or too many requests, is codeUnavailable with
// data.retryable (and data.retryAfter, seconds): the same request may
// succeed later. Anything else is left for conn.reply to log.
func coreError(err error) error {
	var oe *opencode.Error
	if !errors.As(err, &oe) {
		return err
	}
	code := opencode.KindOf(oe.Code).RPC
	if code == 0 {
		return err
	}
	re := &rpcError{Code: code, Message: oe.Message}
	if code == codeUnavailable {
		re.Data = map[string]any{"retryable": true, "retryAfter": max(oe.RetryAfter, 1)}
	}
	return re
}

func (a *Agent) handle(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if a.v2.Load() {
		switch method {
		case "session/load", "session/set_mode", steeringMethod, revokeMethod, replaceMethod:
			// v2 has none of these: session/resume with replayFrom,
			// config options, session/inject and its pending operations.
			return nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + method}
		case "session/prompt":
			return a.promptV2(ctx, params)
		case "session/inject":
			return a.inject(ctx, params)
		case "session/revoke_inject":
			return a.revokeInject(ctx, params)
		case "session/replace_inject":
			return a.replaceInject(ctx, params)
		}
	}
	switch method {
	case "initialize":
		return a.initialize(params)
	case "authenticate":
		return struct{}{}, nil
	case "session/new":
		return a.newSession(ctx, params)
	case "session/load":
		return a.loadSession(ctx, params, true)
	case "session/resume":
		return a.loadSession(ctx, params, false)
	case "session/close":
		var p sessionRef
		if err := decode(params, &p); err != nil {
			return nil, err
		}
		a.detach(p.SessionID)
		return struct{}{}, nil
	case "session/list":
		return a.listSessions(ctx, params)
	case "session/delete":
		var p sessionRef
		if err := decode(params, &p); err != nil {
			return nil, err
		}
		a.detach(p.SessionID)
		return struct{}{}, coreError(a.core.DeleteSession(ctx, p.SessionID))
	case "session/set_mode":
		var p struct {
			SessionID string `json:"sessionId"`
			ModeID    string `json:"modeId"`
		}
		if err := decode(params, &p); err != nil {
			return nil, err
		}
		if !a.isMode(p.ModeID) {
			return nil, invalid("unknown mode " + p.ModeID)
		}
		if err := a.core.SwitchAgent(ctx, p.SessionID, a.ids.NewMessage(), p.ModeID); err != nil {
			return nil, coreError(err)
		}
		_ = a.update(p.SessionID, map[string]any{"sessionUpdate": "current_mode_update", "currentModeId": p.ModeID})
		return struct{}{}, nil
	case "session/set_config_option":
		return a.setConfig(ctx, params)
	case "session/prompt":
		return a.prompt(ctx, params)
	case "session/cancel":
		var p sessionRef
		if err := decode(params, &p); err != nil {
			return nil, err
		}
		a.mu.Lock()
		at := a.sessions[p.SessionID]
		a.mu.Unlock()
		if at != nil {
			at.cancelAsked.Store(true)
			// Marked before the abort reaches the core: a steer read after
			// this line cannot join the cancelled prompt's reply.
			at.mu.Lock()
			if len(at.runs) > 0 {
				at.runs[0].cancelled = true
			}
			at.mu.Unlock()
		}
		if a.v2.Load() {
			a.keepSteers(context.WithoutCancel(ctx), p.SessionID)
		}
		return nil, coreError(a.core.Abort(context.WithoutCancel(ctx), p.SessionID))
	case steeringMethod:
		return a.steer(ctx, params)
	case revokeMethod:
		return a.revoke(ctx, params)
	case replaceMethod:
		return a.replace(ctx, params)
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: "method not found: " + method}
}

const (
	steeringMethod = "_session/steering"
	revokeMethod   = "_opencode-server/revoke"
	replaceMethod  = "_opencode-server/replace"
)

type sessionRef struct {
	SessionID string `json:"sessionId"`
}

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

// slash expands a prompt that starts with /NAME into that command's
// prompt (as POST /session/{id}/command does: arguments, !`cmd` output,
// @references), with its agent; the prompt's other parts follow.
func (a *Agent) slash(ctx context.Context, sessionID string, parts []opencode.Part) (agent string, _ []opencode.Part) {
	if len(parts) == 0 || !strings.HasPrefix(parts[0].Text, "/") {
		return "", parts
	}
	name, args, _ := strings.Cut(strings.TrimPrefix(parts[0].Text, "/"), " ")
	s, err := a.core.GetSession(a.life, sessionID)
	if err != nil {
		return "", parts
	}
	for _, c := range a.commands(s.Directory) {
		if c.Name == name {
			home, _ := os.UserHomeDir()
			isAgent := func(n string) bool {
				for _, ag := range a.core.Agents() {
					if ag.Name == n {
						return true
					}
				}
				return false
			}
			head := command.Prompt(ctx, c.Template, strings.TrimSpace(args), s.Directory, home, isAgent, a.ids.NewPart)
			return c.Agent, append(head, parts[1:]...)
		}
	}
	return "", parts
}

// parts turns ACP content blocks into a prompt's parts.
func (a *Agent) parts(blocks []contentBlock) ([]opencode.Part, error) {
	if len(blocks) == 0 {
		return nil, invalid("prompt is empty")
	}
	var out []opencode.Part
	var text []string
	skipped := 0
	for _, b := range blocks {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "resource_link":
			text = append(text, "@"+strings.TrimPrefix(b.URI, "file://"))
			out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile, URL: b.URI,
				Filename: b.Name, Mime: orText(b.MimeType)})
		case "resource":
			if b.Resource == nil {
				return nil, invalid("resource block without resource")
			}
			if b.Resource.Text != "" {
				text = append(text, "<context ref=\""+b.Resource.URI+"\">\n"+b.Resource.Text+"\n</context>")
			} else {
				out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile,
					URL: "data:" + orText(b.Resource.MimeType) + ";base64," + b.Resource.Blob, Mime: orText(b.Resource.MimeType),
					Filename: filepath.Base(b.Resource.URI)})
			}
		case "image":
			if _, err := base64.StdEncoding.DecodeString(b.Data); err != nil {
				return nil, invalid("image data is not base64")
			}
			out = append(out, opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartFile,
				URL: "data:" + b.MimeType + ";base64," + b.Data, Mime: b.MimeType, Filename: "image"})
		default:
			if a.v2.Load() {
				// v2: unknown (or _-prefixed) block types are tolerated,
				// left out of what the model gets.
				skipped++
				continue
			}
			return nil, invalid("unsupported content block type " + b.Type)
		}
	}
	if skipped == len(blocks) {
		return nil, invalid("prompt has no content block of a known type")
	}
	head := opencode.Part{ID: a.ids.NewPart(), Type: opencode.PartText, Text: strings.Join(text, "\n")}
	return append([]opencode.Part{head}, out...), nil
}

func orText(mime string) string {
	if mime == "" {
		return "text/plain"
	}
	return mime
}

// contentBlock is an ACP ContentBlock (the kinds a prompt may carry).
type contentBlock struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	Data     string    `json:"data,omitempty"`
	MimeType string    `json:"mimeType,omitempty"`
	URI      string    `json:"uri,omitempty"`
	Name     string    `json:"name,omitempty"`
	Resource *resource `json:"resource,omitempty"`
}

type resource struct {
	URI      string `json:"uri"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

type promptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
	Meta      struct {
		// MessageID is a client-chosen msg_ ID (as HTTP's messageID): the
		// client knows it before the reply (to revoke or replace the
		// input), and a re-sent prompt with it is admitted once.
		MessageID string `json:"messageId"`
	} `json:"_meta"`
}

// messageID takes the client's ID or mints one.
func (a *Agent) messageID(client string) (id string, minted bool, err error) {
	if client == "" {
		return a.ids.NewMessage(), true, nil
	}
	if err := identifier.Check(identifier.Message, client); err != nil {
		return "", false, invalid("_meta.messageId: " + err.Error())
	}
	return client, false, nil
}

// input is the input a prompt or a steer admits, on a session this
// connection then follows: its parts, and the client's message ID or a
// fresh one.
func (a *Agent) input(ctx context.Context, sessionID string, blocks []contentBlock, clientID string,
	delivery opencode.Delivery) (*attached, *opencode.Input, error) {
	parts, err := a.parts(blocks)
	if err != nil {
		return nil, nil, err
	}
	at, err := a.attach(ctx, sessionID, false)
	if err != nil {
		return nil, nil, err
	}
	id, minted, err := a.messageID(clientID)
	if err != nil {
		return nil, nil, err
	}
	return at, &opencode.Input{ID: id, Minted: minted, SessionID: sessionID, Delivery: delivery, Parts: parts}, nil
}

// prompt admits a prompt as a queued input (concurrent prompts run in
// order) and answers at the end of its turn, after any steer injected into
// it. A `$/cancel_request` while it is still pending revokes it.
func (a *Agent) prompt(ctx context.Context, params json.RawMessage) (any, error) {
	var p promptParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	at, in, err := a.input(ctx, p.SessionID, p.Prompt, p.Meta.MessageID, opencode.Queue)
	if err != nil {
		return nil, err
	}
	in.Agent, in.Parts = a.slash(ctx, p.SessionID, in.Parts)
	id := in.ID
	run := &promptRun{id: id}
	at.mu.Lock()
	at.runs = append(at.runs, run)
	at.mu.Unlock()
	if _, _, err := a.core.Admit(context.WithoutCancel(ctx), in); err != nil {
		at.finish(run)
		return nil, coreError(err)
	}
	// The rest waits for the turn's end, concurrently with the next
	// requests (a steer, a cancel, another prompt).
	return later(func() (any, error) {
		defer at.finish(run)
		waited := make(chan struct{})
		defer close(waited)
		go func() {
			select {
			case <-ctx.Done():
				// $/cancel_request: revoke it if it is still pending (a
				// delivered one runs on; session/cancel stops a turn). A
				// client that goes away cancels nothing: what was admitted
				// runs.
				if errors.Is(context.Cause(ctx), errCancelRequest) {
					_, _ = a.core.Revoke(context.Background(), p.SessionID, id)
				}
			case <-waited:
			}
		}()
		// Waited for under the connection's life (not the request's: a
		// $/cancel_request of a delivered prompt still gets its real end).
		res, err := a.core.Wait(a.life, p.SessionID, id)
		var oe *opencode.Error
		if errors.As(err, &oe) && oe.Code == opencode.ERevoked {
			return nil, &rpcError{Code: codeCancelled, Message: "Request cancelled: the prompt was revoked before it was delivered"}
		}
		if err != nil {
			return nil, coreError(err)
		}
		// Steers injected into this turn: the turn settles once, at the
		// end of the last of them (a steer that arrived as the turn ended
		// runs in the turn the core started for it).
		for i := 0; ; i++ {
			at.mu.Lock()
			if run.cancelled || i >= len(run.steers) {
				at.mu.Unlock()
				break
			}
			sid := run.steers[i]
			at.mu.Unlock()
			if r, err := a.core.Wait(a.life, p.SessionID, sid); err == nil {
				res = r
			}
		}
		// Every update of the turn is written before the reply that ends it.
		fctx, cancel := context.WithTimeout(a.life, 5*time.Second)
		a.core.Flushed(fctx, res, p.SessionID)
		cancel()
		reason := stopReason(res.Message)
		at.mu.Lock()
		if run.cancelled {
			// ACP: a prompt session/cancel was sent for answers cancelled.
			reason = "cancelled"
		}
		at.mu.Unlock()
		return map[string]any{"stopReason": reason, "_meta": map[string]any{"messageId": id}}, nil
	}), nil
}

// stopReason says why a turn ended, from its last assistant message.
func stopReason(m opencode.MessageWithParts) string {
	if e := m.Info.Error; e != nil && e.Name == "MessageAbortedError" {
		return "cancelled"
	}
	if m.Info.Finish == "length" { // the provider's finish when max_tokens cut it
		return "max_tokens"
	}
	return "end_turn"
}

// finish drops an answered prompt run.
func (at *attached) finish(run *promptRun) {
	at.mu.Lock()
	defer at.mu.Unlock()
	for i, r := range at.runs {
		if r == run {
			at.runs = append(at.runs[:i], at.runs[i+1:]...)
			return
		}
	}
}

type steerParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []contentBlock `json:"prompt"`
	Meta      struct {
		Steering struct {
			IdleBehavior string `json:"idleBehavior"`
		} `json:"steering"`
		MessageID string `json:"messageId"` // client-chosen, as for session/prompt
	} `json:"_meta"`
}

// steer is `_session/steering`: into the running turn, atomically, or (when
// idle) a new turn or nothing, as the client asked.
func (a *Agent) steer(ctx context.Context, params json.RawMessage) (any, error) {
	var p steerParams
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	at, in, err := a.input(ctx, p.SessionID, p.Prompt, p.Meta.MessageID, opencode.Steer)
	if err != nil {
		return nil, err
	}
	id := in.ID
	ctx = context.WithoutCancel(ctx)
	_, _, running, err := a.core.AdmitIfRunning(ctx, in)
	if err != nil {
		return nil, coreError(err)
	}
	meta := map[string]any{"messageId": id}
	if running {
		at.mu.Lock()
		// The running turn is the first prompt not cancelled (a cancelled
		// one's turn has ended; the turn running now is the next's).
		for _, run := range at.runs {
			if !run.cancelled {
				run.steers = append(run.steers, id)
				break
			}
		}
		at.mu.Unlock()
		return map[string]any{"outcome": "injected", "_meta": meta}, nil
	}
	if p.Meta.Steering.IdleBehavior == "promptRequired" {
		return map[string]any{"outcome": "promptRequired", "reason": "noRunningTurn"}, nil
	}
	if _, _, err := a.core.Admit(ctx, in); err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"outcome": "startedNewTurn", "_meta": meta}, nil
}

type inputRef struct {
	SessionID string `json:"sessionId"`
	MessageID string `json:"messageId"`
}

// revoke is `_opencode-server/revoke`: cancel one pending input by its
// message ID (a prompt's, from its reply's or its echo's messageId, or a
// steer's).
func (a *Agent) revoke(ctx context.Context, params json.RawMessage) (any, error) {
	var p inputRef
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	revoked, err := a.core.Revoke(context.WithoutCancel(ctx), p.SessionID, p.MessageID)
	if err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"revoked": revoked}, nil
}

// replace is `_opencode-server/replace`: new content and/or delivery for a
// pending input, under the same message ID.
func (a *Agent) replace(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		inputRef
		Prompt   []contentBlock     `json:"prompt"`
		Delivery *opencode.Delivery `json:"delivery"`
	}
	if err := decode(params, &p); err != nil {
		return nil, err
	}
	var parts []opencode.Part
	if p.Prompt != nil {
		var err error
		if parts, err = a.parts(p.Prompt); err != nil {
			return nil, err
		}
	}
	in, err := a.core.Replace(context.WithoutCancel(ctx), p.SessionID, p.MessageID, p.Delivery, parts)
	if err != nil {
		return nil, coreError(err)
	}
	return map[string]any{"messageId": in.ID, "delivery": in.Delivery}, nil
}
