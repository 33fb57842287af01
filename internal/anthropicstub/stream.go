package anthropicstub

import (
	"context"
	"github.com/opencode-server/opencode-server/jsonw"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// flushAt is how much a zero-delay stream buffers before writing.
const flushAt = 32 << 10

// sse writes Messages API events. With a delay it pauses before every
// piece and flushes after it; without one it batches writes.
type sse struct {
	s       *Server
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	buf     []byte
	delay   time.Duration
	timer   *time.Timer
	failed  bool
	aborted bool // the server is closing: cut the reply off uncleanly
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *Request, resp *Response, reason string, u Usage, chunks int, delay time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
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

	b := e.open("message_start")
	b = append(b, `{"type":"message_start","message":{"id":"msg_stub_`...)
	b = strconv.AppendInt(b, int64(req.N), 10)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = jsonw.AppendString(b, req.Model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheCreationInputTokens, 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, u.CacheReadInputTokens, 10)
	b = append(b, `,"output_tokens":1}}}`...)
	e.close(b)
	e.close(append(e.open("ping"), `{"type":"ping"}`...))
	if !e.flush() {
		return
	}

	index := 0
	ok := true
	if resp.RedactedThinking != "" {
		b := e.blockStart(index, `{"type":"redacted_thinking","data":`)
		b = jsonw.AppendString(b, resp.RedactedThinking)
		e.close(append(b, "}}"...))
		e.blockStop(index)
		index++
	}
	if resp.Thinking != "" {
		e.close(append(e.blockStart(index, `{"type":"thinking","thinking":"","signature":""`), "}}"...))
		ok = e.pieces(index, `{"type":"thinking_delta","thinking":`, resp.Thinking, chunks)
		if ok {
			b := e.delta(index, `{"type":"signature_delta","signature":`)
			b = jsonw.AppendString(b, signature(resp, req.N))
			e.close(append(b, "}}"...))
			e.blockStop(index)
			index++
		}
	}
	if ok && resp.Text != "" {
		e.close(append(e.blockStart(index, `{"type":"text","text":""`), "}}"...))
		ok = e.pieces(index, `{"type":"text_delta","text":`, resp.Text, chunks)
		if ok {
			e.blockStop(index)
			index++
		}
	}
	if !ok {
		return
	}
	if resp.StreamError != nil {
		b := e.open("error")
		b = append(b, `{"type":"error","error":{"type":`...)
		b = jsonw.AppendString(b, resp.StreamError.Type)
		b = append(b, `,"message":`...)
		b = jsonw.AppendString(b, resp.StreamError.Message)
		e.close(append(b, "}}"...))
		e.flush()
		return
	}
	if resp.Malformed {
		e.buf = append(e.buf, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"broken\n\n"...)
		e.flush()
		return
	}
	for i, c := range resp.ToolUses {
		if !e.wait() {
			return
		}
		b := e.blockStart(index, `{"type":"tool_use","id":`)
		b = jsonw.AppendString(b, toolUseID(c, req.N, i))
		b = append(b, `,"name":`...)
		b = jsonw.AppendString(b, c.Name)
		e.close(append(b, `,"input":{}}}`...))
		// The API opens every tool input with an empty piece.
		e.close(append(e.delta(index, `{"type":"input_json_delta","partial_json":""`), "}}"...))
		if !e.step() || !e.pieces(index, `{"type":"input_json_delta","partial_json":`, c.Input, max(chunks, 2)) {
			return
		}
		e.blockStop(index)
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
	b = e.open("message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":`...)
	b = jsonw.AppendString(b, reason)
	b = append(b, `,"stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	e.close(append(b, "}}"...))
	e.close(append(e.open("message_stop"), `{"type":"message_stop"}`...))
	e.flush()
}

// open starts an event: its name line and "data: ".
func (e *sse) open(name string) []byte {
	b := append(e.buf, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

// close ends the event being built in b.
func (e *sse) close(b []byte) { e.buf = append(b, "\n\n"...) }

// blockStart opens a content_block_start whose block the caller ends.
func (e *sse) blockStart(index int, block string) []byte {
	b := e.open("content_block_start")
	b = append(b, `{"type":"content_block_start","index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"content_block":`...)
	return append(b, block...)
}

// delta opens a content_block_delta whose delta the caller ends.
func (e *sse) delta(index int, delta string) []byte {
	b := e.open("content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":`...)
	return append(b, delta...)
}

func (e *sse) blockStop(index int) {
	b := e.open("content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	e.close(append(b, '}'))
}

// pieces streams text in about n pieces as deltas opened by open (which
// ends in the field name and colon).
func (e *sse) pieces(index int, open, text string, n int) bool {
	for rest := text; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(text), n)
		if !e.wait() {
			return false
		}
		b := jsonw.AppendString(e.delta(index, open), piece)
		e.close(append(b, "}}"...))
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
