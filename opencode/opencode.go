// Package opencode holds the domain types every layer shares: sessions,
// messages, parts, admitted inputs and events, in OpenCode's own JSON shapes.
// It imports no other package of the project.
package opencode

import (
	"encoding/json"
)

// Version is the OpenCode version whose protocol this server speaks.
const Version = "1.18.33"

// Delivery says how a pending input reaches the model.
type Delivery string

const (
	// Steer injects the input into the running turn at the next model call.
	Steer Delivery = "steer"
	// Queue runs the input as its own turn after the current one finishes.
	Queue Delivery = "queue"
)

// Valid reports whether d is steer or queue.
func (d Delivery) Valid() bool { return d == Steer || d == Queue }

// Tokens is OpenCode's token accounting.
type Tokens struct {
	Total     *int64     `json:"total,omitempty"`
	Input     int64      `json:"input"`
	Output    int64      `json:"output"`
	Reasoning int64      `json:"reasoning"`
	Cache     CacheUsage `json:"cache"`
}

// CacheUsage counts cached tokens.
type CacheUsage struct {
	Read  int64 `json:"read"`
	Write int64 `json:"write"`
}

// ModelRef names a model in session and v2 shapes.
type ModelRef struct {
	ID         string `json:"id"`
	ProviderID string `json:"providerID"`
	Variant    string `json:"variant,omitempty"`
}

// MessageModel names a model in v1 message shapes.
type MessageModel struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
	Variant    string `json:"variant,omitempty"`
}

// SessionTime holds a session's timestamps in epoch milliseconds.
type SessionTime struct {
	Created  int64    `json:"created"`
	Updated  int64    `json:"updated"`
	Archived *float64 `json:"archived,omitempty"`
}

// SessionSummary is the diff summary of a session.
type SessionSummary struct {
	Additions int64 `json:"additions"`
	Deletions int64 `json:"deletions"`
	Files     int64 `json:"files"`
}

// Session is the v1 Session shape. A session is its own agent: one ID.
type Session struct {
	ID        string `json:"id"`
	Slug      string `json:"slug"`
	ProjectID string `json:"projectID"`
	// WorkspaceID is the workspace the session belongs to (OpenCode's
	// experimental workspaces; warp and sync/steal set it).
	WorkspaceID string          `json:"workspaceID,omitempty"`
	Directory   string          `json:"directory"`
	Path        string          `json:"path,omitempty"`
	ParentID    string          `json:"parentID,omitempty"`
	Summary     *SessionSummary `json:"summary,omitempty"`
	Cost        float64         `json:"cost"`
	Tokens      Tokens          `json:"tokens"`
	Title       string          `json:"title"`
	Agent       string          `json:"agent,omitempty"`
	Model       *ModelRef       `json:"model,omitempty"`
	Version     string          `json:"version"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	Permission  json.RawMessage `json:"permission,omitempty"`
	// Revert is set while the session is reverted to before a message.
	Revert *SessionRevert `json:"revert,omitempty"`
	Time   SessionTime    `json:"time"`
}

// SessionRevert is a session's revert point: the files are as they were
// before MessageID; Snapshot is the state to go back to on unrevert; Diff
// is what the revert undid.
type SessionRevert struct {
	MessageID string `json:"messageID"`
	PartID    string `json:"partID,omitempty"`
	Snapshot  string `json:"snapshot,omitempty"`
	Diff      string `json:"diff,omitempty"`
}

// MarshalJSON writes diff whenever there is a snapshot, "" when the revert
// changes no file, as OpenCode does (it diffs every tracked revert).
func (r SessionRevert) MarshalJSON() ([]byte, error) {
	type plain SessionRevert
	if r.Snapshot == "" {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		Diff string `json:"diff"`
	}{plain(r), r.Diff})
}

// Role is a message's role.
type Role string

// The two message roles.
const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// MessageTime holds a message's timestamps.
type MessageTime struct {
	Created   int64  `json:"created"`
	Completed *int64 `json:"completed,omitempty"`
}

// MessagePath is an assistant message's working directory.
type MessagePath struct {
	Cwd  string `json:"cwd"`
	Root string `json:"root"`
}

// NamedError is OpenCode's {name, data} error shape used inside messages and
// session.error events.
type NamedError struct {
	Name string         `json:"name"`
	Data map[string]any `json:"data"`
}

// UserSummary is the summary a user message carries after its turn.
type UserSummary struct {
	Title string            `json:"title,omitempty"`
	Body  string            `json:"body,omitempty"`
	Diffs []json.RawMessage `json:"diffs"`
}

// Message is the v1 message info: UserMessage or AssistantMessage, told
// apart by Role. Fields of the other role stay empty and are not encoded.
type Message struct {
	ID        string
	SessionID string
	Role      Role
	Time      MessageTime
	Agent     string

	// user
	Model   *MessageModel
	Summary *UserSummary
	System  string
	Tools   map[string]bool

	// assistant
	ParentID   string
	ModelID    string
	ProviderID string
	Mode       string
	Path       MessagePath
	Cost       float64
	Tokens     Tokens
	Finish     string
	Error      *NamedError
	// IsSummary marks a compaction's summary (assistant "summary": true).
	IsSummary bool
}

type userJSON struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	Role      Role            `json:"role"`
	Time      MessageTime     `json:"time"`
	Summary   *UserSummary    `json:"summary,omitempty"`
	Agent     string          `json:"agent"`
	Model     *MessageModel   `json:"model"`
	System    string          `json:"system,omitempty"`
	Tools     map[string]bool `json:"tools,omitempty"`
}

type assistantJSON struct {
	ID         string      `json:"id"`
	SessionID  string      `json:"sessionID"`
	Role       Role        `json:"role"`
	Time       MessageTime `json:"time"`
	Error      *NamedError `json:"error,omitempty"`
	ParentID   string      `json:"parentID"`
	ModelID    string      `json:"modelID"`
	ProviderID string      `json:"providerID"`
	Mode       string      `json:"mode"`
	Agent      string      `json:"agent"`
	Path       MessagePath `json:"path"`
	Cost       float64     `json:"cost"`
	Tokens     Tokens      `json:"tokens"`
	Finish     string      `json:"finish,omitempty"`
	Summary    bool        `json:"summary,omitempty"`
}

// MarshalJSON encodes the shape of the message's role.
func (m Message) MarshalJSON() ([]byte, error) {
	if m.Role == Assistant {
		return json.Marshal(assistantJSON{m.ID, m.SessionID, m.Role, m.Time, m.Error, m.ParentID,
			m.ModelID, m.ProviderID, m.Mode, m.Agent, m.Path, m.Cost, m.Tokens, m.Finish, m.IsSummary})
	}
	model := m.Model
	if model == nil {
		model = &MessageModel{}
	}
	return json.Marshal(userJSON{m.ID, m.SessionID, m.Role, m.Time, m.Summary, m.Agent, model, m.System, m.Tools})
}

// UnmarshalJSON decodes either role's shape.
func (m *Message) UnmarshalJSON(b []byte) error {
	var v struct {
		userJSON
		Error      *NamedError   `json:"error"`
		ParentID   string        `json:"parentID"`
		ModelID    string        `json:"modelID"`
		ProviderID string        `json:"providerID"`
		Mode       string        `json:"mode"`
		Path       MessagePath   `json:"path"`
		Cost       float64       `json:"cost"`
		Tokens     Tokens        `json:"tokens"`
		Finish     string        `json:"finish"`
		Time       MessageTime   `json:"time"`
		Model      *MessageModel `json:"model"`
		// summary is an object on a user message, true on a compaction's
		// assistant message.
		Summary json.RawMessage `json:"summary"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = Message{ID: v.ID, SessionID: v.SessionID, Role: v.Role, Time: v.Time, Agent: v.Agent,
		Model: v.Model, System: v.System, Tools: v.Tools,
		ParentID: v.ParentID, ModelID: v.ModelID, ProviderID: v.ProviderID, Mode: v.Mode,
		Path: v.Path, Cost: v.Cost, Tokens: v.Tokens, Finish: v.Finish, Error: v.Error}
	switch s := string(v.Summary); {
	case s == "true":
		m.IsSummary = true
	case len(s) > 0 && s[0] == '{':
		m.Summary = new(UserSummary)
		if err := json.Unmarshal(v.Summary, m.Summary); err != nil {
			return err
		}
	}
	return nil
}

// MessageWithParts is the {info, parts} pair of v1 message routes.
type MessageWithParts struct {
	Info  Message `json:"info"`
	Parts []Part  `json:"parts"`
}
