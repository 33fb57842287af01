// Package anthropicstub is an Anthropic Messages API server for tests: a
// Script decides every reply from the request, and the server streams it
// as the real API does (message_start, ping, content_block_start/delta/
// stop for thinking with its signature_delta, redacted thinking, text and
// tool_use with input_json_delta, message_delta, message_stop), or answers
// with an API error body, an error event, a cut connection. Every request
// is recorded so tests can check what the client sent.
//
// It serves POST /v1/messages (also /messages) on a loopback listener.
package anthropicstub

import (
	"encoding/json"
	"fmt"
	"github.com/opencode-server/opencode-server/jsonw"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubhttp"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// ModelID is the model the stub reports when the request names none.
const ModelID = "claude-stub"

// maxBody bounds a request body.
const maxBody = 64 << 20

// Request is a Messages API request as the stub understood it.
type Request struct {
	Model       string          `json:"model"`
	MaxTokens   int             `json:"max_tokens"`
	System      []Block         `json:"system,omitempty"`
	Messages    []Message       `json:"messages"`
	Tools       []Tool          `json:"tools,omitempty"`
	ToolChoice  json.RawMessage `json:"tool_choice,omitempty"`
	Thinking    json.RawMessage `json:"thinking,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	Stream      bool            `json:"stream"`

	// N is the 1-based arrival number of the request (title requests
	// apart).
	N int `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
	// Raw is the request body as received.
	Raw json.RawMessage `json:"-"`
}

// Message is one conversation entry; a string content becomes one text
// block.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// UnmarshalJSON accepts string and array content.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role}
	c := raw.Content
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return err
		}
		m.Content = []Block{{Type: "text", Text: s}}
		return nil
	}
	if err := json.Unmarshal(c, &m.Content); err != nil {
		return fmt.Errorf("message content: %w", err)
	}
	return nil
}

// Text is the message's text blocks joined.
func (m Message) Text() string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Block is one content block of any type.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// thinking, redacted_thinking
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// image, document
	Source *Source `json:"source,omitempty"`
	Title  string  `json:"title,omitempty"`

	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// Source is an image's or a document's source.
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// ResultText is a tool_result's content as text (a string, or its text
// blocks joined).
func (b Block) ResultText() string {
	c := b.Content
	if len(c) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []Block
	if json.Unmarshal(c, &blocks) != nil {
		return ""
	}
	var out strings.Builder
	for _, x := range blocks {
		out.WriteString(x.Text)
	}
	return out.String()
}

// Tool is one entry of the request's tools.
type Tool struct {
	Name                string          `json:"name"`
	Description         string          `json:"description,omitempty"`
	InputSchema         json.RawMessage `json:"input_schema,omitempty"`
	EagerInputStreaming bool            `json:"eager_input_streaming,omitempty"`
	CacheControl        json.RawMessage `json:"cache_control,omitempty"`
}

// SystemText is the system blocks' text joined.
func (r Request) SystemText() string {
	var b strings.Builder
	for _, s := range r.System {
		b.WriteString(s.Text)
	}
	return b.String()
}

// LastMessage is the request's last message (zero if none).
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUserText is the text of the last user message with text ("" if none).
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			if t := m.Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// LastIsToolResult reports whether the last message carries tool results.
func (r Request) LastIsToolResult() bool {
	m := r.LastMessage()
	for _, b := range m.Content {
		if b.Type == "tool_result" {
			return m.Role == "user"
		}
	}
	return false
}

// titleSubject is what a title request asks to name: the last text block
// of the last user message with text. OpenCode's question ("Generate a
// title for this conversation:") and the first message are two user
// messages, which the Messages API merges into one: the first message's
// text is its last text block.
func (r Request) titleSubject() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" {
			for k := len(m.Content) - 1; k >= 0; k-- {
				if b := m.Content[k]; b.Type == "text" && strings.TrimSpace(b.Text) != "" {
					return b.Text
				}
			}
		}
	}
	return ""
}

// IsTitle reports whether req is a session's title request: no tools and
// a system prompt about a title.
func (r Request) IsTitle() bool {
	return len(r.Tools) == 0 && strings.Contains(strings.ToLower(r.SystemText()), "title")
}

// ToolUse is a tool call the stub makes; Input is streamed verbatim as
// input_json_delta pieces.
type ToolUse struct {
	ID    string
	Name  string
	Input string
}

// Usage is the reply's token accounting.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
}

// Error is an API error's type and message.
type Error struct {
	Type    string
	Message string
}

// Response is what the stub answers to one request.
type Response struct {
	// RedactedThinking, when set, is a redacted_thinking block's data,
	// first.
	RedactedThinking string
	// Thinking is streamed as thinking_delta pieces, then Signature
	// (default "stub-signature-<n>") as a signature_delta.
	Thinking  string
	Signature string
	// Text is streamed as text_delta pieces.
	Text string
	// ToolUses follow as tool_use blocks; an empty ID becomes
	// "toolu_stub_<n>_<i>".
	ToolUses []ToolUse
	// StopReason defaults to "tool_use" with tool uses, else "end_turn".
	StopReason string
	// Usage defaults to word counts of the prompt and the reply.
	Usage *Usage

	// Status, when neither 0 nor 200, answers with that status and an
	// Anthropic error body {"type":"error","error":{"type":ErrorType,
	// "message":ErrorMessage}} (ErrorType defaults by status: 429
	// rate_limit_error, 529 overloaded_error, ...).
	Status       int
	ErrorType    string
	ErrorMessage string
	// Headers are added to the response (e.g. "retry-after").
	Headers map[string]string

	// StreamError is sent as an error event after the thinking and text
	// blocks (right after message_start when there are none), and the
	// stream ends there.
	StreamError *Error
	// Malformed writes a data line of broken JSON after the text and
	// ends the stream.
	Malformed bool
	// Truncate ends the stream cleanly after the content blocks, without
	// message_delta and message_stop.
	Truncate bool
	// Cut drops the connection after the content blocks (after
	// message_start when there are none).
	Cut bool
	// Disconnect drops the connection without answering.
	Disconnect bool

	// Chunks and Delay override the server's settings when non-zero; a
	// negative Delay means none.
	Chunks int
	Delay  time.Duration
}

// Script decides the response to a request. It may be called concurrently.
type Script func(req Request) Response

// Echo replies "You said: <last user text>".
func Echo(req Request) Response { return Response{Text: "You said: " + req.LastUserText()} }

// Fixed always answers resp.
func Fixed(resp Response) Script { return func(Request) Response { return resp } }

// Sequence answers the n-th call with resps[n-1] and repeats the last one.
func Sequence(resps ...Response) Script {
	if len(resps) == 0 {
		panic("anthropicstub: Sequence needs at least one response")
	}
	var n atomic.Int64
	return func(Request) Response {
		i := min(int(n.Add(1))-1, len(resps)-1)
		return resps[i]
	}
}

// ToolThenAnswer calls toolName with inputJSON unless the last message
// carries tool results, and answers finalText once it does.
func ToolThenAnswer(toolName, inputJSON, finalText string) Script {
	return func(req Request) Response {
		if req.LastIsToolResult() {
			return Response{Text: finalText}
		}
		return Response{ToolUses: []ToolUse{{ID: "toolu_stub_" + strconv.Itoa(req.N), Name: toolName, Input: inputJSON}}}
	}
}

// Directives answers as stubmodel.Directives does ("call:NAME {json}",
// "then:", "think:" in the last user message), so one test prompt drives
// both stubs; reasoning comes as signed thinking.
func Directives(req Request) Response { return FromStubmodel(stubmodel.Directives)(req) }

// FromStubmodel adapts a chat-completions script: the request is shown to
// it in chat-completions form (system first, tool results as "tool"
// messages) and its answer is streamed in the Messages API's.
func FromStubmodel(script stubmodel.Script) Script {
	return func(req Request) Response {
		sr := stubmodel.Request{Model: req.Model, MaxTokens: req.MaxTokens, Stream: req.Stream, N: req.N, Header: req.Header, Raw: req.Raw}
		if s := req.SystemText(); s != "" {
			sr.Messages = append(sr.Messages, stubmodel.Message{Role: "system", Content: s})
		}
		for _, m := range req.Messages {
			var text strings.Builder
			var calls []stubmodel.WireCall
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "tool_result":
					sr.Messages = append(sr.Messages, stubmodel.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: b.ResultText()})
				case "tool_use":
					var c stubmodel.WireCall
					c.ID, c.Type, c.Function.Name, c.Function.Arguments = b.ID, "function", b.Name, string(b.Input)
					calls = append(calls, c)
				}
			}
			if text.Len() > 0 || len(calls) > 0 {
				sr.Messages = append(sr.Messages, stubmodel.Message{Role: m.Role, Content: text.String(), ToolCalls: calls})
			}
		}
		for _, t := range req.Tools {
			var st stubmodel.Tool
			st.Type, st.Function.Name, st.Function.Description, st.Function.Parameters = "function", t.Name, t.Description, t.InputSchema
			sr.Tools = append(sr.Tools, st)
		}
		r := script(sr)
		out := Response{Thinking: r.Reasoning, Text: r.Text, Status: r.Status, ErrorMessage: r.ErrorMessage,
			Headers: r.Headers, Malformed: r.Malformed, Truncate: r.Truncate, Disconnect: r.Disconnect,
			Chunks: r.Chunks, Delay: r.Delay}
		for _, c := range r.ToolCalls {
			out.ToolUses = append(out.ToolUses, ToolUse{ID: c.ID, Name: c.Name, Input: c.Arguments})
		}
		switch r.FinishReason {
		case "stop":
			out.StopReason = "end_turn"
		case "tool_calls":
			out.StopReason = "tool_use"
		case "length":
			out.StopReason = "max_tokens"
		}
		if u := r.Usage; u != nil {
			out.Usage = &Usage{InputTokens: u.PromptTokens - u.CachedTokens, OutputTokens: u.CompletionTokens,
				CacheReadInputTokens: u.CachedTokens}
		}
		return out
	}
}

// Option configures a Server.
type Option func(*Server)

// WithChunks sets how many pieces thinking, text and each tool input are
// split into (default 4; at least 1).
func WithChunks(n int) Option { return func(s *Server) { s.chunks = max(n, 1) } }

// WithDelay sets the pause before every streamed piece (default 0).
func WithDelay(d time.Duration) Option { return func(s *Server) { s.delay = d } }

// Server is a stub Messages API server.
type Server struct {
	script Script
	chunks int
	delay  time.Duration

	stubhttp.Base
}

// New returns a server answering with script (Echo if nil). Call Start.
func New(script Script, opts ...Option) *Server {
	if script == nil {
		script = Echo
	}
	s := &Server{script: script, chunks: 4}
	for _, o := range opts {
		o(s)
	}
	return s
}

// TB is the part of testing.TB NewServer uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// NewServer starts a server on 127.0.0.1 for the test and closes it when
// the test ends.
func NewServer(t TB, script Script, opts ...Option) *Server {
	t.Helper()
	s := New(script, opts...)
	if _, err := s.Start(""); err != nil {
		t.Fatalf("anthropicstub: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on addr (default "127.0.0.1:0") and serves in the
// background. It returns the base URL clients use, ending in /v1.
func (s *Server) Start(addr string) (string, error) {
	return s.Serve(addr, "/v1", []string{"POST /v1/messages", "POST /messages"}, s.handle)
}

// Parsed returns the requests received so far, parsed.
func (s *Server) Parsed() []Request {
	var out []Request
	for i, b := range s.Requests() {
		var r Request
		_ = json.Unmarshal(b, &r)
		r.N, r.Raw = i+1, b
		out = append(out, r)
	}
	return out
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if !s.Enter() {
		writeError(w, 529, "overloaded_error", "stub is shutting down", nil)
		return
	}
	defer s.Done()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "reading body: "+err.Error(), nil)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "", "invalid JSON body: "+err.Error(), nil)
		return
	}
	var resp Response
	if req.IsTitle() {
		s.RecordTitle(body)
		resp = Response{Text: stubmodel.TitleOf(req.titleSubject())}
	} else {
		n := s.Record(r, body)
		req.N, req.Header, req.Raw = n, r.Header, body
		resp = s.script(req)
	}
	if resp.Disconnect {
		panic(http.ErrAbortHandler)
	}
	if resp.Status != 0 && resp.Status != http.StatusOK {
		msg := resp.ErrorMessage
		if msg == "" {
			msg = http.StatusText(resp.Status)
			if resp.Status == 529 {
				msg = "Overloaded"
			}
		}
		writeError(w, resp.Status, resp.ErrorType, msg, resp.Headers)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	chunks, delay := s.chunks, s.delay
	if resp.Chunks > 0 {
		chunks = resp.Chunks
	}
	if resp.Delay != 0 {
		delay = max(resp.Delay, 0)
	}
	if req.Model == "" {
		req.Model = ModelID
	}
	u := resp.usage(&req)
	reason := resp.StopReason
	if reason == "" {
		reason = "end_turn"
		if len(resp.ToolUses) > 0 {
			reason = "tool_use"
		}
	}
	if !req.Stream {
		s.whole(w, &req, &resp, reason, u)
		return
	}
	s.stream(w, r, &req, &resp, reason, u, chunks, delay)
}

func (r *Response) usage(req *Request) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	var u Usage
	u.InputTokens = int64(countWords(req.SystemText()))
	for _, m := range req.Messages {
		u.InputTokens += int64(countWords(m.Text()))
	}
	u.OutputTokens = int64(countWords(r.Text) + countWords(r.Thinking))
	for _, c := range r.ToolUses {
		u.OutputTokens += int64(countWords(c.Input)) + 1
	}
	return u
}

func countWords(s string) int { return len(strings.Fields(s)) }

// errorType is the API's error type for a status.
func errorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func writeError(w http.ResponseWriter, status int, typ, msg string, headers map[string]string) {
	if typ == "" {
		typ = errorType(status)
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := append([]byte(nil), `{"type":"error","error":{"type":`...)
	b = jsonw.AppendString(b, typ)
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, "}}\n"...)
	_, _ = w.Write(b)
}

func toolUseID(c ToolUse, n, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return "toolu_stub_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
}

func signature(r *Response, n int) string {
	if r.Signature != "" {
		return r.Signature
	}
	return "stub-signature-" + strconv.Itoa(n)
}

// whole answers a non-streamed request with one message body.
func (s *Server) whole(w http.ResponseWriter, req *Request, resp *Response, reason string, u Usage) {
	type block map[string]any
	var content []block
	if resp.RedactedThinking != "" {
		content = append(content, block{"type": "redacted_thinking", "data": resp.RedactedThinking})
	}
	if resp.Thinking != "" {
		content = append(content, block{"type": "thinking", "thinking": resp.Thinking, "signature": signature(resp, req.N)})
	}
	if resp.Text != "" {
		content = append(content, block{"type": "text", "text": resp.Text})
	}
	for i, c := range resp.ToolUses {
		content = append(content, block{"type": "tool_use", "id": toolUseID(c, req.N, i), "name": c.Name,
			"input": json.RawMessage(orEmptyObject(c.Input))})
	}
	if content == nil {
		content = []block{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_stub_" + strconv.Itoa(req.N), "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": reason, "stop_sequence": nil,
		"usage": map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
			"cache_read_input_tokens": u.CacheReadInputTokens, "cache_creation_input_tokens": u.CacheCreationInputTokens},
	})
}

func orEmptyObject(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	return "{}"
}
