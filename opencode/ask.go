package opencode

// PermissionRequest is OpenCode's PermissionRequest.
type PermissionRequest struct {
	ID         string          `json:"id"`
	SessionID  string          `json:"sessionID"`
	Permission string          `json:"permission"`
	Patterns   []string        `json:"patterns"`
	Metadata   map[string]any  `json:"metadata"`
	Always     []string        `json:"always"`
	Tool       *PermissionTool `json:"tool,omitempty"`
}

// PermissionTool names the tool call that asks.
type PermissionTool struct {
	MessageID string `json:"messageID"`
	CallID    string `json:"callID"`
}

// QuestionRequest is a question tool call waiting for the user (OpenCode's
// QuestionRequest, the payload of question.asked and GET /question).
type QuestionRequest struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	Questions []QuestionInfo  `json:"questions"`
	Tool      *PermissionTool `json:"tool,omitempty"`
}

// QuestionInfo is one question the model asks the user (OpenCode's
// QuestionInfo).
type QuestionInfo struct {
	Question string           `json:"question"`
	Header   string           `json:"header"`
	Options  []QuestionOption `json:"options"`
	Multiple bool             `json:"multiple,omitempty"`
}

// QuestionOption is one choice of a question.
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}
