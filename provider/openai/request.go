package openai

import (
	"encoding/json"
	"strings"

	"github.com/opencode-server/opencode-server/provider"
)

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens,omitempty"`
	// Messages are spliced in by encode (json.Marshal would validate and
	// copy every memoized encoding again on each call).
	Messages    []json.RawMessage `json:"-"`
	Tools       []chatTool        `json:"tools,omitempty"`
	ToolChoice  string            `json:"tool_choice,omitempty"`
	Temperature *float64          `json:"temperature,omitempty"`
	TopP        *float64          `json:"top_p,omitempty"`
	// ReasoningEffort is a title request's first variant.
	ReasoningEffort string        `json:"reasoning_effort,omitempty"`
	Stream          bool          `json:"stream"`
	StreamOptions   streamOptions `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is a string, or for a user message of several parts an
	// array of content parts (as @ai-sdk/openai-compatible sends it).
	Content any `json:"content"`
	// ReasoningContent is an assistant's earlier reasoning, sent back.
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	CacheControl     *cacheControl  `json:"cache_control,omitempty"`
}

// cacheControl is the mark OpenCode's applyCaching puts on a Claude
// model's prompt (providerOptions.openaiCompatible.cache_control, which
// @ai-sdk/openai-compatible spreads into the message, part or call).
type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type chatToolCall struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Function     chatFunction  `json:"function"`
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatToolSpec `json:"function"`
}

type chatToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest converts a provider request to the OpenAI wire form: the
// system prompt first, assistant tool calls as tool_calls, tool results as
// role "tool" messages.
func buildRequest(req provider.Request) chatRequest {
	out := chatRequest{
		Model:         req.ModelID,
		MaxTokens:     req.MaxTokens,
		Messages:      make([]json.RawMessage, 0, len(req.Messages)+1),
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		Temperature:   req.Temperature,
		TopP:          req.TopP,
	}
	if req.Purpose == provider.PurposeTitle && req.Reasons(func(string) bool { return false }) {
		out.ReasoningEffort = firstVariant(req.ModelID)
	} else if v := req.VariantOptions(); v != nil && req.Purpose != provider.PurposeTitle {
		out.ReasoningEffort = v.ReasoningEffort
	}
	var marked map[int]bool
	if claude(req.ModelID) {
		marked = cacheMarks(req)
	}
	if req.System != "" {
		out.Messages = append(out.Messages, encodeMessage(provider.Message{Role: "system", Content: req.System}, marked[-1]))
	}
	for i, m := range req.Messages {
		if marked[i] {
			// Marks move every call: these few are encoded afresh.
			out.Messages = append(out.Messages, encodeMessage(m, true))
		} else if m.Memo != nil {
			out.Messages = append(out.Messages, m.Memo.Bytes(memoKey, func() []byte { return encodeMessage(m, false) }))
		} else {
			out.Messages = append(out.Messages, encodeMessage(m, false))
		}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 || !json.Valid(params) {
			params = emptySchema
		}
		out.Tools = append(out.Tools, chatTool{
			Type:     "function",
			Function: chatToolSpec{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = "auto" // as the AI SDK sends it when tools are offered
	}
	return out
}

// claude is OpenCode's test for a model whose prompt it marks for caching
// (transform.ts: the model's ID names claude or anthropic).
func claude(id string) bool {
	return strings.Contains(id, "claude") || strings.Contains(id, "anthropic")
}

// cacheMarks are the messages OpenCode's applyCaching marks, as indexes
// into req.Messages (-1: the system prompt): the first two system
// messages and the last two other messages, where a run of tool results
// is one message (OpenCode's tool message holds them all; its last
// result carries the mark).
func cacheMarks(req provider.Request) map[int]bool {
	marks := map[int]bool{}
	systems := 0
	if req.System != "" {
		marks[-1], systems = true, 1
	}
	for i, m := range req.Messages {
		if m.Role == "system" && systems < 2 {
			marks[i] = true
			systems++
		}
	}
	others := 0
	for i := len(req.Messages) - 1; i >= 0 && others < 2; i-- {
		m := req.Messages[i]
		if m.Role == "system" {
			continue
		}
		marks[i] = true
		others++
		for m.Role == "tool" && i > 0 && req.Messages[i-1].Role == "tool" {
			i-- // the rest of the run belongs to the same message
		}
	}
	return marks
}

// firstVariant is the reasoning effort of the first thinking variant
// OpenCode offers an OpenAI-compatible model that reasons (transform.ts
// variants()), which its title request takes; "" for models it offers
// none.
func firstVariant(id string) string {
	l := strings.ToLower(id)
	glm52 := strings.Contains(l, "glm-5.2") || strings.Contains(l, "glm-5-2") || strings.Contains(l, "glm-5p2")
	switch {
	case strings.Contains(l, "minimax-m3"):
		return "" // its variants are thinking modes, not efforts
	case glm52:
		return "high"
	case strings.Contains(l, "deepseek-chat"), strings.Contains(l, "deepseek-reasoner"), strings.Contains(l, "deepseek-r1"),
		strings.Contains(l, "deepseek-v3"), strings.Contains(l, "minimax"), strings.Contains(l, "glm"), strings.Contains(l, "kimi"),
		strings.Contains(l, "k2p"), strings.Contains(l, "qwen"), strings.Contains(l, "big-pickle"):
		return ""
	case strings.Contains(l, "north-mini-code"):
		return "none"
	}
	return "low"
}

// memoKey names this encoder's encodings in a message's memo.
const memoKey = "openai-chat"

// contentPart is one element of a chat-completions content array.
type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *fileData `json:"file,omitempty"`
	// CacheControl marks the last part of a marked message.
	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type fileData struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data"`
}

// userContent is a user message's content as @ai-sdk/openai-compatible
// encodes it: one text part as a plain string, anything else as an array
// (images as image_url, PDFs as file, texts as text).
func userContent(m provider.Message) any {
	if m.Parts == nil {
		return m.Content
	}
	if len(m.Parts) == 1 && m.Parts[0].Type == provider.PartText {
		return m.Parts[0].Text
	}
	out := make([]contentPart, 0, len(m.Parts))
	for _, p := range m.Parts {
		switch {
		case p.Type == provider.PartText:
			out = append(out, contentPart{Type: "text", Text: p.Text})
		case p.Type == provider.PartFile && strings.HasPrefix(p.MediaType, "image/"):
			out = append(out, contentPart{Type: "image_url", ImageURL: &imageURL{URL: p.Data}})
		case p.Type == provider.PartFile && p.MediaType == "application/pdf":
			name := p.Filename
			if name == "" {
				name = "document.pdf"
			}
			out = append(out, contentPart{Type: "file", File: &fileData{Filename: name, FileData: p.Data}})
		}
	}
	return out
}

// assistantText is an assistant message's texts and reasoning, each
// concatenated (reasoning goes back as reasoning_content).
func assistantText(m provider.Message) (text, reasoning string) {
	if m.Parts == nil {
		return m.Content, ""
	}
	var b, r strings.Builder
	for _, p := range m.Parts {
		switch p.Type {
		case provider.PartText:
			b.WriteString(p.Text)
		case provider.PartReasoning:
			r.WriteString(p.Text)
		}
	}
	return b.String(), r.String()
}

// encodeMessage is one message in the OpenAI wire form; mark puts the
// cache mark where @ai-sdk/openai-compatible puts the last part's: on a
// system, tool or one-text user message itself, on the last part of a
// user message's array, on an assistant's last tool call (an assistant's
// text keeps none).
func encodeMessage(m provider.Message, mark bool) json.RawMessage {
	cm := chatMessage{Role: m.Role, Content: m.Content}
	switch m.Role {
	case "user":
		cm.Content = userContent(m)
		if mark {
			if parts, ok := cm.Content.([]contentPart); ok && len(parts) > 0 {
				parts[len(parts)-1].CacheControl = ephemeral
			} else {
				cm.CacheControl = ephemeral
			}
		}
	case "assistant":
		text, reasoning := assistantText(m)
		cm.Content, cm.ReasoningContent = text, reasoning
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			}
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
				ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args},
			})
		}
		if mark && len(cm.ToolCalls) > 0 {
			cm.ToolCalls[len(cm.ToolCalls)-1].CacheControl = ephemeral
		}
	case "tool":
		cm.ToolCallID = m.ToolCallID
		if mark {
			cm.CacheControl = ephemeral
		}
	case "system":
		if mark {
			cm.CacheControl = ephemeral
		}
	}
	b, err := json.Marshal(cm)
	if err != nil {
		// Strings, bools and a RawMessage-free struct cannot fail to encode.
		panic("openai: encode message: " + err.Error())
	}
	return b
}

// encode is the request body: the messages' encodings (memoized, so a long
// history costs a copy, not a re-encoding) then the other fields.
func (r chatRequest) encode() ([]byte, error) {
	rest, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	n := len(rest) + 16
	for _, m := range r.Messages {
		n += len(m) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, `{"messages":[`...)
	for i, m := range r.Messages {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	out = append(out, ']')
	if len(rest) > 2 {
		out = append(out, ',')
		out = append(out, rest[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}
