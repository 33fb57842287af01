package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/opencode"
)

// ACP v2 external agents. initialize offers v2 when the agent's config
// says protocolVersion 2 (with v1's fields beside, so an agent that
// speaks only v1 answers 1), else v1; an agent that answers 2 either way
// (one that speaks only v2) is spoken to in v2. Offered by default, v2
// would switch the real agents whose SDK answers it (claude-agent-acp,
// codex-acp) to a draft where they lose what v1 gives us: our fs methods,
// authenticate, their `_session/steering`. A v2 agent's
// session/prompt answers once the prompt is accepted and its state_update
// idle (with the stop reason) ends the work; session/resume (no replay)
// continues a stored session; steers go to it as session/inject mode
// steer when it offers that (external_steer.go maps the answers).

// initialize sends initialize, offering the version the config says,
// v2's fields beside v1's (an agent that speaks only v2 can read it). An
// agent that refuses that request outright (an RPC error, not a dead
// process: a strict v1 agent, say) is asked again with v1's request alone.
func (x *externals) initialize(ctx context.Context, e *extProc, offer int, req acpclient.InitializeRequest, res *json.RawMessage) error {
	both := acpclient.InitializeRequestV2{InitializeRequest: req, Info: acpclient.Implementation{Name: "opencode-server", Version: "1"}}
	if offer == acpclient.ProtocolVersion2 {
		both.ProtocolVersion = acpclient.ProtocolVersion2
	}
	err := e.p.Call(ctx, acpclient.MethodInitialize, both, res)
	var rpc *acpclient.RPCError
	if errors.As(err, &rpc) {
		x.m.log.Info("external agent refused initialize with v2's fields: asking with v1's alone", "agent", e.agent,
			"offered", both.ProtocolVersion, "err", err)
		return e.p.Call(ctx, acpclient.MethodInitialize, req, res)
	}
	return err
}

// readV2 reads a v2 agent's initialize answer: its prompt capabilities,
// whether it takes steers (session/inject), and session/resume, which
// every v2 agent has, for v1's loadSession.
func (e *extProc) readV2(init json.RawMessage, log *slog.Logger) {
	var r acpclient.InitializeResponseV2
	if json.Unmarshal(init, &r) != nil || r.ProtocolVersion != acpclient.ProtocolVersion2 {
		return
	}
	e.v2 = true
	e.caps.LoadSession = true
	e.caps.PromptCapabilities = r.PromptCapabilities()
	e.inject = r.Steers()
	log.Info("external agent speaks ACP v2", "inject", e.inject)
}

// load continues the agent's session: v1 session/load (it replays the
// history, which goes nowhere), v2 session/resume without a replay.
func (x *externals) load(ctx context.Context, e *extProc, id string, mcp []any) error {
	if e.v2 {
		return e.p.Call(ctx, acpclient.MethodSessionResume, acpclient.ResumeSessionRequest{SessionID: id, Cwd: e.dir, MCPServers: mcp}, nil)
	}
	return e.p.Call(ctx, acpclient.MethodSessionLoad, acpclient.LoadSessionRequest{SessionID: id, Cwd: e.dir, MCPServers: mcp}, nil)
}

// stateUpdate hands a v2 idle's stop reason to the prompt waiting for
// it (on the connection's reading goroutine: after the updates before it
// were posted to the runner).
func (e *extProc) stateUpdate(u acpclient.SessionUpdate) {
	// The kind first: e.v2 is set once initialize answered, and a
	// state_update comes only in a prompt, well after.
	if u.SessionUpdate != "state_update" || !e.v2 {
		return
	}
	v := u.V2()
	if v.State != "idle" {
		return
	}
	select {
	case e.idles <- v.StopReason:
	default: // one not taken yet: the prompt ends on it
	}
}

// drainIdles forgets idles no prompt waited for (before a prompt goes out).
func (e *extProc) drainIdles() {
	for {
		select {
		case <-e.idles:
		default:
			return
		}
	}
}

// awaitIdle waits for the end of a v2 prompt's work: its idle's stop
// reason. A cancelled prompt whose agent does not go idle in time (call
// ends cancelGrace after session/cancel) is killed; a process that dies
// fails the turn.
func (x *externals) awaitIdle(ctx, call context.Context, e *extProc, a agent.Agent) (string, error) {
	select {
	case stop := <-e.idles:
		if stop == "" {
			stop = acpclient.StopEndTurn
		}
		return stop, nil
	case <-call.Done():
		x.drop(e)
		if ctx.Err() != nil {
			return acpclient.StopCancelled, nil
		}
		return "", agentError(a, "session/prompt failed", call.Err())
	case <-e.p.Exited():
		x.drop(e)
		return "", agentError(a, "session/prompt failed", x.why(e, acpclient.ErrClosed))
	}
}

// inject sends one steer to a v2 agent as session/inject mode steer, our
// message ID in _meta: the answer is the agent's ID for it (its
// user_message will carry that ID when it is delivered).
func (x *externals) inject(e *extProc, blocks []acpclient.ContentBlock, messageID string) (string, error) {
	ctx, cancel := context.WithTimeout(x.m.ctx, steerTimeout)
	defer cancel()
	var res acpclient.InjectResponse
	err := e.p.Call(ctx, acpclient.MethodSessionInject, acpclient.InjectRequest{SessionID: e.sessionID, Mode: "steer",
		Content: blocks, Meta: map[string]any{"messageId": messageID}}, &res)
	if err == nil && res.MessageID == "" {
		err = errors.New("session/inject answered no messageId")
	}
	if err == nil {
		e.mu.Lock()
		if e.injects == nil {
			e.injects = map[string]bool{}
		}
		e.injects[res.MessageID] = true
		e.mu.Unlock()
	}
	return res.MessageID, err
}

// injectSettled forgets an accepted inject once delivered or asked back.
func (e *extProc) injectSettled(agentID string) {
	e.mu.Lock()
	delete(e.injects, agentID)
	e.mu.Unlock()
}

// revokeInjects asks back, before an abort's session/cancel, the injects
// the agent accepted and has not delivered: RFD #1261 keeps pending
// injects across a cancel and delivers them once idle, which would have
// the agent answer them in work nobody follows (the runner has already
// delivered them into the aborted turn, as a steer the agent holds). One
// already delivered stays so.
func (x *externals) revokeInjects(e *extProc) {
	e.mu.Lock()
	ids := make([]string, 0, len(e.injects))
	for id := range e.injects {
		ids = append(ids, id)
	}
	clear(e.injects)
	e.mu.Unlock()
	for _, id := range ids {
		// Bounded as the cancel's own answer is: the abort waits for it.
		if err := x.revokeInject(e, id, cancelGrace); err != nil {
			x.m.log.Info("external agent: a steer of the aborted turn stays with the agent", "agent", e.agent,
				"session", e.session, "agentMessage", id, "err", err)
		}
	}
}

// revokeInject takes back an inject the agent accepted and has not
// delivered: nil if it will never deliver it, else its error
// (already_delivered: it has, or is about to).
func (x *externals) revokeInject(e *extProc, agentID string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(x.m.ctx, timeout)
	defer cancel()
	return e.p.Call(ctx, acpclient.MethodRevokeInject, acpclient.RevokeInjectRequest{SessionID: e.sessionID, MessageID: agentID}, nil)
}

// ---- on the runner ----------------------------------------------------------

// extUpdateV2 maps a v2 agent's updates v1 has no word for: user_message
// (an accepted inject delivered), plan_update, tool_call_content_chunk.
func (r *runner) extUpdateV2(u *acpclient.SessionUpdate) {
	v := u.V2()
	switch u.SessionUpdate {
	case "user_message":
		r.extInjected(u.MessageID)
	case "plan_update":
		if v.Plan != nil {
			r.extPlan(v.Plan.Entries)
		}
	case "tool_call_content_chunk":
		var item acpclient.ToolCallContent
		st := r.turn.step
		c := st.call(v.ToolCallID)
		if c == nil || json.Unmarshal(v.Content, &item) != nil {
			return
		}
		more := toolText(&acpclient.ToolCall{Content: []acpclient.ToolCallContent{item}})
		if more == "" {
			return
		}
		r.extTool(st, &acpclient.ToolCall{ToolCallID: v.ToolCallID, RawOutput: mustJSON(c.output + more)})
	}
}

// extInjected delivers into the running turn the inject whose
// user_message the agent sent (the agent's own prompts' are ignored):
// what the agent says next is a new assistant message, parented on it.
func (r *runner) extInjected(agentID string) {
	tu := r.turn
	id, ok := tu.ext.accepted[agentID]
	if !ok {
		return
	}
	delete(tu.ext.accepted, agentID)
	tu.ext.proc.injectSettled(agentID)
	if i := r.pendingIndex(id); i >= 0 {
		r.deliver([]*opencode.Input{r.pending[i]}, false)
		tu.ext.split = true
	}
}

// extRevokeAll asks the agent back, at the prompt's end, the injects it
// accepted and never delivered: revoked, one stays pending and is the
// next prompt; already delivered, it joins this turn.
func (r *runner) extRevokeAll(tu *turn) {
	e := tu.ext.proc
	for agentID, id := range tu.ext.accepted {
		if tu.ext.revoking[agentID] {
			continue
		}
		tu.ext.revoking[agentID] = true
		r.m.wg.Add(1)
		go func() {
			defer r.m.wg.Done()
			err := r.m.ext.revokeInject(e, agentID, steerTimeout)
			r.post(streamMsg{ext: &extMsg{tu: tu, steered: &extSteered{id: id, agentID: agentID, revoke: true, err: err}}})
		}()
	}
}

// extRevoked takes the agent's answer to a revoke.
func (r *runner) extRevoked(s *extSteered) {
	tu := r.turn
	delete(tu.ext.revoking, s.agentID)
	if _, ok := tu.ext.accepted[s.agentID]; !ok {
		return // its user_message came meanwhile: delivered
	}
	delete(tu.ext.accepted, s.agentID)
	tu.ext.proc.injectSettled(s.agentID)
	i := r.pendingIndex(s.id)
	switch {
	case i < 0:
	case s.err == nil:
		r.m.log.Info("external agent: steer not delivered before its work ended, taken back: it runs as the next prompt",
			"session", r.id, "message", s.id)
	case acpclient.InjectReason(s.err) == acpclient.ReasonAlreadyDelivered:
		// The agent has it (its user_message is yet to come): delivered here.
		r.deliver([]*opencode.Input{r.pending[i]}, false)
	default:
		r.m.log.Warn("external agent: could not take back a steer it did not deliver: it runs as the next prompt",
			"session", r.id, "message", s.id, "err", s.err)
	}
}
