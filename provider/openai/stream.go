package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// streamChunk is one chat.completion.chunk.
type streamChunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        json.RawMessage `json:"reasoning"`
			ToolCalls        []toolDelta     `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type toolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// toolCall is a tool call being assembled from deltas.
type toolCall struct {
	index   int
	id      string
	name    string
	args    []byte
	started bool // ToolInputStart emitted
	sent    int  // bytes of args emitted as ToolInputDelta
	done    bool // ToolCallChunk emitted
}

// streamState turns SSE events of one response into chunks.
type streamState struct {
	emit    func(provider.Chunk)
	status  int
	emitted bool

	calls     []*toolCall // in arrival order
	reason    string      // wire finish_reason, "" until one came
	sawReason bool
	usage     provider.Usage
	done      bool
}

func (s *streamState) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

// read consumes the SSE body until [DONE] or its end and emits the chunks,
// ending with exactly one Finish on success.
func (s *streamState) read(ctx context.Context, body io.Reader) error {
	ended, err := httpsse.Read(ctx, body, s.status, func(ev httpsse.Event) (bool, error) {
		err := s.event(ctx, ev.Data)
		return s.done, err
	})
	switch {
	case errors.Is(err, httpsse.ErrLineTooLong):
		return s.streamError("SSE line too long", nil)
	case err != nil || ended:
		return err
	case s.sawReason:
		s.finish()
		return nil
	}
	return s.streamError("stream ended before completion (no finish_reason and no [DONE])", nil)
}

func (s *streamState) streamError(msg string, body []byte) error {
	return &provider.APIError{StatusCode: s.status, Message: msg, ResponseBody: string(body)}
}

// event handles the data of one SSE event.
func (s *streamState) event(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		s.finish()
		return nil
	}
	var c streamChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return s.streamError("malformed stream chunk: "+err.Error(), data)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return s.streamError(errorMessage(s.status, data), data)
	}
	if u := c.Usage; u != nil {
		s.usage = provider.Usage{Input: u.PromptTokens, Output: u.CompletionTokens}
		if u.CompletionTokensDetails != nil {
			s.usage.Reasoning = u.CompletionTokensDetails.ReasoningTokens
		}
		if u.PromptTokensDetails != nil {
			s.usage.CacheRead = u.PromptTokensDetails.CachedTokens
		}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		d := &ch.Delta
		if r := d.ReasoningContent; r != nil && *r != "" {
			s.send(provider.Chunk{Kind: provider.ReasoningDelta, Text: *r})
		} else if r := rawString(d.Reasoning); r != "" {
			s.send(provider.Chunk{Kind: provider.ReasoningDelta, Text: r})
		}
		if t := d.Content; t != nil && *t != "" {
			s.send(provider.Chunk{Kind: provider.TextDelta, Text: *t})
		}
		for j := range d.ToolCalls {
			s.toolDelta(&d.ToolCalls[j])
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.reason, s.sawReason = *ch.FinishReason, true
			s.flushCalls()
		}
	}
	return nil
}

// rawString is the value of a JSON string, else "".
func rawString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// toolDelta merges one tool_calls delta into its call (by index; without
// an index, a new id starts a new call and anything else extends the last).
func (s *streamState) toolDelta(d *toolDelta) {
	var tc *toolCall
	if d.Index != nil {
		for _, c := range s.calls {
			if c.index == *d.Index {
				tc = c
				break
			}
		}
	} else if n := len(s.calls); n > 0 && (d.ID == "" || d.ID == s.calls[n-1].id) {
		tc = s.calls[n-1]
	}
	if tc == nil {
		idx := 0
		if d.Index != nil {
			idx = *d.Index
		} else {
			for _, c := range s.calls {
				idx = max(idx, c.index+1)
			}
		}
		tc = &toolCall{index: idx}
		s.calls = append(s.calls, tc)
	}
	if tc.id == "" {
		tc.id = d.ID
	}
	if tc.name == "" {
		tc.name = d.Function.Name
	}
	if a := d.Function.Arguments; len(a) > 0 && string(a) != "null" {
		if a[0] == '"' {
			tc.args = append(tc.args, rawString(a)...)
		} else {
			tc.args = append(tc.args, a...) // a non-standard object
		}
	}
	if !tc.started && !tc.done && tc.id != "" && tc.name != "" {
		tc.started = true
		s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: tc.id, Name: tc.name}})
	}
	if tc.started && !tc.done && len(tc.args) > tc.sent {
		s.send(provider.Chunk{Kind: provider.ToolInputDelta, Text: string(tc.args[tc.sent:]), ToolCall: &provider.ToolCall{ID: tc.id, Name: tc.name}})
		tc.sent = len(tc.args)
	}
}

// flushCalls emits every call not yet emitted as a ToolCallChunk, in index
// order. A call that never got an id is given "call_<index>".
func (s *streamState) flushCalls() {
	slices.SortStableFunc(s.calls, func(a, b *toolCall) int { return a.index - b.index })
	for _, tc := range s.calls {
		if tc.done {
			continue
		}
		tc.done = true
		if tc.id == "" {
			tc.id = "call_" + strconv.Itoa(tc.index)
		}
		if !tc.started {
			tc.started = true
			s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: tc.id, Name: tc.name}})
		}
		args := json.RawMessage("{}")
		if len(tc.args) > 0 {
			args = json.RawMessage(bytes.Clone(tc.args))
		}
		s.send(provider.Chunk{Kind: provider.ToolCallChunk, ToolCall: &provider.ToolCall{ID: tc.id, Name: tc.name, Arguments: args}})
	}
}

// finish flushes pending tool calls and emits the one Finish chunk.
func (s *streamState) finish() {
	if s.done {
		return
	}
	s.done = true
	s.flushCalls()
	s.send(provider.Chunk{Kind: provider.Finish, Reason: mapReason(s.reason, len(s.calls) > 0), Usage: s.usage})
}

// mapReason maps an OpenAI finish_reason to the AI SDK's names. A stream
// that ended with [DONE] but no finish_reason counts as "tool-calls" when
// it made tool calls (so they run) and "other" otherwise.
func mapReason(r string, calls bool) string {
	switch r {
	case "stop":
		return "stop"
	case "tool_calls", "function_call":
		return "tool-calls"
	case "length":
		return "length"
	case "content_filter":
		return "content-filter"
	case "":
		if calls {
			return "tool-calls"
		}
	}
	return "other"
}
