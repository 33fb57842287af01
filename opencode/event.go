package opencode

import (
	"encoding/json"
	"strings"
	"sync"
)

// Event is one bus event. Durable events belong to a session's log and carry
// the sequence number the store assigned when it committed them; live-only
// events (text deltas, status) have Seq 0.
type Event struct {
	ID        string // evt_ ID, minted once by lifecycle
	Type      string
	SessionID string
	Directory string
	Seq       int64
	Version   int
	Durable   bool
	// Pos is the bus position, set once by eventbus.Publish.
	Pos int64
	// Data is the event's payload JSON: `properties` on /event, `data` on the
	// v2 streams.
	Data json.RawMessage

	frames [frameKinds]frame
}

// IsV2 reports whether the event belongs to the v2 (session.next) stream or
// our inbox extension: its order is tied to the durable log, and on /event
// its timestamp is an ISO string.
func (e *Event) IsV2() bool {
	return strings.HasPrefix(e.Type, "session.next.") || strings.HasPrefix(e.Type, "session.inbox.")
}

type frame struct {
	once sync.Once
	b    []byte
}

// FrameKind names one of the SSE encodings of an event.
type FrameKind int

// The SSE encodings; each is computed at most once per event and shared by
// every subscriber.
const (
	FrameV1 FrameKind = iota
	FrameGlobal
	FrameDurable
	FrameNative
	frameKinds
)

// Frame returns the encoding of kind, computing it with enc on first use.
func (e *Event) Frame(kind FrameKind, enc func(*Event) []byte) []byte {
	f := &e.frames[kind]
	f.once.Do(func() { f.b = enc(e) })
	return f.b
}

// Durable event types (the v2 log) and the inbox events of our extension.
const (
	EvPromptAdmitted   = "session.next.prompt.admitted"
	EvPrompted         = "session.next.prompted"
	EvAgentSwitched    = "session.next.agent.switched"
	EvModelSwitched    = "session.next.model.switched"
	EvStepStarted      = "session.next.step.started"
	EvStepEnded        = "session.next.step.ended"
	EvStepFailed       = "session.next.step.failed"
	EvTextStarted      = "session.next.text.started"
	EvTextDelta        = "session.next.text.delta"
	EvTextEnded        = "session.next.text.ended"
	EvReasoningStarted = "session.next.reasoning.started"
	EvReasoningDelta   = "session.next.reasoning.delta"
	EvReasoningEnded   = "session.next.reasoning.ended"
	EvToolInputStarted = "session.next.tool.input.started"
	EvToolInputDelta   = "session.next.tool.input.delta"
	EvToolInputEnded   = "session.next.tool.input.ended"
	EvToolCalled       = "session.next.tool.called"
	EvToolSuccess      = "session.next.tool.success"
	EvToolFailed       = "session.next.tool.failed"
	EvSessionMoved     = "session.next.moved"

	EvInboxEnqueued        = "session.inbox.enqueued"
	EvInboxDelivered       = "session.inbox.delivered"
	EvInboxCancelled       = "session.inbox.cancelled"
	EvInboxDeliveryChanged = "session.inbox.delivery.changed"
	EvInboxReplaced        = "session.inbox.replaced"
)

// v1 bus event types.
const (
	EvSessionCreated   = "session.created"
	EvSessionUpdated   = "session.updated"
	EvSessionDeleted   = "session.deleted"
	EvSessionStatus    = "session.status"
	EvSessionIdle      = "session.idle"
	EvSessionError     = "session.error"
	EvSessionDiff      = "session.diff"
	EvSessionCompacted = "session.compacted"
	EvCommandExecuted  = "command.executed"
	EvMessageUpdated   = "message.updated"
	EvMessageRemoved   = "message.removed"
	EvPartUpdated      = "message.part.updated"
	EvTodoUpdated      = "todo.updated"
	EvQuestionAsked    = "question.asked"
	EvQuestionReplied  = "question.replied"
	EvQuestionRejected = "question.rejected"
	EvPartDelta        = "message.part.delta"
	EvPartRemoved      = "message.part.removed"
	EvServerConnected  = "server.connected"
	EvHeartbeat        = "server.heartbeat"
	EvPermissionAsked  = "permission.asked"
	EvPermissionReply  = "permission.replied"
)
