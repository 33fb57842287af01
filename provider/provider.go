// Package provider is the interface between lifecycle and a model: one model
// call is one Stream. Providers never mint IDs; they report chunks and
// lifecycle decides which message and part each chunk belongs to.
package provider

import (
	"context"
	"encoding/json"
	"sync"
)

// Message is one entry of the conversation sent to the model.
type Message struct {
	Role       string     `json:"role"` // system, user, assistant, tool
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallID,omitempty"`
	// Memo, when set, caches the message's wire encoding across model
	// calls: a conversation is sent again on every call, and re-encoding a
	// long history each time would make per-call cost grow with it.
	Memo *Memo `json:"-"`
}

// Memo holds one message's encoding, computed once.
type Memo struct {
	once sync.Once
	b    []byte
}

// Bytes returns the cached encoding, computing it with enc the first time.
func (m *Memo) Bytes(enc func() []byte) []byte {
	m.once.Do(func() { m.b = enc() })
	return m.b
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool offered to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	SessionID string
	ModelID   string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	// Purpose is PurposeTitle for a session's title request; "" is a turn's
	// model call.
	Purpose string
	// MaxTokens caps the answer (0: the provider's default).
	MaxTokens int
	// Temperature and TopP are the agent's sampling settings (nil: the
	// model's defaults).
	Temperature, TopP *float64
}

// PurposeTitle marks the small-model request that names a session.
const PurposeTitle = "title"

// Usage is the token accounting of one call.
type Usage struct {
	Input     int64
	Output    int64
	Reasoning int64
	CacheRead int64
}

// ChunkKind tells what a Chunk reports.
type ChunkKind int

// Chunk kinds, in the order a call produces them.
const (
	TextDelta ChunkKind = iota + 1
	ReasoningDelta
	// ToolInputStart: the model began a tool call (ToolCall has ID and Name;
	// its arguments are still streaming).
	ToolInputStart
	// ToolInputDelta: more of a started call's arguments (ToolCall has ID
	// and Name; Text is the new piece of the raw JSON).
	ToolInputDelta
	// ToolCallChunk: a tool call is complete (ToolCall has ID, Name, Arguments).
	ToolCallChunk
	// Retry: the call failed in a retryable way and is tried again at Next.
	Retry
	Finish
)

// Chunk is one piece of a streamed model reply.
type Chunk struct {
	Kind     ChunkKind
	Text     string
	ToolCall *ToolCall
	// Finish: the reason ("stop", "tool-calls", "length", ...) and usage.
	Reason string
	Usage  Usage
	// Retry: which attempt comes next, why, and when (epoch ms).
	Attempt int
	Message string
	Next    int64
}

// APIError is a failed model call that is not retried (or ran out of
// retries). Lifecycle records it on the assistant message as OpenCode's
// APIError.
type APIError struct {
	StatusCode   int
	Message      string
	Retryable    bool
	ResponseBody string
}

func (e *APIError) Error() string { return e.Message }

// Provider streams a model's reply; emit is called in order from the
// caller's goroutine. Stream returns when the reply is finished, ctx is
// cancelled, or it fails.
type Provider interface {
	Stream(ctx context.Context, req Request, emit func(Chunk)) error
}

// Model describes a model a provider serves, for listings.
type Model struct {
	ID      string
	Name    string
	Context int64
	Output  int64
}
