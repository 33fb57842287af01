package acp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

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
