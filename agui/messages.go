package agui

import (
	"encoding/json"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// clientKey is where an admitted message keeps the ID its AG-UI client
// gave it, when that ID is not ours: in its first part's metadata, so it
// is stored in the same commit as the admission.
const clientKey = "agui"

type partMeta struct {
	AGUI *struct {
		ClientMessageID string `json:"clientMessageId"`
	} `json:"agui,omitempty"`
}

func clientIDOf(parts []opencode.Part) string {
	for _, p := range parts {
		if len(p.Metadata) == 0 {
			continue
		}
		var m partMeta
		if json.Unmarshal(p.Metadata, &m) == nil && m.AGUI != nil {
			return m.AGUI.ClientMessageID
		}
	}
	return ""
}

func clientMeta(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{clientKey: map[string]string{"clientMessageId": id}})
	return b
}

// userParts are a user message's content as our parts.
func userParts(content []ContentPart) []opencode.Part {
	var out []opencode.Part
	for _, c := range content {
		switch c.Type {
		case "text":
			out = append(out, opencode.Part{Type: opencode.PartText, Text: c.Text})
		default:
			p := opencode.Part{Type: opencode.PartFile, Mime: c.Source.MimeType, Filename: c.Type}
			switch c.Source.Type {
			case "data":
				p.URL = "data:" + c.Source.MimeType + ";base64," + c.Source.Value
			default:
				p.URL = c.Source.Value
			}
			if p.Mime == "" {
				p.Mime = "application/octet-stream"
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = append(out, opencode.Part{Type: opencode.PartText})
	}
	return out
}

// contextPart is the run's context[] for the model: a synthetic text part
// (the model reads it, the UIs do not show it).
func contextPart(ctx []Context) (opencode.Part, bool) {
	if len(ctx) == 0 {
		return opencode.Part{}, false
	}
	var b strings.Builder
	b.WriteString("Context from the user's application:\n")
	for _, c := range ctx {
		b.WriteString("<context description=")
		d, _ := json.Marshal(c.Description)
		b.Write(d)
		b.WriteString(">\n")
		b.WriteString(c.Value)
		b.WriteString("\n</context>\n")
	}
	return opencode.Part{Type: opencode.PartText, Text: b.String(), Synthetic: true}, true
}

// snapshot is the conversation in AG-UI's message shape, with our IDs:
// user and assistant messages by their msg_ IDs, a tool result as a
// `tool` message with its tool part's prt_ ID, reasoning by its part's ID.
// Pending inputs (admitted, not yet delivered) follow as user messages.
func snapshot(conv []opencode.MessageWithParts, inbox []*opencode.Input) []any {
	out := []any{}
	seen := map[string]bool{}
	for _, m := range conv {
		seen[m.Info.ID] = true
		switch m.Info.Role {
		case opencode.User:
			out = append(out, userMessage(m.Info.ID, m.Parts))
		case opencode.Assistant:
			var text strings.Builder
			var calls []any
			var tools, reasoning []any
			for _, p := range m.Parts {
				switch p.Type {
				case opencode.PartText:
					if !p.Synthetic && !p.Ignored {
						text.WriteString(p.Text)
					}
				case opencode.PartReasoning:
					if p.Text != "" {
						reasoning = append(reasoning, map[string]any{"id": p.ID, "role": "reasoning", "content": p.Text})
					}
				case opencode.PartTool:
					args := "{}"
					if p.State != nil && len(p.State.Input) > 0 {
						args = string(p.State.Input)
					}
					calls = append(calls, map[string]any{"id": p.CallID, "type": "function",
						"function": map[string]any{"name": p.Tool, "arguments": args}})
					if r, ok := toolMessage(p); ok {
						tools = append(tools, r)
					}
				}
			}
			out = append(out, reasoning...)
			am := map[string]any{"id": m.Info.ID, "role": "assistant"}
			if text.Len() > 0 {
				am["content"] = text.String()
			}
			if len(calls) > 0 {
				am["toolCalls"] = calls
			}
			if text.Len() > 0 || len(calls) > 0 {
				out = append(out, am)
			}
			out = append(out, tools...)
		}
	}
	for _, in := range inbox {
		if !seen[in.ID] {
			out = append(out, userMessage(in.ID, in.Parts))
		}
	}
	return out
}

func userMessage(id string, parts []opencode.Part) map[string]any {
	var content []any
	var text strings.Builder
	media := false
	for _, p := range parts {
		switch p.Type {
		case opencode.PartText:
			if p.Synthetic || p.Ignored {
				continue
			}
			text.WriteString(p.Text)
			content = append(content, map[string]any{"type": "text", "text": p.Text})
		case opencode.PartFile:
			kind := "document"
			switch {
			case strings.HasPrefix(p.Mime, "image/"):
				kind = "image"
			case strings.HasPrefix(p.Mime, "audio/"):
				kind = "audio"
			case strings.HasPrefix(p.Mime, "video/"):
				kind = "video"
			}
			src := map[string]any{"type": "url", "value": p.URL, "mimeType": p.Mime}
			if data, ok := strings.CutPrefix(p.URL, "data:"); ok {
				if _, b64, ok := strings.Cut(data, ";base64,"); ok {
					src = map[string]any{"type": "data", "value": b64, "mimeType": p.Mime}
				}
			}
			media = true
			content = append(content, map[string]any{"type": kind, "source": src})
		}
	}
	m := map[string]any{"id": id, "role": "user"}
	if media {
		m["content"] = content
	} else {
		m["content"] = text.String()
	}
	return m
}

// toolMessage is a finished tool call's result as a tool message.
func toolMessage(p opencode.Part) (map[string]any, bool) {
	if p.State == nil {
		return nil, false
	}
	switch p.State.Status {
	case "completed":
		out := ""
		if p.State.Output != nil {
			out = *p.State.Output
		}
		return map[string]any{"id": p.ID, "role": "tool", "toolCallId": p.CallID, "content": out}, true
	case "error":
		return map[string]any{"id": p.ID, "role": "tool", "toolCallId": p.CallID, "content": "Error: " + p.State.Error,
			"error": p.State.Error}, true
	}
	return nil, false
}

// identify gives a message's parts their IDs and returns the message's:
// the client's when it is a msg_ ID, else one minted, the client's kept in
// the first part's metadata (stored in the same commit as the message).
func (h *Handler) identify(clientID string, parts []opencode.Part) string {
	for j := range parts {
		parts[j].ID = h.o.IDs.NewPart()
	}
	if identifier.Check(identifier.Message, clientID) == nil {
		return clientID
	}
	parts[0].Metadata = clientMeta(clientID)
	return h.o.IDs.NewMessage()
}

// toolResult is a tool message's result: its content, or its error when
// it failed with no content.
func toolResult(m Message) (string, bool) {
	out := toolContent(m.Content)
	failed := m.Error != ""
	if failed && out == "" {
		out = m.Error
	}
	return out, failed
}

// noResult is the error of a history's call the client sent no result for.
const noResult = "The client sent no result for this call"

// history is a run's history as our messages, for Core.StoreHistory: a
// user message's content, an assistant message's text and tool calls,
// each call with the result a tool message of the run gives it. A msg_
// ID is kept as the message's; any other is kept in its first part's
// metadata, as an admission keeps it. An assistant message with neither
// text nor calls has nothing to store.
func (h *Handler) history(hist, all []Message) []opencode.MessageWithParts {
	results := map[string]Message{}
	for _, m := range all {
		if m.Role == "tool" {
			results[m.ToolCallID] = m
		}
	}
	var out []opencode.MessageWithParts
	for _, m := range hist {
		var parts []opencode.Part
		role := opencode.User
		if m.Role == "user" {
			content, _ := userContent(m.Content)
			parts = userParts(content)
		} else {
			role = opencode.Assistant
			if t := toolContent(m.Content); t != "" {
				parts = append(parts, opencode.Part{Type: opencode.PartText, Text: t})
			}
			for _, c := range m.ToolCalls {
				parts = append(parts, historyCall(c, results))
			}
			if len(parts) == 0 {
				continue
			}
		}
		id := h.identify(m.ID, parts)
		out = append(out, opencode.MessageWithParts{Info: opencode.Message{ID: id, Role: role}, Parts: parts})
	}
	return out
}

// historyCall is one call of a history's assistant message as a tool
// part, finished with its result (an error when it has none).
func historyCall(c ToolCall, results map[string]Message) opencode.Part {
	input := json.RawMessage(c.Function.Arguments)
	if !json.Valid(input) {
		input = json.RawMessage("{}")
	}
	name := c.Function.Name
	if name == "" {
		name = "unknown"
	}
	st := &opencode.ToolState{Status: "error", Input: input, Error: noResult}
	if r, ok := results[c.ID]; ok {
		out, failed := toolResult(r)
		if failed {
			st.Error = out
		} else {
			st.Status, st.Error, st.Output, st.Title = "completed", "", &out, name
		}
	}
	return opencode.Part{Type: opencode.PartTool, CallID: c.ID, Tool: name, State: st}
}
