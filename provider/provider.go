// Package provider is the interface between lifecycle and a model: one model
// call is one Stream. Providers never mint IDs; they report chunks and
// lifecycle decides which message and part each chunk belongs to.
package provider

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
)

// Message is one entry of the conversation sent to the model, in the shape
// of the AI SDK's model messages that OpenCode builds.
//
// A message whose content is one text (most user messages, every tool
// result, an assistant's answer without reasoning) has it in Content and
// no Parts: the common case allocates no slice. Parts, when set, is the
// whole content in order (Content is then unused): several texts, files,
// reasoning. An assistant's tool calls are in ToolCalls after its content;
// a tool result names its call in ToolCallID.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool
	Content string `json:"content,omitempty"`
	Parts   []Part `json:"parts,omitempty"`
	// ToolCalls are an assistant message's calls, after its content.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName name the call a tool result answers;
	// IsError marks a failed call (its Content is the error text).
	ToolCallID string `json:"toolCallID,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
	// From is the "providerID/modelID" that wrote an assistant message
	// whose parts carry reasoning or provider metadata: only that model is
	// sent them as they are (set by lifecycle, which converts them for
	// another model).
	From string `json:"from,omitempty"`
	// Cache marks the message as the end of a cacheable prefix (providers
	// with prompt caching mark its last block).
	Cache bool `json:"cache,omitempty"`
	// Memo, when set, caches the message's wire encoding across model
	// calls: a conversation is sent again on every call, and re-encoding a
	// long history each time would make per-call cost grow with it.
	Memo *Memo `json:"-"`
}

// PartType tells what a Part holds.
type PartType string

// Content part types, as the AI SDK names them.
const (
	PartText      PartType = "text"
	PartFile      PartType = "file"
	PartReasoning PartType = "reasoning"
)

// Part is one piece of a message's content.
type Part struct {
	Type PartType `json:"type"`
	// Text is a text's or a reasoning's text.
	Text string `json:"text,omitempty"`
	// MediaType, Data and Filename are a file's: Data is its content as a
	// URL (a data: URL with base64 content, or an http(s) URL).
	MediaType string `json:"mediaType,omitempty"`
	Data      string `json:"data,omitempty"`
	Filename  string `json:"filename,omitempty"`
	// Metadata is what the provider that produced the part needs back on
	// later calls (a reasoning signature, an encrypted reasoning item), by
	// provider: {"anthropic":{"signature":"…"}}. It is stored with the part.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Texts returns the message's text content: Content, or its text parts
// joined by newlines.
func (m *Message) Texts() string {
	if m.Parts == nil {
		return m.Content
	}
	var n, texts int
	var one string
	for _, p := range m.Parts {
		if p.Type == PartText {
			n += len(p.Text) + 1
			texts++
			one = p.Text
		}
	}
	if texts <= 1 {
		// No copy: a prompt's text may be megabytes.
		return one
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range m.Parts {
		if p.Type == PartText {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Size is the message's content size in bytes (texts, file data,
// arguments), for memory accounting.
func (m *Message) Size() int {
	n := len(m.Content)
	for _, p := range m.Parts {
		n += len(p.Text) + len(p.Data)
	}
	for _, c := range m.ToolCalls {
		n += len(c.Arguments)
	}
	return n
}

// Memo holds one message's encoding for one encoder, computed once: a
// session that switches to a model of another wire format gets its own
// encoding, never the previous provider's bytes.
type Memo struct {
	mu  sync.Mutex
	key string
	b   []byte
}

// Bytes returns the encoding cached under key, computing it with enc when
// there is none for that key.
func (m *Memo) Bytes(key string, enc func() []byte) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil || m.key != key {
		m.key, m.b = key, enc()
	}
	return m.b
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Metadata is the producing provider's, sent back with the call.
	Metadata json.RawMessage `json:"metadata,omitempty"`
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
	// Reasoning is the model's capabilities.reasoning in the catalog (nil:
	// the catalog does not know the model, and a provider goes by its
	// ID). OpenCode gates its reasoning options and thinking variants on
	// it; a title request takes the small model's first variant.
	Reasoning *bool
	// OutputLimit is the model's limit.output in the catalog (0: unknown);
	// thinking budgets are computed from it.
	OutputLimit int
	// Variant is the options of the thinking variant the prompt picked
	// (catalog.Variants: the AI SDK's provider options, e.g.
	// {"thinking":{"type":"enabled","budgetTokens":16000}} or
	// {"reasoningEffort":"high",…}), nil for the model's defaults. OpenCode
	// merges them over the model's default options.
	Variant json.RawMessage
}

// VariantOptions are the variant options the providers here read.
type VariantOptions struct {
	// Anthropic.
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budgetTokens"`
		Display      string `json:"display"`
	} `json:"thinking"`
	Effort string `json:"effort"`
	// OpenAI (Responses and chat completions).
	ReasoningEffort  string `json:"reasoningEffort"`
	ReasoningSummary string `json:"reasoningSummary"`
	TextVerbosity    string `json:"textVerbosity"`
	// Gemini.
	ThinkingConfig *struct {
		IncludeThoughts *bool  `json:"includeThoughts"`
		ThinkingBudget  *int   `json:"thinkingBudget"`
		ThinkingLevel   string `json:"thinkingLevel"`
	} `json:"thinkingConfig"`
}

// VariantOptions decodes r.Variant (nil when there is none or it does not
// decode).
func (r *Request) VariantOptions() *VariantOptions {
	if len(r.Variant) == 0 {
		return nil
	}
	var v VariantOptions
	if json.Unmarshal(r.Variant, &v) != nil {
		return nil
	}
	return &v
}

// Reasons reports the catalog's reasoning capability, else guess (the
// provider's rule for a model ID it knows).
func (r *Request) Reasons(guess func(id string) bool) bool {
	if r.Reasoning != nil {
		return *r.Reasoning
	}
	return guess(r.ModelID)
}

// PurposeTitle marks the small-model request that names a session.
const PurposeTitle = "title"

// Usage is the token accounting of one call.
type Usage struct {
	Input     int64
	Output    int64
	Reasoning int64
	CacheRead int64
	// CacheWrite is the prompt tokens written to the provider's prompt
	// cache (Anthropic's cache_creation_input_tokens). Like CacheRead it is
	// a part of Input, as the AI SDK's inputTokens.total counts it;
	// OpenCode stores tokens.input = Input - CacheRead - CacheWrite and
	// tokens.cache.write = CacheWrite.
	CacheWrite int64
}

// ChunkKind tells what a Chunk reports.
type ChunkKind int

// Chunk kinds, in the order a call produces them.
const (
	TextDelta ChunkKind = iota + 1
	ReasoningDelta
	// ReasoningEnd: the reasoning block being streamed is complete (its
	// Metadata, if any, is the block's: a signature); a later
	// ReasoningDelta starts a new block. Providers whose API streams
	// several reasoning blocks per call send it, so each goes back whole.
	ReasoningEnd
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
	// Metadata, on a text or reasoning delta, is the provider's data for
	// the part so far (a reasoning signature): the last one given is
	// stored with the part and sent back to that provider.
	Metadata json.RawMessage
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
