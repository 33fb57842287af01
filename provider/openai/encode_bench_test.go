package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/provider"
)

// BenchmarkEncode200 is the encoding cost of one call on a 200-message
// history (the same shape as provider/anthropic's benchmark: user texts,
// assistant texts with a tool call, tool results), memoized as lifecycle
// memoizes it: after the first call each message is encoded once.
func BenchmarkEncode200(b *testing.B) {
	msgs := make([]provider.Message, 0, 200)
	for i := 0; len(msgs) < 200; i++ {
		id := fmt.Sprintf("call_%04d", i)
		msgs = append(msgs,
			provider.Message{Role: "user", Content: strings.Repeat(fmt.Sprintf("question %d ", i), 20), Memo: &provider.Memo{}},
			provider.Message{Role: "assistant", Memo: &provider.Memo{}, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: strings.Repeat("thinking about it. ", 30)},
				{Type: provider.PartText, Text: "Let me run a command."}},
				ToolCalls: []provider.ToolCall{{ID: id, Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la /tmp","description":"list"}`)}}},
			provider.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("drwxr-xr-x file\n", 60), Memo: &provider.Memo{}},
		)
	}
	tools := make([]provider.ToolSpec, 12)
	for i := range tools {
		tools[i] = provider.ToolSpec{Name: fmt.Sprint("tool", i), Description: strings.Repeat("Does things. ", 40),
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The command"},"timeout":{"type":"number"}},"required":["command"]}`)}
	}
	req := provider.Request{ModelID: "gpt-x", System: strings.Repeat("You are a coding agent. ", 400), Messages: msgs[:200], Tools: tools, MaxTokens: 32000}
	out, _ := buildRequest(req).encode()
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := buildRequest(req).encode(); err != nil {
			b.Fatal(err)
		}
	}
}
