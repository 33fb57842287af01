package openairesponses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/jsonw"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// wireUsage is a response's usage (OpenAIResponsesUsage).
type wireUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens     *int64 `json:"cached_tokens"`
		CacheWriteTokens *int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Usage converts to provider.Usage as the AI SDK's
// convertOpenAIResponsesUsage does: Input is input_tokens (cached ones
// included), CacheRead input_tokens_details.cached_tokens, CacheWrite
// cache_write_tokens, Output output_tokens (reasoning included), Reasoning
// output_tokens_details.reasoning_tokens.
func (u *wireUsage) Usage() provider.Usage {
	if u == nil {
		return provider.Usage{}
	}
	out := provider.Usage{Input: u.InputTokens, Output: u.OutputTokens}
	if d := u.InputTokensDetails; d != nil {
		if d.CachedTokens != nil {
			out.CacheRead = *d.CachedTokens
		}
		if d.CacheWriteTokens != nil {
			out.CacheWrite = *d.CacheWriteTokens
		}
	}
	if d := u.OutputTokensDetails; d != nil && d.ReasoningTokens != nil {
		out.Reasoning = *d.ReasoningTokens
	}
	return out
}

// wireItem is an output item of output_item.added and output_item.done.
type wireItem struct {
	Type             string  `json:"type"`
	ID               string  `json:"id"`
	CallID           string  `json:"call_id"`
	Name             string  `json:"name"`
	Arguments        string  `json:"arguments"`
	EncryptedContent *string `json:"encrypted_content"`
	Phase            *string `json:"phase"`
}

// wireError is the error of an error event (nested, or its own fields)
// or of a failed response.
type wireError struct {
	Type    *string         `json:"type"`
	Code    json.RawMessage `json:"code"`
	Message *string         `json:"message"`
}

// wireEvent is one stream event; Type tells which fields are set.
type wireEvent struct {
	Type         string    `json:"type"`
	OutputIndex  int       `json:"output_index"`
	ItemID       string    `json:"item_id"`
	SummaryIndex int       `json:"summary_index"`
	Delta        string    `json:"delta"`
	Item         *wireItem `json:"item"`
	Response     *struct {
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Usage *wireUsage `json:"usage"`
		Error *wireError `json:"error"`
	} `json:"response"`
	// error events: nested, or the fields at the top level.
	Error   *wireError      `json:"error"`
	Code    json.RawMessage `json:"code"`
	Message *string         `json:"message"`
	// A chat-completions chunk has choices and no type.
	Choices json.RawMessage `json:"choices"`
}

// openCall is a function call between its output_item.added and done.
type openCall struct {
	id, name string
	args     []byte
}

// streamState turns the SSE events of one response into chunks.
type streamState struct {
	emit    func(provider.Chunk)
	status  int
	emitted bool
	// output: an event the AI SDK counts as output came (anything but
	// response.created, response.failed, error and unknown events); an
	// error before it fails the call as an APICallError, retried.
	output bool

	calls   map[int]*openCall
	hasCall bool // a function call completed (finish reason tool-calls)
	// textItem is the message item whose text was streamed last: the
	// step's text is one part, another item's is set off by a blank line.
	textItem string
	phases   map[string]string // message item ID -> phase
	// reasonKey ("item:summary") and reasonItem name the open reasoning
	// part ("" : none).
	reasonKey, reasonItem string
	done                  bool
}

func (s *streamState) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

func (s *streamState) streamError(msg string, body []byte) error {
	return &provider.APIError{StatusCode: s.status, Message: msg, ResponseBody: string(body)}
}

// read consumes the SSE body until the response completes or fails, or
// the body ends, and emits the chunks, ending with exactly one Finish on
// success.
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
	}
	return s.streamError("stream ended before completion (no response.completed)", nil)
}

// notOutput are the events the AI SDK does not count as output (with
// the unknown ones).
func notOutput(typ string) bool {
	switch typ {
	case "response.created", "response.failed", "error":
		return true
	}
	return false
}

// known are the events the AI SDK's chunk schema knows; the others are
// its unknown_chunk (not output).
func known(typ string) bool {
	switch typ {
	case "response.output_text.delta", "response.completed", "response.incomplete", "response.failed",
		"response.created", "response.output_item.added", "response.output_item.done",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.image_generation_call.partial_image", "response.code_interpreter_call_code.delta",
		"response.code_interpreter_call_code.done", "response.output_text.annotation.added",
		"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_part.done", "response.apply_patch_call_operation_diff.delta",
		"response.apply_patch_call_operation_diff.done", "error":
		return true
	}
	return false
}

// event handles the data of one SSE event.
func (s *streamState) event(data []byte) error {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return nil
	}
	var ev wireEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return s.streamError("malformed stream event: "+err.Error(), data)
	}
	if ev.Type == "" && len(ev.Choices) > 0 && ev.Choices[0] == '[' {
		return s.streamError("Received a Chat Completions stream while using the OpenAI Responses API. "+
			"The default OpenAI provider model uses the Responses API. If your custom baseURL targets a Chat Completions-compatible endpoint, "+
			"use openai.chat('model-id') or createOpenAI(...).chat('model-id') instead. "+
			"You can also use @ai-sdk/openai-compatible for OpenAI-compatible providers.", data)
	}
	if known(ev.Type) && !notOutput(ev.Type) {
		s.output = true
	}
	switch ev.Type {
	case "response.output_item.added":
		if it := ev.Item; it != nil {
			switch it.Type {
			case "function_call":
				s.callStart(ev.OutputIndex, it)
			case "message":
				if it.Phase != nil {
					if s.phases == nil {
						s.phases = make(map[string]string, 2)
					}
					s.phases[it.ID] = *it.Phase
				}
			}
		}
	case "response.output_item.done":
		if it := ev.Item; it != nil {
			switch it.Type {
			case "function_call":
				s.callDone(ev.OutputIndex, it)
			case "reasoning":
				s.reasoningDone(it)
			}
		}
	case "response.output_text.delta":
		s.textDelta(ev.ItemID, ev.Delta)
	case "response.reasoning_summary_text.delta":
		s.reasoningDelta(ev.ItemID, ev.SummaryIndex, ev.Delta)
	case "response.function_call_arguments.delta":
		if c := s.calls[ev.OutputIndex]; c != nil && ev.Delta != "" {
			c.args = append(c.args, ev.Delta...)
			s.send(provider.Chunk{Kind: provider.ToolInputDelta, Text: ev.Delta, ToolCall: &provider.ToolCall{ID: c.id, Name: c.name}})
		}
	case "response.completed", "response.incomplete":
		var usage *wireUsage
		reason := ""
		if r := ev.Response; r != nil {
			usage = r.Usage
			if d := r.IncompleteDetails; d != nil {
				reason = d.Reason
			}
		}
		s.finish(mapFinishReason(reason, s.hasCall), usage)
	case "response.failed":
		return s.failed(&ev, data)
	case "error":
		return s.errorEvent(&ev, data)
	default:
		// response.created, in_progress, content parts, *.done events and
		// newer ones carry nothing a chunk needs.
	}
	return nil
}

func (s *streamState) callStart(index int, it *wireItem) {
	if s.calls == nil {
		s.calls = make(map[int]*openCall, 2)
	}
	s.calls[index] = &openCall{id: it.CallID, name: it.Name}
	s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: it.CallID, Name: it.Name}})
}

// callDone completes a function call with the item's arguments, as the AI
// SDK takes them (the streamed pieces when the item has none), and its
// item ID as the call's metadata ({"openai":{"itemId":…}}).
func (s *streamState) callDone(index int, it *wireItem) {
	c := s.calls[index]
	if c == nil || c.id != it.CallID {
		// A call whose start was not seen still completes.
		c = &openCall{id: it.CallID, name: it.Name}
		s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: c.id, Name: c.name}})
	}
	delete(s.calls, index)
	s.hasCall = true
	args := it.Arguments
	if args == "" {
		args = string(c.args)
	}
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	md := append([]byte(`{"openai":{"itemId":`), jsonw.AppendString(nil, it.ID)...)
	md = append(md, "}}"...)
	s.send(provider.Chunk{Kind: provider.ToolCallChunk, ToolCall: &provider.ToolCall{ID: it.CallID, Name: it.Name,
		Arguments: json.RawMessage(args), Metadata: md}})
}

// textDelta streams text. The first piece of a message item carries its
// metadata ({"openai":{"itemId":…,"phase":…}}, the AI SDK's text-start
// metadata; the phase goes back with the text);
// a later item's text is set off by a blank line, as the step's texts
// make one part.
func (s *streamState) textDelta(item, delta string) {
	if delta == "" {
		return
	}
	var md json.RawMessage
	if item != s.textItem {
		if s.textItem != "" {
			delta = "\n\n" + delta
		}
		s.textItem = item
		b := append([]byte(`{"openai":{"itemId":`), jsonw.AppendString(nil, item)...)
		if ph, ok := s.phases[item]; ok {
			b = append(b, `,"phase":`...)
			b = jsonw.AppendString(b, ph)
		}
		md = append(b, "}}"...)
	}
	s.send(provider.Chunk{Kind: provider.TextDelta, Text: delta, Metadata: md})
}

// reasoningDelta streams a reasoning summary. Each summary part is its
// own reasoning part, as in OpenCode (the AI SDK's reasoning-start and
// reasoning-end per item:summary): when another part's pieces begin, the
// open one ends with the item's ID as its metadata ({"openai":{"itemId":…}},
// no encrypted content: with store false only the item's last part goes
// back).
func (s *streamState) reasoningDelta(item string, index int, delta string) {
	if delta == "" {
		return
	}
	key := item + ":" + strconv.Itoa(index)
	if s.reasonKey != "" && s.reasonKey != key {
		s.reasoningEnd(reasoningMetadata(s.reasonItem, nil, false))
	}
	s.reasonKey, s.reasonItem = key, item
	s.send(provider.Chunk{Kind: provider.ReasoningDelta, Text: delta})
}

// reasoningEnd ends the open reasoning part with md.
func (s *streamState) reasoningEnd(md json.RawMessage) {
	s.reasonKey, s.reasonItem = "", ""
	s.send(provider.Chunk{Kind: provider.ReasoningEnd, Metadata: md})
}

// reasoningMetadata is the AI SDK's ResponsesReasoningProviderMetadata:
// {"openai":{"itemId":…}} and, at the item's end,
// "reasoningEncryptedContent" (null when the item has none).
func reasoningMetadata(item string, enc *string, withEnc bool) json.RawMessage {
	md := append([]byte(`{"openai":{"itemId":`), jsonw.AppendString(nil, item)...)
	if withEnc {
		md = append(md, `,"reasoningEncryptedContent":`...)
		if enc != nil {
			md = jsonw.AppendString(md, *enc)
		} else {
			md = append(md, "null"...)
		}
	}
	return append(md, "}}"...)
}

// reasoningDone ends the item's last reasoning part with the item's
// metadata and encrypted content, what a later call sends back. An item
// without a summary still makes a (textless) part, as OpenCode opens one
// at the item's start.
func (s *streamState) reasoningDone(it *wireItem) {
	if s.reasonKey != "" && s.reasonItem != it.ID {
		s.reasoningEnd(reasoningMetadata(s.reasonItem, nil, false))
	}
	md := reasoningMetadata(it.ID, it.EncryptedContent, true)
	if s.reasonKey == "" {
		s.send(provider.Chunk{Kind: provider.ReasoningDelta, Metadata: md})
	}
	s.reasoningEnd(md)
}

// failed handles response.failed: with an error it fails the call (an
// APICallError before any output, retried when its status is; the
// stream's error after), without one it finishes with the incomplete
// reason or "error", as the AI SDK does.
func (s *streamState) failed(ev *wireEvent, data []byte) error {
	var usage *wireUsage
	reason := ""
	if r := ev.Response; r != nil {
		usage = r.Usage
		if d := r.IncompleteDetails; d != nil {
			reason = d.Reason
		}
		if e := r.Error; e != nil && e.Message != nil {
			return s.fail(*e.Message, e.Code, "response.failed", data)
		}
	}
	if reason != "" {
		s.finish(mapFinishReason(reason, s.hasCall), usage)
	} else {
		s.finish("error", usage)
	}
	return nil
}

// errorEvent fails the call with an error event's error: nested
// ({"error":{"type","code","message"}}) or at the top level ({"code",
// "message"}).
func (s *streamState) errorEvent(ev *wireEvent, data []byte) error {
	msg, code, typ := "stream error", ev.Code, ""
	if ev.Message != nil {
		msg = *ev.Message
	}
	if e := ev.Error; e != nil {
		if e.Message != nil {
			msg = *e.Message
		}
		if len(e.Code) > 0 {
			code = e.Code
		}
		if e.Type != nil {
			typ = *e.Type
		}
	}
	return s.fail(msg, code, typ, data)
}

// fail is a stream error: its status as the AI SDK's openai-stream-error
// derives it from the code and type; before any output a retryable one
// is retried (the SDK throws an APICallError, which OpenCode retries),
// after output it is final.
func (s *streamState) fail(msg string, code json.RawMessage, typ string, data []byte) error {
	status := streamErrorStatus(code, typ)
	retryable := status == 408 || status == 409 || status == 429 || status >= 500
	e := &provider.APIError{StatusCode: status, Message: msg, Retryable: retryable, ResponseBody: string(data)}
	if !s.output && !s.emitted && retryable {
		return &httpsse.Retryable{Err: e, After: -1}
	}
	return e
}

var threeDigits = regexp.MustCompile(`^\d{3}$`)

// streamErrorStatus is openai-stream-error's getStatusCode.
func streamErrorStatus(code json.RawMessage, typ string) int {
	var parts []string
	if len(code) > 0 {
		var n float64
		var str string
		switch {
		case json.Unmarshal(code, &n) == nil:
			if n == float64(int(n)) && n >= 400 && n <= 599 {
				return int(n)
			}
			parts = append(parts, strconv.FormatFloat(n, 'f', -1, 64))
		case json.Unmarshal(code, &str) == nil:
			if threeDigits.MatchString(str) {
				if n, _ := strconv.Atoi(str); n >= 400 && n <= 599 {
					return n
				}
			}
			parts = append(parts, str)
		}
	}
	if typ != "" {
		parts = append(parts, typ)
	}
	d := strings.ToLower(strings.Join(parts, " "))
	has := func(terms ...string) bool {
		for _, t := range terms {
			if strings.Contains(d, t) {
				return true
			}
		}
		return false
	}
	switch {
	case has("insufficient_quota", "rate_limit"):
		return 429
	case has("authentication"):
		return 401
	case has("permission"):
		return 403
	case has("not_found"):
		return 404
	case has("invalid", "bad_request", "context_length"):
		return 400
	case has("overload"):
		return 503
	case has("timeout"):
		return 504
	}
	return 500
}

// finish emits the one Finish chunk.
func (s *streamState) finish(reason string, u *wireUsage) {
	if s.done {
		return
	}
	s.done = true
	s.send(provider.Chunk{Kind: provider.Finish, Reason: reason, Usage: u.Usage()})
}

// mapFinishReason is the AI SDK's mapOpenAIResponseFinishReason.
func mapFinishReason(reason string, hasCall bool) string {
	switch reason {
	case "":
		if hasCall {
			return "tool-calls"
		}
		return "stop"
	case "max_output_tokens":
		return "length"
	case "content_filter":
		return "content-filter"
	}
	if hasCall {
		return "tool-calls"
	}
	return "other"
}
