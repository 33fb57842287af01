package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/opencode-server/opencode-server/jsonw"
	"io"
	"strconv"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// wireUsage is a Messages API usage object (message_start and
// message_delta; message_delta's fields are cumulative).
type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	OutputTokensDetails      *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// contentBlock is a content_block_start's block (or a message_start
// content entry).
type contentBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	Data  string          `json:"data"`
}

// wireEvent is one stream event; Type tells which fields are set.
type wireEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID         *string        `json:"id"`
		Usage      wireUsage      `json:"usage"`
		StopReason *string        `json:"stop_reason"`
		Content    []contentBlock `json:"content"`
	} `json:"message"`
	ContentBlock *contentBlock `json:"content_block"`
	Delta        *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		Thinking    string  `json:"thinking"`
		Signature   string  `json:"signature"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// openBlock is a content block between its start and stop.
type openBlock struct {
	kind string // "text", "thinking", "redacted_thinking", "tool_use", or another type (ignored)
	id   string
	name string
	args []byte
}

// streamState turns the SSE events of one response into chunks.
type streamState struct {
	emit    func(provider.Chunk)
	status  int
	emitted bool

	blocks    map[int]*openBlock
	open      bool   // between message_start and message_stop
	messageID string // the open message's
	reason    string // the mapped stop reason ("" until one came)
	sawReason bool
	usage     usageState
	done      bool
}

// usageState accumulates the wire usage as the AI SDK does.
type usageState struct {
	input, output, cacheRead, cacheWrite, thinking int64
}

// Usage converts to provider.Usage the way the AI SDK's
// convertAnthropicMessagesUsage does: Input is inputTokens.total =
// input_tokens + cache_creation_input_tokens + cache_read_input_tokens
// (the API's input_tokens counts only the uncached rest), with CacheRead
// and CacheWrite its cached parts; Output is output_tokens, thinking
// included; Reasoning is output_tokens_details.thinking_tokens when the
// API reports it. OpenCode (session getUsage) then stores tokens.input as
// Input - CacheRead - CacheWrite, i.e. the API's input_tokens.
func (u usageState) Usage() provider.Usage {
	return provider.Usage{
		Input:      u.input + u.cacheRead + u.cacheWrite,
		Output:     u.output,
		Reasoning:  u.thinking,
		CacheRead:  u.cacheRead,
		CacheWrite: u.cacheWrite,
	}
}

func (s *streamState) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

func (s *streamState) streamError(msg string, body []byte) error {
	return &provider.APIError{StatusCode: s.status, Message: msg, ResponseBody: string(body)}
}

// read consumes the SSE body until message_stop or its end and emits the
// chunks, ending with exactly one Finish on success.
func (s *streamState) read(ctx context.Context, body io.Reader) error {
	ended, err := httpsse.Read(ctx, body, s.status, func(ev httpsse.Event) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		err := s.event(ev.Data)
		return s.done, err
	})
	switch {
	case errors.Is(err, httpsse.ErrLineTooLong):
		return s.streamError("SSE line too long", nil)
	case err != nil || ended:
		return err
	case s.sawReason:
		// message_delta told how it ended; message_stop was lost.
		s.finish()
		return nil
	}
	return s.streamError("stream ended before completion (no message_stop)", nil)
}

// event handles the data of one SSE event.
func (s *streamState) event(data []byte) error {
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return s.streamError("malformed stream event: "+err.Error(), data)
	}
	switch ev.Type {
	case "ping":
	case "message_start":
		return s.messageStart(&ev, data)
	case "content_block_start":
		if ev.ContentBlock != nil {
			s.blockStart(ev.Index, ev.ContentBlock)
		}
	case "content_block_delta":
		if ev.Delta != nil {
			s.blockDelta(&ev)
		}
	case "content_block_stop":
		s.blockStop(ev.Index)
	case "message_delta":
		if u := ev.Usage; u != nil {
			s.addUsage(u, false)
		}
		if ev.Delta != nil {
			s.reason, s.sawReason = mapStopReason(ev.Delta.StopReason), true
		}
	case "message_stop":
		s.open, s.messageID = false, ""
		s.finish()
	case "error":
		return s.errorEvent(&ev, data)
	default:
		// Newer event types are skipped (the AI SDK's schema would fail
		// on them; a stream that goes on is better).
	}
	return nil
}

// messageStart reads the usage of the prompt. A repeated message_start
// of the open message is ignored; another message's is an error, as in
// the AI SDK.
func (s *streamState) messageStart(ev *wireEvent, data []byte) error {
	m := ev.Message
	if m == nil {
		return s.streamError("malformed stream event: message_start without message", data)
	}
	id := ""
	if m.ID != nil {
		id = *m.ID
	}
	if s.open {
		if id == s.messageID {
			return nil
		}
		return s.streamError("Received message_start for message "+strconv.Quote(id)+
			" while message "+strconv.Quote(s.messageID)+" is still open.", data)
	}
	s.open, s.messageID = true, id
	s.addUsage(&m.Usage, true)
	if m.StopReason != nil {
		s.reason, s.sawReason = mapStopReason(m.StopReason), true
	}
	// Deferred tool calls may come whole in message_start.
	for i := range m.Content {
		c := &m.Content[i]
		if c.Type != "tool_use" {
			continue
		}
		args := compactInput(c.Input)
		tc := &provider.ToolCall{ID: c.ID, Name: c.Name}
		s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: tc})
		s.send(provider.Chunk{Kind: provider.ToolInputDelta, Text: string(args), ToolCall: tc})
		s.send(provider.Chunk{Kind: provider.ToolCallChunk, ToolCall: &provider.ToolCall{ID: c.ID, Name: c.Name, Arguments: args}})
	}
	return nil
}

// compactInput is a block's input object as JSON ("{}" when absent).
func compactInput(raw json.RawMessage) json.RawMessage {
	return json.RawMessage(jsonw.AppendCompact(nil, raw, "{", "{}"))
}

// addUsage merges a usage object: message_start sets the prompt's
// counts; message_delta updates what it carries.
func (s *streamState) addUsage(u *wireUsage, start bool) {
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		} else if start {
			*dst = 0
		}
	}
	set(&s.usage.input, u.InputTokens)
	set(&s.usage.cacheRead, u.CacheReadInputTokens)
	set(&s.usage.cacheWrite, u.CacheCreationInputTokens)
	if !start {
		set(&s.usage.output, u.OutputTokens)
		if d := u.OutputTokensDetails; d != nil && d.ThinkingTokens != nil {
			s.usage.thinking = *d.ThinkingTokens
		}
	}
}

func (s *streamState) blockStart(index int, cb *contentBlock) {
	if s.blocks == nil {
		s.blocks = make(map[int]*openBlock, 4)
	}
	b := &openBlock{kind: cb.Type}
	s.blocks[index] = b
	switch cb.Type {
	case "redacted_thinking":
		md, _ := json.Marshal(map[string]map[string]string{"anthropic": {"redactedData": cb.Data}})
		s.send(provider.Chunk{Kind: provider.ReasoningDelta, Metadata: md})
	case "tool_use":
		b.id, b.name = cb.ID, cb.Name
		// A deferred call may bring its input here; {} means it streams.
		if in := compactInput(cb.Input); string(in) != "{}" {
			b.args = append(b.args, in...)
		}
		s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: b.id, Name: b.name}})
	}
}

func (s *streamState) blockDelta(ev *wireEvent) {
	d := ev.Delta
	b := s.blocks[ev.Index]
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			s.send(provider.Chunk{Kind: provider.TextDelta, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			s.send(provider.Chunk{Kind: provider.ReasoningDelta, Text: d.Thinking})
		}
	case "signature_delta":
		// Signatures belong to thinking blocks only.
		if b != nil && b.kind == "thinking" {
			md, _ := json.Marshal(map[string]map[string]string{"anthropic": {"signature": d.Signature}})
			s.send(provider.Chunk{Kind: provider.ReasoningDelta, Metadata: md})
		}
	case "input_json_delta":
		if d.PartialJSON == "" || b == nil || b.kind != "tool_use" {
			return
		}
		b.args = append(b.args, d.PartialJSON...)
		s.send(provider.Chunk{Kind: provider.ToolInputDelta, Text: d.PartialJSON,
			ToolCall: &provider.ToolCall{ID: b.id, Name: b.name}})
	}
}

// blockStop completes a tool call with its whole input.
func (s *streamState) blockStop(index int) {
	b := s.blocks[index]
	if b == nil {
		return
	}
	delete(s.blocks, index)
	if b.kind == "thinking" || b.kind == "redacted_thinking" {
		// Each thinking block goes back as its own part, with its own
		// signature: end this one.
		s.send(provider.Chunk{Kind: provider.ReasoningEnd})
		return
	}
	if b.kind != "tool_use" {
		return
	}
	args := json.RawMessage("{}")
	if len(b.args) > 0 {
		args = json.RawMessage(b.args)
	}
	s.send(provider.Chunk{Kind: provider.ToolCallChunk, ToolCall: &provider.ToolCall{ID: b.id, Name: b.name, Arguments: args}})
}

// errorEvent fails the stream. Before any output it is the AI SDK's
// first-chunk check: an APICallError with status 529, retryable, for
// overloaded_error and status 500 otherwise; after output it is the
// stream's error (not retried: the output is the user's).
func (s *streamState) errorEvent(ev *wireEvent, data []byte) error {
	typ, msg := "", "stream error"
	if ev.Error != nil {
		typ = ev.Error.Type
		if ev.Error.Message != "" {
			msg = ev.Error.Message
		}
	}
	raw := data
	if ev.Error != nil {
		raw, _ = json.Marshal(ev.Error)
	}
	overloaded := typ == "overloaded_error"
	status := 500
	if overloaded {
		status = 529
	}
	e := &provider.APIError{StatusCode: status, Message: msg, Retryable: overloaded, ResponseBody: string(raw)}
	if overloaded && !s.emitted {
		return &httpsse.Retryable{Err: e, After: -1}
	}
	return e
}

// finish emits the one Finish chunk.
func (s *streamState) finish() {
	if s.done {
		return
	}
	s.done = true
	reason := s.reason
	if !s.sawReason {
		reason = "other"
	}
	s.send(provider.Chunk{Kind: provider.Finish, Reason: reason, Usage: s.usage.Usage()})
}

// mapStopReason is the AI SDK's mapAnthropicStopReason.
func mapStopReason(r *string) string {
	if r == nil {
		return "other"
	}
	switch *r {
	case "pause_turn", "end_turn", "stop_sequence":
		return "stop"
	case "refusal":
		return "content-filter"
	case "tool_use":
		return "tool-calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	}
	return "other"
}
