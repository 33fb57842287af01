package stubmodel

import (
	"context"
	"github.com/opencode-server/opencode-server/jsonw"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// flushAt is how much a zero-delay stream buffers before writing.
const flushAt = 32 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// sse writes chat.completion.chunk events. With a delay it pauses before
// every piece and flushes after it; without one it batches writes.
type sse struct {
	s *Server
	// closing is the server's Closing, read once per reply.
	closing <-chan struct{}
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	buf     []byte
	prefix  []byte // `data: {"id":...,"choices":[`
	delay   time.Duration
	timer   *time.Timer
	failed  bool
	// aborted: the server is closing; the reply is cut off uncleanly so the
	// client sees a broken stream rather than a clean end.
	aborted bool
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, resp *Response, n int, model, reason string, u Usage, includeUsage bool, chunks int, delay time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)

	bp := bufPool.Get().(*[]byte)
	pp := bufPool.Get().(*[]byte)
	e := &sse{s: s, closing: s.Closing(), w: w, rc: http.NewResponseController(w), ctx: r.Context(), buf: (*bp)[:0], delay: delay}
	p := append((*pp)[:0], `data: {"id":"chatcmpl-stub-`...)
	p = strconv.AppendInt(p, int64(n), 10)
	p = append(p, `","object":"chat.completion.chunk","created":`...)
	p = strconv.AppendInt(p, time.Now().Unix(), 10)
	p = append(p, `,"model":`...)
	p = jsonw.AppendString(p, model)
	p = append(p, `,"choices":[`...)
	e.prefix = p
	defer func() {
		if e.timer != nil {
			e.timer.Stop()
		}
		*bp, *pp = e.buf[:0], e.prefix[:0]
		bufPool.Put(bp)
		bufPool.Put(pp)
		if e.aborted {
			panic(http.ErrAbortHandler)
		}
	}()

	// The role chunk goes out with the headers at once.
	e.begin()
	e.buf = append(e.buf, `{"role":"assistant","content":""}`...)
	e.end()
	e.flush()

	ok := e.pieces(`{"reasoning_content":`, resp.Reasoning, chunks) &&
		e.pieces(`{"content":`, resp.Text, chunks)
	if ok && resp.Malformed {
		e.buf = append(e.buf, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"broken\n\n"...)
		e.flush()
		return
	}
	for i := 0; ok && i < len(resp.ToolCalls); i++ {
		c := resp.ToolCalls[i]
		if !e.wait() {
			ok = false
			break
		}
		e.begin()
		e.buf = append(e.buf, `{"tool_calls":[{"index":`...)
		e.buf = strconv.AppendInt(e.buf, int64(i), 10)
		e.buf = append(e.buf, `,"id":`...)
		e.buf = jsonw.AppendString(e.buf, callID(c, n, i))
		e.buf = append(e.buf, `,"type":"function","function":{"name":`...)
		e.buf = jsonw.AppendString(e.buf, c.Name)
		e.buf = append(e.buf, `,"arguments":""}}]}`...)
		e.end()
		ok = e.step() && e.toolArgs(i, c.Arguments, max(chunks, 2))
	}
	if !ok {
		return
	}
	if resp.Truncate {
		e.flush()
		return
	}
	e.buf = append(e.buf, e.prefix...)
	e.buf = append(e.buf, `{"index":0,"delta":{},"finish_reason":`...)
	e.buf = jsonw.AppendString(e.buf, reason)
	e.buf = append(e.buf, "}]}\n\n"...)
	if includeUsage {
		e.buf = append(e.buf, e.prefix...)
		e.buf = append(e.buf, `],"usage":`...)
		e.buf = appendUsage(e.buf, u)
		e.buf = append(e.buf, "}\n\n"...)
		// prefix ends in `"choices":[`, so the above reads "choices":[]
	}
	e.buf = append(e.buf, "data: [DONE]\n\n"...)
	e.flush()
}

// begin opens a choices[0] chunk whose delta the caller appends.
func (e *sse) begin() {
	e.buf = append(e.buf, e.prefix...)
	e.buf = append(e.buf, `{"index":0,"delta":`...)
}

// end closes the chunk begun by begin.
func (e *sse) end() {
	e.buf = append(e.buf, `,"finish_reason":null}]}`+"\n\n"...)
}

// pieces streams text in n pieces as deltas opened by open (which ends in
// the field name and colon).
func (e *sse) pieces(open, text string, n int) bool {
	for rest := text; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(text), n)
		if !e.wait() {
			return false
		}
		e.begin()
		e.buf = append(e.buf, open...)
		e.buf = jsonw.AppendString(e.buf, piece)
		e.buf = append(e.buf, '}')
		e.end()
		if !e.step() {
			return false
		}
	}
	return true
}

func (e *sse) toolArgs(i int, args string, n int) bool {
	for rest := args; rest != ""; {
		var piece string
		piece, rest = cut(rest, len(args), n)
		if !e.wait() {
			return false
		}
		e.begin()
		e.buf = append(e.buf, `{"tool_calls":[{"index":`...)
		e.buf = strconv.AppendInt(e.buf, int64(i), 10)
		e.buf = append(e.buf, `,"function":{"arguments":`...)
		e.buf = jsonw.AppendString(e.buf, piece)
		e.buf = append(e.buf, `}}]}`...)
		e.end()
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
	case <-e.closing:
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
	case <-e.closing:
		e.aborted = true
	default:
		e.s.AddCanceled()
	}
}
