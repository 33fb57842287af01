package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/agent"
	slash "github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// The external agents' processes: one per session, started on first use,
// bounded in number, stopped when idle, deleted or at shutdown; their
// I/O runs off the runner loop (external.go maps what they stream).

// externalProvider is the providerID of an external agent's assistant
// messages (their modelID is the agent's name).
const externalProvider = "acp"

// Defaults of Config.ExternalIdle and Config.MaxExternal.
const (
	defaultExternalIdle = 10 * time.Minute
	defaultMaxExternal  = 16
)

// externalStartTimeout bounds initialize and session/new (an agent run
// through npx may download itself first, and the real `opencode acp`
// took over a minute for session/new on a loaded machine); cancelGrace
// is how long a cancelled prompt may take to answer before its process
// is killed.
const (
	externalStartTimeout = 2 * time.Minute
	cancelGrace          = 5 * time.Second
)

// extMsg is an external turn's news for the runner: an update, a
// permission request, or the end of the prompt.
type extMsg struct {
	tu     *turn
	update *acpclient.SessionUpdate
	perm   *extPerm
	done   bool
	stop   string
	err    error
	// started: the prompt went out on this process; steered: the
	// agent's answer to a steer (external_steer.go).
	started *extProc
	steered *extSteered
	// agent and sessionID: that agent's session ID, to store with ours.
	agent, sessionID string
}

// extPerm is the agent's session/request_permission, answered on the runner.
type extPerm struct {
	req  acpclient.RequestPermissionRequest
	resp chan askResp
}

// extSink is where a process's updates go while a turn uses it.
type extSink struct {
	update     func(acpclient.SessionUpdate)
	permission func(ctx context.Context, req acpclient.RequestPermissionRequest) acpclient.RequestPermissionResponse
	// started: the prompt goes out on this process (steers may follow it).
	started func(*extProc)
	// session gets the agent's session ID when it is not the one loaded
	// (to be stored with ours).
	session func(id string)
}

// extReq is one prompt to a session's agent.
type extReq struct {
	session, dir string
	// messageID is our user message's (sent in _meta).
	messageID string
	// load is the agent's session stored with ours, to continue ("" none).
	load  string
	parts []opencode.Part
	// history is our conversation before this prompt, for a new agent
	// session (external_history.go; "" when none).
	history string
}

// extProc is one session's agent process.
type extProc struct {
	session, agent, dir string
	p                   *acpclient.Process
	// sessionID is the agent's session; caps what it said it does;
	// steering: it takes `_session/steering` (see steer).
	sessionID string
	caps      acpclient.AgentCapabilities
	steering  bool
	// v2: it speaks ACP v2 (external_v2.go); inject: it takes
	// session/inject steers; idles gets its state_update idles' stop reasons.
	v2, inject bool
	idles      chan string
	// fresh: its session was opened new and has had no prompt yet.
	fresh bool
	// injects are the agent's IDs of the steers it accepted and has not
	// delivered (guarded by mu): taken back before a cancel.
	injects map[string]bool
	// lease is held by the turn using it (one at a time: a cancelled
	// prompt finishes before the next starts).
	lease chan struct{}
	mu    sync.Mutex
	sink  *extSink
	idle  *time.Timer
	// terms are the commands it runs through us (external_terminal.go).
	terms extTerminals
}

func (e *extProc) setSink(s *extSink) {
	e.mu.Lock()
	e.sink = s
	e.mu.Unlock()
}

func (e *extProc) getSink() *extSink {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sink
}

// externals holds the running agent processes, one per session at most,
// max of them in all.
type externals struct {
	m      *Manager
	mu     sync.Mutex
	procs  map[string]*extProc
	closed bool
	// cmds are the commands each agent said it has, by directory and
	// agent (its latest available_commands_update there).
	cmds map[string]map[string][]acpclient.AvailableCommand
}

func (x *externals) setCommands(dir, agent string, cmds []acpclient.AvailableCommand) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cmds == nil {
		x.cmds = map[string]map[string][]acpclient.AvailableCommand{}
	}
	if x.cmds[dir] == nil {
		x.cmds[dir] = map[string][]acpclient.AvailableCommand{}
	}
	x.cmds[dir][agent] = cmds
}

// ExternalCommands are the commands the external agents that ran in dir
// said they have (available_commands_update), by agent and name: each
// runs as a prompt "/name arguments" to its agent.
func (m *Manager) ExternalCommands(dir string) []slash.Command {
	m.ext.mu.Lock()
	defer m.ext.mu.Unlock()
	var out []slash.Command
	for agent, cmds := range m.ext.cmds[dir] {
		for _, c := range cmds {
			tmpl := "/" + c.Name + " $ARGUMENTS"
			out = append(out, slash.Command{Name: c.Name, Description: c.Description, Agent: agent, Source: "command",
				Template: tmpl, Hints: slash.Hints(tmpl)})
		}
	}
	slices.SortFunc(out, func(a, b slash.Command) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// agentError is a failure of an external agent, named for the user.
func agentError(a agent.Agent, what string, err error) error {
	return fmt.Errorf("external agent %s (%s): %s: %w", a.Name, a.ACP.Command, what, err)
}

// acquire returns the session's process for agent a, started (initialize,
// session/new) if there is none, leased to the caller until release.
func (x *externals) acquire(ctx context.Context, req extReq, a agent.Agent) (*extProc, error) {
	session, dir := req.session, req.dir
	for {
		x.mu.Lock()
		if x.closed {
			x.mu.Unlock()
			return nil, ErrClosed
		}
		e := x.procs[session]
		if e != nil && (e.agent != a.Name || e.dir != dir) {
			// The session switched agents (or directories): the old one goes.
			delete(x.procs, session)
			x.mu.Unlock()
			x.kill(e)
			continue
		}
		if e == nil {
			var err error
			if e, err = x.reserve(session, dir, a); err != nil {
				x.mu.Unlock()
				return nil, err
			}
			x.mu.Unlock()
			if err := x.start(ctx, e, a, req.load); err != nil {
				x.drop(e)
				return nil, err
			}
			return e, nil
		}
		x.mu.Unlock()
		select {
		case e.lease <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-e.p.Exited():
			// It died while idle: start another.
			x.drop(e)
			<-e.lease
			continue
		default:
		}
		if e.idle != nil {
			e.idle.Stop()
		}
		return e, nil
	}
}

// reserve makes room for a new process (stopping the longest idle one
// when max run) and registers e, leased; x.mu is held.
func (x *externals) reserve(session, dir string, a agent.Agent) (*extProc, error) {
	if len(x.procs) >= x.m.cfg.MaxExternal {
		var victim *extProc
		for _, e := range x.procs {
			select {
			case e.lease <- struct{}{}:
				if victim != nil {
					<-victim.lease
				}
				victim = e
			default:
			}
		}
		if victim == nil {
			return nil, &opencode.Error{Code: opencode.EUnavailable, Message: fmt.Sprintf(
				"external agent %s: %d external agents are busy, the most this server runs; retry when one is done",
				a.Name, x.m.cfg.MaxExternal)}
		}
		delete(x.procs, victim.session)
		go x.kill(victim)
	}
	e := &extProc{session: session, agent: a.Name, dir: dir, lease: make(chan struct{}, 1), idles: make(chan string, 1)}
	e.lease <- struct{}{}
	x.procs[session] = e
	return e, nil
}

// start runs the agent's process and opens its session: load, the one
// stored with ours, when there is one and the agent can load sessions,
// else a new one.
func (x *externals) start(ctx context.Context, e *extProc, a agent.Agent, load string) error {
	log := x.m.log.With("agent", a.Name, "session", e.session)
	spec := acpclient.Spec{Command: a.ACP.Command, Args: a.ACP.Args, Env: a.ACP.Env}
	p, err := acpclient.Start(spec, e.dir, log, acpclient.Handlers{
		Notify: func(method string, params json.RawMessage) {
			if method != acpclient.MethodSessionUpdate {
				return
			}
			var n acpclient.SessionNotification
			if err := json.Unmarshal(params, &n); err != nil {
				log.Warn("bad session/update from the agent", "err", err)
				return
			}
			if n.Update.SessionUpdate == "available_commands_update" {
				// The agent's, whether a turn runs or not (agents send
				// them after session/new).
				x.setCommands(e.dir, e.agent, n.Update.AvailableCommands)
				return
			}
			if s := e.getSink(); s != nil {
				s.update(n.Update)
			} else {
				log.Debug("session/update outside a turn: dropped", "update", n.Update.SessionUpdate)
			}
			e.stateUpdate(n.Update)
		},
		Request: func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return x.serve(ctx, e, method, params)
		},
	})
	if err != nil {
		return agentError(a, "could not start", err)
	}
	e.p = p
	go func() {
		// A process that ends on its own leaves the registry.
		<-p.Exited()
		e.terms.closeAll()
		if err := p.ExitErr(); err != nil {
			log.Info("external agent exited", "pid", p.Pid(), "status", err.Error())
		}
		x.mu.Lock()
		if x.procs[e.session] == e {
			delete(x.procs, e.session)
		}
		x.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, externalStartTimeout)
	defer cancel()
	var init json.RawMessage
	err = x.initialize(ctx, e, a.ACP.ProtocolVersion, acpclient.InitializeRequest{ProtocolVersion: acpclient.ProtocolVersion,
		ClientCapabilities: acpclient.ClientCapabilities{FS: acpclient.FSCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true},
		ClientInfo:         &acpclient.Implementation{Name: "opencode-server", Version: "1"}}, &init)
	if err != nil {
		return agentError(a, "initialize failed", x.why(e, err))
	}
	var ir acpclient.InitializeResponse
	_ = json.Unmarshal(init, &ir) // what it offers; steering is read from the raw answer
	e.caps = ir.AgentCapabilities
	e.steering = acpclient.SupportsSteering(init)
	e.readV2(init, log)
	mcp := extMCPServers(x.m.cfg.MCPServers, e.caps.MCPCapabilities, log)
	if load != "" {
		if e.caps.LoadSession {
			// The history it replays meanwhile goes nowhere: no sink yet.
			err := x.load(ctx, e, load, mcp)
			if err == nil {
				e.sessionID = load
				log.Info("external agent started", "pid", p.Pid(), "agentSession", load, "loaded", true)
				return nil
			}
			var rpc *acpclient.RPCError
			if !errors.As(err, &rpc) {
				return agentError(a, "session/load failed", x.why(e, err))
			}
			log.Warn("external agent could not load its session: a new one, without the conversation so far",
				"agentSession", load, "err", err)
		} else {
			log.Warn("external agent cannot load sessions (no loadSession): a new one, without the conversation so far",
				"agentSession", load)
		}
	}
	var ns acpclient.NewSessionResponse
	newSession := func() error {
		return p.Call(ctx, acpclient.MethodSessionNew, acpclient.NewSessionRequest{Cwd: e.dir, MCPServers: mcp}, &ns)
	}
	err = newSession()
	var rpc *acpclient.RPCError
	if method := acpclient.KeyAuthMethod(ir.AuthMethods); method != "" && errors.As(err, &rpc) && rpc.Code == acpclient.CodeAuthRequired {
		// It wants a login; one with the key its env holds is ours to run.
		if err := p.Call(ctx, acpclient.MethodAuthenticate, acpclient.AuthenticateRequest{MethodID: method}, nil); err != nil {
			return agentError(a, "authenticate ("+method+") failed", x.why(e, err))
		}
		err = newSession()
	}
	if err != nil {
		return agentError(a, "session/new failed", x.why(e, err))
	}
	if ns.SessionID == "" {
		return agentError(a, "session/new failed", errors.New("no sessionId in its answer"))
	}
	e.sessionID, e.fresh = ns.SessionID, true
	log.Info("external agent started", "pid", p.Pid(), "agentSession", ns.SessionID)
	return nil
}

// why turns a call's failure on a dead connection into how the process ended.
func (x *externals) why(e *extProc, err error) error {
	if errors.Is(err, acpclient.ErrClosed) {
		if why := e.p.Why(); why != "" {
			return errors.New("the process stopped (" + why + ")")
		}
	}
	return err
}

// serve answers the agent's requests: files inside the session directory
// (the same os.Root rules as our tools), and permissions through the turn.
func (x *externals) serve(ctx context.Context, e *extProc, method string, params json.RawMessage) (any, error) {
	switch method {
	case acpclient.MethodReadTextFile:
		req, err := decodeParams[acpclient.ReadTextFileRequest](params)
		if err != nil {
			return nil, err
		}
		line, limit := 0, 0
		if req.Line != nil {
			line = *req.Line
		}
		if req.Limit != nil {
			limit = *req.Limit
		}
		text, err := tool.ReadTextFile(e.dir, req.Path, line, limit)
		if err != nil {
			return nil, err
		}
		return acpclient.ReadTextFileResponse{Content: text}, nil
	case acpclient.MethodWriteTextFile:
		req, err := decodeParams[acpclient.WriteTextFileRequest](params)
		if err != nil {
			return nil, err
		}
		if err := tool.WriteTextFile(e.dir, req.Path, req.Content); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	case acpclient.MethodTerminalCreate, acpclient.MethodTerminalOutput, acpclient.MethodTerminalWait,
		acpclient.MethodTerminalKill, acpclient.MethodTerminalRelease:
		return x.serveTerminal(ctx, e, method, params)
	case acpclient.MethodRequestPermission:
		req, err := decodeParams[acpclient.RequestPermissionRequest](params)
		if err != nil {
			return nil, err
		}
		s := e.getSink()
		if s == nil {
			// No turn runs: nobody to ask.
			return acpclient.RequestPermissionResponse{Outcome: acpclient.PermissionOutcome{Outcome: "cancelled"}}, nil
		}
		return s.permission(ctx, req), nil
	}
	return nil, &acpclient.RPCError{Code: acpclient.CodeMethodNotFound, Message: "method not found: " + method}
}

// decodeParams reads a request's params; bad ones are the agent's invalid params.
func decodeParams[T any](params json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(params, &v); err != nil {
		return v, &acpclient.RPCError{Code: acpclient.CodeInvalidParams, Message: err.Error()}
	}
	return v, nil
}

// release gives the process back after a turn; it is stopped after it
// has been idle for Config.ExternalIdle.
func (x *externals) release(e *extProc) {
	e.setSink(nil)
	x.mu.Lock()
	if x.procs[e.session] == e {
		if e.idle == nil {
			e.idle = time.AfterFunc(x.m.cfg.ExternalIdle, func() { x.stopIdle(e) })
		} else {
			e.idle.Reset(x.m.cfg.ExternalIdle)
		}
	}
	x.mu.Unlock()
	<-e.lease
}

// stopIdle stops e unless a turn uses it.
func (x *externals) stopIdle(e *extProc) {
	select {
	case e.lease <- struct{}{}:
	default:
		return // in use: its release arms the timer again
	}
	x.mu.Lock()
	if x.procs[e.session] == e {
		delete(x.procs, e.session)
	}
	x.mu.Unlock()
	x.kill(e)
}

// drop removes a failed process and kills it.
func (x *externals) drop(e *extProc) {
	x.mu.Lock()
	if x.procs[e.session] == e {
		delete(x.procs, e.session)
	}
	x.mu.Unlock()
	x.kill(e)
}

func (x *externals) kill(e *extProc) {
	if e.idle != nil {
		e.idle.Stop()
	}
	e.terms.closeAll()
	if e.p != nil {
		e.p.Kill()
	}
}

// stop kills a session's process (the session was deleted).
func (x *externals) stop(session string) {
	x.mu.Lock()
	e := x.procs[session]
	delete(x.procs, session)
	x.mu.Unlock()
	if e != nil {
		x.kill(e)
	}
}

// closeAll kills every process and refuses new ones (shutdown).
func (x *externals) closeAll() {
	x.mu.Lock()
	x.closed = true
	procs := x.procs
	x.procs = map[string]*extProc{}
	x.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range procs {
		wg.Go(func() { x.kill(e) })
	}
	wg.Wait()
}

// ExternalPID is the process ID of the session's external agent, 0 when
// none runs (tests check that none outlives its session).
func (m *Manager) ExternalPID(session string) int {
	m.ext.mu.Lock()
	defer m.ext.mu.Unlock()
	if e := m.ext.procs[session]; e != nil && e.p != nil {
		return e.p.Pid()
	}
	return 0
}

// prompt runs one prompt on the session's agent: sink gets its updates
// until it answers. ctx ending (abort, shutdown) sends session/cancel.
func (x *externals) prompt(ctx context.Context, req extReq, a agent.Agent, sink *extSink) (string, error) {
	e, err := x.acquire(ctx, req, a)
	if err != nil {
		return "", err
	}
	defer x.release(e)
	if e.sessionID != req.load {
		sink.session(e.sessionID)
	}
	blocks := withHistory(e, req, promptBlocks(req.parts, e.caps.PromptCapabilities, req.dir))
	messageID := req.messageID
	e.setSink(sink)
	if sink.started != nil {
		sink.started(e)
	}
	call, stop := context.WithCancel(context.Background())
	defer stop()
	cancelled := context.AfterFunc(ctx, func() {
		e.terms.killAll() // an aborted turn's commands end with it
		x.revokeInjects(e)
		_ = e.p.Notify(acpclient.MethodSessionCancel, acpclient.CancelNotification{SessionID: e.sessionID})
		time.AfterFunc(cancelGrace, stop)
	})
	defer cancelled()
	e.drainIdles()
	var res acpclient.PromptResponse
	err = e.p.Call(call, acpclient.MethodSessionPrompt, acpclient.PromptRequest{SessionID: e.sessionID, Prompt: blocks,
		Meta: map[string]any{"messageId": messageID}}, &res)
	if err != nil {
		if call.Err() != nil && ctx.Err() != nil {
			// Cancelled and not answering: it goes.
			x.drop(e)
			return acpclient.StopCancelled, nil
		}
		err = agentError(a, "session/prompt failed", x.why(e, err))
		var rpc *acpclient.RPCError
		if !errors.As(err, &rpc) {
			x.drop(e) // the next prompt starts it again
		}
		return "", err
	}
	if e.v2 {
		// v2 answers once the prompt is accepted; its idle ends the work.
		return x.awaitIdle(ctx, call, e, a)
	}
	return res.StopReason, nil
}

// ---- on the runner ----------------------------------------------------------
