package agui

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// plan is what a run did before its stream: what it admitted and
// answered, and what the stream follows.
type plan struct {
	// targets are the run's user messages by our IDs, in order: the new
	// ones it admitted, or (nothing new) the last one it sent that the
	// session has, whose turn the stream replays.
	targets []string
	// callParts maps call IDs to tool part IDs (the tool messages' IDs).
	callParts map[string]string
	snapshot  []any
	parentRun string
	// admitted: the run admitted its targets (subscribed before).
	admitted bool
	// continued: the run handed over results or answered asks, so the
	// running turn goes on from now: the stream follows it live (and any
	// targets after it), with nothing to read from the log.
	continued bool
	// refuse ends the run with RUN_ERROR at once: nothing was admitted.
	refuse *inputError
}

// known is what the session holds: our message IDs, and the client IDs
// its admitted messages and stored history were sent under.
type known struct {
	ids    map[string]bool
	client map[string]string // client ID -> msg_ ID
}

func (h *Handler) known(ctx context.Context, thread string) (known, []opencode.MessageWithParts, []*opencode.Input, error) {
	k := known{ids: map[string]bool{}, client: map[string]string{}}
	conv, err := h.o.Core.Messages(ctx, thread)
	if err != nil {
		return k, nil, nil, err
	}
	inbox, err := h.o.Core.Inbox(ctx, thread)
	if err != nil {
		return k, nil, nil, err
	}
	for _, m := range conv {
		k.ids[m.Info.ID] = true
		if c := clientIDOf(m.Parts); c != "" {
			k.client[c] = m.Info.ID
		}
		for _, p := range m.Parts {
			k.ids[p.ID] = true
		}
	}
	for _, in := range inbox {
		k.ids[in.ID] = true
		if c := clientIDOf(in.Parts); c != "" {
			k.client[c] = in.ID
		}
	}
	return k, conv, inbox, nil
}

// ours is the msg_ ID the session holds a client's message under.
func (k known) ours(id string) (string, bool) {
	if k.ids[id] {
		return id, true
	}
	if o, ok := k.client[id]; ok {
		return o, true
	}
	return "", false
}

// plan admits the run's new user messages, hands over the results of
// frontend calls and answers the asks resume[] names, in that order, and
// says what the stream follows. It runs under the thread's lock.
func (h *Handler) plan(ctx context.Context, in *RunAgentInput, fwd forwarded) (*plan, error) {
	core := h.o.Core
	thread := in.ThreadID
	// The snapshot is the conversation as it is before this run: what the
	// run admits follows in it, and what its turn says follows in the
	// stream (a fast turn may be over before the stream starts: read
	// after, the snapshot would hold the reply the stream then repeats).
	k, conv, inbox, err := h.known(ctx, thread)
	if err != nil {
		return nil, err
	}
	pl := &plan{}

	// What is new. The run's input is its user messages after its last
	// assistant message; what comes before that and the session holds
	// under neither ID is history (a chat moved into a new thread), stored
	// as the conversation, never run as turns. Tool messages answer calls
	// that wait for the client.
	waiting, err := core.WaitingClientCalls(ctx, thread)
	if err != nil {
		return nil, err
	}
	held := heldCalls(conv)
	lastAssistant := -1
	for i, m := range in.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
	}
	type result struct {
		callID, output string
		failed         bool
	}
	var hist, fresh []Message
	var results []result
	var stale, system []string
	histCalls := map[string]bool{}
	lastKnown := ""
	for i, m := range in.Messages {
		switch m.Role {
		case "user":
			if id, ok := k.ours(m.ID); ok {
				lastKnown = id
			} else if i < lastAssistant {
				hist = append(hist, m)
			} else {
				fresh = append(fresh, m)
			}
		case "assistant":
			// The client's copy of a message of ours under its own ID
			// holds our calls.
			if _, ok := k.ours(m.ID); ok || slices.ContainsFunc(m.ToolCalls, func(c ToolCall) bool { return held[c.ID] != nil }) {
				continue
			}
			hist = append(hist, m)
			for _, c := range m.ToolCalls {
				histCalls[c.ID] = true
			}
		case "tool":
			if _, ok := k.ours(m.ID); ok || histCalls[m.ToolCallID] {
				continue
			}
			out, failed := toolResult(m)
			switch {
			case slices.Contains(waiting, m.ToolCallID):
				results = append(results, result{m.ToolCallID, out, failed})
			case !handedOver(held[m.ToolCallID], out, failed):
				// A result for a call that no longer waits (a restart
				// cut it off) or never did: refused, not dropped.
				stale = append(stale, m.ToolCallID)
			}
		case "system", "developer":
			var s string
			if json.Unmarshal(m.Content, &s) == nil && s != "" {
				system = append(system, s)
			}
		}
	}
	if len(stale) > 0 {
		pl.refuse = &inputError{code: opencode.KindOf(opencode.ENotFound).AGUI, message: "tool call " + strings.Join(stale, ", ") +
			" is not waiting for a result (it was cut off by a restart, was answered already or was never made): nothing of the run was admitted"}
		return pl, nil
	}

	// Asks: resume[] answers them; anything else while one waits is
	// refused, as AG-UI says (the client must address every interrupt).
	asks := map[string]string{} // request ID -> "permission" | "question"
	for _, p := range core.Permissions() {
		if p.SessionID == thread {
			asks[p.ID] = "permission"
		}
	}
	for _, q := range core.Questions() {
		if q.SessionID == thread {
			asks[q.ID] = "question"
		}
	}
	answered := map[string]bool{}
	for _, r := range in.Resume {
		if _, ok := asks[r.InterruptID]; ok {
			answered[r.InterruptID] = true
		}
	}
	unanswered := len(asks) > len(answered)
	if unanswered && (len(fresh) > 0 || len(results) > 0 || len(hist) > 0) {
		var ids []string
		for id := range asks {
			if !answered[id] {
				ids = append(ids, id)
			}
		}
		pl.refuse = &inputError{code: "PENDING_INTERRUPT", message: "the thread has interrupts to answer first (resume[] with their IDs): " + strings.Join(ids, ", ")}
		return pl, nil
	}
	if len(hist) > 0 {
		// One commit before anything else: a history refused (the turn
		// runs, an ID is another session's) leaves nothing admitted.
		if err := core.StoreHistory(ctx, thread, h.history(hist, in.Messages)); err != nil {
			return nil, err
		}
		if conv, err = core.Messages(ctx, thread); err != nil {
			return nil, err
		}
	}
	for _, r := range in.Resume {
		kind, ok := asks[r.InterruptID]
		if !ok {
			continue // answered already (a retried run), or never ours
		}
		if err := h.answer(ctx, kind, r); err != nil {
			return nil, err
		}
	}
	for _, r := range results {
		if err := core.ToolResult(ctx, thread, r.callID, r.output, r.failed); err != nil {
			return nil, err
		}
	}

	if fwd.Abort {
		if err := core.Abort(ctx, thread); err != nil {
			return nil, err
		}
	}

	busy := core.Status()[thread] == "busy"
	if busy {
		pl.parentRun = h.runOf(thread)
	}
	delivery := opencode.Queue
	if fwd.Delivery == "steer" {
		delivery = opencode.Steer
	}
	var tools []opencode.ClientTool
	for _, t := range in.Tools {
		tools = append(tools, opencode.ClientTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	for i, m := range fresh {
		content, _ := userContent(m.Content)
		parts := userParts(content)
		id := h.identify(m.ID, parts)
		if i == len(fresh)-1 {
			if p, ok := contextPart(in.Context); ok {
				p.ID = h.o.IDs.NewPart()
				parts = append(parts, p)
			}
		}
		adm := &opencode.Input{ID: id, SessionID: thread, Delivery: delivery, Parts: parts,
			System: strings.Join(system, "\n"), ClientTools: tools, Agent: fwd.Agent}
		out, _, err := core.Admit(ctx, adm)
		if err != nil {
			return nil, err
		}
		pl.targets = append(pl.targets, out.ID)
		inbox = append(inbox, out)
	}
	pl.admitted = len(fresh) > 0
	pl.continued = len(results) > 0 || len(answered) > 0
	if len(fresh) > 0 && !busy {
		h.setRun(thread, in.RunID)
	}
	pl.callParts = callParts(conv)
	if len(fresh) == 0 && len(results) == 0 && len(answered) == 0 && len(hist) == 0 && !fwd.Abort && lastKnown != "" {
		// Nothing new: the same run again. Its turn is replayed, so the
		// snapshot ends with its message.
		pl.targets = []string{lastKnown}
		for i, m := range conv {
			if m.Info.ID == lastKnown {
				conv = conv[:i+1]
				break
			}
		}
	}
	pl.snapshot = snapshot(conv, inbox)
	return pl, nil
}

// heldCalls are the conversation's tool parts by call ID.
func heldCalls(conv []opencode.MessageWithParts) map[string]*opencode.Part {
	out := map[string]*opencode.Part{}
	for _, m := range conv {
		for j, p := range m.Parts {
			if p.Type == opencode.PartTool && p.CallID != "" {
				out[p.CallID] = &m.Parts[j]
			}
		}
	}
	return out
}

// handedOver reports whether a call's stored result is the one a tool
// message brings: a run re-sent after it handed the result over.
func handedOver(p *opencode.Part, out string, failed bool) bool {
	if p == nil || p.State == nil {
		return false
	}
	switch p.State.Status {
	case "completed":
		return !failed && p.State.Output != nil && *p.State.Output == out
	case "error":
		return failed && p.State.Error == out
	}
	return false
}

// callParts maps the conversation's call IDs to their tool parts' IDs.
func callParts(conv []opencode.MessageWithParts) map[string]string {
	out := map[string]string{}
	for id, p := range heldCalls(conv) {
		out[id] = p.ID
	}
	return out
}

// answer replies to one ask from its resume entry.
func (h *Handler) answer(ctx context.Context, kind string, r ResumeEntry) error {
	switch kind {
	case "permission":
		reply := "reject"
		if r.Status == "resolved" {
			var p struct {
				Reply string `json:"reply"`
			}
			_ = json.Unmarshal(r.Payload, &p)
			switch p.Reply {
			case "", "once", "approve", "allow":
				reply = "once"
			case "always":
				reply = "always"
			case "reject", "deny":
				reply = "reject"
			default:
				return badInput(`resume payload reply %q: a permission is answered "once", "always" or "reject"`, p.Reply)
			}
		}
		return h.o.Core.ReplyPermission(ctx, r.InterruptID, reply)
	default:
		if r.Status == "cancelled" {
			return h.o.Core.ReplyQuestion(ctx, r.InterruptID, nil, true)
		}
		var p struct {
			Answers [][]string `json:"answers"`
		}
		if err := json.Unmarshal(r.Payload, &p); err != nil || p.Answers == nil {
			return badInput("resume payload for a question: {answers: [[label, ...], ...]}, one list per question")
		}
		return h.o.Core.ReplyQuestion(ctx, r.InterruptID, p.Answers, false)
	}
}
