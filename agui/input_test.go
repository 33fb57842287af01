package agui

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodeInput: the shapes AG-UI's schema allows decode; every other
// one is an inputError naming what is wrong.
func TestDecodeInput(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		ok         bool
		want       string
	}{
		{"minimal", `{"threadId":"t","runId":"r","messages":[]}`, true, ""},
		{"full", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"hi"},
			{"id":"2","role":"assistant","content":"yo","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"id":"3","role":"tool","toolCallId":"c","content":"done"},{"id":"4","role":"reasoning","content":"hm"},
			{"id":"5","role":"user","content":[{"type":"text","text":"see"},{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"}}]}],
			"tools":[{"name":"f","description":"d","parameters":{"type":"object"}}],"context":[{"description":"d","value":"v"}],
			"state":{"a":1},"forwardedProps":{"delivery":"steer","agent":"plan"},"resume":[{"interruptId":"per_1","status":"resolved","payload":{"reply":"once"}}]}`, true, ""},
		{"null tools", `{"threadId":"t","runId":"r","messages":[],"tools":null}`, true, ""},
		{"not an object", `[1]`, false, "not a JSON"},
		{"messages missing", `{"threadId":"t","runId":"r"}`, false, "messages must be an array"},
		{"messages an object", `{"threadId":"t","runId":"r","messages":{}}`, false, "messages must be an array"},
		{"threadId a number", `{"threadId":1,"runId":"r","messages":[]}`, false, "threadId"},
		{"empty runId", `{"threadId":"t","runId":"","messages":[]}`, false, "runId"},
		{"unknown role", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"robot","content":"x"}]}`, false, "not an AG-UI role"},
		{"message without id", `{"threadId":"t","runId":"r","messages":[{"role":"user","content":"x"}]}`, false, "id"},
		{"user content a number", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":5}]}`, false, "content"},
		{"unknown part", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"hologram"}]}]}`, false, "hologram"},
		{"data without mime", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"image","source":{"type":"data","value":"AA"}}]}]}`, false, "mimeType"},
		{"tool without call", `{"threadId":"t","runId":"r","messages":[{"id":"1","role":"tool","content":"x"}]}`, false, "toolCallId"},
		{"tools an object", `{"threadId":"t","runId":"r","messages":[],"tools":{}}`, false, "tools must be an array"},
		{"tool params a string", `{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"f","description":"","parameters":"x"}]}`, false, "parameters"},
		{"resume bad status", `{"threadId":"t","runId":"r","messages":[],"resume":[{"interruptId":"i","status":"maybe"}]}`, false, "resume"},
		{"bad delivery", `{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"delivery":1}}`, false, "delivery"},
		{"agent not a string", `{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"agent":["stub"]}}`, false, "forwardedProps.agent"},
		{"abort not bool", `{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"abort":"yes"}}`, false, "abort"},
		{"forwardedProps an array", `{"threadId":"t","runId":"r","messages":[],"forwardedProps":[]}`, false, "forwardedProps"},
		{"huge state", `{"threadId":"t","runId":"r","messages":[],"state":"` + strings.Repeat("x", maxState) + `"}`, false, "state is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeInput([]byte(tt.body))
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			ie, ok := err.(*inputError)
			if !ok || ie.status < 400 || ie.status > 499 || !strings.Contains(ie.message, tt.want) {
				t.Fatalf("error %v, want a 4xx naming %q", err, tt.want)
			}
		})
	}
}

// FuzzDecodeInput: the decoder never panics, and what it accepts has
// the fields the handler relies on.
func FuzzDecodeInput(f *testing.F) {
	for _, s := range []string{
		`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":"hi"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"user","content":[{"type":"image","source":{"type":"url","value":"http://x"}}]}]}`,
		`{"threadId":"t","runId":"r","messages":[],"forwardedProps":{"delivery":"queue","abort":true},"resume":[]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"1","role":"tool","toolCallId":"c","content":[{"type":"text","text":"x"}]}]}`,
		`{}`, `null`, `[]`, `{"messages":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeInput(b)
		if err != nil {
			if _, ok := err.(*inputError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if in.ThreadID == "" || in.RunID == "" {
			t.Fatalf("accepted without a thread or run: %s", b)
		}
		for _, m := range in.Messages {
			if m.Role == "user" {
				parts, err := userContent(m.Content)
				if err != nil {
					t.Fatalf("accepted user content it cannot read: %v", err)
				}
				_ = userParts(parts)
			}
		}
		_, _ = json.Marshal(in)
	})
}
