package google

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

// wirePart is one part of a candidate's content. Fields the decoder does
// not use (inlineData, executableCode, server tool calls) are skipped.
type wirePart struct {
	Text             *string `json:"text"`
	Thought          *bool   `json:"thought"`
	ThoughtSignature *string `json:"thoughtSignature"`
	FunctionCall     *struct {
		Name         *string         `json:"name"`
		Args         json.RawMessage `json:"args"`
		PartialArgs  json.RawMessage `json:"partialArgs"`
		WillContinue *bool           `json:"willContinue"`
	} `json:"functionCall"`
}

// wireUsage is usageMetadata.
type wireUsage struct {
	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
}

// wireChunk is one GenerateContentResponse of the stream.
type wireChunk struct {
	Candidates []struct {
		Content *struct {
			Parts []wirePart `json:"parts"`
		} `json:"content"`
		FinishReason *string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata  *wireUsage `json:"usageMetadata"`
	PromptFeedback *struct {
		BlockReason *string `json:"blockReason"`
	} `json:"promptFeedback"`
	Error *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// streamState turns the SSE events of one response into chunks.
type streamState struct {
	emit    func(provider.Chunk)
	status  int
	genID   func() string
	emitted bool

	usage     *wireUsage
	reason    string // the mapped finish reason ("" until one came)
	toolCalls bool
	blocked   bool // promptFeedback.blockReason: the prompt was refused
}

func (s *streamState) send(c provider.Chunk) {
	s.emitted = true
	s.emit(c)
}

func (s *streamState) streamError(msg string, body []byte) error {
	return &provider.APIError{StatusCode: s.status, Message: msg, ResponseBody: string(body)}
}

// read consumes the SSE body to its end and emits the chunks, ending with
// exactly one Finish on success.
func (s *streamState) read(ctx context.Context, body io.Reader) error {
	_, err := httpsse.Read(ctx, body, s.status, func(ev httpsse.Event) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return false, s.event(ev.Data)
	})
	switch {
	case errors.Is(err, httpsse.ErrLineTooLong):
		return s.streamError("SSE line too long", nil)
	case err != nil:
		return err
	case s.reason == "" && !s.blocked:
		// The last chunk carries the finishReason; a stream without one
		// was cut short (the AI SDK would finish with "other").
		return s.streamError("stream ended before completion (no finishReason)", nil)
	}
	reason := s.reason
	if reason == "" {
		reason = "other" // a refused prompt: no candidate, as the AI SDK ends it
	}
	s.send(provider.Chunk{Kind: provider.Finish, Reason: reason, Usage: usage(s.usage)})
	return nil
}

// usage is the AI SDK's convertGoogleGenerativeAIUsage: inputTokens.total
// is promptTokenCount (cached content included, cacheRead its cached
// part); outputTokens.total is candidatesTokenCount + thoughtsTokenCount,
// reasoning the thoughts.
func usage(u *wireUsage) provider.Usage {
	if u == nil {
		return provider.Usage{}
	}
	v := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return provider.Usage{
		Input:     v(u.PromptTokenCount),
		Output:    v(u.CandidatesTokenCount) + v(u.ThoughtsTokenCount),
		Reasoning: v(u.ThoughtsTokenCount),
		CacheRead: v(u.CachedContentTokenCount),
	}
}

// signature is a part's thoughtSignature as the AI SDK's providerMetadata.
func signature(sig *string) json.RawMessage {
	if sig == nil || *sig == "" {
		return nil
	}
	b := append([]byte(`{"google":{"thoughtSignature":`), jsonw.AppendString(nil, *sig)...)
	return append(b, "}}"...)
}

// event handles the data of one SSE event: one GenerateContentResponse.
func (s *streamState) event(data []byte) error {
	var ch wireChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return s.streamError("malformed stream event: "+err.Error(), data)
	}
	if ch.Error != nil {
		return s.errorObject(&ch, data)
	}
	if ch.UsageMetadata != nil {
		s.usage = ch.UsageMetadata
	}
	if pf := ch.PromptFeedback; pf != nil && pf.BlockReason != nil && *pf.BlockReason != "" {
		s.blocked = true
	}
	if len(ch.Candidates) == 0 {
		return nil // the API sometimes sends no candidate
	}
	cand := &ch.Candidates[0]
	if cand.Content != nil {
		parts := cand.Content.Parts
		// The AI SDK takes a chunk's texts and thoughts first, then its
		// function calls.
		for i := range parts {
			s.textPart(&parts[i])
		}
		for i := range parts {
			if parts[i].FunctionCall != nil {
				s.functionCall(&parts[i])
			}
		}
	}
	if cand.FinishReason != nil {
		s.reason = mapFinishReason(*cand.FinishReason, s.toolCalls)
	}
	return nil
}

func (s *streamState) textPart(p *wirePart) {
	if p.FunctionCall != nil {
		return
	}
	if p.Text == nil {
		return // a generated file (inlineData) or a server tool's part: not kept
	}
	switch {
	case *p.Text == "":
		// An empty part may carry a signature for the open text: the
		// @ai-sdk/google stream passes it on as an empty text-delta,
		// which the AI SDK's streamText drops (if (R.delta.length>0)),
		// so OpenCode never stores it. Neither does this.
	case p.Thought != nil && *p.Thought:
		s.send(provider.Chunk{Kind: provider.ReasoningDelta, Text: *p.Text, Metadata: signature(p.ThoughtSignature)})
	default:
		s.send(provider.Chunk{Kind: provider.TextDelta, Text: *p.Text, Metadata: signature(p.ThoughtSignature)})
	}
}

// functionCall emits a whole call: the API (unlike Vertex's
// streamFunctionCallArguments) sends each call complete in one part.
// Partial (streamed) call pieces are skipped.
func (s *streamState) functionCall(p *wirePart) {
	fc := p.FunctionCall
	if fc.Name == nil || len(fc.PartialArgs) > 0 && string(fc.PartialArgs) != "null" ||
		fc.WillContinue != nil && *fc.WillContinue {
		return
	}
	args := callArgs(fc.Args)
	id := s.genID()
	md := signature(p.ThoughtSignature)
	s.send(provider.Chunk{Kind: provider.ToolInputStart, ToolCall: &provider.ToolCall{ID: id, Name: *fc.Name}})
	if !isNull(fc.Args) { // a call without args has no input delta
		s.send(provider.Chunk{Kind: provider.ToolInputDelta, Text: string(args), ToolCall: &provider.ToolCall{ID: id, Name: *fc.Name}})
	}
	s.send(provider.Chunk{Kind: provider.ToolCallChunk, ToolCall: &provider.ToolCall{ID: id, Name: *fc.Name, Arguments: args, Metadata: md}})
	s.toolCalls = true
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// callArgs is a call's input as the AI SDK has it: a string as is (when
// it is JSON), else the args value as JSON ({} for none).
func callArgs(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return json.RawMessage("{}")
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil && json.Valid([]byte(s)) {
			return json.RawMessage(jsonw.AppendCompact(nil, []byte(s), "", "{}"))
		}
	}
	return json.RawMessage(jsonw.AppendCompact(nil, raw, "", "{}"))
}

// errorObject fails the stream on an {"error":{…}} chunk. Before any
// output a retryable code (429, 5xx) is retried; after output it is
// final (the output is the user's). The AI SDK's chunk schema would let
// it pass unnoticed and finish with "other".
func (s *streamState) errorObject(ch *wireChunk, data []byte) error {
	status := 500
	if c := ch.Error.Code; c != nil && *c >= 400 && *c <= 599 {
		status = *c
	}
	msg := ch.Error.Message
	if msg == "" {
		msg = "stream error"
		if ch.Error.Status != "" {
			msg += ": " + ch.Error.Status
		} else {
			msg += " (code " + strconv.Itoa(status) + ")"
		}
	}
	again := status == 429 || status >= 500 || retryStatus(status)
	e := &provider.APIError{StatusCode: status, Message: msg, Retryable: again, ResponseBody: string(data)}
	if again && !s.emitted {
		return &httpsse.Retryable{Err: e, After: -1}
	}
	return e
}

// mapFinishReason is the AI SDK's mapGoogleGenerativeAIFinishReason.
func mapFinishReason(r string, toolCalls bool) string {
	switch r {
	case "STOP":
		if toolCalls {
			return "tool-calls"
		}
		return "stop"
	case "MAX_TOKENS":
		return "length"
	case "IMAGE_SAFETY", "RECITATION", "SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII":
		return "content-filter"
	case "MALFORMED_FUNCTION_CALL":
		return "error"
	}
	return "other"
}
