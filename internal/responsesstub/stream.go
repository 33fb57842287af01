package responsesstub

import (
	"context"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/jsonw"
)

// flushAt is how much a zero-delay stream buffers before writing.
const flushAt = 32 << 10

// sse writes Responses API events. With a delay it pauses before every
// piece and flushes after it; without one it batches writes.
type sse struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	buf     []byte
	seq     int
	delay   time.Duration
	timer   *time.Timer
	failed  bool
	aborted bool // the server is closing: cut the reply off uncleanly
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *Request, resp *Response, u Usage, chunks int, delay time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	e := &sse{s: s, w: w, rc: http.NewResponseController(w), ctx: r.Context(), delay: delay}
	defer func() {
		if e.timer != nil {
			e.timer.Stop()
		}
		if e.aborted {
			panic(http.ErrAbortHandler)
		}
	}()

	n := req.N
	respID := "resp_stub_" + strconv.Itoa(n)
	// head is the response object's fields up to its status.
	head := func(b []byte, status string) []byte {
		b = append(b, `,"response":{"id":"`...)
		b = append(b, respID...)
		b = append(b, `","object":"response","created_at":`...)
		b = strconv.AppendInt(b, createdAt, 10)
		b = append(b, `,"status":"`...)
		b = append(b, status...)
		b = append(b, `","model":`...)
		return jsonw.AppendString(b, req.Model)
	}
	for _, name := range []string{"response.created", "response.in_progress"} {
		b := head(e.open(name), "in_progress")
		e.close(append(b, `,"output":[],"usage":null}}`...))
	}
	if !e.flush() {
		return
	}

	var items [][]byte // the done items, for the final response's output
	index := 0
	if resp.hasReasoning() {
		id := "rs_stub_" + strconv.Itoa(n)
		b := e.item("response.output_item.added", index)
		e.close(append(append(b, `{"id":"`+id+`","type":"reasoning","summary":[]}`...), '}'))
		for j, text := range resp.Reasoning {
			part := func(name string, text string) {
				b := e.open(name)
				b = e.ref(b, id, index)
				b = append(b, `,"summary_index":`...)
				b = strconv.AppendInt(b, int64(j), 10)
				b = append(b, `,"part":{"type":"summary_text","text":`...)
				b = jsonw.AppendString(b, text)
				e.close(append(b, "}}"...))
			}
			part("response.reasoning_summary_part.added", "")
			prefix := string(e.ref(nil, id, index)) + `,"summary_index":` + strconv.Itoa(j) + `,"delta":`
			if !e.pieces("response.reasoning_summary_text.delta", prefix, text, chunks, "") {
				return
			}
			b := e.open("response.reasoning_summary_text.done")
			b = e.ref(b, id, index)
			b = append(b, `,"summary_index":`...)
			b = strconv.AppendInt(b, int64(j), 10)
			b = append(b, `,"text":`...)
			e.close(append(jsonw.AppendString(b, text), '}'))
			part("response.reasoning_summary_part.done", text)
		}
		it := append([]byte(nil), `{"id":"`+id+`","type":"reasoning"`...)
		if enc := encrypted(resp, req); enc != nil {
			it = append(it, `,"encrypted_content":`...)
			it = jsonw.AppendString(it, *enc)
		}
		it = append(it, `,"summary":[`...)
		for j, text := range resp.Reasoning {
			if j > 0 {
				it = append(it, ',')
			}
			it = append(it, `{"type":"summary_text","text":`...)
			it = append(jsonw.AppendString(it, text), '}')
		}
		it = append(it, "]}"...)
		e.close(append(append(e.item("response.output_item.done", index), it...), '}'))
		items = append(items, it)
		index++
	}
	if resp.Text != "" {
		id := "msg_stub_" + strconv.Itoa(n)
		phase := ""
		if resp.Phase != "" {
			phase = `,"phase":` + string(jsonw.AppendString(nil, resp.Phase))
		}
		b := e.item("response.output_item.added", index)
		e.close(append(b, `{"id":"`+id+`","type":"message","status":"in_progress","content":[]`+phase+`,"role":"assistant"}}`...))
		contentPart := func(name, text string) {
			b := e.ref(e.open(name), id, index)
			b = append(b, `,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
			e.close(append(jsonw.AppendString(b, text), "}}"...))
		}
		contentPart("response.content_part.added", "")
		prefix := string(e.ref(nil, id, index)) + `,"content_index":0,"delta":`
		if !e.pieces("response.output_text.delta", prefix, resp.Text, chunks, `,"logprobs":[]`) {
			return
		}
		b = e.ref(e.open("response.output_text.done"), id, index)
		b = append(b, `,"content_index":0,"text":`...)
		e.close(append(jsonw.AppendString(b, resp.Text), `,"logprobs":[]}`...))
		contentPart("response.content_part.done", resp.Text)
		it := append([]byte(nil), `{"id":"`+id+`","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
		it = jsonw.AppendString(it, resp.Text)
		it = append(it, `}]`+phase+`,"role":"assistant"}`...)
		e.close(append(append(e.item("response.output_item.done", index), it...), '}'))
		items = append(items, it)
		index++
	}
	if se := resp.StreamError; se != nil {
		b := e.open("error")
		if se.Flat {
			b = append(b, `,"code":`...)
			b = appendNullable(b, se.Code)
			b = append(b, `,"message":`...)
			b = jsonw.AppendString(b, se.Message)
			b = append(b, `,"param":null}`...)
		} else {
			b = append(b, `,"error":{"type":`...)
			b = jsonw.AppendString(b, se.Type)
			b = append(b, `,"code":`...)
			b = appendNullable(b, se.Code)
			b = append(b, `,"message":`...)
			b = jsonw.AppendString(b, se.Message)
			b = append(b, `,"param":null}}`...)
		}
		e.close(b)
		e.failedResponse(head, se)
		e.flush()
		return
	}
	if resp.Failed != nil {
		e.failedResponse(head, resp.Failed)
		e.flush()
		return
	}
	if resp.Malformed {
		e.buf = append(e.buf, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg\",\"delta\":\"broken\n\n"...)
		e.flush()
		return
	}
	for i, c := range resp.FunctionCalls {
		if !e.wait() {
			return
		}
		id, call := itemID(c, n, i), callID(c, n, i)
		fields := func(b []byte, status, args string) []byte {
			b = append(b, `{"id":`...)
			b = jsonw.AppendString(b, id)
			b = append(b, `,"type":"function_call","status":"`+status+`","arguments":`...)
			b = jsonw.AppendString(b, args)
			b = append(b, `,"call_id":`...)
			b = jsonw.AppendString(b, call)
			b = append(b, `,"name":`...)
			b = jsonw.AppendString(b, c.Name)
			return append(b, '}')
		}
		e.close(append(fields(e.item("response.output_item.added", index), "in_progress", ""), '}'))
		if !e.step() {
			return
		}
		prefix := string(e.ref(nil, id, index)) + `,"delta":`
		if !e.pieces("response.function_call_arguments.delta", prefix, c.Arguments, max(chunks, 2), "") {
			return
		}
		b := e.ref(e.open("response.function_call_arguments.done"), id, index)
		b = append(b, `,"arguments":`...)
		e.close(append(jsonw.AppendString(b, c.Arguments), '}'))
		it := fields(nil, "completed", c.Arguments)
		e.close(append(append(e.item("response.output_item.done", index), it...), '}'))
		items = append(items, it)
		index++
	}
	if resp.Cut {
		e.flush()
		e.aborted = true // the deferred panic drops the connection
		return
	}
	if resp.Truncate {
		e.flush()
		return
	}
	name, status, incomplete := "response.completed", "completed", "null"
	if resp.IncompleteReason != "" {
		name, status = "response.incomplete", "incomplete"
		incomplete = `{"reason":` + string(jsonw.AppendString(nil, resp.IncompleteReason)) + `}`
	}
	b := head(e.open(name), status)
	b = append(b, `,"error":null,"incomplete_details":`+incomplete+`,"output":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, `],"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.CachedTokens, 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.ReasoningTokens, 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens+u.OutputTokens, 10)
	e.close(append(b, "}}}"...))
	e.flush()
}

// failedResponse writes response.failed with err as the response's error.
func (e *sse) failedResponse(head func([]byte, string) []byte, err *Error) {
	b := head(e.open("response.failed"), "failed")
	b = append(b, `,"error":{"code":`...)
	b = appendNullable(b, err.Code)
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, err.Message)
	e.close(append(b, `},"incomplete_details":null,"output":[],"usage":null}}`...))
}

// open starts an event: its name line, "data: " and its JSON up to the
// type and sequence number, which the caller continues and ends.
func (e *sse) open(name string) []byte {
	b := append(e.buf, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(e.seq), 10)
	e.seq++
	return b
}

// close ends the event being built in b.
func (e *sse) close(b []byte) { e.buf = append(b, "\n\n"...) }

// item opens an output_item event up to its "item":, which the caller
// writes and ends.
func (e *sse) item(name string, index int) []byte {
	b := e.open(name)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	return append(b, `,"item":`...)
}

// ref appends an event's item_id and output_index.
func (e *sse) ref(b []byte, id string, index int) []byte {
	b = append(b, `,"item_id":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"output_index":`...)
	return strconv.AppendInt(b, int64(index), 10)
}

// pieces streams text in about n pieces as events named name, each
// prefix (the event's fields up to "delta":), the piece, then suffix.
func (e *sse) pieces(name, prefix, text string, n int, suffix string) bool {
	for rest := text; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(text), n)
		if !e.wait() {
			return false
		}
		b := append(e.open(name), prefix...)
		b = jsonw.AppendString(b, piece)
		e.close(append(append(b, suffix...), '}'))
		if !e.step() {
			return false
		}
	}
	return true
}

// cut returns the next piece of rest when a string of total bytes is cut
// into about n pieces, ending on a rune boundary.
func cut(rest string, total, n int) (string, string) {
	size := (total + n - 1) / max(n, 1)
	if size >= len(rest) {
		return rest, ""
	}
	for size < len(rest) && !utf8.RuneStart(rest[size]) {
		size++
	}
	return rest[:size], rest[size:]
}

// wait pauses before a piece; false when the client or the server went away.
func (e *sse) wait() bool {
	if e.failed {
		return false
	}
	if e.delay <= 0 {
		return true
	}
	if e.timer == nil {
		e.timer = time.NewTimer(e.delay)
	} else {
		e.timer.Reset(e.delay)
	}
	select {
	case <-e.timer.C:
		return true
	case <-e.ctx.Done():
		e.fail()
		return false
	case <-e.s.Closing():
		e.failed, e.aborted = true, true
		return false
	}
}

// step sends what is buffered when pieces are paced or the buffer is big.
func (e *sse) step() bool {
	if e.delay > 0 || len(e.buf) >= flushAt {
		return e.flush()
	}
	return true
}

func (e *sse) flush() bool {
	if e.failed {
		return false
	}
	if len(e.buf) > 0 {
		_, err := e.w.Write(e.buf)
		e.buf = e.buf[:0]
		if err != nil {
			e.fail()
			return false
		}
	}
	if err := e.rc.Flush(); err != nil {
		e.fail()
		return false
	}
	return true
}

// fail marks the reply abandoned: by the client (counted in Canceled)
// unless the server is closing.
func (e *sse) fail() {
	e.failed = true
	select {
	case <-e.s.Closing():
		e.aborted = true
	default:
		e.s.AddCanceled()
	}
}
