package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/tool"
)

// toolRun is one tool call of a step, owned by the runner.
type toolRun struct {
	callID    string
	name      string
	messageID string
	part      int // index of the tool part in step.parts
	input     json.RawMessage
	raw       strings.Builder // the arguments as streamed so far
	started   bool
	done      bool
	output    string
	failed    bool
	// client: a client tool's call, waiting for ToolResult (no goroutine).
	client bool
	// title is an external agent's title of the call.
	title string
}

// toolProgress is a running tool's metadata reported from its goroutine.
type toolProgress struct {
	callID   string
	metadata map[string]any
}

// askReq is a tool goroutine asking the runner for a permission decision.
type askReq struct {
	callID     string
	permission string
	patterns   []string
	// metadata and always are the ask's as the tool details them
	// (tool.AskDetailer); nil: {} and the patterns.
	metadata map[string]any
	always   []string
	resp     chan askResp
}

type askResp struct {
	action string         // allow, deny, ask
	reply  chan permReply // for ask: once, always or reject
}

// toolResult is a finished tool run reported back to the runner.
type toolResult struct {
	callID string
	res    tool.Result
	err    error
}

func toolSpecs(tools []tool.Tool) []provider.ToolSpec {
	out := make([]provider.ToolSpec, len(tools))
	for i, t := range tools {
		out[i] = provider.ToolSpec{Name: t.Name(), Description: t.Description(), Parameters: t.Parameters()}
	}
	return out
}

func (st *step) call(id string) *toolRun {
	for _, c := range st.calls {
		if c.callID == id {
			return c
		}
	}
	return nil
}

// toolPending opens a tool part in state pending when the model starts a call.
func (r *runner) toolPending(st *step, tc *provider.ToolCall) *toolRun {
	if c := st.call(tc.ID); c != nil {
		return c
	}
	now := r.m.now()
	raw := ""
	p := opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: st.msg.ID, Type: opencode.PartTool,
		CallID: tc.ID, Tool: tc.Name, State: &opencode.ToolState{Status: "pending", Input: json.RawMessage("{}"), Raw: &raw}}
	c := &toolRun{callID: tc.ID, name: tc.Name, messageID: st.msg.ID, part: len(st.parts)}
	st.parts = append(st.parts, p)
	st.calls = append(st.calls, c)
	t := r.outbox()
	t.part(p, now)
	t.durable(opencode.ToolInputStarted{StepHeader: r.stepHeader(now, st.msg.ID), CallID: tc.ID, Name: tc.Name})
	return c
}

// toolCall marks the call running and starts it on its own goroutine.
func (r *runner) toolCall(st *step, tc *provider.ToolCall) {
	c := r.toolPending(st, tc)
	if c.started {
		return
	}
	r.markRunning(st, c, tc, "")

	impl := lookupTool(r.m.cfg.Tools, c.name)
	if impl == nil && r.m.cfg.MoreTools != nil {
		impl = lookupTool(r.m.cfg.MoreTools(), c.name)
	}
	n, ctx, dir := st.n, r.turn.ctx, r.sess.Directory
	args := tc.Arguments
	if !r.owned() {
		r.fenced() // no tool runs for a session this instance lost
		return
	}
	if impl == nil && r.turn.isClientTool(c.name) {
		// The client runs it: the call stays running until ToolResult
		// answers it, and the step waits for it as for any running call.
		// No permission is asked: the client decides what its tool does.
		c.client = true
		return
	}
	r.m.wg.Add(1)
	callID := c.callID
	progress := func(md map[string]any) {
		r.post(streamMsg{step: n, progress: &toolProgress{callID: callID, metadata: md}})
	}
	subtask := r.subtaskFunc(progress)
	go func() {
		defer r.m.wg.Done()
		res, err := r.execTool(ctx, n, c.callID, impl, tool.Call{Dir: dir, Input: args, Progress: progress,
			Ask: r.askFunc(n, callID), Subtask: subtask})
		r.post(streamMsg{step: n, tool: &toolResult{callID: c.callID, res: res, err: err}})
	}()
}

// markRunning puts a call's part in state running with the call's
// arguments (and title, if any), logged as OpenCode logs a call.
func (r *runner) markRunning(st *step, c *toolRun, tc *provider.ToolCall, title string) {
	c.started = true
	input := tc.Arguments
	if !json.Valid(input) || len(input) == 0 {
		input = json.RawMessage("{}")
	}
	c.input = input
	now := r.m.now()
	p := st.parts[c.part]
	p.State = &opencode.ToolState{Status: "running", Input: input, Title: title, Time: &opencode.ToolTime{Start: now}}
	if len(tc.Metadata) > 0 {
		// The provider's own data for the call, sent back with it later.
		p.Metadata = tc.Metadata
	}
	st.parts[c.part] = p
	t := r.outbox()
	t.part(p, now)
	// The arguments as the model sent them, then the call itself, as
	// OpenCode logs them (input.ended carries the raw text).
	t.durable(opencode.ToolInputEnded{StepHeader: r.stepHeader(now, st.msg.ID), CallID: c.callID, Text: string(tc.Arguments)})
	t.durable(opencode.ToolCalled{StepHeader: r.stepHeader(now, st.msg.ID), CallID: c.callID, Tool: c.name, Input: input,
		Provider: opencode.ToolProvider})
}

func lookupTool(tools []tool.Tool, name string) tool.Tool {
	for _, t := range tools {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

type toolError string

func (e toolError) Error() string { return string(e) }

// errRejected is a call the user rejected without a word: the step ends
// and the turn with it (OpenCode's RejectedError), the model is not asked
// again.
const errRejected = toolError("The user rejected permission to use this specific tool call.")

// execTool runs on the tool's goroutine: permission first (asking the
// runner, and the user if a rule says ask), then the tool itself.
func (r *runner) execTool(ctx context.Context, n int64, callID string, impl tool.Tool, call tool.Call) (tool.Result, error) {
	if impl == nil {
		return tool.Result{}, toolError("unknown tool")
	}
	perm, patterns, err := impl.Permission(call)
	if err != nil {
		return tool.Result{}, err
	}
	req := &askReq{callID: callID, permission: perm, patterns: patterns, resp: make(chan askResp, 1)}
	if d, ok := impl.(tool.AskDetailer); ok {
		// Worked out here, on the tool's goroutine (it reads the file):
		// the ask, if one is made, carries them.
		if req.metadata, req.always, err = d.AskDetails(call); err != nil {
			return tool.Result{}, err
		}
	}
	r.post(streamMsg{step: n, ask: req})
	var resp askResp
	select {
	case resp = <-req.resp:
	case <-ctx.Done():
		return tool.Result{}, ctx.Err()
	}
	switch resp.action {
	case "deny":
		return tool.Result{}, toolError("A permission rule forbids this tool call: " + perm + " is denied for " +
			strings.Join(patterns, ", ") + ". Do not retry it; continue without it or ask the user.")
	case "ask":
		select {
		case reply := <-resp.reply:
			if reply.reply == "reject" && reply.message != "" {
				return tool.Result{}, toolError("The user rejected permission to use this specific tool call with the following feedback: " + reply.message)
			}
			if reply.reply == "reject" {
				return tool.Result{}, errRejected
			}
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}
	return impl.Run(ctx, call)
}

// onAsk answers a tool goroutine's permission question on the runner.
func (r *runner) onAsk(st *step, req *askReq) {
	c := st.call(req.callID)
	if c == nil {
		req.resp <- askResp{action: "deny"}
		return
	}
	if st.shell {
		// The user typed the command: nothing to ask them.
		req.resp <- askResp{action: "allow"}
		return
	}
	action, reply := r.ask(c, req.permission, req.patterns, req.metadata, req.always)
	req.resp <- askResp{action: action, reply: reply}
}

// toolDone closes a tool part as completed or error.
func (r *runner) toolDone(st *step, tr *toolResult) {
	c := st.call(tr.callID)
	if c == nil || c.done {
		return
	}
	c.done = true
	now := r.m.now()
	p := st.parts[c.part]
	start := now
	if p.State != nil && p.State.Time != nil {
		start = p.State.Time.Start
	}
	end := now
	t := r.outbox()
	if tr.err != nil {
		if errors.Is(tr.err, errRejected) || errors.Is(tr.err, tool.ErrDismissed) {
			st.blocked = true
		}
		c.failed = true
		c.output = tr.err.Error()
		p.State = &opencode.ToolState{Status: "error", Input: c.input, Error: c.output, Time: &opencode.ToolTime{Start: start, End: &end}}
		r.toolFailed(t, st.msg.ID, c.callID, c.output, now)
	} else {
		c.output = tr.res.Output
		md := tr.res.Metadata
		if md == nil {
			md = map[string]any{}
		}
		out := tr.res.Output
		p.State = &opencode.ToolState{Status: "completed", Input: c.input, Output: &out, Title: tr.res.Title,
			Metadata: mustJSON(md), Time: &opencode.ToolTime{Start: start, End: &end}}
		for _, a := range tr.res.Attachments {
			p.State.Attachments = append(p.State.Attachments, opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id,
				MessageID: st.msg.ID, Type: opencode.PartFile, Mime: a.Mime, URL: a.URL})
		}
		structured, content := opencode.ToolOutcome(p)
		t.durable(opencode.ToolSuccess{StepHeader: r.stepHeader(now, st.msg.ID), CallID: c.callID, Structured: structured,
			Content: content, OutputPaths: []string{}, Provider: opencode.ToolProvider})
		if c.name == "todowrite" {
			r.setTodos(t, c.input)
		}
	}
	st.parts[c.part] = p
	t.part(p, now)
	r.maybeEndStep()
}

// abortTools closes every unfinished tool part of the step as aborted.
func (r *runner) abortTools(t *outbox, st *step, now int64) {
	for _, c := range st.calls {
		if c.done {
			continue
		}
		c.done, c.failed, c.output = true, true, toolAborted
		p := st.parts[c.part]
		note := ""
		if c.name == "bash" {
			// What OpenCode's bash adds when the user aborts it.
			note = "\n\n<shell_metadata>\nUser aborted the command\n</shell_metadata>"
		}
		p.State = abortedState(p.State, c.input, now, note)
		st.parts[c.part] = p
		t.part(p, now)
		r.toolFailed(t, st.msg.ID, c.callID, c.output, now)
	}
}

// toolAborted is the error of a tool call cut off before it ended (an
// abort, a shutdown, a crash), OpenCode's words.
const toolAborted = "Tool execution aborted"

// abortedState is the state of a tool call cut off before it ended, as
// OpenCode's processor closes one: an error that keeps the call's input,
// start and metadata (bash: its output so far), marked interrupted, so the
// model is sent what the call had printed. input is the call's (nil: the
// stored one); note, if any, is added to the output.
func abortedState(old *opencode.ToolState, input json.RawMessage, now int64, note string) *opencode.ToolState {
	start := now
	if old != nil && old.Time != nil {
		start = old.Time.Start
	}
	if len(input) == 0 && old != nil {
		input = old.Input
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	md := map[string]any{}
	if old != nil && len(old.Metadata) > 0 {
		_ = json.Unmarshal(old.Metadata, &md)
	}
	md["interrupted"] = true
	if out, ok := md["output"].(string); ok && note != "" {
		md["output"] = out + note
	}
	return &opencode.ToolState{Status: "error", Input: input, Error: toolAborted, Metadata: mustJSON(md),
		Time: &opencode.ToolTime{Start: start, End: &now}}
}

// toolFailed logs the failure of call callID of assistant message
// messageID (msg is its error) as OpenCode's session.next.tool.failed.
func (r *runner) toolFailed(t *outbox, messageID, callID, msg string, now int64) {
	t.durable(opencode.ToolFailed{StepHeader: r.stepHeader(now, messageID), CallID: callID,
		Error:    opencode.EventError{Type: "unknown", Message: msg},
		Result:   opencode.ToolResult{Type: "error", Value: msg},
		Provider: opencode.ToolProvider})
}

// toolInputDelta streams a pending call's arguments to v2 clients. Like
// text deltas it is live only; tool.input.ended logs the whole text.
func (r *runner) toolInputDelta(st *step, tc *provider.ToolCall, delta string) {
	c := st.call(tc.ID)
	if c == nil || c.started || delta == "" {
		return
	}
	c.raw.WriteString(delta)
	r.publishLive(opencode.ToolInputDelta{StepHeader: r.stepHeader(r.m.now(), st.msg.ID), CallID: c.callID, Delta: delta})
}

// toolProgress shows a running call's metadata (bash: its output so far)
// in its v1 part, as OpenCode updates the running state. The update is
// stored, as OpenCode stores it, so a client that refetches the message
// sees what the event showed; progress is throttled (10/s), and group
// commit folds it into the step's other writes.
func (r *runner) toolProgress(st *step, pr *toolProgress) {
	c := st.call(pr.callID)
	if c == nil || c.done {
		return
	}
	p := st.parts[c.part]
	if p.State == nil || p.State.Status != "running" {
		return
	}
	ps := *p.State
	ps.Metadata = mustJSON(pr.metadata)
	p.State = &ps
	st.parts[c.part] = p
	r.outbox().part(p, r.m.now())
}
