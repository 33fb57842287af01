package opencode

import (
	"encoding/json"
	"strconv"
)

// Payload is the data of one event type, in OpenCode's shape (the event's
// `properties` on /event, its `data` on the v2 streams). EventType names
// the type, so an event built from a payload cannot carry another type's
// data, and the compiler checks every field of the schema.
type Payload interface {
	EventType() string
}

// EventVersion is the schema version of p's event type: 1, unless its
// payload says otherwise (an EventVersion method).
func EventVersion(p Payload) int {
	if v, ok := p.(interface{ EventVersion() int }); ok {
		return v.EventVersion()
	}
	return 1
}

// StepHeader opens every v2 event of an assistant message.
type StepHeader struct {
	Timestamp          int64  `json:"timestamp"`
	SessionID          string `json:"sessionID"`
	AssistantMessageID string `json:"assistantMessageID"`
}

// InputHeader opens every v2 and inbox event of a user message (an input).
type InputHeader struct {
	Timestamp int64  `json:"timestamp"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
}

// EventError is the {type, message} error of step.failed and tool.failed
// (OpenCode's SessionErrorUnknown; "context_overflow" too).
type EventError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// TurnInterrupted is the message of the step.failed error of a step whose
// model call was cut off (an abort, a restart): OpenCode's own wire text, so
// it must stay as it is.
const TurnInterrupted = "Provider turn interrupted"

// InterruptedError is the step.failed error of a step that was cut off, as
// OpenCode logs it. The core builds it here so the front doors can tell it
// apart with Interrupted instead of matching the text.
func InterruptedError() EventError {
	return EventError{Type: "unknown", Message: TurnInterrupted}
}

// Interrupted reports whether e is the error of a step that was cut off
// (InterruptedError), as opposed to one the model or a tool failed.
func (e EventError) Interrupted() bool { return e.Message == TurnInterrupted }

// The durable v2 events and the inbox events of our extension.

// PromptAdmitted is session.next.prompt.admitted.
type PromptAdmitted struct {
	InputHeader
	Prompt   Prompt   `json:"prompt"`
	Delivery Delivery `json:"delivery"`
}

// Prompted is session.next.prompted.
type Prompted struct {
	InputHeader
	Prompt   Prompt   `json:"prompt"`
	Delivery Delivery `json:"delivery"`
}

// SessionMoved is session.next.moved: the session works in another
// directory of its project from now on.
type SessionMoved struct {
	Timestamp    int64       `json:"timestamp"`
	SessionID    string      `json:"sessionID"`
	Location     MovedTarget `json:"location"`
	Subdirectory string      `json:"subdirectory"`
}

// MovedTarget is where a session moved.
type MovedTarget struct {
	Directory string `json:"directory"`
}

// AgentSwitched is session.next.agent.switched.
type AgentSwitched struct {
	InputHeader
	Agent string `json:"agent"`
}

// ModelSwitched is session.next.model.switched.
type ModelSwitched struct {
	InputHeader
	Model ModelRef `json:"model"`
}

// StepStarted is session.next.step.started.
type StepStarted struct {
	StepHeader
	Agent    string   `json:"agent"`
	Model    ModelRef `json:"model"`
	Snapshot string   `json:"snapshot,omitempty"`
}

// StepEnded is session.next.step.ended (version 2).
type StepEnded struct {
	StepHeader
	Finish string  `json:"finish"`
	Cost   float64 `json:"cost"`
	Tokens Tokens  `json:"tokens"`
	// StepSnapshot is set when the step's end was tracked.
	*StepSnapshot
}

// StepSnapshot is the snapshot a step ended at and the files it changed
// since the step's start (null when the start was not tracked).
type StepSnapshot struct {
	Snapshot string   `json:"snapshot"`
	Files    []string `json:"files"`
}

// StepFailed is session.next.step.failed.
type StepFailed struct {
	StepHeader
	Error EventError `json:"error"`
}

// TextStarted is session.next.text.started.
type TextStarted struct {
	StepHeader
	TextID string `json:"textID"`
}

// TextDelta is session.next.text.delta (live only).
type TextDelta struct {
	StepHeader
	TextID string `json:"textID"`
	Delta  string `json:"delta"`
}

// TextEnded is session.next.text.ended.
type TextEnded struct {
	StepHeader
	TextID string `json:"textID"`
	Text   string `json:"text"`
}

// ReasoningStarted is session.next.reasoning.started.
type ReasoningStarted struct {
	StepHeader
	ReasoningID string `json:"reasoningID"`
}

// ReasoningDelta is session.next.reasoning.delta (live only).
type ReasoningDelta struct {
	StepHeader
	ReasoningID string `json:"reasoningID"`
	Delta       string `json:"delta"`
}

// ReasoningEnded is session.next.reasoning.ended.
type ReasoningEnded struct {
	StepHeader
	ReasoningID string `json:"reasoningID"`
	Text        string `json:"text"`
}

// ToolInputStarted is session.next.tool.input.started.
type ToolInputStarted struct {
	StepHeader
	CallID string `json:"callID"`
	Name   string `json:"name"`
}

// ToolInputDelta is session.next.tool.input.delta (live only).
type ToolInputDelta struct {
	StepHeader
	CallID string `json:"callID"`
	Delta  string `json:"delta"`
}

// ToolInputEnded is session.next.tool.input.ended: the arguments as the
// model sent them.
type ToolInputEnded struct {
	StepHeader
	CallID string `json:"callID"`
	Text   string `json:"text"`
}

// ToolCalled is session.next.tool.called.
type ToolCalled struct {
	StepHeader
	CallID   string           `json:"callID"`
	Tool     string           `json:"tool"`
	Input    json.RawMessage  `json:"input"`
	Provider ToolProviderInfo `json:"provider"`
}

// ToolSuccess is session.next.tool.success.
type ToolSuccess struct {
	StepHeader
	CallID      string           `json:"callID"`
	Structured  json.RawMessage  `json:"structured"`
	Content     []ToolContent    `json:"content"`
	OutputPaths []string         `json:"outputPaths"`
	Provider    ToolProviderInfo `json:"provider"`
}

// ToolFailed is session.next.tool.failed.
type ToolFailed struct {
	StepHeader
	CallID   string           `json:"callID"`
	Error    EventError       `json:"error"`
	Result   ToolResult       `json:"result"`
	Provider ToolProviderInfo `json:"provider"`
}

// ToolResult is a failed call's result: {type: "error", value}.
type ToolResult struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// InboxEnqueued is session.inbox.enqueued.
type InboxEnqueued struct {
	InputHeader
	Delivery Delivery `json:"delivery"`
	Prompt   Prompt   `json:"prompt"`
}

// InboxDelivered is session.inbox.delivered.
type InboxDelivered struct {
	InputHeader
	Delivery Delivery `json:"delivery"`
}

// InboxCancelled is session.inbox.cancelled.
type InboxCancelled struct {
	InputHeader
	Delivery Delivery `json:"delivery"`
	Reason   string   `json:"reason"`
}

// InboxDeliveryChanged is session.inbox.delivery.changed.
type InboxDeliveryChanged struct {
	InputHeader
	Delivery Delivery `json:"delivery"`
}

// InboxReplaced is session.inbox.replaced.
type InboxReplaced struct {
	InputHeader
	Delivery Delivery `json:"delivery"`
	Prompt   Prompt   `json:"prompt"`
}

// The v1 bus events.

// SessionCreated is session.created.
type SessionCreated struct {
	SessionID string  `json:"sessionID"`
	Info      Session `json:"info"`
}

// SessionUpdated is session.updated.
type SessionUpdated struct {
	SessionID string  `json:"sessionID"`
	Info      Session `json:"info"`
}

// SessionDeleted is session.deleted.
type SessionDeleted struct {
	SessionID string  `json:"sessionID"`
	Info      Session `json:"info"`
}

// SessionStatus is session.status.
type SessionStatus struct {
	SessionID string            `json:"sessionID"`
	Status    SessionStatusInfo `json:"status"`
}

// SessionStatusInfo is a session's status (OpenCode's SessionStatus.Info):
// {type: "idle"}, {type: "busy"}, or {type: "retry", attempt, message, next}.
type SessionStatusInfo struct {
	Type string `json:"type"`
	*SessionRetry
}

// SessionRetry is a retry status: which attempt comes next, why, and when
// (epoch ms).
type SessionRetry struct {
	Attempt int    `json:"attempt"`
	Message string `json:"message"`
	Next    int64  `json:"next"`
}

// SessionIdle is session.idle.
type SessionIdle struct {
	SessionID string `json:"sessionID"`
}

// SessionCompacted is session.compacted.
type SessionCompacted struct {
	SessionID string `json:"sessionID"`
}

// SessionError is session.error.
type SessionError struct {
	SessionID string      `json:"sessionID"`
	Error     *NamedError `json:"error"`
}

// SessionDiff is session.diff: the session's changes so far.
type SessionDiff struct {
	SessionID string     `json:"sessionID"`
	Diff      []FileDiff `json:"diff"`
}

// CommandExecuted is command.executed.
type CommandExecuted struct {
	Name      string `json:"name"`
	SessionID string `json:"sessionID"`
	Arguments string `json:"arguments"`
	MessageID string `json:"messageID"`
}

// MessageUpdated is message.updated.
type MessageUpdated struct {
	SessionID string  `json:"sessionID"`
	Info      Message `json:"info"`
}

// MessageRemoved is message.removed.
type MessageRemoved struct {
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
}

// PartUpdated is message.part.updated.
type PartUpdated struct {
	SessionID string `json:"sessionID"`
	Part      Part   `json:"part"`
	Time      int64  `json:"time"`
}

// MarshalJSON writes the part into the event's buffer once (see
// Part.AppendJSON), as encoding/json would write the struct.
func (e PartUpdated) MarshalJSON() ([]byte, error) {
	sid, err := json.Marshal(e.SessionID)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(sid)+len(e.Part.Text)+len(e.Part.Text)/16+512)
	b = append(append(append(b, `{"sessionID":`...), sid...), `,"part":`...)
	if b, err = e.Part.AppendJSON(b); err != nil {
		return nil, err
	}
	return append(strconv.AppendInt(append(b, `,"time":`...), e.Time, 10), '}'), nil
}

// PartDelta is message.part.delta.
type PartDelta struct {
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	PartID    string `json:"partID"`
	Field     string `json:"field"`
	Delta     string `json:"delta"`
}

// PartRemoved is message.part.removed.
type PartRemoved struct {
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
	PartID    string `json:"partID"`
}

// TodoUpdated is todo.updated.
type TodoUpdated struct {
	SessionID string `json:"sessionID"`
	Todos     []Todo `json:"todos"`
}

// PermissionReplied is permission.replied.
type PermissionReplied struct {
	SessionID string `json:"sessionID"`
	RequestID string `json:"requestID"`
	Reply     string `json:"reply"`
}

// QuestionReplied is question.replied.
type QuestionReplied struct {
	SessionID string     `json:"sessionID"`
	RequestID string     `json:"requestID"`
	Answers   [][]string `json:"answers"`
}

// QuestionRejected is question.rejected.
type QuestionRejected struct {
	SessionID string `json:"sessionID"`
	RequestID string `json:"requestID"`
}

// The event type of each payload. permission.asked carries a
// PermissionRequest and question.asked a QuestionRequest.

func (PromptAdmitted) EventType() string       { return EvPromptAdmitted }
func (Prompted) EventType() string             { return EvPrompted }
func (AgentSwitched) EventType() string        { return EvAgentSwitched }
func (SessionMoved) EventType() string         { return EvSessionMoved }
func (ModelSwitched) EventType() string        { return EvModelSwitched }
func (StepStarted) EventType() string          { return EvStepStarted }
func (StepEnded) EventType() string            { return EvStepEnded }
func (StepFailed) EventType() string           { return EvStepFailed }
func (TextStarted) EventType() string          { return EvTextStarted }
func (TextDelta) EventType() string            { return EvTextDelta }
func (TextEnded) EventType() string            { return EvTextEnded }
func (ReasoningStarted) EventType() string     { return EvReasoningStarted }
func (ReasoningDelta) EventType() string       { return EvReasoningDelta }
func (ReasoningEnded) EventType() string       { return EvReasoningEnded }
func (ToolInputStarted) EventType() string     { return EvToolInputStarted }
func (ToolInputDelta) EventType() string       { return EvToolInputDelta }
func (ToolInputEnded) EventType() string       { return EvToolInputEnded }
func (ToolCalled) EventType() string           { return EvToolCalled }
func (ToolSuccess) EventType() string          { return EvToolSuccess }
func (ToolFailed) EventType() string           { return EvToolFailed }
func (InboxEnqueued) EventType() string        { return EvInboxEnqueued }
func (InboxDelivered) EventType() string       { return EvInboxDelivered }
func (InboxCancelled) EventType() string       { return EvInboxCancelled }
func (InboxDeliveryChanged) EventType() string { return EvInboxDeliveryChanged }
func (InboxReplaced) EventType() string        { return EvInboxReplaced }
func (SessionCreated) EventType() string       { return EvSessionCreated }
func (SessionUpdated) EventType() string       { return EvSessionUpdated }
func (SessionDeleted) EventType() string       { return EvSessionDeleted }
func (SessionStatus) EventType() string        { return EvSessionStatus }
func (SessionIdle) EventType() string          { return EvSessionIdle }
func (SessionCompacted) EventType() string     { return EvSessionCompacted }
func (SessionError) EventType() string         { return EvSessionError }
func (SessionDiff) EventType() string          { return EvSessionDiff }
func (CommandExecuted) EventType() string      { return EvCommandExecuted }
func (MessageUpdated) EventType() string       { return EvMessageUpdated }
func (MessageRemoved) EventType() string       { return EvMessageRemoved }
func (PartUpdated) EventType() string          { return EvPartUpdated }
func (PartDelta) EventType() string            { return EvPartDelta }
func (PartRemoved) EventType() string          { return EvPartRemoved }
func (TodoUpdated) EventType() string          { return EvTodoUpdated }
func (PermissionRequest) EventType() string    { return EvPermissionAsked }
func (PermissionReplied) EventType() string    { return EvPermissionReply }
func (QuestionRequest) EventType() string      { return EvQuestionAsked }
func (QuestionReplied) EventType() string      { return EvQuestionReplied }
func (QuestionRejected) EventType() string     { return EvQuestionRejected }

// EventVersion: step.ended's schema is version 2.
func (StepEnded) EventVersion() int { return 2 }
