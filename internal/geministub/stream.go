package geministub

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"
)

// flushAt is how much a zero-delay stream buffers before writing.
const flushAt = 32 << 10

// sse writes streamGenerateContent?alt=sse chunks ("data: {json}\r\n\r\n",
// as the API frames them). With a delay it pauses before every chunk and
// flushes after it; without one it batches writes.
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
	if resp.BlockReason != "" {
		e.data(responseJSON(req, resp, nil, "", u, true))
		e.flush()
		return
	}
	// Thought pieces (the signature on the last), then text pieces.
	for rest := resp.Thinking; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(resp.Thinking), chunks)
		sig := ""
		if rest == "" {
			sig = resp.ThoughtSignature
		}
		if !e.chunk(responseJSON(req, resp, []json.RawMessage{textPart(piece, true, sig)}, "", u, false)) {
			return
		}
	}
	for rest := resp.Text; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(resp.Text), chunks)
		if !e.chunk(responseJSON(req, resp, []json.RawMessage{textPart(piece, false, "")}, "", u, false)) {
			return
		}
	}
	if resp.StreamError != nil {
		code := resp.StreamError.Code
		if code == 0 {
			code = 500
		}
		e.data(errorJSON(code, resp.StreamError.Status, resp.StreamError.Message))
		e.flush()
		return
	}
	if resp.Malformed {
		e.buf = append(e.buf, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"broken\r\n\r\n"...)
		e.flush()
		return
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
	// The last chunk: the calls (the signature on the first), or the
	// signature on an empty text part; finishReason and the usage.
	var parts []json.RawMessage
	for i, c := range resp.Calls {
		sig := ""
		if i == 0 {
			sig = resp.Signature
		}
		parts = append(parts, callPart(c, sig))
	}
	if len(parts) == 0 {
		parts = append(parts, textPart("", false, resp.Signature))
	}
	if e.wait() {
		e.data(responseJSON(req, resp, parts, reason, u, true))
		e.flush()
	}
}

// data buffers one SSE event.
func (e *sse) data(b []byte) {
	e.buf = append(e.buf, "data: "...)
	e.buf = append(e.buf, b...)
	e.buf = append(e.buf, "\r\n\r\n"...)
}

// chunk sends one chunk after the pause; false when the client or the
// server went away.
func (e *sse) chunk(b []byte) bool {
	if !e.wait() {
		return false
	}
	e.data(b)
	if e.delay > 0 || len(e.buf) >= flushAt {
		return e.flush()
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

// wait pauses before a chunk; false when the client or the server went away.
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
