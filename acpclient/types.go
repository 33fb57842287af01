package acpclient

import "encoding/json"

// ProtocolVersion is the ACP version this client speaks.
const ProtocolVersion = 1

// Method names.
const (
	MethodInitialize        = "initialize"
	MethodAuthenticate      = "authenticate"
	MethodSessionNew        = "session/new"
	MethodSessionLoad       = "session/load"
	MethodSessionPrompt     = "session/prompt"
	MethodSessionCancel     = "session/cancel"
	MethodSessionUpdate     = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodReadTextFile      = "fs/read_text_file"
	MethodWriteTextFile     = "fs/write_text_file"
)

// InitializeRequest is initialize's params.
type InitializeRequest struct {
	ProtocolVersion    int                `json:"protocolVersion"`
	ClientCapabilities ClientCapabilities `json:"clientCapabilities"`
	ClientInfo         *Implementation    `json:"clientInfo,omitempty"`
}

// ClientCapabilities are what this client serves to the agent.
type ClientCapabilities struct {
	FS       FSCapabilities `json:"fs"`
	Terminal bool           `json:"terminal"`
}

// FSCapabilities: fs/read_text_file and fs/write_text_file.
type FSCapabilities struct {
	ReadTextFile  bool `json:"readTextFile"`
	WriteTextFile bool `json:"writeTextFile"`
}

// Implementation names a client or an agent.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeResponse is initialize's result (what this client reads of it).
type InitializeResponse struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities AgentCapabilities `json:"agentCapabilities"`
	AgentInfo         *Implementation   `json:"agentInfo,omitempty"`
	AuthMethods       []AuthMethod      `json:"authMethods,omitempty"`
}

// AuthMethod is a way the agent offers to authenticate; Type "env_var"
// (ACP's unstable auth methods) takes its key from the environment.
type AuthMethod struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Type string `json:"type,omitempty"`
}

// KeyAuthMethod is the agent's method that authenticates with an API key
// from its environment (Codex's "api-key", an "env_var" method), "" if none:
// the only kind a server can run without a user at a browser.
func KeyAuthMethod(methods []AuthMethod) string {
	for _, m := range methods {
		if m.ID == "api-key" || m.Type == "env_var" {
			return m.ID
		}
	}
	return ""
}

// AuthenticateRequest is authenticate's params.
type AuthenticateRequest struct {
	MethodID string `json:"methodId"`
}

// AgentCapabilities are what the agent says it does (what this client
// reads of them).
type AgentCapabilities struct {
	LoadSession        bool               `json:"loadSession"`
	PromptCapabilities PromptCapabilities `json:"promptCapabilities"`
	MCPCapabilities    MCPCapabilities    `json:"mcpCapabilities"`
}

// PromptCapabilities are the content blocks a prompt may hold beyond text
// and resource links.
type PromptCapabilities struct {
	Image           bool `json:"image"`
	EmbeddedContext bool `json:"embeddedContext"`
}

// LoadSessionRequest is session/load's params (its result is empty; the
// agent replays the session's history as updates before answering).
type LoadSessionRequest struct {
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	MCPServers []any  `json:"mcpServers"`
}

// NewSessionRequest is session/new's params.
type NewSessionRequest struct {
	Cwd        string `json:"cwd"`
	MCPServers []any  `json:"mcpServers"`
}

// NewSessionResponse is session/new's result.
type NewSessionResponse struct {
	SessionID string `json:"sessionId"`
}

// ContentBlock is a content block: text, image (Data, MimeType),
// resource_link (URI, Name, MimeType) or resource (Resource).
type ContentBlock struct {
	Type     string            `json:"type"`
	Text     string            `json:"text,omitempty"`
	Data     string            `json:"data,omitempty"`
	MimeType string            `json:"mimeType,omitempty"`
	URI      string            `json:"uri,omitempty"`
	Name     string            `json:"name,omitempty"`
	Resource *EmbeddedResource `json:"resource,omitempty"`
}

// EmbeddedResource is a resource block's contents: text, or base64 Blob.
type EmbeddedResource struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// PromptRequest is session/prompt's params; Meta carries our message ID.
type PromptRequest struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// PromptResponse is session/prompt's result.
type PromptResponse struct {
	StopReason    string `json:"stopReason"`
	UserMessageID string `json:"userMessageId,omitempty"`
}

// Stop reasons.
const (
	StopEndTurn         = "end_turn"
	StopMaxTokens       = "max_tokens"
	StopMaxTurnRequests = "max_turn_requests"
	StopRefusal         = "refusal"
	StopCancelled       = "cancelled"
)

// CancelNotification is session/cancel's params.
type CancelNotification struct {
	SessionID string `json:"sessionId"`
}

// SessionNotification is session/update's params.
type SessionNotification struct {
	SessionID string        `json:"sessionId"`
	Update    SessionUpdate `json:"update"`
}

// SessionUpdate is one update: the fields of its kind (SessionUpdate) are set.
type SessionUpdate struct {
	SessionUpdate string `json:"sessionUpdate"`
	// agent_message_chunk, agent_thought_chunk, user_message_chunk
	Content   *ContentBlock `json:"-"`
	MessageID string        `json:"messageId,omitempty"`
	// tool_call, tool_call_update
	ToolCall
	// plan
	Entries []PlanEntry `json:"entries,omitempty"`
	// usage_update: tokens in context, the context window, the session's
	// cumulative cost.
	Used int64 `json:"used,omitempty"`
	Size int64 `json:"size,omitempty"`
	Cost *Cost `json:"cost,omitempty"`
	// available_commands_update
	AvailableCommands []AvailableCommand `json:"availableCommands,omitempty"`
	// session_info_update
	Title *string `json:"-"`
	raw   json.RawMessage
}

// AvailableCommand is a command the agent runs when a prompt starts with
// "/name"; Input, when set, says it takes text after the name.
type AvailableCommand struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Input       *struct {
		Hint string `json:"hint"`
	} `json:"input,omitempty"`
}

// PlanEntry is one entry of the agent's plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority"`
	Status   string `json:"status"`
}

// Cost is an amount in a currency.
type Cost struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Raw is the update as the agent sent it.
func (u SessionUpdate) Raw() json.RawMessage { return u.raw }

// UnmarshalJSON reads the fields every kind uses; content is a block for
// chunks and a list for tool calls.
func (u *SessionUpdate) UnmarshalJSON(b []byte) error {
	var w struct {
		SessionUpdate string          `json:"sessionUpdate"`
		MessageID     string          `json:"messageId"`
		MessageIDAlt  string          `json:"messageID"`
		Content       json.RawMessage `json:"content"`
		ToolCall
		Entries []PlanEntry        `json:"entries"`
		Used    int64              `json:"used"`
		Size    int64              `json:"size"`
		Cost    *Cost              `json:"cost"`
		Cmds    []AvailableCommand `json:"availableCommands"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*u = SessionUpdate{SessionUpdate: w.SessionUpdate, MessageID: w.MessageID, ToolCall: w.ToolCall,
		Entries: w.Entries, Used: w.Used, Size: w.Size, Cost: w.Cost, AvailableCommands: w.Cmds, raw: b}
	if w.SessionUpdate == "session_info_update" {
		// The tool call's title is the session's here (null clears it:
		// left alone).
		var info struct {
			Title *string `json:"title"`
		}
		_ = json.Unmarshal(b, &info)
		u.Title, u.ToolCall.Title = info.Title, ""
	}
	if u.MessageID == "" {
		u.MessageID = w.MessageIDAlt
	}
	u.ToolCall.Content = nil
	if len(w.Content) > 0 {
		if w.Content[0] == '[' {
			_ = json.Unmarshal(w.Content, &u.ToolCall.Content)
		} else {
			var c ContentBlock
			if json.Unmarshal(w.Content, &c) == nil {
				u.Content = &c
			}
		}
	}
	return nil
}

// ToolCall is a tool_call or tool_call_update (every field but the ID
// optional in an update).
type ToolCall struct {
	ToolCallID string            `json:"toolCallId"`
	Title      string            `json:"title,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Status     string            `json:"status,omitempty"`
	RawInput   json.RawMessage   `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage   `json:"rawOutput,omitempty"`
	Content    []ToolCallContent `json:"content,omitempty"`
	Locations  []ToolLocation    `json:"locations,omitempty"`
}

// ToolCallContent is one item of a tool call's content: a content block,
// a diff or a terminal.
type ToolCallContent struct {
	Type    string        `json:"type"`
	Content *ContentBlock `json:"content,omitempty"`
	Path    string        `json:"path,omitempty"`
	OldText *string       `json:"oldText,omitempty"`
	NewText string        `json:"newText,omitempty"`
	// TerminalID: a terminal of terminal/create, shown with the call.
	TerminalID string `json:"terminalId,omitempty"`
}

// ToolLocation is a file a tool call touches.
type ToolLocation struct {
	Path string `json:"path"`
	Line *int   `json:"line,omitempty"`
}

// Tool call statuses.
const (
	ToolPending    = "pending"
	ToolInProgress = "in_progress"
	ToolCompleted  = "completed"
	ToolFailed     = "failed"
)

// RequestPermissionRequest is session/request_permission's params.
type RequestPermissionRequest struct {
	SessionID string             `json:"sessionId"`
	ToolCall  ToolCall           `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
}

// PermissionOption is one answer the agent offers.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// RequestPermissionResponse is session/request_permission's result.
type RequestPermissionResponse struct {
	Outcome PermissionOutcome `json:"outcome"`
}

// PermissionOutcome is "selected" with an option, or "cancelled".
type PermissionOutcome struct {
	Outcome  string `json:"outcome"`
	OptionID string `json:"optionId,omitempty"`
}

// ReadTextFileRequest is fs/read_text_file's params.
type ReadTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Line      *int   `json:"line,omitempty"`
	Limit     *int   `json:"limit,omitempty"`
}

// ReadTextFileResponse is fs/read_text_file's result.
type ReadTextFileResponse struct {
	Content string `json:"content"`
}

// WriteTextFileRequest is fs/write_text_file's params.
type WriteTextFileRequest struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}
