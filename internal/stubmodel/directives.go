package stubmodel

import (
	"strconv"
	"strings"
)

// Directives is a script a test writes in its prompt, so one stub serves
// the real opencode serve and ours alike without knowing which is asking.
// Each line of the last user message of the form
//
//	call:NAME {"json":"args"}
//
// becomes a tool call, when the request offers tools (a title request
// offers none and gets the echo). Once the last message is a tool result,
// the stub answers "Done." followed by the text after any "then:" line, so
// a test can see the turn's final text. A line "think:TEXT" streams TEXT as
// reasoning first. Every other prompt is echoed as Echo does.
func Directives(req Request) Response {
	last := req.LastMessage()
	text := req.LastUserText()
	var reasoning, then string
	var calls []ToolCall
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "call:"):
			name, args, _ := strings.Cut(strings.TrimPrefix(line, "call:"), " ")
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			calls = append(calls, ToolCall{ID: "call_" + strconv.Itoa(req.N) + "_" + strconv.Itoa(len(calls)), Name: name, Arguments: strings.TrimSpace(args)})
		case strings.HasPrefix(line, "then:"):
			then = strings.TrimSpace(strings.TrimPrefix(line, "then:"))
		case strings.HasPrefix(line, "think:"):
			reasoning = strings.TrimSpace(strings.TrimPrefix(line, "think:"))
		}
	}
	if len(calls) == 0 || len(req.Tools) == 0 {
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
