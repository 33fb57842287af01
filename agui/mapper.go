package agui

import (
	"encoding/json"
	"maps"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// event is one AG-UI event in its JSON form ({"type": ..., ...}).
type event map[string]any

// wanted is the events a run's stream looks at.
func wanted(e *opencode.Event) bool {
	if e.Durable || e.IsV2() {
		return true
	}
	switch e.Type {
	case opencode.EvTodoUpdated, opencode.EvPermissionAsked, opencode.EvPermissionReply, opencode.EvQuestionAsked,
		opencode.EvQuestionReplied, opencode.EvQuestionRejected, opencode.EvSessionStatus, opencode.EvPartUpdated,
		opencode.EvSessionError:
		return true
	}
	return false
}

// ending is how a run's stream ends.
type ending int

const (
	goOn ending = iota
	endSuccess
	endInterrupt
	endPending   // only frontend tool calls are open: the client runs them
	endCancelled // the turn was aborted
	endError
	// idleSeen: session.status idle. A turn's end says idle even when the
	// next queued input starts a turn in the same commit (its prompted
	// may come first), so the run asks the core whether the session is
	// still busy before it ends (Handler.follow).
	idleSeen
)

// streamed is one text, reasoning or tool-argument stream: what was sent
// of it. A stream first seen in the log (the run attached while it ran)
// sends nothing until it ends, then the whole text: its earlier deltas
// were never seen, so sending the later ones would garble it.
type streamed struct {
	msgID     string // the AG-UI messageId: the assistant's, or the reasoning part's
	stepID    string // the step (assistant message) it belongs to
	reasoning bool
	sent      strings.Builder
	catchUp   bool
}

type callState struct {
	id     string
	name   string
	msgID  string
	args   streamed
	ended  bool // TOOL_CALL_END sent
	client bool
}

// mapper turns a session's events into one run's AG-UI events.
type mapper struct {
	emit func(event)
	// targets are the run's user messages: the run follows the turn(s)
	// that deliver them. Empty: the run follows the turn running now.
	targets map[string]bool
	// waiting: no target delivered yet (an earlier turn still runs).
	waiting bool
	// subscribedFirst: the run subscribed before its turn began (it
	// admitted the turn's messages), so every delta of a stream the log
	// shows started is in the subscription: it streams, no catch-up.
	subscribedFirst bool
	// clientOpen: a frontend call was made live; the run asks the core
	// whether the turn now waits on the client alone.
	clientOpen  bool
	clientTools map[string]bool

	lastSeq  int64
	streams  map[string]*streamed // texts and reasoning, by part ID
	calls    map[string]*callState
	callPart map[string]string // call ID -> tool part ID
	// lookupParts reads the call -> tool part IDs of the stored session.
	lookupParts func() map[string]string
	steps       []string // open steps, by assistant message ID
	failure     *opencode.EventError
	aborted     bool
	interrupt   []event
	// handedOver are the frontend calls the core said the turn waits on
	// alone (WaitingClientCalls): RUN_FINISHED's pendingToolCallIds.
	handedOver []string
}

func newMapper(emit func(event)) *mapper {
	return &mapper{emit: emit, targets: map[string]bool{}, clientTools: map[string]bool{},
		streams: map[string]*streamed{}, calls: map[string]*callState{},
		callPart: map[string]string{}}
}

func (mp *mapper) openStep(msgID string) {
	for _, s := range mp.steps {
		if s == msgID {
			return
		}
	}
	mp.steps = append(mp.steps, msgID)
	mp.emit(event{"type": "STEP_STARTED", "stepName": msgID})
}

func (mp *mapper) closeStep(msgID string) {
	for i, s := range mp.steps {
		if s == msgID {
			mp.closeStreams(msgID)
			mp.steps = append(mp.steps[:i], mp.steps[i+1:]...)
			mp.emit(event{"type": "STEP_FINISHED", "stepName": msgID})
			return
		}
	}
}

// closeStreams ends what is still open of a step's texts, reasoning and
// calls ("" : of every step): a run never finishes with one open.
func (mp *mapper) closeStreams(msgID string) {
	for id, st := range mp.streams {
		if msgID == "" || st.stepID == msgID {
			mp.endStream(id, st, "")
		}
	}
	for _, c := range mp.calls {
		if !c.ended && (msgID == "" || c.msgID == msgID) {
			c.ended = true
			mp.emit(event{"type": "TOOL_CALL_END", "toolCallId": c.id})
		}
	}
}

// finish closes every open stream and step.
func (mp *mapper) finish() {
	mp.closeStreams("")
	for len(mp.steps) > 0 {
		mp.closeStep(mp.steps[len(mp.steps)-1])
	}
}

func data[T any](e *opencode.Event) (T, bool) {
	var v T
	return v, json.Unmarshal(e.Data, &v) == nil
}

// add maps one event; replay is true for the log read before the run
// went live. It says whether the run ends here.
func (mp *mapper) add(e *opencode.Event, replay bool) ending {
	if e.Durable {
		if e.Seq <= mp.lastSeq {
			return goOn // read from the log already
		}
		mp.lastSeq = e.Seq
	}
	switch e.Type {
	case opencode.EvPrompted:
		p, _ := data[opencode.Prompted](e)
		if mp.waiting {
			if mp.targets[p.MessageID] {
				mp.waiting = false
			}
			return goOn
		}
		if mp.targets[p.MessageID] {
			return goOn // the next of the run's own messages
		}
		if p.Delivery == opencode.Queue {
			return endSuccess // the next turn is someone else's
		}
		// A steer joined the turn: its user message, where it was delivered.
		mp.emit(event{"type": "TEXT_MESSAGE_START", "messageId": p.MessageID, "role": "user"})
		if t := p.Prompt.Text; t != "" {
			mp.emit(event{"type": "TEXT_MESSAGE_CONTENT", "messageId": p.MessageID, "delta": t})
		}
		mp.emit(event{"type": "TEXT_MESSAGE_END", "messageId": p.MessageID})
		return goOn
	case opencode.EvInboxCancelled:
		p, _ := data[opencode.InboxCancelled](e)
		if mp.waiting && mp.targets[p.MessageID] {
			delete(mp.targets, p.MessageID)
			if len(mp.targets) == 0 {
				mp.failure = &opencode.EventError{Type: "MESSAGE_REVOKED", Message: "the run's message was revoked before it was delivered"}
				return endError
			}
		}
		return goOn
	}
	if mp.waiting {
		return goOn
	}
	switch e.Type {
	case opencode.EvSessionError:
		p, _ := data[opencode.SessionError](e)
		if p.Error != nil && p.Error.Name == "MessageAbortedError" {
			mp.aborted = true
		}
	case opencode.EvStepStarted:
		p, _ := data[opencode.StepStarted](e)
		mp.failure, mp.aborted = nil, false
		mp.openStep(p.AssistantMessageID)
	case opencode.EvStepEnded:
		p, _ := data[opencode.StepEnded](e)
		mp.closeStep(p.AssistantMessageID)
	case opencode.EvStepFailed:
		p, _ := data[opencode.StepFailed](e)
		mp.closeStep(p.AssistantMessageID)
		f := p.Error
		mp.failure = &f
	case opencode.EvTextStarted:
		p, _ := data[opencode.TextStarted](e)
		mp.startStream(p.TextID, p.AssistantMessageID, false, replay)
	case opencode.EvTextDelta:
		p, _ := data[opencode.TextDelta](e)
		mp.streamDelta(p.TextID, p.Delta)
	case opencode.EvTextEnded:
		p, _ := data[opencode.TextEnded](e)
		mp.endStream(p.TextID, mp.startStream(p.TextID, p.AssistantMessageID, false, replay), p.Text)
	case opencode.EvReasoningStarted:
		p, _ := data[opencode.ReasoningStarted](e)
		mp.startStream(p.ReasoningID, p.AssistantMessageID, true, replay)
	case opencode.EvReasoningDelta:
		p, _ := data[opencode.ReasoningDelta](e)
		mp.streamDelta(p.ReasoningID, p.Delta)
	case opencode.EvReasoningEnded:
		p, _ := data[opencode.ReasoningEnded](e)
		mp.endStream(p.ReasoningID, mp.startStream(p.ReasoningID, p.AssistantMessageID, true, replay), p.Text)
	case opencode.EvToolInputStarted:
		p, _ := data[opencode.ToolInputStarted](e)
		mp.openStep(p.AssistantMessageID)
		mp.startCall(p.CallID, p.Name, p.AssistantMessageID, replay)
	case opencode.EvToolInputDelta:
		p, _ := data[opencode.ToolInputDelta](e)
		if c := mp.calls[p.CallID]; c != nil && !c.args.catchUp && !c.ended {
			c.args.sent.WriteString(p.Delta)
			mp.emit(event{"type": "TOOL_CALL_ARGS", "toolCallId": p.CallID, "delta": p.Delta})
		}
	case opencode.EvToolInputEnded:
		p, _ := data[opencode.ToolInputEnded](e)
		mp.openStep(p.AssistantMessageID)
		c := mp.calls[p.CallID]
		if c == nil {
			return goOn // its input.started is before the run (a resumed call)
		}
		mp.endArgs(p.CallID, c, p.Text)
	case opencode.EvToolCalled:
		p, _ := data[opencode.ToolCalled](e)
		c := mp.calls[p.CallID]
		if c == nil {
			mp.openStep(p.AssistantMessageID)
			c = mp.startCall(p.CallID, p.Tool, p.AssistantMessageID, replay)
		}
		mp.endArgs(p.CallID, c, string(p.Input))
		if c.client && !replay {
			// The run hands the call over once the turn waits on the
			// client alone (the core says when: WaitingClientCalls).
			mp.clientOpen = true
		}
	case opencode.EvToolSuccess, opencode.EvToolFailed:
		var callID, content string
		var failed bool
		if e.Type == opencode.EvToolSuccess {
			p, _ := data[opencode.ToolSuccess](e)
			callID = p.CallID
			for _, c := range p.Content {
				content += c.Text
			}
		} else {
			p, _ := data[opencode.ToolFailed](e)
			callID, content, failed = p.CallID, p.Error.Message, true
		}
		partID := mp.callPart[callID]
		if partID == "" && mp.lookupParts != nil {
			// A call the run did not see live (read from the log): its part
			// is stored by now.
			maps.Copy(mp.callPart, mp.lookupParts())
			partID = mp.callPart[callID]
		}
		if partID == "" {
			partID = callID
		}
		ev := event{"type": "TOOL_CALL_RESULT", "messageId": partID, "toolCallId": callID, "content": content, "role": "tool"}
		if failed {
			ev["content"] = "Error: " + content
		}
		mp.emit(ev)
	case opencode.EvPartUpdated:
		p, _ := data[opencode.PartUpdated](e)
		if p.Part.Type == opencode.PartTool && p.Part.CallID != "" {
			mp.callPart[p.Part.CallID] = p.Part.ID
		}
	case opencode.EvTodoUpdated:
		p, _ := data[opencode.TodoUpdated](e)
		todos := p.Todos
		if todos == nil {
			todos = []opencode.Todo{}
		}
		mp.emit(event{"type": "STATE_SNAPSHOT", "snapshot": map[string]any{"todos": todos, "status": "busy"}})
	case opencode.EvPermissionAsked:
		if replay {
			return goOn
		}
		var req opencode.PermissionRequest
		if json.Unmarshal(e.Data, &req) == nil {
			mp.interrupt = []event{permissionInterrupt(req)}
			return endInterrupt
		}
	case opencode.EvQuestionAsked:
		if replay {
			return goOn
		}
		var req opencode.QuestionRequest
		if json.Unmarshal(e.Data, &req) == nil {
			mp.interrupt = []event{questionInterrupt(req)}
			return endInterrupt
		}
	case opencode.EvSessionStatus:
		if replay {
			return goOn
		}
		p, _ := data[opencode.SessionStatus](e)
		if p.Status.Type == "idle" {
			return idleSeen
		}
	}
	return goOn
}

// turnEnded is how the run ends when its turn is over.
func (mp *mapper) turnEnded() ending {
	// An abort fails the running step as "interrupted" (a restart's too)
	// and says MessageAbortedError live.
	if mp.aborted || (mp.failure != nil && mp.failure.Interrupted()) {
		return endCancelled
	}
	if mp.failure != nil {
		return endError
	}
	return endSuccess
}

// startStream opens a text (its AG-UI message is the assistant's) or a
// reasoning part (its own) in its step, once.
func (mp *mapper) startStream(partID, stepID string, reasoning, replay bool) *streamed {
	if st := mp.streams[partID]; st != nil {
		return st
	}
	mp.openStep(stepID)
	st := &streamed{msgID: stepID, stepID: stepID, reasoning: reasoning, catchUp: replay && !mp.subscribedFirst}
	mp.streams[partID] = st
	if reasoning {
		st.msgID = partID
		mp.emit(event{"type": "REASONING_START", "messageId": partID})
		mp.emit(event{"type": "REASONING_MESSAGE_START", "messageId": partID, "role": "reasoning"})
	} else {
		mp.emit(event{"type": "TEXT_MESSAGE_START", "messageId": stepID, "role": "assistant"})
	}
	return st
}

func (st *streamed) content() string {
	if st.reasoning {
		return "REASONING_MESSAGE_CONTENT"
	}
	return "TEXT_MESSAGE_CONTENT"
}

func (mp *mapper) streamDelta(partID, delta string) {
	if st := mp.streams[partID]; st != nil && !st.catchUp && delta != "" {
		st.sent.WriteString(delta)
		mp.emit(event{"type": st.content(), "messageId": st.msgID, "delta": delta})
	}
}

// endStream sends what is left of text (all of it when the run attached
// after the stream began) and ends the stream.
func (mp *mapper) endStream(partID string, st *streamed, text string) {
	if rest, ok := strings.CutPrefix(text, st.sent.String()); ok && rest != "" {
		mp.emit(event{"type": st.content(), "messageId": st.msgID, "delta": rest})
	}
	if st.reasoning {
		mp.emit(event{"type": "REASONING_MESSAGE_END", "messageId": st.msgID})
		mp.emit(event{"type": "REASONING_END", "messageId": st.msgID})
	} else {
		mp.emit(event{"type": "TEXT_MESSAGE_END", "messageId": st.msgID})
	}
	delete(mp.streams, partID)
}

func (mp *mapper) startCall(callID, name, msgID string, replay bool) *callState {
	if c := mp.calls[callID]; c != nil {
		return c
	}
	mp.openStep(msgID)
	c := &callState{id: callID, name: name, msgID: msgID, client: mp.clientTools[name]}
	c.args.catchUp = replay && !mp.subscribedFirst
	mp.calls[callID] = c
	mp.emit(event{"type": "TOOL_CALL_START", "toolCallId": callID, "toolCallName": name, "parentMessageId": msgID})
	return c
}

// endArgs sends what is left of a call's arguments and ends it.
func (mp *mapper) endArgs(callID string, c *callState, text string) {
	if c.ended {
		return
	}
	if rest, ok := strings.CutPrefix(text, c.args.sent.String()); ok && rest != "" {
		c.args.sent.WriteString(rest)
		mp.emit(event{"type": "TOOL_CALL_ARGS", "toolCallId": callID, "delta": rest})
	}
	c.ended = true
	mp.emit(event{"type": "TOOL_CALL_END", "toolCallId": callID})
}

// permissionInterrupt is a permission ask as an AG-UI interrupt: the next
// run's resume entry {interruptId, status, payload: {reply}} answers it.
func permissionInterrupt(req opencode.PermissionRequest) event {
	msg := req.Permission
	if len(req.Patterns) > 0 {
		msg += ": " + strings.Join(req.Patterns, ", ")
	}
	ev := event{"id": req.ID, "reason": "permission", "message": msg,
		"responseSchema": map[string]any{"type": "object", "properties": map[string]any{
			"reply": map[string]any{"type": "string", "enum": []string{"once", "always", "reject"}},
		}, "required": []string{"reply"}},
		"metadata": map[string]any{"permission": req.Permission, "patterns": req.Patterns}}
	if req.Tool != nil {
		ev["toolCallId"] = req.Tool.CallID
	}
	return ev
}

// questionInterrupt is a question the model asks as an interrupt: the
// resume payload {answers: [[label, ...], ...]} answers it, one list per
// question.
func questionInterrupt(req opencode.QuestionRequest) event {
	var texts []string
	for _, q := range req.Questions {
		texts = append(texts, q.Question)
	}
	ev := event{"id": req.ID, "reason": "question", "message": strings.Join(texts, "\n"),
		"responseSchema": map[string]any{"type": "object", "properties": map[string]any{
			"answers": map[string]any{"type": "array", "items": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
		}, "required": []string{"answers"}},
		"metadata": map[string]any{"questions": req.Questions}}
	if req.Tool != nil {
		ev["toolCallId"] = req.Tool.CallID
	}
	return ev
}
