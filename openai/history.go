package openai

// A conversation as input: a client that keeps the conversation itself
// (the @openai/agents SDK's default, stateless mode; openai SDK users
// appending the output to their input) sends all of it each time, as
// user and assistant message items, function_call items and the
// function_call_output items that answered them, and reasoning items.
// Its earlier part is matched against the session's conversation: what
// the session holds is skipped, what extends it is stored as history
// (Core.StoreHistory, never run as turns: the model reads it once, as the
// conversation before the turn), and only its end runs: the last user
// message(s) are admitted as the turn's user message, or the
// function_call_output items at the end are handed to the calls the
// session's turn waits on. Reasoning items are dropped: the server's
// turns keep their own reasoning, a client's is not replayed.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// convItem is one item of a conversation input, as it is compared with
// the session's and stored: a user message, an assistant message's text,
// or a function call with the output the input gives it.
type convItem struct {
	kind   string // "user", "assistant", "call"
	texts  []string
	id     string // the client's ID of the item
	callID string
	name   string
	args   string
	output *string
	param  string
}

func (c convItem) text() string { return strings.TrimSpace(strings.Join(c.texts, "\n")) }

// Item kinds.
const (
	kindUser      = "user"
	kindAssistant = "assistant"
	kindCall      = "call"
)

// isConversation reports whether an input list is a conversation: it
// holds an assistant message or a function_call item, or
// function_call_output items with user messages.
func isConversation(items []inputItem) bool {
	user, output := false, false
	for _, it := range items {
		switch itemType(it) {
		case "function_call":
			return true
		case "message":
			switch it.Role {
			case "assistant":
				return true
			case "user":
				user = true
			}
		case "function_call_output":
			output = true
		}
	}
	return user && output
}

func itemType(it inputItem) string {
	if it.Type == "" && it.Role != "" {
		return "message"
	}
	return it.Type
}

// decodeConversation reads a conversation input: its earlier part into
// t.history, its end into t.texts (user messages) or t.outputs
// (function_call_output items). Every function_call_output of the earlier
// part must answer a function_call before it, every function_call of the
// list must have its output in the list; those at the end that answer no
// function_call of the list must answer calls waiting in the session
// (checked at admission).
func (t *turn) decodeConversation(items []inputItem) error {
	type entry struct {
		kind string // kindUser, kindAssistant, kindCall, "output"
		item convItem
		out  callOutput
	}
	var seq []entry
	var system []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch typ := itemType(it); typ {
		case "reasoning":
			continue // dropped (see the file's comment)
		case "function_call":
			if it.CallID == "" {
				return invalid(param+".call_id", "missing_required_parameter", "a function_call needs its call_id")
			}
			if it.Name == "" {
				return invalid(param+".name", "missing_required_parameter", "a function_call needs the name of the function it called")
			}
			args := strings.TrimSpace(it.Arguments)
			if args == "" {
				args = "{}"
			}
			if !json.Valid([]byte(args)) {
				return invalid(param+".arguments", "invalid_value", "a function_call's arguments must be a JSON text")
			}
			seq = append(seq, entry{kind: kindCall, item: convItem{kind: kindCall, id: it.ID, callID: it.CallID, name: it.Name, args: args, param: param + ".call_id"}})
		case "function_call_output":
			var one turn
			if err := one.addOutput(it, param); err != nil {
				return err
			}
			seq = append(seq, entry{kind: "output", out: one.outputs[0]})
		case "message":
			switch it.Role {
			case "user", "system", "developer":
				texts, err := contentTexts(it.Content, param+".content")
				if err != nil {
					return err
				}
				if it.Role != "user" {
					system = append(system, texts...)
					continue
				}
				seq = append(seq, entry{kind: kindUser, item: convItem{kind: kindUser, texts: texts, id: it.ID, param: param}})
			case "assistant":
				texts, err := assistantTexts(it.Content, param+".content")
				if err != nil {
					return err
				}
				if strings.TrimSpace(strings.Join(texts, "")) == "" {
					continue // no text: nothing to compare or store
				}
				seq = append(seq, entry{kind: kindAssistant, item: convItem{kind: kindAssistant, texts: texts, id: it.ID, param: param}})
			default:
				return invalid(param+".role", "invalid_value", fmt.Sprintf("role %q is not one of user, assistant, system, developer", clip(it.Role)))
			}
		default:
			return invalid(param+".type", "unsupported_value", fmt.Sprintf("input items of type %q are not supported: send message, function_call, function_call_output and reasoning items", clip(typ)))
		}
	}
	if len(seq) == 0 {
		return invalid("input", "missing_required_parameter", "input has no user message with text")
	}
	// The end: the user messages after the last other item, or the
	// function_call_output items after the last other item.
	end := len(seq)
	last := seq[end-1].kind
	if last != kindUser && last != "output" {
		return invalid(seq[end-1].item.param, "invalid_value", "a conversation must end with the user's message (the turn to run) or function_call_output items (for the calls a turn waits on)")
	}
	for end > 0 && seq[end-1].kind == last {
		end--
	}
	calls := map[string]int{} // call ID -> index in t.history
	for _, e := range seq[:end] {
		switch e.kind {
		case "output":
			i, ok := calls[e.out.callID]
			switch {
			case !ok:
				return invalid(e.out.param, "invalid_value", fmt.Sprintf("No tool call found for function call output with call_id %s: an output in a conversation answers a function_call before it", clip(e.out.callID)))
			case t.history[i].output != nil:
				return invalid(e.out.param, "duplicate_value", fmt.Sprintf("call_id %s is answered twice", clip(e.out.callID)))
			}
			o := e.out.output
			t.history[i].output = &o
		case kindCall:
			if _, dup := calls[e.item.callID]; dup {
				return invalid(e.item.param, "duplicate_value", fmt.Sprintf("call_id %s is called twice", clip(e.item.callID)))
			}
			calls[e.item.callID] = len(t.history)
			t.history = append(t.history, e.item)
		default:
			t.history = append(t.history, e.item)
		}
	}
	for _, e := range seq[end:] {
		if last == kindUser {
			t.texts = append(t.texts, e.item.texts...)
			continue
		}
		t.outputs = append(t.outputs, e.out)
		if i, ok := calls[e.out.callID]; ok {
			if t.history[i].output != nil {
				return invalid(e.out.param, "duplicate_value", fmt.Sprintf("call_id %s is answered twice", clip(e.out.callID)))
			}
			o := e.out.output
			t.history[i].output = &o
		}
	}
	for _, c := range t.history {
		if c.kind == kindCall && c.output == nil && last == kindUser {
			return invalid(c.param, "missing_required_parameter", fmt.Sprintf("No tool output found for function call %s: a conversation gives each call's function_call_output", clip(c.callID)))
		}
	}
	t.conversation = true
	t.system = strings.Join(system, "\n")
	return nil
}

// assistantTexts reads an assistant message's content: a string or
// output_text parts (refusal parts are their text).
func assistantTexts(raw json.RawMessage, param string) ([]string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, nil
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, invalid(param, "invalid_type", "an assistant message's content must be a string or a list of output_text parts")
	}
	out := make([]string, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "output_text", "input_text", "text":
			out = append(out, p.Text)
		case "refusal":
			out = append(out, p.Refusal)
		default:
			return nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "unsupported_value", fmt.Sprintf("assistant content parts of type %q are not supported: send output_text", clip(p.Type)))
		}
	}
	return out, nil
}

// historyLock serializes the requests that match a conversation against
// session sid's and store what extends it (responses and chat
// completions): taken after the request's Idempotency-Key, never before.
func (h *Handler) historyLock(sid string) func() { return h.keys.lock("history\x00" + sid) }

// heldItems are a session's conversation as items to compare a request's
// with: each user message's text, each assistant message's text and its
// calls whose IDs the request names (the server's own tool calls are no
// items), in the order of their parts as a response's output gives them.
func heldItems(conv []opencode.MessageWithParts, named map[string]bool) []convItem {
	var out []convItem
	for _, m := range conv {
		if m.Info.Role == opencode.User {
			it := convItem{kind: kindUser, id: m.Info.ID}
			for _, p := range m.Parts {
				if p.Type == opencode.PartText && !p.Synthetic && !p.Ignored {
					it.texts = append(it.texts, p.Text)
				}
			}
			out = append(out, it)
			continue
		}
		text := -1
		for _, p := range m.Parts {
			switch {
			case p.Type == opencode.PartText && !p.Synthetic && !p.Ignored && p.Text != "":
				if text < 0 {
					text = len(out)
					out = append(out, convItem{kind: kindAssistant, id: m.Info.ID})
				}
				out[text].texts = append(out[text].texts, p.Text)
			case p.Type == opencode.PartTool && named[p.CallID]:
				it := convItem{kind: kindCall, id: p.ID, callID: p.CallID, name: p.Tool}
				if p.State != nil && p.State.Status == "completed" && p.State.Output != nil {
					it.output = p.State.Output
				}
				out = append(out, it)
			}
		}
	}
	return out
}

// sameItem reports whether a request's item is the session's: the same
// kind and text, the same call (its output, when the session has one).
// IDs are not compared: a fork holds its source's messages under new IDs.
func sameItem(req, held convItem) bool {
	if req.kind != held.kind {
		return false
	}
	switch req.kind {
	case kindCall:
		return req.callID == held.callID && req.name == held.name &&
			(held.output == nil || req.output == nil || *held.output == *req.output)
	default:
		return req.text() == held.text()
	}
}

func sameItems(req, held []convItem) bool {
	if len(req) != len(held) {
		return false
	}
	for i := range req {
		if !sameItem(req[i], held[i]) {
			return false
		}
	}
	return true
}

// callIDs are the call IDs a request's history names.
func (t *turn) callIDs() map[string]bool {
	out := map[string]bool{}
	for _, c := range t.history {
		if c.kind == kindCall {
			out[c.callID] = true
		}
	}
	return out
}

// matchHistory compares a request's history with the session's
// conversation: the items that extend it are to be stored (fresh);
// retry is the session's user message the request re-sends, the session
// holding the conversation up to it (its turn answers the request); ok
// is false when the request does not repeat the session's conversation.
func (t *turn) matchHistory(conv []opencode.MessageWithParts) (fresh []convItem, retry string, ok bool) {
	held := heldItems(conv, t.callIDs())
	req := t.history
	switch {
	case len(req) >= len(held) && sameItems(req[:len(held)], held):
		return req[len(held):], "", true
	case len(req) < len(held) && sameItems(req, held[:len(req)]) && held[len(req)].kind == kindUser &&
		held[len(req)].text() == strings.TrimSpace(strings.Join(t.texts, "\n")):
		return nil, held[len(req)].id, true
	}
	return nil, "", false
}

// conversationMismatch is the 409 of a conversation that does not repeat
// its session's.
func conversationMismatch(sid string) error {
	return &fieldError{&opencode.Error{Code: opencode.EConflict, Message: fmt.Sprintf(
		"the input is not the conversation of session %s: a conversation sent as input must repeat the session's and add to it (send it without previous_response_id and conversation to start a new session, or only the new items with previous_response_id)", sid)},
		"input", "conversation_mismatch"}
}

// historyMessages are a request's fresh history items as our messages,
// for Core.StoreHistory: a user message per user item, an assistant
// message per assistant message item with the function_call items that
// follow it (up to their outputs), each call completed with its output.
// A client's msg_ ID of our form is kept when no session holds it and it
// sorts in its place; parts get IDs of our own.
func (h *Handler) historyMessages(ctx context.Context, items []convItem, last string) ([]opencode.MessageWithParts, error) {
	var out []opencode.MessageWithParts
	open := false // the last message is an assistant's that may take more calls
	// ids are the messages' IDs: the client's where historyID keeps it, of
	// our form, sorting after the message before and before any minted
	// now (OpenCode's clients order a session's messages by ID), else
	// minted.
	now := h.o.IDs.NewMessage()
	ids := func(client string) (string, error) {
		id, err := h.historyID(ctx, client)
		if err == nil && (len(id) != len(now) || id <= last || id >= now) {
			id = h.o.IDs.NewMessage()
		}
		last = id
		return id, err
	}
	for _, it := range items {
		switch it.kind {
		case kindUser:
			parts := make([]opencode.Part, len(it.texts))
			for i, s := range it.texts {
				parts[i] = opencode.Part{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: s}
			}
			id, err := ids(it.id)
			if err != nil {
				return nil, err
			}
			out = append(out, opencode.MessageWithParts{Info: opencode.Message{ID: id, Role: opencode.User}, Parts: parts})
			open = false
		case kindAssistant:
			id, err := ids(it.id)
			if err != nil {
				return nil, err
			}
			m := opencode.MessageWithParts{Info: opencode.Message{ID: id, Role: opencode.Assistant}}
			for _, s := range it.texts {
				if s != "" {
					m.Parts = append(m.Parts, opencode.Part{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: s})
				}
			}
			out = append(out, m)
			open = true
		case kindCall:
			if !open {
				id, err := ids("")
				if err != nil {
					return nil, err
				}
				out = append(out, opencode.MessageWithParts{Info: opencode.Message{ID: id, Role: opencode.Assistant}})
				open = true
			}
			m := &out[len(out)-1]
			st := &opencode.ToolState{Status: "completed", Input: json.RawMessage(it.args), Output: it.output, Title: it.name}
			m.Parts = append(m.Parts, opencode.Part{ID: h.o.IDs.NewPart(), Type: opencode.PartTool, CallID: it.callID, Tool: it.name, State: st})
			if it.output != nil {
				// The output ends the step: what follows is the next one.
				open = false
				for _, p := range m.Parts {
					if p.Type == opencode.PartTool && p.State.Output == nil {
						open = true
					}
				}
			}
		}
	}
	// An assistant message with nothing in it has nothing to store.
	out = slices.DeleteFunc(out, func(m opencode.MessageWithParts) bool { return len(m.Parts) == 0 })
	return out, nil
}

// historyID is the ID of a stored history message: the client's when it
// is a msg_ ID no session holds, else one minted here.
func (h *Handler) historyID(ctx context.Context, id string) (string, error) {
	if id == "" || identifier.Check(identifier.Message, id) != nil {
		return h.o.IDs.NewMessage(), nil
	}
	if _, err := h.o.Core.MessageSession(ctx, id); err == nil {
		return h.o.IDs.NewMessage(), nil
	} else if oe := (*opencode.Error)(nil); !asNotFound(err, &oe) {
		return "", err
	}
	return id, nil
}

// inferSession is the session a conversation without
// previous_response_id or conversation continues: the one that waits on
// the calls its function_call_output items at the end answer (or, for
// the same outputs again, the one this instance handed them to), else the
// one that holds its last assistant message by its msg_ ID ("": none, a
// new session).
func (h *Handler) inferSession(ctx context.Context, t *turn) (string, error) {
	core := h.o.Core
	if len(t.outputs) > 0 {
		for sid := range core.Status() {
			ids, err := core.WaitingClientCalls(ctx, sid)
			if err != nil {
				var oe *opencode.Error
				if asNotFound(err, &oe) {
					continue // gone meanwhile
				}
				return "", err
			}
			if slices.Contains(ids, t.outputs[0].callID) {
				return sid, nil
			}
		}
		// The same outputs again (a retry): the session they were handed
		// to, as this instance remembers it.
		if e, ok := h.keys.get(handedKey(t.outputs[0].callID)); ok {
			return e.session, nil
		}
		return "", nil
	}
	for i := len(t.history) - 1; i >= 0; i-- {
		it := t.history[i]
		if it.kind != kindAssistant || identifier.Check(identifier.Message, it.id) != nil {
			continue
		}
		sid, err := core.MessageSession(ctx, it.id)
		if err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				return "", nil
			}
			return "", err
		}
		return sid, nil
	}
	return "", nil
}

// checkWaiting refuses a conversation that gives the output of a call
// the session's turn still waits on before its end: the turn would wait
// on, the new input queued behind it. Such outputs go at the end of the
// input, where they are handed over.
func (h *Handler) checkWaiting(ctx context.Context, sid string, t *turn) error {
	waiting, err := h.o.Core.WaitingClientCalls(ctx, sid)
	if err != nil || len(waiting) == 0 {
		return err
	}
	for _, c := range t.history {
		if c.kind == kindCall && c.output != nil && slices.Contains(waiting, c.callID) {
			return invalid(c.param, "invalid_value", fmt.Sprintf("call %s waits for its output in session %s: send the conversation up to the call with its function_call_output at the end (the turn goes on), then the next user message", clip(c.callID), sid))
		}
	}
	return nil
}

// handedKey is where the keys index remembers the session a
// conversation's output for call callID was handed to (no header value
// holds a NUL: no Idempotency-Key is one).
func handedKey(callID string) string { return "handed\x00" + callID }

// storeHistory stores a conversation's fresh history in session sid
// after its last message (nothing when it has none).
func (h *Handler) storeHistory(ctx context.Context, sid string, fresh []convItem, last string) error {
	if len(fresh) == 0 {
		return nil
	}
	msgs, err := h.historyMessages(ctx, fresh, last)
	if err != nil {
		return err
	}
	return h.o.Core.StoreHistory(ctx, sid, msgs)
}
