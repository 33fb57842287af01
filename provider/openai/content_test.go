package openai

import (
	"encoding/json"
	"testing"

	"github.com/opencode-server/opencode-server/provider"
)

// TestMessageContent: each message shape is encoded as
// @ai-sdk/openai-compatible encodes it (convert-to-openai-compatible-chat-
// messages): one user text as a string, several parts as an array with
// images as image_url and PDFs as file, an assistant's texts concatenated
// and its reasoning as reasoning_content, tool results and failed calls as
// their text.
func TestMessageContent(t *testing.T) {
	img := "data:image/png;base64,iVBORw0KGgo="
	cases := []struct {
		name string
		msg  provider.Message
		want string
	}{
		{"one text", provider.Message{Role: "user", Content: "hi"},
			`{"role":"user","content":"hi"}`},
		{"one text part", provider.Message{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "hi"}}},
			`{"role":"user","content":"hi"}`},
		{"texts", provider.Message{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "a"}, {Type: provider.PartText, Text: "b"}}},
			`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`},
		{"image", provider.Message{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "see"},
			{Type: provider.PartFile, MediaType: "image/png", Data: img, Filename: "a.png"}}},
			`{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"` + img + `"}}]}`},
		{"pdf", provider.Message{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "read"},
			{Type: provider.PartFile, MediaType: "application/pdf", Data: "data:application/pdf;base64,JVBERg==", Filename: "a.pdf"}}},
			`{"role":"user","content":[{"type":"text","text":"read"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERg=="}}]}`},
		{"assistant parts", provider.Message{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "hmm"},
			{Type: provider.PartText, Text: "ok"}}},
			`{"role":"assistant","content":"ok","reasoning_content":"hmm"}`},
		{"assistant call", provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "read", Arguments: json.RawMessage(`{"filePath":"/a"}`)}}},
			`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"filePath\":\"/a\"}"}}]}`},
		{"tool error", provider.Message{Role: "tool", ToolCallID: "c1", Content: "File not found: /a", IsError: true},
			`{"role":"tool","content":"File not found: /a","tool_call_id":"c1"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(encodeMessage(c.msg, false)); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestMemoPerEncoder: a memo holds one encoder's bytes; another encoder's
// key gets its own encoding, never the first one's.
func TestMemoPerEncoder(t *testing.T) {
	var m provider.Memo
	calls := 0
	enc := func(s string) func() []byte { return func() []byte { calls++; return []byte(s) } }
	if got := string(m.Bytes("a", enc("A"))); got != "A" {
		t.Fatal(got)
	}
	if got := string(m.Bytes("a", enc("X"))); got != "A" || calls != 1 {
		t.Fatalf("cached: %q after %d encodings", got, calls)
	}
	if got := string(m.Bytes("b", enc("B"))); got != "B" {
		t.Fatalf("another encoder got %q", got)
	}
}

// TestCacheMarks: a Claude model's prompt is marked as OpenCode's
// applyCaching marks it through @ai-sdk/openai-compatible: the system
// message, and the last two other messages (a run of tool results counts
// as one, its last result marked; an assistant's mark sits on its last
// tool call, and an assistant's text keeps none); any other model gets no
// marks. A title request of a reasoning model takes the first variant's
// effort.
func TestCacheMarks(t *testing.T) {
	call := func(id string) provider.ToolCall {
		return provider.ToolCall{ID: id, Name: "read", Arguments: json.RawMessage(`{}`)}
	}
	hist := []provider.Message{
		{Role: "user", Content: "one"},
		{Role: "assistant", Content: "said"},
		{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "a"}, {Type: provider.PartText, Text: "b"}}},
		{Role: "assistant", ToolCalls: []provider.ToolCall{call("c1"), call("c2")}},
		{Role: "tool", ToolCallID: "c1", Content: "r1"},
		{Role: "tool", ToolCallID: "c2", Content: "r2"},
	}
	marks := func(req provider.Request) string {
		var body struct {
			Messages []struct {
				Role         string          `json:"role"`
				Content      json.RawMessage `json:"content"`
				CacheControl *cacheControl   `json:"cache_control"`
				ToolCalls    []struct {
					CacheControl *cacheControl `json:"cache_control"`
				} `json:"tool_calls"`
			} `json:"messages"`
			ReasoningEffort string `json:"reasoning_effort"`
		}
		b, err := buildRequest(req).encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		out := body.ReasoningEffort
		for _, m := range body.Messages {
			out += " " + m.Role[:1]
			if m.CacheControl != nil {
				out += "*"
			}
			for _, c := range m.ToolCalls {
				if c.CacheControl != nil {
					out += "c*"
				} else {
					out += "c"
				}
			}
			var parts []struct {
				CacheControl *cacheControl `json:"cache_control"`
			}
			if json.Unmarshal(m.Content, &parts) == nil {
				for _, p := range parts {
					if p.CacheControl != nil {
						out += "p*"
					} else {
						out += "p"
					}
				}
			}
		}
		return out
	}
	yes := true
	for _, c := range []struct {
		name string
		req  provider.Request
		want string
	}{
		{"tool run", provider.Request{ModelID: "anthropic/claude-sonnet-4.5", System: "s", Messages: hist},
			" s* u a upp acc* t t*"},
		{"multi-part user and assistant text", provider.Request{ModelID: "claude-sonnet-4-5", System: "s", Messages: hist[:3]},
			" s* u a upp*"},
		{"one user text", provider.Request{ModelID: "claude-sonnet-4-5", System: "s", Messages: hist[:1]},
			" s* u*"},
		{"not claude", provider.Request{ModelID: "gpt-4.1", System: "s", Messages: hist}, " s u a upp acc t t"},
		{"title of a reasoning model", provider.Request{ModelID: "claude-sonnet-4-5", System: "s", Messages: hist[:1],
			Purpose: provider.PurposeTitle, Reasoning: &yes}, "low s* u*"},
		{"title of a model with no variants", provider.Request{ModelID: "qwen3-coder", Messages: hist[:1],
			Purpose: provider.PurposeTitle, Reasoning: &yes}, " u"},
		{"title of a model not known to reason", provider.Request{ModelID: "gpt-oss", Messages: hist[:1],
			Purpose: provider.PurposeTitle}, " u"},
	} {
		if got := marks(c.req); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
