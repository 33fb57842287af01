package opencode

import (
	"encoding/json"
	"strconv"
)

// ToolContent is one item of a v2 tool result's content.
type ToolContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolProviderInfo says who ran a tool: the `provider` of v2 tool events
// and parts.
type ToolProviderInfo struct {
	Executed bool `json:"executed"`
}

// ToolProvider says who ran a tool: always us (OpenCode's provider-executed
// tools are a provider feature no OpenAI-compatible model offers).
var ToolProvider = ToolProviderInfo{Executed: false}

// ToolOutcome is the v2 view of a finished tool part, as
// session.next.tool.success carries it and the v2 message shows it:
// structured data and content items, derived from the v1 state so that the
// event and every later projection of the stored part agree.
func ToolOutcome(p Part) (structured json.RawMessage, content []ToolContent) {
	st := p.State
	if st == nil || st.Status != "completed" {
		return json.RawMessage("{}"), []ToolContent{}
	}
	out := ""
	if st.Output != nil {
		out = *st.Output
	}
	structured = st.Metadata
	if len(structured) == 0 {
		structured = json.RawMessage("{}")
	}
	if p.Tool == "bash" {
		// OpenCode's bash result: the output, then the exit code as its own
		// item; structured is {exit, truncated}.
		var md struct {
			Output    *string `json:"output"`
			Exit      int     `json:"exit"`
			Truncated bool    `json:"truncated"`
		}
		_ = json.Unmarshal(st.Metadata, &md)
		text := out
		if md.Output != nil {
			text = *md.Output
		}
		if text == "" {
			text = "(no output)"
		}
		structured, _ = json.Marshal(map[string]any{"exit": md.Exit, "truncated": md.Truncated})
		return structured, []ToolContent{{Type: "text", Text: text},
			{Type: "text", Text: "Command exited with code " + strconv.Itoa(md.Exit) + "."}}
	}
	return structured, []ToolContent{{Type: "text", Text: out}}
}
