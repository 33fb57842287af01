package lifecycle

import (
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// unsupportedParts is msgs with every file the model cannot read replaced
// by OpenCode's error text (provider/transform.ts), so the model tells the
// user rather than failing the call. It is applied per call, not stored:
// the same conversation goes whole to a model that reads images.
func (m *Manager) unsupportedParts(msgs []provider.Message, model opencode.MessageModel) []provider.Message {
	info, _ := m.modelInfo(model)
	var out []provider.Message
	for i, msg := range msgs {
		if msg.Role != "user" || mediaParts(msg.Parts) == 0 {
			continue
		}
		var parts []provider.Part
		for k, p := range msg.Parts {
			if p.Type != provider.PartFile {
				continue
			}
			modality := catalog.Modality(p.MediaType)
			if modality == "" || (info != nil && info.Accepts(modality)) {
				continue
			}
			if parts == nil {
				parts = slices.Clone(msg.Parts)
			}
			name := modality
			if p.Filename != "" {
				name = `"` + p.Filename + `"`
			}
			parts[k] = provider.Part{Type: provider.PartText,
				Text: "ERROR: Cannot read " + name + " (this model does not support " + modality + " input). Inform the user."}
		}
		if parts == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		msg.Parts, msg.Memo = parts, nil
		out[i] = msg
	}
	if out == nil {
		return msgs
	}
	return out
}

// forModel is msgs as model gets them: an assistant message another model
// wrote keeps its reasoning only as text (when there is some) and none of
// that provider's metadata, as OpenCode's toModelMessages converts it.
func forModel(msgs []provider.Message, model string) []provider.Message {
	var out []provider.Message
	for i, msg := range msgs {
		if msg.From == "" || msg.From == model {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		var parts []provider.Part
		for _, p := range msg.Parts {
			if p.Type == provider.PartReasoning {
				if strings.TrimSpace(p.Text) == "" {
					continue
				}
				p.Type = provider.PartText
			}
			p.Metadata = nil
			parts = append(parts, p)
		}
		calls := make([]provider.ToolCall, len(msg.ToolCalls))
		for k, c := range msg.ToolCalls {
			c.Metadata = nil
			calls[k] = c
		}
		msg.Parts, msg.ToolCalls, msg.From, msg.Memo = parts, calls, "", nil
		if len(parts) == 0 {
			msg.Parts = nil
		}
		out[i] = msg
	}
	if out == nil {
		return msgs
	}
	return out
}
