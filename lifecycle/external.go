package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

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

// external is the agent a turn's content comes from, if it is an external one.
func (r *runner) external(tu *turn) (agent.Agent, bool) {
	a, ok := r.m.agent(tu.agent)
	return a, ok && a.ACP != nil && !tu.compact
}

// startExternal starts an external agent's turn: the first assistant
// message, and the prompt sent off the loop.
func (r *runner) startExternal(a agent.Agent) {
	tu := r.turn
	tu.ext = &extTurn{sending: map[string]int64{}, accepted: map[string]string{}, revoking: map[string]bool{}}
	// In a tracked project the first message begins with the snapshot
	// the agent's edits are measured from, taken off the loop before the
	// prompt goes out (external_edits.go).
	repo := r.repo()
	st := r.extOpen("")
	if repo == nil {
		r.beginStep(st, "")
	}
	var parts []opencode.Part
	for _, in := range tu.inputs {
		for _, p := range in.Parts {
			if !p.Ignored {
				parts = append(parts, p)
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
		started: func(e *extProc) { post(&extMsg{started: e}) },
		session: func(id string) { r.post(streamMsg{ext: &extMsg{agent: a.Name, sessionID: id}}) },
	}
	req := extReq{session: r.id, dir: r.sess.Directory, messageID: tu.parentID, parts: parts,
		load: extSessionID(r.sess.Metadata, a.Name)}
	req.history = r.extHistory(tu, req.load)
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		if repo != nil {
			r.extBegin(tu, st, repo)
		}
		stop, err := r.m.ext.prompt(tu.ctx, req, a, sink)
		post(&extMsg{done: true, stop: stop, err: err})
	}()
}

// The agent's session ID is kept in our session's metadata, under "acp"
// and the agent's name: {"acp": {"claude": {"sessionId": "..."}}}; after
// a restart the agent's process loads it (session/load).

// extSessionID is the agent's session stored with ours ("" when none).
func extSessionID(meta json.RawMessage, agent string) string {
	var md struct {
		ACP map[string]struct {
			SessionID string `json:"sessionId"`
		} `json:"acp"`
	}
	_ = json.Unmarshal(meta, &md)
	return md.ACP[agent].SessionID
}

// withExtSessionID is meta with the agent's session ID set; the rest of
// the metadata (the user's) is kept.
func withExtSessionID(meta json.RawMessage, agent, id string) json.RawMessage {
	md := map[string]any{}
	_ = json.Unmarshal(meta, &md)
	acp, _ := md["acp"].(map[string]any)
	if acp == nil {
		acp = map[string]any{}
	}
	acp[agent] = map[string]any{"sessionId": id}
	md["acp"] = acp
	return mustJSON(md)
}

// extSession stores the agent's session ID with the session.
func (r *runner) extSession(agent, id string) {
	s := r.sess
	s.Metadata = withExtSessionID(s.Metadata, agent, id)
	if _, err := r.saveSession(r.outbox(), s); err != nil {
		r.m.log.Warn("could not store the external agent's session", "session", r.id, "agent", agent, "err", err)
	}
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
	if e.sessionID != "" {
		r.extSession(e.agent, e.sessionID)
		return
	}
	tu := r.turn
	if r.extMeasuring(e) {
		return
	}
	if tu == nil || tu != e.tu || tu.step == nil {
		// The turn ended (an abort): the agent's late words are dropped.
		if e.update != nil {
			r.m.log.Debug("external agent's update after its turn: dropped", "session", r.id, "update", e.update.SessionUpdate)
		}
		if e.perm != nil {
			e.perm.resp <- askResp{action: "deny"}
		}
		return
	}
	switch {
	case e.started != nil:
		tu.ext.proc = e.started
		r.extSteer()
	case e.steered != nil:
		r.extSteered(e.steered)
	case e.done && (len(tu.ext.sending) > 0 || len(tu.ext.accepted) > 0):
		// Steers the agent has not answered (or, v2, not delivered) yet:
		// they may be in this turn; the end waits for them (extSteered).
		tu.ext.held = e
		r.extReplay(tu)
	case e.done:
		r.extDone(e.stop, e.err)
	case e.perm != nil:
		r.extPermission(e.perm)
	case e.update != nil && len(tu.ext.sending) > 0:
		tu.ext.buffered = append(tu.ext.buffered, e) // until the steers are answered
	case e.update != nil:
		r.extUpdate(e.update)
	}
}

// extStep opens an assistant message of the external turn; extID is the
// agent's ID of it ("" until it sends one). It begins where the message
// before it ended (its measured end snapshot).
func (r *runner) extStep(extID string) *step {
	st := r.extOpen(extID)
	r.beginStep(st, r.turn.endSnap)
	return st
}

// extOpen opens an assistant message of the external turn, not begun yet.
func (r *runner) extOpen(extID string) *step {
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
		r.extSplit(u.MessageID)
		if r.extHold(u) {
			return
		}
		st := r.extMessage(u.MessageID)
		if r.extHold(u) {
			return
		}
		if u.Content == nil || u.Content.Type != "text" {
			return
		}
		st.extChars += len(u.Content.Text)
		if u.SessionUpdate == "agent_message_chunk" {
			r.delta(st, &st.text, textStream, u.Content.Text, st.extMeta)
		} else {
			r.delta(st, &st.reasoning, reasoningStream, u.Content.Text, st.extMeta)
		}
	case "tool_call":
		r.extSplit(u.MessageID)
		if r.extHold(u) {
			return
		}
		r.extTool(r.turn.step, &u.ToolCall)
	case "tool_call_update":
		if r.turn.step.call(u.ToolCallID) == nil {
			r.extSplit(u.MessageID) // v2: the first update of a call opens it
		}
		r.extTool(r.turn.step, &u.ToolCall)
	case "plan":
		r.extPlan(u.Entries)
	case "usage_update":
		// The context the agent fills now is the message's tokens (what
		// OpenCode's TUI shows as context; extFinish splits it); its cost
		// is what the session's cumulative cost grew by.
		st := r.turn.step
		st.extUsed = u.Used
		if u.Cost != nil {
			add := u.Cost.Amount - r.extCostSeen
			if add < 0 {
				add = u.Cost.Amount // another process of the agent: counted anew
			}
			r.extCostSeen = u.Cost.Amount
			st.extCost += add
		}
	case "user_message", "plan_update", "tool_call_content_chunk":
		r.extUpdateV2(u)
	case "session_info_update":
		if u.Title != nil && *u.Title != "" && *u.Title != r.sess.Title {
			if _, err := r.update(opencode.SessionPatch{Title: u.Title}); err != nil {
				r.m.log.Warn("could not store the external agent's title", "session", r.id, "err", err)
			}
		}
	}
}

// extPlan is the agent's plan as our todowrite tool records one: a
// completed todowrite call whose input is the list (the TUI shows it, GET
// /session/{id}/todo and todo.updated have it, a restart remembers it).
func (r *runner) extPlan(entries []acpclient.PlanEntry) {
	todos := make([]opencode.Todo, 0, len(entries))
	open := 0
	for _, e := range entries {
		todos = append(todos, opencode.Todo{Content: e.Content, Status: e.Status, Priority: e.Priority})
		if e.Status != "completed" {
			open++
		}
	}
	input := mustJSON(map[string]any{"todos": todos})
	r.extTool(r.turn.step, &acpclient.ToolCall{ToolCallID: "plan_" + r.m.ids.NewPart(), Kind: "todowrite",
		Title: fmt.Sprintf("%d todos", open), Status: acpclient.ToolCompleted, RawInput: input,
		RawOutput: mustJSON(string(mustJSON(todos)))})
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
	if out := r.extToolOutput(tc); out != "" {
		c.output = out
	}
	switch tc.Status {
	case acpclient.ToolCompleted:
		if !c.started {
			r.markRunning(st, c, &provider.ToolCall{ID: c.callID, Name: c.name, Arguments: c.input}, c.title)
		}
		r.toolDone(st, &toolResult{callID: c.callID, res: tool.Result{Output: c.output, Title: c.title,
			Metadata: r.extToolMeta(tc.ToolCallID)}})
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
		md := r.extToolMeta(tc.ToolCallID)
		if c.output != "" {
			if md == nil {
				md = map[string]any{}
			}
			md["output"] = c.output
		}
		if md != nil {
			ps.Metadata = mustJSON(md)
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
// finish reason: its open tool calls are closed as aborted. In a tracked
// project it ends once its end snapshot is measured (off the loop), as
// our own steps do: what the agent changed is its patch, session.diff and
// a point revert restores.
func (r *runner) extFinish(st *step, reason string) {
	st.streamed = true
	st.finish = &provider.Chunk{Kind: provider.Finish, Reason: reason, Usage: extUsage(st)}
	r.abortTools(r.outbox(), st, r.m.now())
	r.maybeEndStep()
}

// extUsage splits the context the agent reported into input and output
// tokens: ACP says only how many are in context, and OpenCode's TUI counts
// a message's context only when it has output tokens. The output is
// estimated from the message's text (four characters a token).
func extUsage(st *step) provider.Usage {
	if st.extUsed <= 0 {
		return provider.Usage{}
	}
	out := min(max(int64(st.extChars+3)/4, 1), st.extUsed)
	return provider.Usage{Input: st.extUsed - out, Output: out}
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
// message opens, or the turn ends. Steers not taken by the agent (see
// external_steer.go) wait as queued inputs: they start the next turn.
func (r *runner) extContinue(tu *turn) {
	if next := tu.extNext; next != nil {
		tu.extNext = nil
		r.extStep(*next)
		r.extReplay(tu)
		return
	}
	r.endTurn()
}
