package openai

import (
	"encoding/json"

	"github.com/opencode-server/opencode-server/provider"
)

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model         string            `json:"model"`
	MaxTokens     int               `json:"max_tokens,omitempty"`
	Messages      []json.RawMessage `json:"messages"`
	Tools         []chatTool        `json:"tools,omitempty"`
	ToolChoice    string            `json:"tool_choice,omitempty"`
	Temperature   *float64          `json:"temperature,omitempty"`
	TopP          *float64          `json:"top_p,omitempty"`
	Stream        bool              `json:"stream"`
	StreamOptions streamOptions     `json:"stream_options"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
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
	if req.System != "" {
		out.Messages = append(out.Messages, encodeMessage(provider.Message{Role: "system", Content: req.System}))
	}
	for _, m := range req.Messages {
		if m.Memo != nil {
			out.Messages = append(out.Messages, m.Memo.Bytes(func() []byte { return encodeMessage(m) }))
		} else {
			out.Messages = append(out.Messages, encodeMessage(m))
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

// encodeMessage is one message in the OpenAI wire form.
func encodeMessage(m provider.Message) json.RawMessage {
	cm := chatMessage{Role: m.Role, Content: m.Content}
	switch m.Role {
	case "assistant":
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			}
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
				ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args},
			})
		}
	case "tool":
		cm.ToolCallID = m.ToolCallID
	}
	b, err := json.Marshal(cm)
	if err != nil {
		// Strings, bools and a RawMessage-free struct cannot fail to encode.
		panic("openai: encode message: " + err.Error())
	}
	return b
}
