package openai

// Function tools: a request's tools of type "function" are the admitted
// input's client tools (the core's mechanism for tools the client runs,
// as AG-UI's frontend tools). A model call of one makes the response end
// completed with function_call output items while the turn waits; the
// next request's function_call_output items are handed to the waiting
// calls (Core.ToolResult), so the exchange stays one turn of ours. That
// turn is then answered in several responses, each ending where the model
// called client tools: the first is named by the user message's msg_ ID,
// each continuation by the msg_ ID of the assistant message whose calls
// it continues after.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// calls is what a request says of function tools.
type calls struct {
	tools   []opencode.ClientTool
	strict  []string // the tools sent with strict: true
	choice  string   // tool_choice: "auto" (or ""), "none"
	outputs []callOutput
}

// callOutput is one function_call_output item.
type callOutput struct {
	callID, output, param string
}

// funcTool is a tools entry, as sent and as answered back.
type funcTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// decodeTools reads tools and tool_choice. Only function tools are
// taken: OpenAI's hosted tools (web search, file search, ...) have no
// counterpart here, and the agent's own tools are the server's.
func (t *turn) decodeTools() error {
	for i, raw := range t.req.Tools {
		param := fmt.Sprintf("tools[%d]", i)
		var ft funcTool
		if err := json.Unmarshal(raw, &ft); err != nil {
			return invalid(param, "invalid_type", "a tool must be an object: {\"type\": \"function\", \"name\", \"parameters\"}")
		}
		if ft.Type != "function" {
			return invalid(param+".type", "unsupported_value", fmt.Sprintf("tools of type %q are not supported: send function tools (the agent's own tools run on the server)", clip(ft.Type)))
		}
		if ft.Name == "" {
			return invalid(param+".name", "missing_required_parameter", "a function tool needs a name")
		}
		ct := opencode.ClientTool{Name: ft.Name, Parameters: ft.Parameters}
		if ft.Description != nil {
			ct.Description = *ft.Description
		}
		t.tools = append(t.tools, ct)
		if ft.Strict != nil && *ft.Strict {
			t.strict = append(t.strict, ft.Name)
		}
	}
	raw := bytes.TrimSpace(t.req.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		// A named function, allowed_tools, a hosted tool: the core offers
		// tools to the model, it cannot make it call one.
		return invalid("tool_choice", "unsupported_value", `tool_choice must be "auto" or "none": the server cannot force a tool call`)
	}
	switch s {
	case "auto":
		t.choice = s
	case "none":
		// The function tools are not offered (the agent's own tools are).
		t.choice, t.tools, t.strict = s, nil, nil
	default:
		return invalid("tool_choice", "unsupported_value", fmt.Sprintf(`tool_choice %q is not supported: "auto" or "none" (the server cannot force a tool call)`, clip(s)))
	}
	return nil
}

// addOutput reads a function_call_output item: its output is a string
// or a list of input_text parts.
func (t *turn) addOutput(it inputItem, param string) error {
	if it.CallID == "" {
		return invalid(param+".call_id", "missing_required_parameter", "a function_call_output needs the call_id of the call it answers")
	}
	raw := bytes.TrimSpace(it.Output)
	var out string
	if json.Unmarshal(raw, &out) != nil {
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return invalid(param+".output", "invalid_type", "a function_call_output's output must be a string or a list of input_text parts")
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "input_text" && p.Type != "text" {
				return invalid(fmt.Sprintf("%s.output[%d].type", param, j), "unsupported_value", fmt.Sprintf("output parts of type %q are not supported: send input_text", clip(p.Type)))
			}
			b.WriteString(p.Text)
		}
		out = b.String()
	}
	t.outputs = append(t.outputs, callOutput{callID: it.CallID, output: out, param: param + ".call_id"})
	return nil
}

// functionCall is a function_call output item: a client tool's call, its
// ID the tool part's prt_ ID, its call_id the call's ID.
type functionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// MarshalJSON writes a function_call item as itself, any other item as a
// message.
func (it outputItem) MarshalJSON() ([]byte, error) {
	if it.call != nil {
		return json.Marshal(it.call)
	}
	if it.reasoning != nil {
		return json.Marshal(it.reasoning)
	}
	type message outputItem // without this method
	return json.Marshal(message(it))
}

func callItem(c functionCall) outputItem {
	return outputItem{ID: c.ID, Type: "function_call", call: &c}
}

// arguments are a stored call's arguments as the model sent them.
func arguments(p opencode.Part) string {
	if p.State == nil || len(p.State.Input) == 0 {
		return "{}"
	}
	return string(p.State.Input)
}

// clientNames are the names of an input's client tools.
func clientNames(in *opencode.Input) map[string]bool {
	out := map[string]bool{}
	for _, ct := range in.ClientTools {
		out[ct.Name] = true
	}
	return out
}

// isClientCall reports whether a part is a call of one of the client
// tools: a server tool never has a client tool's name (the core refuses
// such client tools).
func isClientCall(p opencode.Part, names map[string]bool) bool {
	return p.Type == opencode.PartTool && p.CallID != "" && names[p.Tool]
}

// stepItems are a step's output items in the order its parts began: one
// message item with its texts, placed at its first text, and a
// function_call item per client call. The server's own tool calls are not
// items: the server ran them, and the session's messages hold them.
func stepItems(m opencode.MessageWithParts, names map[string]bool) []outputItem {
	var out []outputItem
	msg := -1
	for _, p := range m.Parts {
		switch {
		case p.Type == opencode.PartText && !p.Synthetic && !p.Ignored:
			if msg < 0 {
				it := outputItem{ID: m.Info.ID, Type: "message", Role: "assistant", Status: statusCompleted}
				if m.Info.Time.Completed == nil {
					it.Status = statusInProgress
				}
				msg = len(out)
				out = append(out, it)
			}
			out[msg].Content = append(out[msg].Content, newOutputText(p.Text))
		case isReasoning(p):
			st := statusCompleted
			if p.Time == nil || p.Time.End == nil {
				st = statusInProgress
			}
			out = append(out, reasonItem(p.ID, p.Text, st))
		case isClientCall(p, names):
			st := statusCompleted
			if p.State == nil || p.State.Status == "pending" {
				st = statusInProgress
			}
			out = append(out, callItem(functionCall{ID: p.ID, Type: "function_call", CallID: p.CallID, Name: p.Tool,
				Arguments: arguments(p), Status: st}))
		}
	}
	return out
}

// hasClientCalls reports whether a step called client tools: a response
// ends with it.
func hasClientCalls(m opencode.MessageWithParts, names map[string]bool) bool {
	return slices.ContainsFunc(m.Parts, func(p opencode.Part) bool { return isClientCall(p, names) })
}

// answered reports whether any client call of a step has its result: the
// calls were handed to the client and answered.
func answered(m opencode.MessageWithParts, names map[string]bool) bool {
	return slices.ContainsFunc(m.Parts, func(p opencode.Part) bool {
		return isClientCall(p, names) && p.State != nil && (p.State.Status == "completed" || p.State.Status == "error")
	})
}

// segment cuts a turn's steps to one response's: those after the step
// after (the turn's start for ""), up to and with the next step that
// called client tools. prev is the response before it in the turn ("" for
// the first), cut whether it ends at client calls; ok is false when after
// is not a step of the turn that called client tools.
func segment(steps []opencode.MessageWithParts, names map[string]bool, first, after string) (seg []opencode.MessageWithParts, prev string, cut, ok bool) {
	start := 0
	if after != "" {
		i := slices.IndexFunc(steps, func(m opencode.MessageWithParts) bool { return m.Info.ID == after })
		if i < 0 || !hasClientCalls(steps[i], names) {
			return nil, "", false, false
		}
		start, prev = i+1, first
		for j := i - 1; j >= 0; j-- {
			if hasClientCalls(steps[j], names) {
				prev = steps[j].Info.ID
				break
			}
		}
	}
	for _, m := range steps[start:] {
		seg = append(seg, m)
		if hasClientCalls(m, names) {
			return seg, prev, true, true
		}
	}
	return seg, prev, false, true
}

// toolCore is what function tools need of the lifecycle.
type toolCore interface {
	Message(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error)
	MessageSession(ctx context.Context, messageID string) (string, error)
	ToolResult(ctx context.Context, sessionID, callID, output string, failed bool) error
	WaitingClientCalls(ctx context.Context, sessionID string) ([]string, error)
}

// echoTools are an input's client tools as the response's tools.
func echoTools(in *opencode.Input) []funcTool {
	var strict []string
	if m := metaOf(in.Parts); m != nil {
		strict = m.Strict
	}
	out := make([]funcTool, 0, len(in.ClientTools))
	for _, ct := range in.ClientTools {
		ft := funcTool{Type: "function", Name: ct.Name, Parameters: ct.Parameters}
		if ct.Description != "" {
			d := ct.Description
			ft.Description = &d
		}
		s := slices.Contains(strict, ct.Name)
		ft.Strict = &s
		if len(ft.Parameters) == 0 {
			ft.Parameters = json.RawMessage("null")
		}
		out = append(out, ft)
	}
	return out
}

// continued makes r the continuation after the client calls of assistant
// message after: named by it, following prev. Its request's metadata was
// not kept: the turn's first response has it.
func continued(r *Response, conv []opencode.MessageWithParts, after, prev string) {
	r.ID = after
	r.PreviousResponseID = &prev
	r.Metadata = map[string]string{}
	if i := slices.IndexFunc(conv, func(m opencode.MessageWithParts) bool { return m.Info.ID == after }); i >= 0 {
		r.CreatedAt = conv[i].Info.Time.Created / 1000
	}
}

// handedOver reports whether a step that called client tools is over for
// its response: its calls wait for the client alone (the model call
// returned and the server's calls of the step finished), or have their
// results, or the step ended otherwise (aborted). Over, the response is
// completed when its last call began: the step itself ends only once the
// client has answered.
func (h *Handler) handedOver(ctx context.Context, r *Response, in *opencode.Input, step opencode.MessageWithParts) (bool, error) {
	names := clientNames(in)
	over := step.Info.Error != nil || step.Info.Time.Completed != nil || answered(step, names)
	if !over {
		ids, err := h.o.Core.WaitingClientCalls(ctx, in.SessionID)
		if err != nil {
			return false, err
		}
		over = slices.ContainsFunc(step.Parts, func(p opencode.Part) bool {
			return isClientCall(p, names) && slices.Contains(ids, p.CallID)
		})
	}
	if !over {
		return false, nil
	}
	for _, p := range step.Parts {
		if isClientCall(p, names) && p.State != nil && p.State.Time != nil {
			at := p.State.Time.Start / 1000
			if r.CompletedAt == nil || at > *r.CompletedAt {
				r.CompletedAt = &at
			}
		}
	}
	return true, nil
}

// locate reads the input whose turn a response ID is part of: the input
// itself, or for a continuation (an assistant message that called client
// tools) the input of its turn, with after the continuation's ID.
func (h *Handler) locate(ctx context.Context, id string) (in *opencode.Input, after string, err error) {
	in, err = h.find(ctx, id)
	var oe *opencode.Error
	if err == nil || !asNotFound(err, &oe) || identifier.Check(identifier.Message, id) != nil {
		return in, "", err
	}
	missing := err
	core := h.o.Core
	sid, err := core.MessageSession(ctx, id)
	if err != nil {
		if asNotFound(err, &oe) {
			return nil, "", missing
		}
		return nil, "", err
	}
	conv, err := core.Messages(ctx, sid)
	if err != nil {
		return nil, "", err
	}
	i := slices.IndexFunc(conv, func(m opencode.MessageWithParts) bool { return m.Info.ID == id })
	if i < 0 || conv[i].Info.Role != opencode.Assistant {
		return nil, "", missing
	}
	called := map[string]bool{}
	for _, p := range conv[i].Parts {
		if p.Type == opencode.PartTool {
			called[p.Tool] = true
		}
	}
	// The turn's input is the nearest user message before it that is an
	// input offering a tool the message called; steers delivered into the
	// turn are passed over.
	for j := i - 1; j >= 0; j-- {
		if conv[j].Info.Role != opencode.User {
			continue
		}
		cand, err := core.FindInput(ctx, conv[j].Info.ID)
		if err != nil {
			if asNotFound(err, &oe) {
				continue // history, not an input
			}
			return nil, "", err
		}
		cand = h.inherit(ctx, cand)
		for _, ct := range cand.ClientTools {
			if called[ct.Name] {
				return cand, id, nil
			}
		}
		if cand.Delivery != opencode.Steer {
			break
		}
	}
	return nil, "", missing
}
