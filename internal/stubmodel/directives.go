package stubmodel

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Directives is a script a test writes in its prompt, so one stub serves
// the real opencode serve and ours alike without knowing which is asking.
// In the last user message,
//
//	call:NAME {"json":"args"}
//
// becomes a tool call (several may follow each other, on one line or
// several), when the request offers tools (a title request offers none and
// gets the echo). Once the last message is a tool result, the stub answers
// "Done." followed by the text after "then:" (to the end of its line), so a
// test can see the turn's final text. "think:TEXT" (to the end of its line)
// streams TEXT as reasoning first. "reply:TEXT" (to the end of its line)
// answers TEXT instead of the echo (a big prompt with a short answer).
// Every other prompt is echoed as Echo does.
func Directives(req Request) Response {
	last := req.LastMessage()
	text := req.LastUserText()
	var reasoning, then, reply string
	var calls []ToolCall
	rest := text
	for {
		i := strings.IndexAny(rest, "crt")
		if i < 0 {
			break
		}
		rest = rest[i:]
		switch {
		case strings.HasPrefix(rest, "call:"):
			name, after, _ := strings.Cut(strings.TrimPrefix(rest, "call:"), " ")
			args := "{}"
			dec := json.NewDecoder(strings.NewReader(after))
			var v json.RawMessage
			if dec.Decode(&v) == nil {
				args = string(v)
				after = after[dec.InputOffset():]
			}
			calls = append(calls, ToolCall{ID: "call_" + strconv.Itoa(req.N) + "_" + strconv.Itoa(len(calls)), Name: strings.TrimSpace(name), Arguments: args})
			rest = after
		case strings.HasPrefix(rest, "then:"):
			line, after, _ := strings.Cut(strings.TrimPrefix(rest, "then:"), "\n")
			then, rest = strings.TrimSpace(line), after
		case strings.HasPrefix(rest, "reply:"):
			line, after, _ := strings.Cut(strings.TrimPrefix(rest, "reply:"), "\n")
			reply, rest = strings.TrimSpace(line), after
		case strings.HasPrefix(rest, "think:"):
			line, after, _ := strings.Cut(strings.TrimPrefix(rest, "think:"), "\n")
			reasoning, rest = strings.TrimSpace(line), after
		default:
			rest = rest[1:]
		}
	}
	if len(calls) == 0 || len(req.Tools) == 0 {
		if reply != "" {
			return Response{Reasoning: reasoning, Text: reply}
		}
		return Response{Reasoning: reasoning, Text: "You said: " + text}
	}
	if last.Role == "tool" {
		out := "Done."
		if then != "" {
			out += " " + then
		}
		return Response{Text: out}
	}
	return Response{Reasoning: reasoning, ToolCalls: calls}
}
