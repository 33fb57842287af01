// Package responsesstub is an OpenAI Responses API server for tests: a
// Script decides every reply from the request, and the server streams it
// as the real API does (response.created, response.in_progress, then per
// output item response.output_item.added, its content events and
// response.output_item.done: a reasoning item with
// response.reasoning_summary_part.added/response.reasoning_summary_text.delta
// and, when the request includes "reasoning.encrypted_content", its
// encrypted_content at the end; a message with response.output_text.delta;
// function calls with response.function_call_arguments.delta/done; then
// response.completed or response.incomplete with usage incl.
// input_tokens_details.cached_tokens and output_tokens_details.reasoning_tokens),
// or answers with an OpenAI error body, an error event followed by
// response.failed, a failed response, a cut connection. Every request is
// recorded so tests can check what the client sent.
//
// It serves POST /v1/responses (also /responses) on a loopback listener.
package responsesstub

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
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/jsonw"
)

// ModelID is the model the stub reports when the request names none.
const ModelID = "gpt-stub"

// maxBody bounds a request body.
const maxBody = 64 << 20

// Request is a Responses API request as the stub understood it.
type Request struct {
	Model           string          `json:"model"`
	Input           []Item          `json:"input"`
	Instructions    string          `json:"instructions,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"top_p,omitempty"`
	MaxOutputTokens int             `json:"max_output_tokens,omitempty"`
	Text            *TextOptions    `json:"text,omitempty"`
	Store           *bool           `json:"store,omitempty"`
	Include         []string        `json:"include,omitempty"`
	PromptCacheKey  string          `json:"prompt_cache_key,omitempty"`
	Reasoning       *Reasoning      `json:"reasoning,omitempty"`
	Tools           []Tool          `json:"tools,omitempty"`
	ToolChoice      json.RawMessage `json:"tool_choice,omitempty"`
	Stream          bool            `json:"stream"`

	// N is the 1-based arrival number of the request (title requests
	// apart).
	N int `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
	// Raw is the request body as received.
	Raw json.RawMessage `json:"-"`
}

// TextOptions is the request's text.
type TextOptions struct {
	Verbosity string          `json:"verbosity,omitempty"`
	Format    json.RawMessage `json:"format,omitempty"`
}

// Reasoning is the request's reasoning.
type Reasoning struct {
	Effort  string `json:"effort,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// Item is one input item: a message (Role set, Type "" or "message"), a
// function_call, a function_call_output, a reasoning item or an
// item_reference.
type Item struct {
	Type string `json:"type,omitempty"`
	ID   string `json:"id,omitempty"`
	// message
	Role    string    `json:"role,omitempty"`
	Content []Content `json:"content,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	// function_call
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// function_call_output: a string, or content parts.
	Output json.RawMessage `json:"output,omitempty"`
	// reasoning
	EncryptedContent *string   `json:"encrypted_content,omitempty"`
	Summary          []Content `json:"summary,omitempty"`
}

// UnmarshalJSON accepts a message's string content as one input_text.
func (it *Item) UnmarshalJSON(b []byte) error {
	type plain Item
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*it = Item(raw.plain)
	c := raw.Content
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return err
		}
		it.Content = []Content{{Type: "input_text", Text: s}}
		return nil
	}
	if err := json.Unmarshal(c, &it.Content); err != nil {
		return fmt.Errorf("item content: %w", err)
	}
	return nil
}

// IsMessage reports whether the item is a message.
func (it Item) IsMessage() bool { return it.Role != "" && (it.Type == "" || it.Type == "message") }

// Text is a message's text parts joined.
func (it Item) Text() string {
	var b strings.Builder
	for _, c := range it.Content {
		if c.Type == "input_text" || c.Type == "output_text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// OutputText is a function_call_output's output as text (a string, or its
// text parts joined).
func (it Item) OutputText() string {
	if len(it.Output) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(it.Output, &s) == nil {
		return s
	}
	var parts []Content
	if json.Unmarshal(it.Output, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Content is one part of a message's content or of a reasoning summary.
type Content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
	FileData string `json:"file_data,omitempty"`
	Filename string `json:"filename,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Tool is one entry of the request's tools.
type Tool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// SystemText is the instructions and the system and developer messages'
// text joined by newlines.
func (r Request) SystemText() string {
	var parts []string
	if r.Instructions != "" {
		parts = append(parts, r.Instructions)
	}
	for _, it := range r.Input {
		if it.IsMessage() && (it.Role == "system" || it.Role == "developer") {
			parts = append(parts, it.Text())
		}
	}
	return strings.Join(parts, "\n")
}

// LastItem is the request's last input item (zero if none).
func (r Request) LastItem() Item {
	if len(r.Input) == 0 {
		return Item{}
	}
	return r.Input[len(r.Input)-1]
}

// LastUserText is the text of the last user message with text ("" if none).
func (r Request) LastUserText() string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		if it := r.Input[i]; it.IsMessage() && it.Role == "user" {
			if t := it.Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// LastIsToolResult reports whether the last input item is a
// function_call_output.
func (r Request) LastIsToolResult() bool { return r.LastItem().Type == "function_call_output" }

// Includes reports whether the request's include names v.
func (r Request) Includes(v string) bool {
	for _, x := range r.Include {
		if x == v {
			return true
		}
	}
	return false
}

// IsTitle reports whether req is a session's title request: no tools and
// a system prompt about a title.
func (r Request) IsTitle() bool {
	return len(r.Tools) == 0 && strings.Contains(strings.ToLower(r.SystemText()), "title")
}

// FunctionCall is a function call the stub makes; Arguments is streamed
// verbatim as response.function_call_arguments.delta pieces.
type FunctionCall struct {
	// CallID defaults to "call_stub_<n>_<i>"; ID (the item's) to
	// "fc_stub_<n>_<i>".
	CallID    string
	ID        string
	Name      string
	Arguments string
}

// Usage is the reply's token accounting; InputTokens includes the cached
// ones and OutputTokens the reasoning ones, as the API counts them.
type Usage struct {
	InputTokens     int64
	CachedTokens    int64
	OutputTokens    int64
	ReasoningTokens int64
}

// Error is an API error.
type Error struct {
	// Type and Code as the API sends them ("" : null for Code; Type
	// defaults by status for bodies, and is left out of error events
	// sent flat).
	Type    string
	Code    string
	Message string
	// Flat sends an error event with code and message at its top level
	// (the documented ResponseErrorEvent) instead of nested in "error".
	Flat bool
}

// Response is what the stub answers to one request.
type Response struct {
	// Reasoning, when set, is a reasoning item's summary parts, each
	// streamed as response.reasoning_summary_text.delta pieces.
	// EmptyReasoning makes a reasoning item without a summary.
	Reasoning      []string
	EmptyReasoning bool
	// EncryptedContent is the reasoning item's encrypted_content (default
	// "stub-encrypted-<n>"), sent when the request includes
	// "reasoning.encrypted_content".
	EncryptedContent string
	// Text is a message item's text, streamed as response.output_text.delta
	// pieces; Phase is its phase ("commentary", "final_answer").
	Text  string
	Phase string
	// FunctionCalls follow as function_call items.
	FunctionCalls []FunctionCall
	// IncompleteReason, when set, ends the reply with response.incomplete
	// and incomplete_details.reason ("max_output_tokens",
	// "content_filter").
	IncompleteReason string
	// Usage defaults to word counts of the prompt and the reply.
	Usage *Usage

	// Status, when neither 0 nor 200, answers with that status and an
	// OpenAI error body {"error":{"message":ErrorMessage,"type":…,
	// "param":null,"code":…}}.
	Status       int
	ErrorType    string
	ErrorCode    string
	ErrorMessage string
	// Headers are added to the response (e.g. "retry-after").
	Headers map[string]string

	// StreamError is sent as an error event after the reasoning and text
	// items (right after response.in_progress when there are none),
	// followed by response.failed with the same error, and the stream
	// ends there. Failed sends only the response.failed.
	StreamError *Error
	Failed      *Error
	// Malformed writes a data line of broken JSON after the text and
	// ends the stream.
	Malformed bool
	// Truncate ends the stream cleanly after the output items, without
	// response.completed.
	Truncate bool
	// Cut drops the connection after the output items (after
	// response.in_progress when there are none).
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
		panic("responsesstub: Sequence needs at least one response")
	}
	var n atomic.Int64
	return func(Request) Response {
		i := min(int(n.Add(1))-1, len(resps)-1)
		return resps[i]
	}
}

// ToolThenAnswer calls toolName with argsJSON unless the last item is a
// function call's output, and answers finalText once it is.
func ToolThenAnswer(toolName, argsJSON, finalText string) Script {
	return func(req Request) Response {
		if req.LastIsToolResult() {
			return Response{Text: finalText}
		}
		return Response{FunctionCalls: []FunctionCall{{CallID: "call_stub_" + strconv.Itoa(req.N), Name: toolName, Arguments: argsJSON}}}
	}
}

// Directives answers as stubmodel.Directives does ("call:NAME {json}",
// "then:", "think:" in the last user message), so one test prompt drives
// every stub; reasoning comes as a summarised reasoning item.
func Directives(req Request) Response { return FromStubmodel(stubmodel.Directives)(req) }

// FromStubmodel adapts a chat-completions script: the request is shown to
// it in chat-completions form (the system text first, assistant texts and
// their function calls as assistant messages, outputs as "tool"
// messages) and its answer is streamed in the Responses API's.
func FromStubmodel(script stubmodel.Script) Script {
	return func(req Request) Response {
		sr := stubmodel.Request{Model: req.Model, MaxTokens: req.MaxOutputTokens, Stream: req.Stream, N: req.N, Header: req.Header, Raw: req.Raw}
		if s := req.SystemText(); s != "" {
			sr.Messages = append(sr.Messages, stubmodel.Message{Role: "system", Content: s})
		}
		// Function calls join the assistant message before them (or make
		// one).
		lastAssistant := func() *stubmodel.Message {
			if n := len(sr.Messages); n > 0 && sr.Messages[n-1].Role == "assistant" {
				return &sr.Messages[n-1]
			}
			sr.Messages = append(sr.Messages, stubmodel.Message{Role: "assistant"})
			return &sr.Messages[len(sr.Messages)-1]
		}
		for _, it := range req.Input {
			switch {
			case it.IsMessage() && (it.Role == "user" || it.Role == "assistant"):
				sr.Messages = append(sr.Messages, stubmodel.Message{Role: it.Role, Content: it.Text()})
			case it.Type == "function_call":
				var c stubmodel.WireCall
				c.ID, c.Type, c.Function.Name, c.Function.Arguments = it.CallID, "function", it.Name, it.Arguments
				a := lastAssistant()
				a.ToolCalls = append(a.ToolCalls, c)
			case it.Type == "function_call_output":
				sr.Messages = append(sr.Messages, stubmodel.Message{Role: "tool", ToolCallID: it.CallID, Content: it.OutputText()})
			}
		}
		for _, t := range req.Tools {
			var st stubmodel.Tool
			st.Type, st.Function.Name, st.Function.Description, st.Function.Parameters = "function", t.Name, t.Description, t.Parameters
			sr.Tools = append(sr.Tools, st)
		}
		r := script(sr)
		out := Response{Text: r.Text, Status: r.Status, ErrorMessage: r.ErrorMessage,
			Headers: r.Headers, Malformed: r.Malformed, Truncate: r.Truncate, Disconnect: r.Disconnect,
			Chunks: r.Chunks, Delay: r.Delay}
		if r.Reasoning != "" {
			out.Reasoning = []string{r.Reasoning}
		}
		for _, c := range r.ToolCalls {
			out.FunctionCalls = append(out.FunctionCalls, FunctionCall{CallID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		if r.FinishReason == "length" {
			out.IncompleteReason = "max_output_tokens"
		}
		if u := r.Usage; u != nil {
			out.Usage = &Usage{InputTokens: u.PromptTokens, CachedTokens: u.CachedTokens, OutputTokens: u.CompletionTokens,
				ReasoningTokens: u.ReasoningTokens}
		}
		return out
	}
}

// Option configures a Server.
type Option func(*Server)

// WithChunks sets how many pieces reasoning, text and each call's
// arguments are split into (default 4; at least 1).
func WithChunks(n int) Option { return func(s *Server) { s.chunks = max(n, 1) } }

// WithDelay sets the pause before every streamed piece (default 0).
func WithDelay(d time.Duration) Option { return func(s *Server) { s.delay = d } }

// Server is a stub Responses API server.
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
		t.Fatalf("responsesstub: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on addr (default "127.0.0.1:0") and serves in the
// background. It returns the base URL clients use, ending in /v1.
func (s *Server) Start(addr string) (string, error) {
	return s.Serve(addr, "/v1", []string{"POST /v1/responses", "POST /responses"}, s.handle)
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
		writeError(w, http.StatusServiceUnavailable, "", "", "stub is shutting down", nil)
		return
	}
	defer s.Done()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "", "reading body: "+err.Error(), nil)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "", "", "invalid JSON body: "+err.Error(), nil)
		return
	}
	var resp Response
	if req.IsTitle() {
		s.RecordTitle(body)
		resp = Response{Text: stubmodel.TitleOf(req.LastUserText())}
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
		}
		writeError(w, resp.Status, resp.ErrorType, resp.ErrorCode, msg, resp.Headers)
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
	if !req.Stream {
		s.whole(w, &req, &resp, u)
		return
	}
	s.stream(w, r, &req, &resp, u, chunks, delay)
}

func (r *Response) usage(req *Request) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	var u Usage
	for _, it := range req.Input {
		u.InputTokens += int64(countWords(it.Text()) + countWords(it.OutputText()))
	}
	for _, s := range r.Reasoning {
		u.ReasoningTokens += int64(countWords(s))
	}
	u.OutputTokens = int64(countWords(r.Text)) + u.ReasoningTokens
	for _, c := range r.FunctionCalls {
		u.OutputTokens += int64(countWords(c.Arguments)) + 1
	}
	return u
}

func countWords(s string) int { return len(strings.Fields(s)) }

// errorDefaults are the API's error type and code for a status.
func errorDefaults(status int) (typ, code string) {
	switch {
	case status == 401:
		return "invalid_request_error", "invalid_api_key"
	case status == 404:
		return "invalid_request_error", "model_not_found"
	case status == 429:
		return "requests", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string, headers map[string]string) {
	dt, dc := errorDefaults(status)
	if typ == "" {
		typ = dt
	}
	if code == "" {
		code = dc
	}
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := append([]byte(nil), `{"error":{"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = jsonw.AppendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	b = appendNullable(b, code)
	b = append(b, "}}\n"...)
	_, _ = w.Write(b)
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonw.AppendString(b, s)
}

func callID(c FunctionCall, n, i int) string {
	if c.CallID != "" {
		return c.CallID
	}
	return "call_stub_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
}

func itemID(c FunctionCall, n, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return "fc_stub_" + strconv.Itoa(n) + "_" + strconv.Itoa(i)
}

// encrypted is the reasoning item's encrypted_content, nil unless the
// request included it.
func encrypted(r *Response, req *Request) *string {
	if !req.Includes("reasoning.encrypted_content") {
		return nil
	}
	e := r.EncryptedContent
	if e == "" {
		e = "stub-encrypted-" + strconv.Itoa(req.N)
	}
	return &e
}

func (r *Response) hasReasoning() bool { return len(r.Reasoning) > 0 || r.EmptyReasoning }

// whole answers a non-streamed request with one response object.
func (s *Server) whole(w http.ResponseWriter, req *Request, resp *Response, u Usage) {
	type obj = map[string]any
	output := []obj{}
	n := req.N
	if resp.hasReasoning() {
		summary := []obj{}
		for _, t := range resp.Reasoning {
			summary = append(summary, obj{"type": "summary_text", "text": t})
		}
		item := obj{"id": "rs_stub_" + strconv.Itoa(n), "type": "reasoning", "summary": summary}
		if e := encrypted(resp, req); e != nil {
			item["encrypted_content"] = *e
		}
		output = append(output, item)
	}
	if resp.Text != "" {
		item := obj{"id": "msg_stub_" + strconv.Itoa(n), "type": "message", "status": "completed", "role": "assistant",
			"content": []obj{{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": resp.Text}}}
		if resp.Phase != "" {
			item["phase"] = resp.Phase
		}
		output = append(output, item)
	}
	for i, c := range resp.FunctionCalls {
		output = append(output, obj{"id": itemID(c, n, i), "type": "function_call", "status": "completed",
			"arguments": c.Arguments, "call_id": callID(c, n, i), "name": c.Name})
	}
	status := "completed"
	var incomplete any
	if resp.IncompleteReason != "" {
		status, incomplete = "incomplete", obj{"reason": resp.IncompleteReason}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj{
		"id": "resp_stub_" + strconv.Itoa(n), "object": "response", "created_at": createdAt, "status": status,
		"error": nil, "incomplete_details": incomplete, "model": req.Model, "output": output,
		"usage": obj{"input_tokens": u.InputTokens, "input_tokens_details": obj{"cached_tokens": u.CachedTokens},
			"output_tokens": u.OutputTokens, "output_tokens_details": obj{"reasoning_tokens": u.ReasoningTokens},
			"total_tokens": u.InputTokens + u.OutputTokens},
	})
}

// createdAt is the created_at the stub reports (a fixed time).
const createdAt = 1765552659
