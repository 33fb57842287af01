package stubmodel

import (
	"reflect"
	"testing"
)

func TestDirectives(t *testing.T) {
	tools := []Tool{{Type: "function"}}
	user := func(text string) Request {
		return Request{N: 7, Tools: tools, Messages: []Message{{Role: "user", Content: text}}}
	}
	tests := []struct {
		name string
		req  Request
		want Response
	}{
		{"echo", user("hello"), Response{Text: "You said: hello"}},
		{"reply", user("reply: short\n" + "a long prompt"), Response{Text: "short"}},
		{"one call, inline then", user(`call:glob {"pattern":"*.md"} then: listed`),
			Response{ToolCalls: []ToolCall{{ID: "call_7_0", Name: "glob", Arguments: `{"pattern":"*.md"}`}}}},
		{"two calls on lines, think", user("think: hmm\ncall:glob {\"pattern\":\"*\"}\ncall:bash {\"command\":\"ls\"}\nthen: ok"),
			Response{Reasoning: "hmm", ToolCalls: []ToolCall{{ID: "call_7_0", Name: "glob", Arguments: `{"pattern":"*"}`},
				{ID: "call_7_1", Name: "bash", Arguments: `{"command":"ls"}`}}}},
		{"no tools offered (title request)", Request{Messages: []Message{{Role: "user", Content: "call:glob {}"}}},
			Response{Text: "You said: call:glob {}"}},
		{"after the tool result", Request{Tools: tools, Messages: []Message{{Role: "user", Content: "call:glob {} then: listed"},
			{Role: "assistant"}, {Role: "tool", Content: "x"}}}, Response{Text: "Done. listed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Directives(tt.req); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
