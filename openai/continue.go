package openai

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// continueTurn serves a request of function_call_output items: each goes
// to the call waiting for it (Core.ToolResult), and the response is the
// turn going on from there, named by the assistant message that made the
// calls. Every item must answer a call waiting in the session, all the
// waiting calls of that message must be answered, and nothing is handed
// over unless all of that holds. The same outputs sent again (a retry)
// hand nothing over and answer the same continuation.
func (h *Handler) continueTurn(w http.ResponseWriter, r *http.Request, t *turn) {
	ctx := r.Context()
	core := h.o.Core
	sid := t.session
	switch {
	case t.previous != "":
		prev, _, err := h.locate(ctx, t.previous)
		if err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				err = notFound("previous_response_id", "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", clip(t.previous)))
			}
			h.WriteError(w, r, err)
			return
		}
		sid = prev.SessionID
	case sid == "" && t.conversation:
		var err error
		if sid, err = h.inferSession(ctx, t); err != nil {
			h.WriteError(w, r, err)
			return
		}
		if sid == "" {
			o := t.outputs[0]
			h.WriteError(w, r, invalid(o.param, "invalid_value", fmt.Sprintf("No tool call waits for the function call output with call_id %s: the function_call_output items that end a conversation answer the calls a turn waits on (end the input with the user's message to run a turn after them)", clip(o.callID))))
			return
		}
	case sid == "":
		h.WriteError(w, r, invalid("previous_response_id", "missing_required_parameter", "function_call_output items answer the calls of a response: give its previous_response_id (or its conversation)"))
		return
	default:
		if _, err := core.GetSession(ctx, sid); err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				err = notFound("conversation", "conversation_not_found", fmt.Sprintf("Conversation with id '%s' not found.", clip(sid)))
			}
			h.WriteError(w, r, err)
			return
		}
	}
	if t.conversation {
		// The conversation must be the session's up to the calls: no
		// history can be stored while the turn waits.
		conv, err := core.Messages(ctx, sid)
		if err != nil {
			h.WriteError(w, r, err)
			return
		}
		held := heldItems(conv, t.callIDs())
		if len(t.history) > len(held) || !sameItems(t.history, held[:len(t.history)]) {
			h.WriteError(w, r, conversationMismatch(sid))
			return
		}
	}
	// A background continuation's stream is recorded from the handover.
	ho, err := h.handOver(ctx, sid, t.outputs, "input", t.req.Stream || t.req.Background)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if t.conversation && t.previous == "" && t.session == "" {
		// A stateless client's retry finds the session by them.
		for _, o := range t.outputs {
			h.keys.put(handedKey(o.callID), keyEntry{session: sid})
		}
	}
	if t.req.Background {
		h.createBackground(w, r, streamSpec{in: ho.in, after: ho.after, skip: ho.skip, existed: ho.existed}, ho.sub, t.req.Stream)
		return
	}
	if ho.sub != nil {
		defer ho.sub.Close()
		h.streamAt(w, r, streamSpec{in: ho.in, after: ho.after, skip: ho.skip, existed: ho.existed}, ho.sub)
		return
	}
	if err := h.settle(ctx, ho.in, ho.after); err != nil && ctx.Err() != nil {
		return // the client left; the turn goes on in the core
	}
	h.respond(w, r, ho.after)
}

// handed is what handOver did: the turn (in) that goes on, the
// continuation's ID (after), the turn before it (skip), and for a stream
// the subscription taken before; existed: a retry, nothing handed over.
type handed struct {
	in      *opencode.Input
	after   string
	skip    map[string]bool
	existed bool
	sub     *eventbus.Subscription
}

// handOver checks a request's outputs against the session's waiting
// client calls and hands them over (Core.ToolResult): every output must
// answer a call waiting in the session, all the waiting calls of that
// assistant message must be answered, else nothing is handed over. The
// same outputs sent again (a retry) hand nothing over.
func (h *Handler) handOver(ctx context.Context, sid string, outputs []callOutput, list string, stream bool) (*handed, error) {
	core := h.o.Core
	waiting, err := core.WaitingClientCalls(ctx, sid)
	if err != nil {
		return nil, err
	}
	conv, err := core.Messages(ctx, sid)
	if err != nil {
		return nil, err
	}
	type held struct {
		part    opencode.Part
		message string
	}
	calls := map[string]held{}
	for _, m := range conv {
		for _, p := range m.Parts {
			if p.Type == opencode.PartTool && p.CallID != "" {
				calls[p.CallID] = held{p, m.Info.ID}
			}
		}
	}
	step := ""
	seen := map[string]bool{}
	var fresh []callOutput
	for _, o := range outputs {
		c, ok := calls[o.callID]
		switch {
		case seen[o.callID]:
			return nil, invalid(o.param, "duplicate_value", fmt.Sprintf("call_id %s is answered twice", clip(o.callID)))
		case ok && slices.Contains(waiting, o.callID):
			fresh = append(fresh, o)
		case ok && gaveOutput(c.part, o.output):
			// Handed over already with this output: a retry.
		default:
			return nil, invalid(o.param, "invalid_value", fmt.Sprintf("No tool call found for function call output with call_id %s: no call of this conversation waits for its output (it was answered with another, cut off by a restart, or never made)", clip(o.callID)))
		}
		seen[o.callID] = true
		if step == "" {
			step = c.message
		} else if c.message != step {
			return nil, invalid(o.param, "invalid_value", "the outputs must answer the calls of one response")
		}
	}
	if len(fresh) > 0 {
		var missing []string
		for _, id := range waiting {
			if c := calls[id]; c.message == step && !seen[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return nil, invalid(list, "missing_required_parameter", "No tool output found for function call "+strings.Join(missing, ", ")+": answer every call of the response at once")
		}
	}
	in, after, err := h.locate(ctx, step)
	if err != nil {
		return nil, err
	}
	ho := &handed{in: in, after: after, existed: len(fresh) == 0, skip: map[string]bool{}}
	// The turn so far is not the continuation's: its steps up to the one
	// that made the calls.
	for _, m := range conv {
		ho.skip[m.Info.ID] = true
		if m.Info.ID == after {
			break
		}
	}
	if stream {
		ho.sub = core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
	}
	for _, o := range fresh {
		if err := core.ToolResult(ctx, sid, o.callID, o.output, false); err != nil {
			if ho.sub != nil {
				ho.sub.Close()
			}
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				err = invalid(o.param, "invalid_value", oe.Message)
			}
			return nil, err
		}
	}
	return ho, nil
}

// gaveOutput reports whether a call's stored result is output.
func gaveOutput(p opencode.Part, output string) bool {
	return p.State != nil && p.State.Status == "completed" && p.State.Output != nil && *p.State.Output == output
}

// callOutputItem is an input item of a continuation: a client call's
// output, under the ID of the tool part that holds the call and its
// result.
type callOutputItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
	Status string `json:"status"`
}

// outputItems answers GET /v1/responses/{id}/input_items for a
// continuation: the outputs of the calls it continues after.
func (h *Handler) outputItems(w http.ResponseWriter, r *http.Request, in *opencode.Input, after string) {
	m, err := h.o.Core.Message(r.Context(), in.SessionID, after)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	names := clientNames(in)
	items := []callOutputItem{}
	for _, p := range m.Parts {
		if !isClientCall(p, names) || p.State == nil {
			continue
		}
		switch {
		case p.State.Status == "completed" && p.State.Output != nil:
			items = append(items, callOutputItem{ID: p.ID, Type: "function_call_output", CallID: p.CallID, Output: *p.State.Output, Status: statusCompleted})
		case p.State.Status == "error":
			items = append(items, callOutputItem{ID: p.ID, Type: "function_call_output", CallID: p.CallID, Output: p.State.Error, Status: statusCompleted})
		}
	}
	first, last := "", ""
	if n := len(items); n > 0 {
		first, last = items[0].ID, items[n-1].ID
	}
	writeJSON(w, http.StatusOK, struct {
		Object  string           `json:"object"`
		Data    []callOutputItem `json:"data"`
		FirstID string           `json:"first_id"`
		LastID  string           `json:"last_id"`
		HasMore bool             `json:"has_more"`
	}{"list", items, first, last, false})
}
