package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// RunAgentInput is AG-UI's request body (@ag-ui/core RunAgentInputSchema).
type RunAgentInput struct {
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId,omitempty"`
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	State           json.RawMessage `json:"state,omitempty"`
	Messages        []Message       `json:"messages"`
	Tools           []Tool          `json:"tools"`
	Context         []Context       `json:"context"`
	ForwardedProps  json.RawMessage `json:"forwardedProps,omitempty"`
	Resume          []ResumeEntry   `json:"resume,omitempty"`
}

// Message is one AG-UI message, any role. Content is a string, or for
// user and tool messages an array of content parts.
type Message struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Name       string          `json:"name,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ToolCall      `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// ToolCall is an assistant message's call.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ContentPart is one part of a multimodal user message.
type ContentPart struct {
	Type   string      `json:"type"`
	Text   string      `json:"text,omitempty"`
	Source *PartSource `json:"source,omitempty"`
}

// PartSource is where a media part's bytes are: inline base64 data, a URL,
// or a provider's file ID.
type PartSource struct {
	Type     string `json:"type"`
	Value    string `json:"value"`
	MimeType string `json:"mimeType,omitempty"`
}

// Tool is a frontend tool the client offers: the client runs it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Context is one piece of context the client gives the run.
type Context struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResumeEntry answers one interrupt of the previous run.
type ResumeEntry struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload,omitempty"`
}

// forwarded is what we read of forwardedProps: our extensions.
type forwarded struct {
	Delivery string `json:"delivery"`
	Abort    bool   `json:"abort"`
	// Agent is the agent of the run's turn (as agent on a prompt route):
	// one of GET /agent's, an external one too.
	Agent string `json:"agent"`
}

// Limits on what one run may carry.
const (
	maxBody     = 32 << 20
	maxState    = 1 << 20
	maxMessages = 10000
	maxTools    = 128
)

// inputError is bad input: a 4xx answered before any event, with AG-UI's
// error code.
type inputError struct {
	status  int
	code    string
	message string
}

func (e *inputError) Error() string { return e.message }

func badInput(format string, args ...any) *inputError {
	return &inputError{status: 400, code: "INVALID_INPUT", message: fmt.Sprintf(format, args...)}
}

var roles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true,
	"tool": true, "activity": true, "reasoning": true}

// DecodeInput decodes and checks a RunAgentInput: the shape the AG-UI
// schema gives, and our limits. It never panics (FuzzDecodeInput).
func DecodeInput(body []byte) (*RunAgentInput, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, badInput("the body is not a JSON RunAgentInput object: %v", err)
	}
	if m, ok := probe["messages"]; !ok || !isArray(m) {
		return nil, badInput("messages must be an array")
	}
	for _, k := range []string{"tools", "context", "resume"} {
		if v, ok := probe[k]; ok && !isArray(v) && !isNull(v) {
			return nil, badInput("%s must be an array", k)
		}
	}
	for _, k := range []string{"threadId", "runId"} {
		v, ok := probe[k]
		var s string
		if !ok || json.Unmarshal(v, &s) != nil || s == "" {
			return nil, badInput("%s must be a non-empty string", k)
		}
	}
	if s := probe["state"]; len(s) > maxState {
		return nil, &inputError{status: 413, code: "STATE_TOO_LARGE",
			message: fmt.Sprintf("state is %d bytes; at most %d are accepted", len(s), maxState)}
	}
	var in RunAgentInput
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, badInput("the RunAgentInput does not match AG-UI's schema: %v", err)
	}
	if len(in.Messages) > maxMessages {
		return nil, badInput("at most %d messages are accepted in one run", maxMessages)
	}
	if len(in.Tools) > maxTools {
		return nil, badInput("at most %d tools are accepted in one run", maxTools)
	}
	for i, m := range in.Messages {
		if m.ID == "" {
			return nil, badInput("messages[%d].id must be a non-empty string", i)
		}
		if !roles[m.Role] {
			return nil, badInput("messages[%d].role %q is not an AG-UI role (developer, system, assistant, user, tool, activity, reasoning)", i, m.Role)
		}
		switch m.Role {
		case "user":
			if _, err := userContent(m.Content); err != nil {
				return nil, badInput("messages[%d].content: %v", i, err)
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, badInput("messages[%d].toolCallId must be a non-empty string", i)
			}
		}
	}
	for i, t := range in.Tools {
		if t.Name == "" {
			return nil, badInput("tools[%d].name must be a non-empty string", i)
		}
		if len(t.Parameters) > 0 && !isNull(t.Parameters) && !isObject(t.Parameters) {
			return nil, badInput("tools[%d].parameters must be a JSON Schema object", i)
		}
	}
	for i, r := range in.Resume {
		if r.InterruptID == "" || (r.Status != "resolved" && r.Status != "cancelled") {
			return nil, badInput("resume[%d] needs an interruptId and a status of resolved or cancelled", i)
		}
	}
	if f := in.ForwardedProps; len(f) > 0 && !isNull(f) && !isObject(f) {
		return nil, badInput("forwardedProps must be an object")
	}
	if _, err := in.forwarded(); err != nil {
		return nil, err
	}
	return &in, nil
}

func (in *RunAgentInput) forwarded() (forwarded, error) {
	var f forwarded
	if len(in.ForwardedProps) == 0 || isNull(in.ForwardedProps) {
		return f, nil
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(in.ForwardedProps, &raw) != nil {
		return f, badInput("forwardedProps must be an object")
	}
	if d, ok := raw["delivery"]; ok && json.Unmarshal(d, &f.Delivery) != nil {
		return f, badInput(`forwardedProps.delivery must be "steer" or "queue"`)
	}
	if f.Delivery != "" && f.Delivery != "steer" && f.Delivery != "queue" {
		return f, badInput(`forwardedProps.delivery must be "steer" or "queue", not %q`, f.Delivery)
	}
	if a, ok := raw["abort"]; ok && json.Unmarshal(a, &f.Abort) != nil {
		return f, badInput("forwardedProps.abort must be a boolean")
	}
	if a, ok := raw["agent"]; ok && json.Unmarshal(a, &f.Agent) != nil {
		return f, badInput("forwardedProps.agent must be a string (an agent's name)")
	}
	return f, nil
}

// userContent is a user message's content as parts: a string is one text
// part.
func userContent(raw json.RawMessage) ([]ContentPart, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, fmt.Errorf("a user message needs content")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []ContentPart{{Type: "text", Text: s}}, nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("must be a string or an array of content parts")
	}
	for i, p := range parts {
		switch p.Type {
		case "text":
		case "image", "audio", "video", "document":
			if p.Source == nil || p.Source.Value == "" {
				return nil, fmt.Errorf("[%d] (%s) needs a source with a value", i, p.Type)
			}
			switch p.Source.Type {
			case "data":
				if p.Source.MimeType == "" {
					return nil, fmt.Errorf("[%d] (%s): a data source needs its mimeType", i, p.Type)
				}
			case "url", "file":
			default:
				return nil, fmt.Errorf("[%d] (%s): source type %q is not data, url or file", i, p.Type, p.Source.Type)
			}
		default:
			return nil, fmt.Errorf("[%d]: content part type %q is not text, image, audio, video or document", i, p.Type)
		}
	}
	return parts, nil
}

// toolContent is a tool message's content as text.
func toolContent(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}

func isArray(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '['
}

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }
