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
			if got := string(encodeMessage(c.msg)); got != c.want {
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
