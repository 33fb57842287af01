// Package stubmodel is an OpenAI-compatible chat-completions server for
// tests and load runs: a Script decides every reply from the request, and the
// server streams it as chat.completion.chunk SSE events (or one JSON body
// when the request does not ask for a stream). Every request body is
// recorded so tests can check what the client sent.
//
// It serves POST /v1/chat/completions (also /chat/completions) and
// GET /v1/models (also /models) on a loopback listener.
package stubmodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubhttp"
	"github.com/opencode-server/opencode-server/jsonw"
)

// ModelID is the model GET /v1/models lists unless WithModels says otherwise.
const ModelID = "stub-model"

// maxBody bounds a request body.
const maxBody = 64 << 20

// Request is a chat-completions request as the stub understood it.
type Request struct {
	Model         string          `json:"model"`
	Messages      []Message       `json:"messages"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    json.RawMessage `json:"tool_choice,omitempty"`
	MaxTokens     int             `json:"max_tokens,omitempty"`
	Stream        bool            `json:"stream"`
	StreamOptions *StreamOptions  `json:"stream_options,omitempty"`

	// N is the 1-based arrival number of the request at this server.
	N int `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
	// Raw is the request body as received.
	Raw json.RawMessage `json:"-"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one conversation entry. Content is the text of a string
// content, or the concatenated text parts of an array content.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []WireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// UnmarshalJSON accepts string, null and array-of-parts content.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []WireCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = Message{Role: raw.Role, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID, Name: raw.Name}
	c := raw.Content
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	if c[0] == '"' {
		return json.Unmarshal(c, &m.Content)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c, &parts); err != nil {
		return fmt.Errorf("message content: %w", err)
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	m.Content = sb.String()
	return nil
}

// WireCall is a tool call as it appears in an assistant message.
type WireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is one entry of the request's tools array.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// LastMessage is the last message of the request (zero if none).
func (r Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUserText is the content of the last user message ("" if none).
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ToolCall is a tool call the stub makes; Arguments is streamed verbatim
// (split across several deltas).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Usage is the token accounting reported for a reply. Zero details are
// left out of the wire form.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	ReasoningTokens  int64 // completion_tokens_details.reasoning_tokens
	CachedTokens     int64 // prompt_tokens_details.cached_tokens
}

// Response is what the stub answers to one request.
type Response struct {
	// Reasoning is streamed first, as reasoning_content deltas.
	Reasoning string
	// Text is streamed as content deltas.
	Text string
	// ToolCalls are streamed after the text as tool_calls deltas; an empty
	// ID becomes "call_stub_<request>_<index>".
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string
	// Usage defaults to a word count of the prompt and the reply. It is sent
	// in a final chunk with empty choices when the request asked for
	// stream_options.include_usage (always in a non-streamed reply).
	Usage *Usage

	// Status, when neither 0 nor 200, answers with that status and an
	// OpenAI error body {"error":{"message":ErrorMessage,...}}.
	Status       int
	ErrorMessage string
	// Headers are added to the response (e.g. "Retry-After").
	Headers map[string]string

	// Malformed writes a data line with broken JSON after the text and ends
	// the stream there (no finish_reason, no [DONE]).
	Malformed bool
	// Truncate ends the stream after the deltas, without finish_reason and
	// without [DONE].
	Truncate bool
	// Disconnect drops the connection without answering.
	Disconnect bool

	// Chunks and Delay override the server's settings when non-zero; a
	// negative Delay means none.
	Chunks int
	Delay  time.Duration
}

// Script decides the response to a request. It may be called concurrently.
type Script func(req Request) Response

// IsTitle reports whether req is a session's title request: no tools, and a
// system prompt about a title (OpenCode's and ours both say so).
func (r Request) IsTitle() bool {
	if len(r.Tools) > 0 || len(r.Messages) == 0 || r.Messages[0].Role != "system" {
		return false
	}
	return strings.Contains(strings.ToLower(r.Messages[0].Content), "title")
}

// TitleOf is the stub's title for a first message: its first line, at most
// 50 characters.
func TitleOf(text string) string {
	text, _, _ = strings.Cut(strings.TrimSpace(text), "\n")
	n := 0
	for i := range text {
		if n == 50 {
			return text[:i] + "…"
		}
		n++
	}
	return text
}

// Echo replies "You said: <last user text>".
func Echo(req Request) Response {
	return Response{Text: "You said: " + req.LastUserText()}
}

// Fixed always answers resp.
func Fixed(resp Response) Script {
	return func(Request) Response { return resp }
}

// Sequence answers the n-th call of the script with resps[n-1] and repeats
// the last one after that.
func Sequence(resps ...Response) Script {
	if len(resps) == 0 {
		panic("stubmodel: Sequence needs at least one response")
	}
	var n atomic.Int64
	return func(Request) Response {
		i := int(n.Add(1)) - 1
		if i >= len(resps) {
			i = len(resps) - 1
		}
		return resps[i]
	}
}

// ToolThenAnswer calls toolName with argsJSON when the last message is a
// user message, and answers finalText otherwise (once the tool result is
// the last message).
func ToolThenAnswer(toolName, argsJSON, finalText string) Script {
	return func(req Request) Response {
		if req.LastMessage().Role == "user" {
			return Response{ToolCalls: []ToolCall{{
				ID:        "call_stub_" + strconv.Itoa(req.N),
				Name:      toolName,
				Arguments: argsJSON,
			}}}
		}
		return Response{Text: finalText}
	}
}

// Option configures a Server.
type Option func(*Server)

// WithChunks sets how many pieces Text, Reasoning and each tool call's
// arguments are split into (default 4; at least 1).
func WithChunks(n int) Option { return func(s *Server) { s.chunks = max(n, 1) } }

// WithDelay sets the pause before every streamed piece (default 0).
func WithDelay(d time.Duration) Option { return func(s *Server) { s.delay = d } }

// WithModels sets the model ids GET /v1/models lists.
func WithModels(ids ...string) Option {
	return func(s *Server) { s.models = append([]string(nil), ids...) }
}

// WithoutRecording stops the server from keeping request bodies (for long
// load runs); Count still counts them.
func WithoutRecording() Option { return func(s *Server) { s.norecord = true } }

// Server is a stub model server.
type Server struct {
	script   Script
	chunks   int
	delay    time.Duration
	models   []string
	norecord bool

	// The listener, the clean close and the request record.
	stubhttp.Base
}

// New returns a server answering with script (Echo if nil). Call Start.
func New(script Script, opts ...Option) *Server {
	if script == nil {
		script = Echo
	}
	s := &Server{script: script, chunks: 4, models: []string{ModelID}}
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
		t.Fatalf("stubmodel: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on addr (default "127.0.0.1:0") and serves in the
// background. It returns the base URL clients use, ending in /v1.
func (s *Server) Start(addr string) (string, error) {
	return s.Serve(addr, "/v1", []string{"POST /v1/chat/completions", "POST /chat/completions", "GET /v1/models", "GET /models"},
		func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				s.handleModels(w, r)
				return
			}
			s.handleChat(w, r)
		})
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, id := range s.models {
		out.Data = append(out.Data, model{ID: id, Object: "model", OwnedBy: "stubmodel"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	if !s.Enter() {
		writeError(w, http.StatusServiceUnavailable, "stub model is shutting down", nil)
		return
	}
	defer s.Done()

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error(), nil)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error(), nil)
		return
	}
	var resp Response
	if req.IsTitle() {
		// A session's title request is answered on the side, as the
		// reference mock answers it, so a script's sequence and the
		// recorded requests are the turns' model calls only.
		s.RecordTitle(body)
		resp = Response{Text: TitleOf(req.LastUserText())}
	} else {
		var n int
		if s.norecord {
			n = s.Tally()
		} else {
			n = s.Record(r, body)
		}
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
		}
		writeError(w, resp.Status, msg, resp.Headers)
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
	model := req.Model
	if model == "" {
		model = ModelID
	}
	usage := resp.usage(&req)
	reason := resp.FinishReason
	if reason == "" {
		reason = "stop"
		if len(resp.ToolCalls) > 0 {
			reason = "tool_calls"
		}
	}
	if !req.Stream {
		s.whole(w, r, &resp, req.N, model, reason, usage, delay*time.Duration(chunks))
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s.stream(w, r, &resp, req.N, model, reason, usage, includeUsage, chunks, delay)
}

func (r *Response) usage(req *Request) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	var u Usage
	for i := range req.Messages {
		u.PromptTokens += int64(countWords(req.Messages[i].Content))
	}
	u.CompletionTokens = int64(countWords(r.Text) + countWords(r.Reasoning))
	for _, c := range r.ToolCalls {
		u.CompletionTokens += int64(countWords(c.Arguments)) + 1
	}
	return u
}

func countWords(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); i++ {
		space := s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r'
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

func callID(c ToolCall, n, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return "call_stub_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
}

func writeError(w http.ResponseWriter, status int, msg string, headers map[string]string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var b []byte
	b = append(b, `{"error":{"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = jsonw.AppendString(b, typ)
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, "}}\n"...)
	_, _ = w.Write(b)
}

// whole answers a non-streamed request with one chat.completion body.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, resp *Response, n int, model, reason string, u Usage, delay time.Duration) {
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			s.AddCanceled()
			return
		case <-s.Closing():
			panic(http.ErrAbortHandler)
		}
	}
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type msg struct {
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content,omitempty"`
		ToolCalls        []call  `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int    `json:"index"`
		Message      msg    `json:"message"`
		FinishReason string `json:"finish_reason"`
	}
	m := msg{Role: "assistant", ReasoningContent: resp.Reasoning}
	if resp.Text != "" || len(resp.ToolCalls) == 0 {
		m.Content = &resp.Text
	}
	for i, c := range resp.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, call{ID: callID(c, n, i), Type: "function", Function: fn{c.Name, c.Arguments}})
	}
	out := struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []choice        `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
	}{
		ID: "chatcmpl-stub-" + strconv.Itoa(n), Object: "chat.completion", Created: time.Now().Unix(),
		Model: model, Choices: []choice{{Message: m, FinishReason: reason}},
		Usage: appendUsage(nil, u),
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func appendUsage(b []byte, u Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens+u.CompletionTokens, 10)
	if u.ReasoningTokens != 0 {
		b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, u.ReasoningTokens, 10)
		b = append(b, '}')
	}
	if u.CachedTokens != 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, u.CachedTokens, 10)
		b = append(b, '}')
	}
	return append(b, '}')
}
