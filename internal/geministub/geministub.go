// Package geministub is a Gemini API (generativelanguage.googleapis.com)
// server for tests: a Script decides every reply from the request, and the
// server streams it as the real API does for
// models/{model}:streamGenerateContent?alt=sse — SSE data lines of
// GenerateContentResponse JSON whose candidates[0].content.parts carry
// thought summaries (thought: true), text, functionCall parts and
// thoughtSignatures, the last with finishReason and usageMetadata — or
// answers with a Google error body {"error":{"code","message","status"}},
// an error object mid-stream, a cut connection. Every request is recorded
// so tests can check what the client sent.
//
// It serves POST /v1beta/models/{model}:streamGenerateContent (and
// :generateContent, also without the /v1beta prefix) on a loopback
// listener.
package geministub

import (
	"encoding/json"
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

// maxBody bounds a request body.
const maxBody = 64 << 20

// Call is a function call the stub makes; Args is sent as the call's args
// (it must be a JSON object, "" for none).
type Call struct {
	Name string
	Args string
}

// Usage is the reply's usageMetadata.
type Usage struct {
	PromptTokenCount        int64
	CandidatesTokenCount    int64
	ThoughtsTokenCount      int64
	CachedContentTokenCount int64
}

// Error is an API error's code, status and message.
type Error struct {
	Code    int
	Status  string
	Message string
}

// Response is what the stub answers to one request.
type Response struct {
	// Thinking is streamed first as thought parts; ThoughtSignature, when
	// set, rides on its last piece.
	Thinking         string
	ThoughtSignature string
	// Text is streamed as text parts.
	Text string
	// Calls are sent together in the last chunk, as the API sends
	// parallel calls.
	Calls []Call
	// Signature is the turn's thoughtSignature: on the first function
	// call, else on an empty text part of the last chunk.
	Signature string
	// FinishReason defaults to "STOP".
	FinishReason string
	// Usage defaults to word counts of the prompt and the reply.
	Usage *Usage
	// BlockReason answers with promptFeedback and no candidate (a refused
	// prompt).
	BlockReason string

	// Status, when neither 0 nor 200, answers with that status and a
	// Google error body {"error":{"code":Status,"message":ErrorMessage,
	// "status":ErrorStatus}} (ErrorStatus defaults by code: 429
	// RESOURCE_EXHAUSTED, 503 UNAVAILABLE, ...).
	Status       int
	ErrorStatus  string
	ErrorMessage string
	// Headers are added to the response (e.g. "retry-after").
	Headers map[string]string

	// StreamError is sent as a data line {"error":{…}} after the thought
	// and text chunks, and the stream ends there.
	StreamError *Error
	// Malformed writes a data line of broken JSON after the text and
	// ends the stream.
	Malformed bool
	// Truncate ends the stream cleanly before the last chunk (no
	// finishReason).
	Truncate bool
	// Cut drops the connection before the last chunk.
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
		panic("geministub: Sequence needs at least one response")
	}
	var n atomic.Int64
	return func(Request) Response {
		i := min(int(n.Add(1))-1, len(resps)-1)
		return resps[i]
	}
}

// CallThenAnswer calls name with argsJSON unless the last content carries
// function responses, and answers finalText once it does.
func CallThenAnswer(name, argsJSON, finalText string) Script {
	return func(req Request) Response {
		if req.LastIsToolResult() {
			return Response{Text: finalText}
		}
		return Response{Calls: []Call{{Name: name, Args: argsJSON}}, Signature: "stub-signature-" + strconv.Itoa(req.N)}
	}
}

// Directives answers as stubmodel.Directives does ("call:NAME {json}",
// "then:", "think:" in the last user message), so one test prompt drives
// every stub; reasoning comes as thought parts.
func Directives(req Request) Response { return FromStubmodel(stubmodel.Directives)(req) }

// FromStubmodel adapts a chat-completions script: the request is shown to
// it in chat-completions form (system first, function responses as "tool"
// messages, calls as tool_calls with IDs call_<content>_<i>, since Gemini
// has none) and its answer is streamed in Gemini's.
func FromStubmodel(script stubmodel.Script) Script {
	return func(req Request) Response {
		sr := stubmodel.Request{Model: req.Model, Stream: req.Stream, N: req.N, Header: req.Header, Raw: req.Raw}
		if g := req.GenerationConfig; g != nil {
			sr.MaxTokens = g.MaxOutputTokens
		}
		if s := req.SystemText(); s != "" {
			sr.Messages = append(sr.Messages, stubmodel.Message{Role: "system", Content: s})
		}
		for ci, c := range req.Contents {
			var text strings.Builder
			var calls []stubmodel.WireCall
			for _, p := range c.Parts {
				switch {
				case p.FunctionResponse != nil:
					sr.Messages = append(sr.Messages, stubmodel.Message{Role: "tool", Name: p.FunctionResponse.Name,
						Content: p.FunctionResponse.ResultText()})
				case p.FunctionCall != nil:
					var w stubmodel.WireCall
					w.ID, w.Type = "call_"+strconv.Itoa(ci)+"_"+strconv.Itoa(len(calls)), "function"
					w.Function.Name, w.Function.Arguments = p.FunctionCall.Name, string(p.FunctionCall.Args)
					calls = append(calls, w)
				case !p.Thought:
					text.WriteString(p.Text)
				}
			}
			role := "user"
			if c.Role == "model" {
				role = "assistant"
			}
			if text.Len() > 0 || len(calls) > 0 {
				sr.Messages = append(sr.Messages, stubmodel.Message{Role: role, Content: text.String(), ToolCalls: calls})
			}
		}
		for _, d := range req.Declarations() {
			var st stubmodel.Tool
			st.Type, st.Function.Name, st.Function.Description, st.Function.Parameters = "function", d.Name, d.Description, d.Parameters
			sr.Tools = append(sr.Tools, st)
		}
		r := script(sr)
		out := Response{Thinking: r.Reasoning, Text: r.Text, Status: r.Status, ErrorMessage: r.ErrorMessage,
			Headers: r.Headers, Malformed: r.Malformed, Truncate: r.Truncate, Disconnect: r.Disconnect,
			Chunks: r.Chunks, Delay: r.Delay}
		for _, c := range r.ToolCalls {
			out.Calls = append(out.Calls, Call{Name: c.Name, Args: c.Arguments})
		}
		if len(out.Calls) > 0 {
			out.Signature = "stub-signature-" + strconv.Itoa(req.N)
		}
		switch r.FinishReason {
		case "length":
			out.FinishReason = "MAX_TOKENS"
		case "content_filter":
			out.FinishReason = "SAFETY"
		}
		if u := r.Usage; u != nil {
			out.Usage = &Usage{PromptTokenCount: u.PromptTokens, CandidatesTokenCount: u.CompletionTokens - u.ReasoningTokens,
				ThoughtsTokenCount: u.ReasoningTokens, CachedContentTokenCount: u.CachedTokens}
		}
		return out
	}
}

// Option configures a Server.
type Option func(*Server)

// WithChunks sets how many pieces thinking and text are split into
// (default 4; at least 1).
func WithChunks(n int) Option { return func(s *Server) { s.chunks = max(n, 1) } }

// WithDelay sets the pause before every streamed chunk (default 0).
func WithDelay(d time.Duration) Option { return func(s *Server) { s.delay = d } }

// Server is a stub Gemini API server.
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
		t.Fatalf("geministub: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on addr (default "127.0.0.1:0") and serves in the
// background. It returns the base URL clients use, ending in /v1beta.
func (s *Server) Start(addr string) (string, error) {
	return s.Serve(addr, "/v1beta", []string{"POST /"}, s.handle)
}

// Parsed returns the requests received so far, parsed.
func (s *Server) Parsed() []Request {
	bodies, headers, paths := s.Recorded()
	var out []Request
	for i, b := range bodies {
		var r Request
		_ = json.Unmarshal(b, &r)
		r.N, r.Raw, r.Header = i+1, b, headers[i]
		r.Model, r.Stream, _ = parsePath(paths[i])
		out = append(out, r)
	}
	return out
}

// parsePath reads ".../models/{model}:{method}[?alt=sse]": the model,
// whether the method streams, and whether it is one the stub serves.
func parsePath(pathQuery string) (model string, stream, ok bool) {
	path, _, _ := strings.Cut(pathQuery, "?")
	i := strings.Index(path, "models/")
	if i < 0 {
		return "", false, false
	}
	model, method, found := strings.Cut(path[i+len("models/"):], ":")
	if !found || model == "" {
		return "", false, false
	}
	switch method {
	case "streamGenerateContent":
		return model, true, true
	case "generateContent":
		return model, false, true
	}
	return model, false, false
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if !s.Enter() {
		writeError(w, 503, "", "stub is shutting down", nil)
		return
	}
	defer s.Done()
	model, stream, ok := parsePath(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, "", "unknown method "+r.URL.Path, nil)
		return
	}
	sse := r.URL.Query().Get("alt") == "sse"
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "reading body: "+err.Error(), nil)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "", "Invalid JSON payload received. "+err.Error(), nil)
		return
	}
	req.Model, req.Stream = model, stream
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
		writeError(w, resp.Status, resp.ErrorStatus, msg, resp.Headers)
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
	u := resp.usage(&req)
	reason := resp.FinishReason
	if reason == "" {
		reason = "STOP"
	}
	if !stream || !sse {
		s.whole(w, &req, &resp, reason, u, stream)
		return
	}
	s.stream(w, r, &req, &resp, reason, u, chunks, delay)
}

func (r *Response) usage(req *Request) Usage {
	if r.Usage != nil {
		return *r.Usage
	}
	var u Usage
	u.PromptTokenCount = int64(countWords(req.SystemText()))
	for _, c := range req.Contents {
		u.PromptTokenCount += int64(countWords(c.Text()))
	}
	u.CandidatesTokenCount = int64(countWords(r.Text))
	u.ThoughtsTokenCount = int64(countWords(r.Thinking))
	for _, c := range r.Calls {
		u.CandidatesTokenCount += int64(countWords(c.Args)) + 1
	}
	return u
}

func countWords(s string) int { return len(strings.Fields(s)) }

// errorStatus is the API's status string for a code.
func errorStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// errorJSON is a Google error object.
func errorJSON(code int, status, msg string) []byte {
	if status == "" {
		status = errorStatus(code)
	}
	b := append([]byte(nil), `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"status":`...)
	b = jsonw.AppendString(b, status)
	return append(b, "}}"...)
}

func writeError(w http.ResponseWriter, code int, status, msg string, headers map[string]string) {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(append(errorJSON(code, status, msg), '\n'))
}

// whole answers generateContent (and a streamed call without alt=sse,
// as a one-element array) with all parts in one response.
func (s *Server) whole(w http.ResponseWriter, req *Request, resp *Response, reason string, u Usage, array bool) {
	var parts []json.RawMessage
	if resp.Thinking != "" {
		parts = append(parts, textPart(resp.Thinking, true, resp.ThoughtSignature))
	}
	sig := resp.Signature
	if resp.Text != "" {
		textSig := ""
		if len(resp.Calls) == 0 {
			textSig, sig = sig, ""
		}
		parts = append(parts, textPart(resp.Text, false, textSig))
	}
	for i, c := range resp.Calls {
		callSig := ""
		if i == 0 {
			callSig = sig
		}
		parts = append(parts, callPart(c, callSig))
	}
	b := responseJSON(req, resp, parts, reason, u, true)
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if array {
		b = append(append([]byte{'['}, b...), ']')
	}
	_, _ = w.Write(append(b, '\n'))
}

func textPart(text string, thought bool, sig string) json.RawMessage {
	b := jsonw.AppendString([]byte(`{"text":`), text)
	if thought {
		b = append(b, `,"thought":true`...)
	}
	if sig != "" {
		b = jsonw.AppendString(append(b, `,"thoughtSignature":`...), sig)
	}
	return append(b, '}')
}

func callPart(c Call, sig string) json.RawMessage {
	b := jsonw.AppendString([]byte(`{"functionCall":{"name":`), c.Name)
	args := strings.TrimSpace(c.Args)
	if args == "" || !json.Valid([]byte(args)) {
		args = "{}"
	}
	b = append(b, `,"args":`...)
	b = append(b, args...)
	b = append(b, '}')
	if sig != "" {
		b = jsonw.AppendString(append(b, `,"thoughtSignature":`...), sig)
	}
	return append(b, '}')
}

// responseJSON is one GenerateContentResponse: a candidate with parts
// (finishReason when reason is set) and usageMetadata (all of u when
// final, else the prompt's count only, as the API's partial chunks have
// it), or promptFeedback alone for a blocked prompt.
func responseJSON(req *Request, resp *Response, parts []json.RawMessage, reason string, u Usage, final bool) []byte {
	if resp.BlockReason != "" {
		b := jsonw.AppendString([]byte(`{"promptFeedback":{"blockReason":`), resp.BlockReason)
		b = append(b, `},"usageMetadata":{"promptTokenCount":`...)
		b = strconv.AppendInt(b, u.PromptTokenCount, 10)
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, u.PromptTokenCount, 10)
		b = append(b, `},"modelVersion":`...)
		b = jsonw.AppendString(b, req.Model)
		return append(b, '}')
	}
	b := append([]byte(nil), `{"candidates":[{"content":{"parts":[`...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p...)
	}
	b = append(b, `],"role":"model"}`...)
	if reason != "" {
		b = jsonw.AppendString(append(b, `,"finishReason":`...), reason)
	}
	b = append(b, `,"index":0}],"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, u.PromptTokenCount, 10)
	if final {
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, u.CandidatesTokenCount, 10)
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount, 10)
		if u.CachedContentTokenCount > 0 {
			b = append(b, `,"cachedContentTokenCount":`...)
			b = strconv.AppendInt(b, u.CachedContentTokenCount, 10)
		}
		if u.ThoughtsTokenCount > 0 {
			b = append(b, `,"thoughtsTokenCount":`...)
			b = strconv.AppendInt(b, u.ThoughtsTokenCount, 10)
		}
	} else {
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, u.PromptTokenCount, 10)
	}
	b = append(b, `},"modelVersion":`...)
	b = jsonw.AppendString(b, req.Model)
	b = append(b, `,"responseId":"stub-`...)
	b = strconv.AppendInt(b, int64(req.N), 10)
	return append(b, `"}`...)
}
