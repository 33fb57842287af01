package lifecycle

// Client tools (AG-UI's frontend tools): tools an input brings, offered to
// the model for the turn that delivers it, run by the client. A model call
// of one goes running like any tool call and then waits, with nothing
// running here, until ToolResult answers it; the step goes on from there,
// so the whole exchange stays one turn.
//
// A restart while a client call waits does to it what it does to any
// running call: a shutdown aborts it ("Tool execution aborted"); after a
// crash, recovery closes it the same way with the message it is in; the
// cut-off turn is then continued with a new model call, offered the
// inputs' client tools again. The old call is no longer waiting:
// ToolResult for it is ENotFound.

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/tool"
)

// maxClientTools bounds the client tools of one input.
const maxClientTools = 128

// clientToolName is what a tool name may be: what every provider accepts.
var clientToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// emptySchema is the parameters of a client tool that declared none: the
// providers want an object schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// validateClientTools checks an input's client tools before anything is
// admitted. A "null" schema counts as none.
func (m *Manager) validateClientTools(in *opencode.Input) error {
	if len(in.ClientTools) == 0 {
		return nil
	}
	bad := func(format string, args ...any) error {
		e := opencode.Errorf(opencode.EInvalid, format, args...)
		e.Field = "clientTools"
		return e
	}
	if len(in.ClientTools) > maxClientTools {
		return bad("too many client tools: %d, at most %d", len(in.ClientTools), maxClientTools)
	}
	server := map[string]bool{}
	for _, s := range m.allSpecs() {
		server[s.Name] = true
	}
	seen := map[string]bool{}
	for i := range in.ClientTools {
		ct := &in.ClientTools[i]
		if !clientToolName.MatchString(ct.Name) {
			return bad("client tool name %q is invalid: 1 to 64 letters, digits, _ or -", ct.Name)
		}
		if server[ct.Name] {
			return bad("client tool %q has the name of a tool of the server", ct.Name)
		}
		if seen[ct.Name] {
			return bad("client tool %q is given twice", ct.Name)
		}
		seen[ct.Name] = true
		p := bytes.TrimSpace(ct.Parameters)
		if len(p) == 0 || string(p) == "null" {
			ct.Parameters = nil
			continue
		}
		var obj map[string]json.RawMessage
		if p[0] != '{' || json.Unmarshal(p, &obj) != nil {
			return bad("client tool %q: parameters must be a JSON Schema object", ct.Name)
		}
	}
	return nil
}

// addClientTools adds an input's client tools to the turn's; a tool of the
// same name as an earlier one replaces it.
func (tu *turn) addClientTools(tools []opencode.ClientTool) {
	for _, ct := range tools {
		if i := tu.clientToolIndex(ct.Name); i >= 0 {
			tu.clientTools[i] = ct
		} else {
			tu.clientTools = append(tu.clientTools, ct)
		}
	}
}

// isClientTool reports whether the turn offers a client tool of that name.
func (tu *turn) isClientTool(name string) bool { return tu.clientToolIndex(name) >= 0 }

func (tu *turn) clientToolIndex(name string) int {
	return slices.IndexFunc(tu.clientTools, func(ct opencode.ClientTool) bool { return ct.Name == name })
}

// clientSpecs are the turn's client tools as the model is offered them,
// after the server's tools. A name a server tool took since admission (an
// MCP server connected) stays the server's: one tool per name.
func clientSpecs(tools []opencode.ClientTool, server []provider.ToolSpec) []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, ct := range tools {
		if slices.ContainsFunc(server, func(s provider.ToolSpec) bool { return s.Name == ct.Name }) {
			continue
		}
		params := ct.Parameters
		if len(params) == 0 {
			params = emptySchema
		}
		out = append(out, provider.ToolSpec{Name: ct.Name, Description: ct.Description, Parameters: params})
	}
	return out
}

// clientAnswer is a result ToolResult gave a client call, kept so a retry
// of the same result is answered as done.
type clientAnswer struct {
	output string
	failed bool
}

// maxClientAnswers bounds the answers a runner keeps for retries; the
// oldest go first. They live in memory only: a retry after the runner was
// rebuilt (restart, idle eviction) is ENotFound, as for any call not
// waiting.
const maxClientAnswers = 256

// ToolResult answers a client tool call that waits for its result: the
// call completes (or, failed, errors) with output, exactly as a finished
// tool does, and the step goes on with it as the model's tool result. A
// call not waiting in that session is ENotFound; a retry of the result
// already given is nil, a different one EConflict.
func (m *Manager) ToolResult(ctx context.Context, sessionID, callID, output string, failed bool) error {
	var err error
	if derr := m.do(ctx, sessionID, func(r *runner) { err = r.clientResult(callID, output, failed) }); derr != nil {
		return derr
	}
	return err
}

// WaitingClientCalls lists the call IDs of the session's client tool calls
// that the turn waits on, in the order the model made them: only once the
// turn waits on them alone (the model call has returned and every other
// call of the step has finished), so a front door that hands them to its
// client (AG-UI ends the run) misses none of the step's calls.
func (m *Manager) WaitingClientCalls(ctx context.Context, sessionID string) ([]string, error) {
	var out []string
	err := m.do(ctx, sessionID, func(r *runner) {
		if r.turn == nil || r.turn.step == nil || !r.turn.step.streamed {
			return
		}
		for _, c := range r.turn.step.calls {
			switch {
			case c.client && !c.done:
				out = append(out, c.callID)
			case !c.done:
				out = nil // a server tool still runs
				return
			}
		}
	})
	return out, err
}

func (r *runner) clientResult(callID, output string, failed bool) error {
	if a, ok := r.clientAnswers[callID]; ok {
		if a.output == output && a.failed == failed {
			return nil
		}
		return &opencode.Error{Code: opencode.EConflict, SessionID: r.id,
			Message: "tool call " + callID + " already has a different result"}
	}
	var c *toolRun
	var st *step
	if r.turn != nil && r.turn.step != nil {
		st = r.turn.step
		c = st.call(callID)
	}
	if c == nil || !c.client || c.done {
		return &opencode.Error{Code: opencode.ENotFound, SessionID: r.id,
			Message: "tool call " + callID + " is not waiting for a result"}
	}
	if r.clientAnswers == nil {
		r.clientAnswers = map[string]clientAnswer{}
	}
	if len(r.clientAnswerOrder) >= maxClientAnswers {
		delete(r.clientAnswers, r.clientAnswerOrder[0])
		r.clientAnswerOrder = r.clientAnswerOrder[1:]
	}
	r.clientAnswers[callID] = clientAnswer{output: output, failed: failed}
	r.clientAnswerOrder = append(r.clientAnswerOrder, callID)
	// The title is the tool's name: a completed part needs one, and the
	// client's result has none.
	tr := &toolResult{callID: callID, res: tool.Result{Output: output, Title: c.name}}
	if failed {
		msg := output
		if msg == "" {
			msg = "The client tool failed"
		}
		tr.err = toolError(msg)
	}
	r.toolDone(st, tr)
	return nil
}
