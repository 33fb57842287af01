package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/tool"
)

// An external agent (agent.<name>.acp in opencode.json) produces a turn's
// content instead of our model loop: the runner keeps admission, the
// inbox, the log and abort as for its own turns, and maps what the agent
// streams onto assistant messages and parts it mints itself. The agent's
// process and its I/O live off the loop (externals); its updates come
// back to the runner as stream messages, like a model call's chunks.

// externalProvider is the providerID of an external agent's assistant
// messages (their modelID is the agent's name).
const externalProvider = "acp"

// Defaults of Config.ExternalIdle and Config.MaxExternal.
const (
	defaultExternalIdle = 10 * time.Minute
	defaultMaxExternal  = 16
)

// externalStartTimeout bounds initialize and session/new; cancelGrace is
// how long a cancelled prompt may take to answer before its process is
// killed.
const (
	externalStartTimeout = 60 * time.Second
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
}

// extProc is one session's agent process.
type extProc struct {
	session, agent, dir string
	p                   *acpclient.Process
	// sessionID is the agent's session.
	sessionID string
	// lease is held by the turn using it (one at a time: a cancelled
	// prompt finishes before the next starts).
	lease chan struct{}
	mu    sync.Mutex
	sink  *extSink
	idle  *time.Timer
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
}

// agentError is a failure of an external agent, named for the user.
func agentError(a agent.Agent, what string, err error) error {
	return fmt.Errorf("external agent %s (%s): %s: %w", a.Name, a.ACP.Command, what, err)
}

// acquire returns the session's process for agent a, started (initialize,
// session/new) if there is none, leased to the caller until release.
func (x *externals) acquire(ctx context.Context, session, dir string, a agent.Agent) (*extProc, error) {
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
			if err := x.start(ctx, e, a); err != nil {
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
	e := &extProc{session: session, agent: a.Name, dir: dir, lease: make(chan struct{}, 1)}
	e.lease <- struct{}{}
	x.procs[session] = e
	return e, nil
}

// start runs the agent's process and opens its session.
func (x *externals) start(ctx context.Context, e *extProc, a agent.Agent) error {
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
			if s := e.getSink(); s != nil {
				s.update(n.Update)
			}
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
	var init acpclient.InitializeResponse
	err = p.Call(ctx, acpclient.MethodInitialize, acpclient.InitializeRequest{ProtocolVersion: acpclient.ProtocolVersion,
		ClientCapabilities: acpclient.ClientCapabilities{FS: acpclient.FSCapabilities{ReadTextFile: true, WriteTextFile: true}},
		ClientInfo:         &acpclient.Implementation{Name: "opencode-server", Version: "1"}}, &init)
	if err != nil {
		return agentError(a, "initialize failed", x.why(e, err))
	}
	var ns acpclient.NewSessionResponse
	if err := p.Call(ctx, acpclient.MethodSessionNew, acpclient.NewSessionRequest{Cwd: e.dir, MCPServers: []any{}}, &ns); err != nil {
		return agentError(a, "session/new failed", x.why(e, err))
	}
	if ns.SessionID == "" {
		return agentError(a, "session/new failed", errors.New("no sessionId in its answer"))
	}
	e.sessionID = ns.SessionID
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
func (x *externals) prompt(ctx context.Context, session, dir string, a agent.Agent, blocks []acpclient.ContentBlock,
	messageID string, sink *extSink) (string, error) {
	e, err := x.acquire(ctx, session, dir, a)
	if err != nil {
		return "", err
	}
	defer x.release(e)
	e.setSink(sink)
	call, stop := context.WithCancel(context.Background())
	defer stop()
	cancelled := context.AfterFunc(ctx, func() {
		_ = e.p.Notify(acpclient.MethodSessionCancel, acpclient.CancelNotification{SessionID: e.sessionID})
		time.AfterFunc(cancelGrace, stop)
	})
	defer cancelled()
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
	return res.StopReason, nil
}

// ---- on the runner ----------------------------------------------------------

// external is the agent a turn's content comes from, if it is an external one.
func (r *runner) external(tu *turn) (agent.Agent, bool) {
	a, ok := r.m.agent(tu.agent)
	return a, ok && a.ACP != nil && !tu.compact
}

// startExternal starts an external agent's turn: the first assistant
// message, and the prompt sent off the loop.
func (r *runner) startExternal(a agent.Agent) {
	tu := r.turn
	r.extStep("")
	var blocks []acpclient.ContentBlock
	for _, in := range tu.inputs {
		for _, p := range in.Parts {
			if p.Type == opencode.PartText && p.Text != "" && !p.Ignored {
				blocks = append(blocks, acpclient.ContentBlock{Type: "text", Text: p.Text})
			}
		}
	}
	if !r.owned() {
		r.fenced()
		return
	}
	post := func(m *extMsg) {
		m.tu = tu
		r.post(streamMsg{ext: m})
	}
	sink := &extSink{
		update: func(u acpclient.SessionUpdate) { post(&extMsg{update: &u}) },
		permission: func(ctx context.Context, req acpclient.RequestPermissionRequest) acpclient.RequestPermissionResponse {
			return r.extAsk(ctx, tu, post, req)
		},
	}
	session, dir, parent := r.id, r.sess.Directory, tu.parentID
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		stop, err := r.m.ext.prompt(tu.ctx, session, dir, a, blocks, parent, sink)
		post(&extMsg{done: true, stop: stop, err: err})
	}()
}

// extAsk runs on the connection's goroutine: the runner decides through
// our permission rules (asking the user when they say ask), and the
// answer becomes one of the agent's options.
func (r *runner) extAsk(ctx context.Context, tu *turn, post func(*extMsg), req acpclient.RequestPermissionRequest) acpclient.RequestPermissionResponse {
	cancelled := acpclient.RequestPermissionResponse{Outcome: acpclient.PermissionOutcome{Outcome: "cancelled"}}
	p := &extPerm{req: req, resp: make(chan askResp, 1)}
	post(&extMsg{perm: p})
	var resp askResp
	select {
	case resp = <-p.resp:
	case <-ctx.Done():
		return cancelled
	case <-tu.ctx.Done():
		return cancelled
	}
	allow := resp.action == "allow"
	always := false
	if resp.action == "ask" {
		select {
		case reply := <-resp.reply:
			allow, always = reply.reply != "reject", reply.reply == "always"
		case <-ctx.Done():
			return cancelled
		case <-tu.ctx.Done():
			return cancelled
		}
	}
	kinds := []string{"reject_once", "reject_always"}
	switch {
	case allow && always:
		kinds = []string{"allow_always", "allow_once"}
	case allow:
		kinds = []string{"allow_once", "allow_always"}
	}
	for _, k := range kinds {
		for _, o := range req.Options {
			if o.Kind == k {
				return acpclient.RequestPermissionResponse{Outcome: acpclient.PermissionOutcome{Outcome: "selected", OptionID: o.OptionID}}
			}
		}
	}
	return cancelled
}

// onExternal handles an external turn's news on the runner.
func (r *runner) onExternal(e *extMsg) {
	tu := r.turn
	if tu == nil || tu != e.tu || tu.step == nil {
		// The turn ended (an abort): the agent's late words are dropped.
		if e.perm != nil {
			e.perm.resp <- askResp{action: "deny"}
		}
		return
	}
	switch {
	case e.done:
		r.extDone(e.stop, e.err)
	case e.perm != nil:
		r.extPermission(e.perm)
	case e.update != nil:
		r.extUpdate(e.update)
	}
}

// extStep opens an assistant message of the external turn; extID is the
// agent's ID of it ("" until it sends one).
func (r *runner) extStep(extID string) *step {
	now := r.m.now()
	tu := r.turn
	r.steps++
	st := &step{n: r.steps, ext: true}
	st.msg = opencode.Message{ID: r.m.ids.NewMessage(), SessionID: r.id, Role: opencode.Assistant,
		Time: opencode.MessageTime{Created: now}, ParentID: tu.parentID, ModelID: tu.agent,
		ProviderID: externalProvider, Mode: tu.agent, Agent: tu.agent,
		Path: opencode.MessagePath{Cwd: r.sess.Directory, Root: r.sess.Directory}}
	st.setExtID(extID)
	tu.step = st
	tu.steps++
	r.outbox().message(st.msg)
	r.beginStep(st, "")
	return st
}

// setExtID records the agent's message ID: kept in the metadata of the
// message's text and reasoning parts (OpenCode's assistant message has no
// metadata of its own).
func (st *step) setExtID(id string) {
	if id == "" {
		return
	}
	st.extID = id
	st.extMeta = mustJSON(map[string]any{"acp": map[string]any{"messageId": id}})
}

// extMessage is the step the agent's message mid goes to: a change of
// its messageId ends the current assistant message and opens another.
func (r *runner) extMessage(mid string) *step {
	tu := r.turn
	st := tu.step
	if mid == "" || mid == st.extID {
		return st
	}
	if st.extID == "" {
		st.setExtID(mid)
		return st
	}
	tu.extNext = &mid
	r.extFinish(st, "stop")
	return tu.step
}

// extUpdate maps one session/update onto the turn's parts.
func (r *runner) extUpdate(u *acpclient.SessionUpdate) {
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		st := r.extMessage(u.MessageID)
		if u.Content == nil || u.Content.Type != "text" {
			return
		}
		if u.SessionUpdate == "agent_message_chunk" {
			r.delta(st, &st.text, textStream, u.Content.Text, st.extMeta)
		} else {
			r.delta(st, &st.reasoning, reasoningStream, u.Content.Text, st.extMeta)
		}
	case "tool_call", "tool_call_update":
		r.extTool(r.turn.step, &u.ToolCall)
	}
}

// extTool opens or updates the tool part of the agent's tool call.
func (r *runner) extTool(st *step, tc *acpclient.ToolCall) *toolRun {
	if tc.ToolCallID == "" {
		return nil
	}
	c := st.call(tc.ToolCallID)
	if c == nil {
		// Closing the text first keeps the parts in the order they came.
		r.closeText(r.outbox(), st, r.m.now())
		name := tc.Kind
		if name == "" {
			name = "other"
		}
		c = r.toolPending(st, &provider.ToolCall{ID: tc.ToolCallID, Name: name})
	}
	if c.done {
		return c
	}
	if tc.Title != "" {
		c.title = tc.Title
	}
	if len(tc.RawInput) > 0 && json.Valid(tc.RawInput) {
		c.input = tc.RawInput
	}
	if out := toolText(tc); out != "" {
		c.output = out
	}
	switch tc.Status {
	case acpclient.ToolCompleted:
		if !c.started {
			r.markRunning(st, c, &provider.ToolCall{ID: c.callID, Name: c.name, Arguments: c.input}, c.title)
		}
		r.toolDone(st, &toolResult{callID: c.callID, res: tool.Result{Output: c.output, Title: c.title}})
	case acpclient.ToolFailed:
		if !c.started {
			r.markRunning(st, c, &provider.ToolCall{ID: c.callID, Name: c.name, Arguments: c.input}, c.title)
		}
		msg := c.output
		if msg == "" {
			msg = "tool call failed"
		}
		r.toolDone(st, &toolResult{callID: c.callID, err: toolError(msg)})
	default:
		if !c.started {
			r.markRunning(st, c, &provider.ToolCall{ID: c.callID, Name: c.name, Arguments: c.input}, c.title)
			return c
		}
		// Running: its title, input and output so far.
		now := r.m.now()
		p := st.parts[c.part]
		ps := *p.State
		ps.Title, ps.Input = c.title, c.input
		if len(ps.Input) == 0 {
			ps.Input = json.RawMessage("{}")
		}
		if c.output != "" {
			ps.Metadata = mustJSON(map[string]any{"output": c.output})
		}
		p.State = &ps
		st.parts[c.part] = p
		r.outbox().part(p, now)
	}
	return c
}

// toolText is what a tool call's content says: its text blocks, the files
// its diffs change, else its raw output.
func toolText(tc *acpclient.ToolCall) string {
	var out []string
	for _, c := range tc.Content {
		switch {
		case c.Type == "content" && c.Content != nil && c.Content.Type == "text":
			out = append(out, c.Content.Text)
		case c.Type == "diff":
			out = append(out, "Edited "+c.Path)
		}
	}
	if len(out) == 0 && len(tc.RawOutput) > 0 {
		var s string
		if json.Unmarshal(tc.RawOutput, &s) == nil {
			return s
		}
		return string(tc.RawOutput)
	}
	return strings.Join(out, "\n")
}

// extPermission answers the agent's permission request through our
// rules: the call's permission is its kind's (edits ask as edits do,
// execute as bash...), its patterns the files it names.
func (r *runner) extPermission(p *extPerm) {
	st := r.turn.step
	tc := p.req.ToolCall
	if tc.ToolCallID == "" {
		tc.ToolCallID = "perm_" + r.m.ids.NewPart()
	}
	c := r.extTool(st, &tc)
	patterns := []string{}
	for _, l := range tc.Locations {
		rel, err := filepath.Rel(r.sess.Directory, l.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = l.Path
		}
		patterns = append(patterns, filepath.ToSlash(rel))
	}
	if len(patterns) == 0 {
		patterns = []string{"*"}
	}
	md := map[string]any{"title": c.title}
	if len(c.input) > 0 {
		md["input"] = c.input
	}
	action, reply := r.ask(c, kindPermission(tc.Kind, c.name), patterns, md, nil)
	p.resp <- askResp{action: action, reply: reply}
}

// kindPermission is the permission an ACP tool kind needs: our tools'.
func kindPermission(kind, name string) string {
	if kind == "" {
		kind = name
	}
	switch kind {
	case "read":
		return "read"
	case "edit", "delete", "move":
		return "edit"
	case "execute":
		return "bash"
	case "fetch":
		return "webfetch"
	case "search":
		return "grep"
	}
	return kind
}

// extFinish ends the current assistant message of an external turn with
// finish reason: its open tool calls are closed as aborted.
func (r *runner) extFinish(st *step, reason string) {
	st.streamed = true
	st.finish = &provider.Chunk{Kind: provider.Finish, Reason: reason}
	r.abortTools(r.outbox(), st, r.m.now())
	r.endStep(nil)
}

// extDone ends an external turn as the agent's stop reason says.
func (r *runner) extDone(stop string, err error) {
	st := r.turn.step
	if err != nil {
		st.streamed = true
		r.abortTools(r.outbox(), st, r.m.now())
		r.endStep(err)
		return
	}
	switch stop {
	case acpclient.StopCancelled:
		r.interrupt("Aborted", true)
		return
	case acpclient.StopMaxTokens:
		r.extFinish(st, "length")
	case acpclient.StopRefusal:
		r.extFinish(st, "content-filter")
	case acpclient.StopEndTurn, "":
		r.extFinish(st, "stop")
	default:
		r.extFinish(st, "other")
	}
}

// extContinue is endStep's end for an external turn: the agent's next
// message opens, or the turn ends. Steers wait as queued inputs (no
// steering into an external agent yet): they start the next turn.
func (r *runner) extContinue(tu *turn) {
	if next := tu.extNext; next != nil {
		tu.extNext = nil
		r.extStep(*next)
		return
	}
	r.endTurn()
}
