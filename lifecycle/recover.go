package lifecycle

// What a runner does when it starts: load the session, close what a crash
// or shutdown left open, and continue a cut-off turn.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/store"
)

// state is what a runner loads when it starts.
type state struct {
	sess     opencode.Session
	pending  []*opencode.Input
	msgs     []opencode.MessageWithParts
	lastSeq  int64
	lastUser string
	// epoch is the claim under which this instance runs the session
	// (cluster mode).
	epoch int64
	// lazy: the session has nothing to resume, so its history was not read
	// (a cold inbox, abort or edit does not need it); a turn reads it.
	lazy bool
}

func (m *Manager) load(ctx context.Context, id string) (*state, error) {
	epoch, err := m.claim(ctx, id)
	if err != nil {
		return nil, err
	}
	sess, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	pending, err := m.store.PendingInputs(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	last, err := m.store.LastSeq(ctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	st := &state{sess: sess, pending: pending, lastSeq: last, epoch: epoch}
	if len(pending) == 0 {
		open, err := m.store.SessionOpen(ctx, id)
		if err != nil {
			return nil, mapStoreErr(err, id)
		}
		st.lazy = !open
	}
	if !st.lazy {
		// Recovery needs the history now: a turn may have been cut off.
		if st.msgs, err = m.store.ListMessages(ctx, id); err != nil {
			return nil, mapStoreErr(err, id)
		}
	}
	return st, nil
}

// start loads the conversation, closes what a crash left open and picks up
// pending work. It runs on the loop goroutine.
func (r *runner) start() {
	msgs := r.boot
	r.boot = nil
	if data, ok := r.m.cfg.Snapshots.Intent(r.id); ok {
		r.finishRestore(data)
	}
	if r.lazy {
		r.maybeStart()
		r.flushPending()
		return
	}
	// A shown input's message is stored before it is delivered: the model
	// sees it only once it is (it is remembered then).
	waiting := map[string]bool{}
	for _, in := range r.pending {
		if in.Shown {
			waiting[in.ID] = true
		}
	}
	msgs = slices.DeleteFunc(msgs, func(mp opencode.MessageWithParts) bool { return waiting[mp.Info.ID] })
	r.firstSnap = firstSnapshot(msgs)
	// Closed first, so the model is sent the calls as they are stored.
	closed := r.recover(msgs)
	for _, mp := range msgs {
		r.remember(mp)
	}
	unanswered, err := r.m.unanswered(msgs)
	if err != nil {
		// Whether the last turn was cut off cannot be read: retried in
		// the background, not guessed.
		r.failure = err
		return
	}
	if closed != nil || interruptedByServer(msgs) || unanswered {
		r.resume = cutOff(msgs)
	}
	if r.resume != nil {
		r.resume.last = closed
		if closed == nil && interruptedByServer(msgs) {
			r.resume.last = &msgs[len(msgs)-1]
		}
	}
	r.maybeStart()
	r.flushPending()
}

// cutTurn is a turn a shutdown or crash cut off: its latest user message,
// which the continuation answers, and the user messages (inputs) delivered
// into it, whose recorded answer becomes the continuation's.
type cutTurn struct {
	user   opencode.Message
	inputs []string
	// last is the assistant message the cut closed, if it ends the history.
	last *opencode.MessageWithParts
}

// cutOff finds the cut-off turn at the end of msgs: the user messages after
// the last assistant message that ended a turn (one that stopped, not one
// that called tools and not the interrupted one).
func cutOff(msgs []opencode.MessageWithParts) *cutTurn {
	var c *cutTurn
	var inputs []string
	for i := len(msgs) - 1; i >= 0; i-- {
		info := msgs[i].Info
		if info.Role == opencode.User {
			if c == nil {
				c = &cutTurn{user: info}
			}
			inputs = append(inputs, info.ID)
			continue
		}
		if c != nil && info.Error == nil && info.Finish != "" && info.Finish != "tool-calls" {
			break // the turn before
		}
		if c != nil && info.Error != nil && !isInterrupted(info) {
			break // a turn that ended in an error
		}
	}
	if c == nil {
		return nil
	}
	slices.Reverse(inputs)
	c.inputs = inputs
	return c
}

// isInterrupted reports whether an assistant message was cut off by a
// server shutdown or restart.
func isInterrupted(info opencode.Message) bool {
	if info.Role != opencode.Assistant || info.Error == nil || info.Error.Name != "MessageAbortedError" {
		return false
	}
	msg, _ := info.Error.Data["message"].(string)
	return strings.HasPrefix(msg, interruptedPrefix)
}

// ensureHistory reads the conversation of a lazily started runner, before
// its first turn needs it.
func (r *runner) ensureHistory() error {
	if !r.lazy {
		return nil
	}
	msgs, err := r.m.store.ListMessages(r.m.ctx, r.id)
	if err != nil {
		return err
	}
	r.lazy = false
	r.firstSnap = firstSnapshot(msgs)
	for _, mp := range msgs {
		r.remember(mp)
	}
	return nil
}

// interruptedByServer reports whether the last message is an assistant
// message a server shutdown or restart cut off.
func interruptedByServer(msgs []opencode.MessageWithParts) bool {
	if len(msgs) == 0 {
		return false
	}
	return isInterrupted(msgs[len(msgs)-1].Info)
}

// unanswered reports whether the last message is a user message whose turn
// never got an assistant message: a crash between its delivery and the first
// model call.
func (m *Manager) unanswered(msgs []opencode.MessageWithParts) (bool, error) {
	if len(msgs) == 0 {
		return false, nil
	}
	last := msgs[len(msgs)-1].Info
	if last.Role != opencode.User {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.StoreTimeout)
	defer cancel()
	in, err := m.store.InputStatus(ctx, last.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // a user message no input made (a replayed history)
	}
	if err != nil {
		return false, err
	}
	return in.State == opencode.InputDelivered && !in.NoReply && in.Answer == "", nil
}

// interruptedPrefix starts the abort message of turns the server cut off.
const interruptedPrefix = "Interrupted by server"

// interruptedStep is the step.failed error of a step that was cut off (an
// abort, a restart); opencode owns its text so the front doors recognise it.
var interruptedStep = opencode.InterruptedError()

// remember appends a stored message to the conversation sent to the model,
// as OpenCode's toModelMessages builds it: a user message's texts and the
// files a model reads as files (text files and directories reach it as the
// synthetic texts stored beside them); an assistant message's text,
// reasoning and tool calls, followed by the tool results. An assistant
// message that failed is left out, unless it was aborted with something
// to show (its partial text, its finished calls).
func (r *runner) remember(mp opencode.MessageWithParts) {
	if mp.Info.Role == opencode.Assistant && mp.Info.Agent == "plan" {
		r.usedPlan = true
	}
	if isCompaction(mp) {
		// The model's view starts over from the summary that follows.
		r.compactID, r.compactTranscript = mp.Info.ID, transcript(r.history)
		r.history = []provider.Message{{Role: "user", Content: compactionQuestion, Memo: &provider.Memo{}}}
		r.toolOutputs, r.media, r.foreign = nil, false, false
		return
	}
	if mp.Info.Role == opencode.User {
		r.compactID, r.compactTranscript = "", ""
		r.userTurns++
		if m, ok := userModelMessage(mp.Parts); ok {
			if mediaParts(m.Parts) > 0 {
				r.media = true
			}
			r.history = append(r.history, m)
		}
		return
	}
	if !sentBack(mp) {
		return
	}
	var parts []provider.Part
	var calls []provider.ToolCall
	var results []provider.Message
	var refs []toolRef
	var media []provider.Part
	texts := 0
	for _, p := range mp.Parts {
		switch {
		case p.Type == opencode.PartText && !p.Ignored:
			parts = append(parts, provider.Part{Type: provider.PartText, Text: p.Text, Metadata: p.Metadata})
			texts++
		case p.Type == opencode.PartReasoning:
			parts = append(parts, provider.Part{Type: provider.PartReasoning, Text: p.Text, Metadata: p.Metadata})
		case p.Type == opencode.PartTool && p.State != nil:
			if p.Tool == "todowrite" && p.State.Status == "completed" {
				r.todos = todosOf(p.State.Input)
			}
			input := p.State.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			calls = append(calls, provider.ToolCall{ID: p.CallID, Name: p.Tool, Arguments: input, Metadata: p.Metadata})
			res := provider.Message{Role: "tool", ToolCallID: p.CallID, ToolName: p.Tool}
			switch p.State.Status {
			case "completed":
				if p.State.Output != nil {
					res.Content = *p.State.Output
				}
				if p.State.Time != nil && p.State.Time.Compacted != nil {
					res.Content = prunedOutput
				} else {
					for _, a := range p.State.Attachments {
						if catalog.Modality(a.Mime) == "image" || a.Mime == "application/pdf" {
							media = append(media, provider.Part{Type: provider.PartFile, MediaType: a.Mime, Data: a.URL, Filename: a.Filename})
						}
					}
					// Its place in the history: after the message, then the results.
					refs = append(refs, toolRef{messageID: mp.Info.ID, partID: p.ID, tokens: len(res.Content) / 4,
						hist: len(r.history) + 1 + len(results), turn: r.userTurns})
				}
			case "error":
				res.Content, res.IsError = p.State.Error, true
				if out, ok := interruptedOutput(p.State.Metadata); ok {
					res.Content, res.IsError = out, false
				}
			default:
				// A call a crash or an abort cut off before it ended: the
				// model must still get a result for it.
				res.Content, res.IsError = interruptedToolText, true
			}
			results = append(results, res)
		}
	}
	if len(parts) == 0 && len(calls) == 0 {
		return
	}
	m := provider.Message{Role: "assistant", ToolCalls: calls, Memo: &provider.Memo{}}
	if texts != len(parts) || hasMetadata(parts, calls) {
		// Reasoning and metadata go back only to the model that wrote them.
		m.From = mp.Info.ProviderID + "/" + mp.Info.ModelID
		r.foreign = true
	}
	if texts == len(parts) && texts <= 1 {
		if texts == 1 {
			m.Content = parts[0].Text
			if parts[0].Metadata != nil {
				m.Parts = parts
			}
		}
	} else {
		m.Parts = parts
	}
	r.history = append(r.history, m)
	for _, res := range results {
		res.Memo = &provider.Memo{}
		r.history = append(r.history, res)
	}
	if len(media) > 0 {
		// Images and PDFs a call returned follow as a user message, as
		// OpenCode sends them to a chat-completions model (a tool result
		// holds only text there).
		r.history = append(r.history, provider.Message{Role: "user", Memo: &provider.Memo{},
			Parts: append([]provider.Part{{Type: provider.PartText, Text: toolMediaText}}, media...)})
		r.media = true
	}
	r.toolOutputs = append(r.toolOutputs, refs...)
}

// toolMediaText opens the user message of the files tool calls returned.
const toolMediaText = "Attached media from tool result:"

// hasMetadata reports whether any part or call carries provider metadata.
func hasMetadata(parts []provider.Part, calls []provider.ToolCall) bool {
	for _, p := range parts {
		if len(p.Metadata) > 0 {
			return true
		}
	}
	for _, c := range calls {
		if len(c.Metadata) > 0 {
			return true
		}
	}
	return false
}

// interruptedToolText is the result OpenCode gives the model for a tool
// call that never finished.
const interruptedToolText = "[Tool execution was interrupted]"

// interruptedOutput is what an aborted call had printed (OpenCode's
// metadata.output of a call marked interrupted): the model gets it as the
// call's result.
func interruptedOutput(md json.RawMessage) (string, bool) {
	if len(md) == 0 {
		return "", false
	}
	var m struct {
		Interrupted bool    `json:"interrupted"`
		Output      *string `json:"output"`
	}
	if json.Unmarshal(md, &m) != nil || !m.Interrupted || m.Output == nil {
		return "", false
	}
	return *m.Output, true
}

// sentBack reports whether an assistant message goes back to the model:
// not one that failed, unless it was aborted after producing something
// besides reasoning (OpenCode's rule).
func sentBack(mp opencode.MessageWithParts) bool {
	if mp.Info.Error == nil {
		return true
	}
	if mp.Info.Error.Name != "MessageAbortedError" {
		return false
	}
	for _, p := range mp.Parts {
		if p.Type != opencode.PartStepStart && p.Type != opencode.PartReasoning {
			return true
		}
	}
	return false
}

// userModelMessage is a stored user message as the model gets it; ok is
// false when nothing of it is for the model.
func userModelMessage(ps []opencode.Part) (provider.Message, bool) {
	var parts []provider.Part
	for _, p := range ps {
		switch p.Type {
		case opencode.PartText:
			if !p.Ignored && p.Text != "" {
				parts = append(parts, provider.Part{Type: provider.PartText, Text: p.Text})
			}
		case opencode.PartFile:
			// Text files and directories are in the synthetic texts.
			if p.Mime != "text/plain" && p.Mime != "application/x-directory" {
				parts = append(parts, provider.Part{Type: provider.PartFile, MediaType: p.Mime, Data: p.URL, Filename: p.Filename})
			}
		case opencode.PartSubtask:
			parts = append(parts, provider.Part{Type: provider.PartText, Text: subtaskUserText})
		}
	}
	switch {
	case len(parts) == 0:
		return provider.Message{}, false
	case len(parts) == 1 && parts[0].Type == provider.PartText:
		// The common case: one text, no slice kept.
		return provider.Message{Role: "user", Content: parts[0].Text, Memo: &provider.Memo{}}, true
	}
	return provider.Message{Role: "user", Parts: parts, Memo: &provider.Memo{}}, true
}

// subtaskUserText stands for a subtask part in the user message.
const subtaskUserText = "The following tool was executed by the user"

// mediaParts counts the files of parts (images, PDFs): a history without
// any needs no check against the model's modalities.
func mediaParts(parts []provider.Part) int {
	n := 0
	for _, p := range parts {
		if p.Type == provider.PartFile {
			n++
		}
	}
	return n
}

// recover closes assistant messages a crash left open: the turn is over, and
// it ended interrupted; so did its unfinished tool calls. It updates msgs'
// parts in place, and returns the last message it closed (nil: none).
func (r *runner) recover(msgs []opencode.MessageWithParts) *opencode.MessageWithParts {
	t := r.outbox()
	var closed *opencode.MessageWithParts
	now := r.m.now()
	for _, mp := range msgs {
		if mp.Info.Role != opencode.Assistant || mp.Info.Time.Completed != nil {
			continue
		}
		info := mp.Info
		info.Time.Completed = &now
		info.Error = &opencode.NamedError{Name: "MessageAbortedError", Data: map[string]any{"message": interruptedPrefix + " restart"}}
		for i, p := range mp.Parts {
			switch {
			case (p.Type == opencode.PartText || p.Type == opencode.PartReasoning) && p.Time != nil && p.Time.End == nil:
				p.Time.End = &now
				t.part(p, now)
			case p.Type == opencode.PartTool && openTool(p.State):
				// A call the crash cut off (a bash still running, a client
				// tool waiting for its client) ends as an abort ends it; its
				// process is gone with the one that ran it.
				p.State = abortedState(p.State, nil, now, "")
				t.part(p, now)
				r.toolFailed(t, info.ID, p.CallID, toolAborted, now)
			default:
				continue
			}
			mp.Parts[i] = p // the model's view is built from what is stored
		}
		t.message(info)
		t.durable(opencode.StepFailed{StepHeader: r.stepHeader(now, info.ID), Error: interruptedStep})
		closed = &opencode.MessageWithParts{Info: info, Parts: mp.Parts}
	}
	return closed
}

// openTool reports whether a tool part's call has not ended (pending or
// running).
func openTool(st *opencode.ToolState) bool {
	return st == nil || (st.Status != "completed" && st.Status != "error")
}
