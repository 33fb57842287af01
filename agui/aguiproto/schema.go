package aguiproto

import "google.golang.org/protobuf/encoding/protowire"

// The wire schema of proto/ag_ui/*.proto as tables Encode walks: each
// message's fields in field-number order (the order proto.Marshal and
// @ag-ui/proto write them in), by JSON name. TestTablesMatchProto holds these
// tables to the generated descriptors field for field, and those are held to
// @ag-ui/proto 1.0.0's schema (testdata/wire-schema.json).

type kind uint8

const (
	kString kind = iota + 1
	kBool
	kInt64
	kEnum    // only behind an enc hook: JSON names the value, not its number
	kMessage // one of the tables below
	kValue   // google.protobuf.Value: any JSON value
	kStruct  // google.protobuf.Struct: a JSON object
)

type field struct {
	num  protowire.Number
	name string // the JSON name (message_id → messageId)
	kind kind
	list bool // repeated
	opt  bool // explicit presence (proto3 optional): written when set, even to its zero
	msg  *message
	// enc writes a field 1.0.0 reshapes the JSON for (outcome, content,
	// patch op...) from the whole object o at path; nil is the plain
	// mapping of appendField.
	enc encFunc
}

type message struct {
	name   string // as in the .proto (nested: ToolCall.Function)
	fields []field
	// check refuses an object before its fields are written (a content part
	// or source of no known type).
	check func(o map[string]any, path string) error
}

func str(n protowire.Number, name string) field { return field{num: n, name: name, kind: kString} }
func optStr(n protowire.Number, name string) field {
	return field{num: n, name: name, kind: kString, opt: true}
}
func optInt(n protowire.Number, name string) field {
	return field{num: n, name: name, kind: kInt64, opt: true}
}
func value(n protowire.Number, name string) field { return field{num: n, name: name, kind: kValue} }
func optValue(n protowire.Number, name string) field {
	return field{num: n, name: name, kind: kValue, opt: true}
}
func object(n protowire.Number, name string) field { return field{num: n, name: name, kind: kStruct} }
func sub(n protowire.Number, name string, m *message) field {
	return field{num: n, name: name, kind: kMessage, msg: m}
}
func list(n protowire.Number, name string, m *message) field {
	return field{num: n, name: name, kind: kMessage, list: true, msg: m}
}
func strList(n protowire.Number, name string) field {
	return field{num: n, name: name, kind: kString, list: true}
}

// hooked gives a field its enc.
func hooked(f field, enc encFunc) field {
	f.enc = enc
	return f
}

// EventType, by the JSON type.
var eventTypes = map[string]uint64{
	"TEXT_MESSAGE_START": 0, "TEXT_MESSAGE_CONTENT": 1, "TEXT_MESSAGE_END": 2,
	"TOOL_CALL_START": 3, "TOOL_CALL_ARGS": 4, "TOOL_CALL_END": 5,
	"STATE_SNAPSHOT": 6, "STATE_DELTA": 7, "MESSAGES_SNAPSHOT": 8,
	"RAW": 9, "CUSTOM": 10, "RUN_STARTED": 11, "RUN_FINISHED": 12, "RUN_ERROR": 13,
	"STEP_STARTED": 14, "STEP_FINISHED": 15,
	"SUBAGENT_STARTED": 16, "SUBAGENT_FINISHED": 17, "SUBAGENT_ERROR": 18,
	"TEXT_MESSAGE_CHUNK": 19, "TOOL_CALL_CHUNK": 20, "TOOL_CALL_RESULT": 21,
	"ACTIVITY_SNAPSHOT": 22, "ACTIVITY_DELTA": 23,
	"REASONING_START": 24, "REASONING_MESSAGE_START": 25, "REASONING_MESSAGE_CONTENT": 26,
	"REASONING_MESSAGE_END": 27, "REASONING_MESSAGE_CHUNK": 28, "REASONING_END": 29,
	"REASONING_ENCRYPTED_VALUE": 30,
}

// JsonPatchOperationType, by the JSON op.
var patchOps = map[string]uint64{"add": 0, "remove": 1, "replace": 2, "move": 3, "copy": 4, "test": 5}

// The Event envelope's oneof: its arm (field number) and message by JSON type.
var arms = map[string]struct {
	num protowire.Number
	msg *message
}{
	"TEXT_MESSAGE_START":        {1, textMessageStart},
	"TEXT_MESSAGE_CONTENT":      {2, textMessageContent},
	"TEXT_MESSAGE_END":          {3, textMessageEnd},
	"TOOL_CALL_START":           {4, toolCallStart},
	"TOOL_CALL_ARGS":            {5, toolCallArgs},
	"TOOL_CALL_END":             {6, toolCallEnd},
	"STATE_SNAPSHOT":            {7, stateSnapshot},
	"STATE_DELTA":               {8, stateDelta},
	"MESSAGES_SNAPSHOT":         {9, messagesSnapshot},
	"RAW":                       {10, rawEvent},
	"CUSTOM":                    {11, customEvent},
	"RUN_STARTED":               {12, runStarted},
	"RUN_FINISHED":              {13, runFinished},
	"RUN_ERROR":                 {14, runError},
	"STEP_STARTED":              {15, stepStarted},
	"STEP_FINISHED":             {16, stepFinished},
	"TEXT_MESSAGE_CHUNK":        {17, textMessageChunk},
	"TOOL_CALL_CHUNK":           {18, toolCallChunk},
	"SUBAGENT_STARTED":          {19, subagentStarted},
	"SUBAGENT_FINISHED":         {20, subagentFinished},
	"SUBAGENT_ERROR":            {21, subagentError},
	"TOOL_CALL_RESULT":          {22, toolCallResult},
	"ACTIVITY_SNAPSHOT":         {23, activitySnapshot},
	"ACTIVITY_DELTA":            {24, activityDelta},
	"REASONING_START":           {25, reasoningStart},
	"REASONING_MESSAGE_START":   {26, reasoningMessageStart},
	"REASONING_MESSAGE_CONTENT": {27, reasoningMessageContent},
	"REASONING_MESSAGE_END":     {28, reasoningMessageEnd},
	"REASONING_MESSAGE_CHUNK":   {29, reasoningMessageChunk},
	"REASONING_END":             {30, reasoningEnd},
	"REASONING_ENCRYPTED_VALUE": {31, reasoningEncryptedValue},
}

// The base event is read off the event's own top-level keys.
var (
	baseEvent = &message{name: "BaseEvent", fields: []field{
		hooked(field{num: 1, name: "type", kind: kEnum}, eventTypeField),
		optInt(2, "timestamp"),
		optValue(3, "rawEvent"),
		object(4, "metadata"),
	}}
	base = hooked(sub(1, "baseEvent", baseEvent), baseEventField)
)

var (
	textMessageStart = &message{name: "TextMessageStartEvent", fields: []field{
		base, str(2, "messageId"), optStr(3, "role"), optStr(4, "name"), optStr(5, "subagentRunId")}}
	textMessageContent = &message{name: "TextMessageContentEvent", fields: []field{
		base, str(2, "messageId"), str(3, "delta"), optStr(4, "subagentRunId")}}
	textMessageEnd = &message{name: "TextMessageEndEvent", fields: []field{
		base, str(2, "messageId"), optStr(3, "subagentRunId")}}
	textMessageChunk = &message{name: "TextMessageChunkEvent", fields: []field{
		base, optStr(2, "messageId"), optStr(3, "role"), optStr(4, "delta"), optStr(5, "name"), optStr(6, "subagentRunId")}}
	toolCallStart = &message{name: "ToolCallStartEvent", fields: []field{
		base, str(2, "toolCallId"), str(3, "toolCallName"), optStr(4, "parentMessageId"), optStr(5, "subagentRunId")}}
	toolCallArgs = &message{name: "ToolCallArgsEvent", fields: []field{
		base, str(2, "toolCallId"), str(3, "delta"), optStr(4, "subagentRunId")}}
	toolCallEnd = &message{name: "ToolCallEndEvent", fields: []field{
		base, str(2, "toolCallId"), optStr(3, "subagentRunId")}}
	toolCallChunk = &message{name: "ToolCallChunkEvent", fields: []field{
		base, optStr(2, "toolCallId"), optStr(3, "toolCallName"), optStr(4, "parentMessageId"), optStr(5, "delta"), optStr(6, "subagentRunId")}}
	toolCallResult = &message{name: "ToolCallResultEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId"), str(4, "toolCallId"),
		hooked(optStr(5, "content"), toolResultText),
		optStr(6, "role"),
		hooked(list(7, "contentParts", inputContent), toolResultParts)}}
	stateSnapshot = &message{name: "StateSnapshotEvent", fields: []field{
		base, value(2, "snapshot"), optStr(3, "subagentRunId")}}
	stateDelta = &message{name: "StateDeltaEvent", fields: []field{
		base, list(2, "delta", patchOperation), optStr(3, "subagentRunId")}}
	messagesSnapshot = &message{name: "MessagesSnapshotEvent", fields: []field{
		base, list(2, "messages", chatMessage)}}
	activitySnapshot = &message{name: "ActivitySnapshotEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId"), str(4, "activityType"),
		hooked(object(5, "content"), requiredObject), // JSON requires it: null is no absence
		{num: 6, name: "replace", kind: kBool, opt: true}}}
	activityDelta = &message{name: "ActivityDeltaEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId"), str(4, "activityType"), list(5, "patch", patchOperation)}}
	rawEvent = &message{name: "RawEvent", fields: []field{
		base, value(2, "event"), optStr(3, "source"), optStr(4, "subagentRunId")}}
	customEvent = &message{name: "CustomEvent", fields: []field{
		base, str(2, "name"), value(3, "value"), optStr(4, "subagentRunId")}}
	runStarted = &message{name: "RunStartedEvent", fields: []field{
		base, str(2, "threadId"), str(3, "runId"), optStr(4, "parentRunId"), sub(5, "input", runAgentInput), optStr(6, "protocolVersion")}}
	// outcome {type, pendingToolCallIds?, interrupts?} is flattened into 5, 6 and 8.
	runFinished = &message{name: "RunFinishedEvent", fields: []field{
		base, str(2, "threadId"), str(3, "runId"), optValue(4, "result"),
		hooked(str(5, "outcome"), outcomeType),
		hooked(list(6, "interrupts", interrupt), outcomeList("interrupt", "interrupts")),
		list(7, "usage", usage),
		hooked(strList(8, "pendingToolCallIds"), outcomeList("success", "pendingToolCallIds"))}}
	runError = &message{name: "RunErrorEvent", fields: []field{
		base, optStr(2, "code"), str(3, "message"), list(4, "usage", usage)}}
	stepStarted = &message{name: "StepStartedEvent", fields: []field{
		base, str(2, "stepName"), optStr(3, "subagentRunId")}}
	stepFinished = &message{name: "StepFinishedEvent", fields: []field{
		base, str(2, "stepName"), optStr(3, "subagentRunId")}}
	reasoningStart = &message{name: "ReasoningStartEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId")}}
	reasoningMessageStart = &message{name: "ReasoningMessageStartEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId"), str(4, "role")}}
	reasoningMessageContent = &message{name: "ReasoningMessageContentEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId"), str(4, "delta")}}
	reasoningMessageEnd = &message{name: "ReasoningMessageEndEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId")}}
	reasoningMessageChunk = &message{name: "ReasoningMessageChunkEvent", fields: []field{
		base, optStr(2, "subagentRunId"), optStr(3, "messageId"), optStr(4, "delta")}}
	reasoningEnd = &message{name: "ReasoningEndEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "messageId")}}
	reasoningEncryptedValue = &message{name: "ReasoningEncryptedValueEvent", fields: []field{
		base, optStr(2, "subagentRunId"), str(3, "subtype"), str(4, "entityId"), str(5, "encryptedValue")}}
	subagentStarted = &message{name: "SubagentStartedEvent", fields: []field{
		base, str(2, "subagentRunId"), str(3, "name"), optStr(4, "description"), optStr(5, "parentSubagentRunId"),
		optStr(6, "parentToolCallId"), optStr(7, "parentMessageId")}}
	// outcome {type, interruptIds?} is flattened into 4 and 5.
	subagentFinished = &message{name: "SubagentFinishedEvent", fields: []field{
		base, str(2, "subagentRunId"), optValue(3, "result"),
		hooked(str(4, "outcome"), outcomeType),
		hooked(strList(5, "interruptIds"), outcomeList("suspended", "interruptIds"))}}
	subagentError = &message{name: "SubagentErrorEvent", fields: []field{
		base, str(2, "subagentRunId"), str(3, "message"), optStr(4, "code")}}
)

var (
	usage = &message{name: "Usage", fields: []field{
		optStr(1, "provider"), optStr(2, "model"), optInt(3, "inputTokens"), optInt(4, "outputTokens"),
		optInt(5, "totalTokens"), optInt(6, "reasoningTokens"), optInt(7, "cachedInputTokens"), optInt(8, "cacheWriteInputTokens")}}
	patchOperation = &message{name: "JsonPatchOperation", fields: []field{
		hooked(field{num: 1, name: "op", kind: kEnum}, patchOpField),
		str(2, "path"), optStr(3, "from"),
		hooked(optValue(4, "value"), valueOrNull)}}
	interrupt = &message{name: "Interrupt", fields: []field{
		str(1, "id"), str(2, "reason"), optStr(3, "message"), optStr(4, "toolCallId"), optValue(5, "responseSchema"),
		optStr(6, "expiresAt"), optValue(7, "metadata"), optStr(8, "subagentRunId")}}
	toolCallFunction = &message{name: "ToolCall.Function", fields: []field{str(1, "name"), str(2, "arguments")}}
	toolCall         = &message{name: "ToolCall", fields: []field{
		str(1, "id"), str(2, "type"), sub(3, "function", toolCallFunction), object(4, "metadata"), optStr(5, "encryptedValue")}}
	// JSON content is a string (3), parts (8) or the activity object (13).
	chatMessage = &message{name: "Message", fields: []field{
		str(1, "id"), str(2, "role"),
		hooked(optStr(3, "content"), messageText),
		optStr(4, "name"), list(5, "toolCalls", toolCall), optStr(6, "toolCallId"), optStr(7, "error"),
		hooked(list(8, "contentParts", inputContent), messageParts),
		object(9, "metadata"), optStr(10, "subagentRunId"), optStr(11, "encryptedValue"), optStr(12, "activityType"),
		hooked(object(13, "activityContent"), activityContent)}}
	tool = &message{name: "Tool", fields: []field{
		str(1, "name"), str(2, "description"), optValue(3, "parameters"), object(4, "metadata")}}
	runContext  = &message{name: "Context", fields: []field{str(1, "description"), str(2, "value")}}
	resumeEntry = &message{name: "ResumeEntry", fields: []field{
		str(1, "interruptId"), str(2, "status"), optValue(3, "payload"), object(4, "metadata")}}
	runAgentInput = &message{name: "RunAgentInput", fields: []field{
		str(1, "threadId"), str(2, "runId"), optStr(3, "parentRunId"), optValue(4, "state"), list(5, "messages", chatMessage),
		list(6, "tools", tool), list(7, "context", runContext), optValue(8, "forwardedProps"), list(9, "resume", resumeEntry),
		optStr(10, "protocolVersion")}}
)

// A content part: the JSON type picks the oneof arm, and each arm's fields
// are the part's own keys.
var (
	dataSource = &message{name: "InputContentDataSource", fields: []field{
		str(1, "value"),
		hooked(str(2, "mimeType"), nullIsEmpty)}} // 1.0.0 writes mimeType ?? ""
	urlSource  = &message{name: "InputContentUrlSource", fields: []field{str(1, "value"), optStr(2, "mimeType")}}
	fileSource = &message{name: "InputContentFileSource", fields: []field{
		str(1, "value"), optStr(2, "provider"), optStr(3, "mimeType")}}
	contentSource = &message{name: "InputContentSource", check: knownType("source type", "data", "url", "file"), fields: []field{
		hooked(sub(1, "data", dataSource), arm("data")),
		hooked(sub(2, "url", urlSource), arm("url")),
		hooked(sub(3, "file", fileSource), arm("file"))}}
	textPart  = &message{name: "TextInputPart", fields: []field{str(1, "text"), optStr(2, "id"), optValue(3, "metadata")}}
	mediaPart = func(name string) *message {
		return &message{name: name, fields: []field{sub(1, "source", contentSource), optValue(2, "metadata"), optStr(3, "id")}}
	}
	documentPart = mediaPart("DocumentInputPart")
	inputContent = &message{name: "InputContent",
		check: knownType("content part type", "text", "image", "audio", "video", "document", "binary"), fields: []field{
			hooked(sub(1, "text", textPart), arm("text")),
			hooked(sub(2, "image", mediaPart("ImageInputPart")), arm("image")),
			hooked(sub(3, "audio", mediaPart("AudioInputPart")), arm("audio")),
			hooked(sub(4, "video", mediaPart("VideoInputPart")), arm("video")),
			hooked(sub(5, "document", documentPart), documentArm)}}
)
