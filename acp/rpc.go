// Package acp serves the Agent Client Protocol (ACP v1: JSON-RPC 2.0,
// newline-delimited, over stdio) on the same core as the HTTP API: the
// same sessions, the same message IDs, the same inbox with steer and
// queue. Editors and agent hosts (Zed and others) launch `opencode-server
// acp` and drive it; `_session/steering` injects into a running turn.
//
// The codec is our own, small, with hand-written types checked against
// the official JSON schema in tests: the Go SDK served here
// (github.com/coder/acp-go-sdk) is generated from an older schema and
// cancels a prompt's context when a second prompt arrives, which is
// exactly the concurrency (queued prompts, steers) this server exists
// to get right.
package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/opencode-server/opencode-server/opencode"
)

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = opencode.RPCMethodNotFound
	codeInvalidParams  = opencode.RPCInvalidParams
	codeInternal       = -32603
	codeCancelled      = -32800
	codeAuthRequired   = opencode.RPCAuthRequired // ACP's authentication required
	codeNotFound       = opencode.RPCNotFound     // ACP's resource not found
	// codeUnavailable: the request may succeed if sent again later (the
	// store cannot be written now); data.retryable says so.
	codeUnavailable = opencode.RPCUnavailable
)

// internalMessage is all a client learns of an internal error; its cause
// goes to the log.
const internalMessage = "Internal error: the agent's log has the details"

// errCancelRequest is the cause of a request context the client cancelled
// with `$/cancel_request` (not the connection ending).
var errCancelRequest = errors.New("cancelled by $/cancel_request")

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// frame is any JSON-RPC message; which fields are set says which kind.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// handler answers one request (result or error) or handles a
// notification (its result is dropped). ctx ends when the client sends
// `$/cancel_request` for it. Handlers run one at a time, in arrival order
// (two prompts sent in a row are admitted in that order); one that must
// wait long (a prompt, until its turn ends) returns a later: the rest of
// its work, run on its own while the next frames are read.
type handler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// later is a result still to come: run after the handler returned,
// concurrently with the following requests.
type later func() (any, error)

// replyThen is a result followed by work that must come after the reply
// on the wire (updates about a session the client learns of from it).
type replyThen struct {
	res  any
	then func()
}

// conn is one JSON-RPC peer on a reader and a writer. Requests are
// handled concurrently (a prompt blocks until its turn ends); writes are
// one line each, serialised.
type conn struct {
	r      io.Reader
	w      io.Writer
	wmu    sync.Mutex
	handle handler
	log    *slog.Logger
	// sent, if set, sees every frame written (tests validate them).
	sent func([]byte)
	// maxLine is maxLine (tests lower it: a 64 MiB line under -race on a
	// loaded machine takes longer than any bound worth waiting for).
	maxLine int

	mu sync.Mutex
	// inflight are the client's requests being handled, by ID, with the
	// cancel of their context.
	inflight map[string]context.CancelCauseFunc
	// calls are our requests to the client waiting for a response.
	calls  map[string]chan frame
	nextID atomic.Int64
	wg     sync.WaitGroup
	// eof is closed when the input ends.
	eof chan struct{}
	// broken is closed when a write to the client failed: the connection
	// is over (as a failed commit stops a session), writeErr says why.
	broken   chan struct{}
	breakOne sync.Once
	writeErr error
}

func newConn(r io.Reader, w io.Writer, h handler, log *slog.Logger) *conn {
	return &conn{r: r, w: w, handle: h, log: log, eof: make(chan struct{}), broken: make(chan struct{}), maxLine: maxLine,
		inflight: map[string]context.CancelCauseFunc{}, calls: map[string]chan frame{}}
}

// write sends one frame as one line.
func (c *conn) write(f frame) error {
	f.JSONRPC = "2.0"
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if c.sent != nil {
		c.sent(b)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.broken:
		return c.writeErr // nothing more reaches the client
	default:
	}
	if _, err = c.w.Write(b); err != nil {
		c.breakOne.Do(func() {
			c.writeErr = fmt.Errorf("acp: write to the client: %w", err)
			c.log.Error("acp: the client cannot be written to; the connection ends", "err", err)
			close(c.broken)
			if cl, ok := c.r.(io.Closer); ok {
				_ = cl.Close() // the read loop stops too
			}
		})
	}
	return err
}

func (c *conn) notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.write(frame{Method: method, Params: p})
}

// call sends a request to the client and waits for its response.
func (c *conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(c.nextID.Add(1), 10)
	ch := make(chan frame, 1)
	c.mu.Lock()
	c.calls[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}()
	if err := c.write(frame{ID: json.RawMessage(id), Method: method, Params: p}); err != nil {
		return nil, err
	}
	select {
	case f := <-ch:
		if f.Error != nil {
			return nil, f.Error
		}
		return f.Result, nil
	case <-ctx.Done():
		// Tell the client we no longer wait (ACP's cancellation).
		_ = c.notify("$/cancel_request", map[string]any{"requestId": json.RawMessage(id)})
		return nil, ctx.Err()
	case <-c.eof:
		return nil, io.ErrUnexpectedEOF
	case <-c.broken:
		return nil, c.writeErr
	}
}

// serve reads frames until the reader ends, then waits for the handlers.
func (c *conn) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		close(c.eof)
		cancel()
		c.wg.Wait()
	}()
	br := bufio.NewReaderSize(c.r, 64<<10)
	for {
		line, tooLong, err := readLine(br, c.maxLine)
		if tooLong {
			// The line is dropped, the connection lives on.
			_ = c.write(frame{ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest,
				Message: fmt.Sprintf("message too large: a line may hold at most %d bytes", c.maxLine)}})
		} else if len(bytes.TrimSpace(line)) > 0 {
			var f frame
			if uerr := json.Unmarshal(line, &f); uerr != nil {
				_ = c.write(frame{ID: json.RawMessage("null"), Error: &rpcError{Code: codeParse, Message: "parse error: " + uerr.Error()}})
			} else if !validID(f.ID) {
				_ = c.write(frame{ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest,
					Message: "invalid request: an id is a string, a number or null"}})
			} else {
				c.dispatch(ctx, f)
			}
		}
		select {
		case <-c.broken:
			return c.writeErr
		default:
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// maxLine bounds one JSON-RPC message (a prompt with an embedded file may
// be large).
const maxLine = 64 << 20

// readLine reads one newline-terminated line of at most limit bytes
// (without the newline). A longer one is read to its end and dropped:
// tooLong is set and line is nil.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return line, tooLong, err
	}
}

// validID reports whether a request's id is what JSON-RPC 2.0 allows: a
// string, a number or null (absent: a notification).
func validID(id json.RawMessage) bool {
	if id == nil {
		return true
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

func (c *conn) dispatch(ctx context.Context, f frame) {
	switch {
	case f.Method == "" && f.ID != nil: // a response to our call
		c.mu.Lock()
		ch := c.calls[string(f.ID)]
		c.mu.Unlock()
		if ch != nil {
			select {
			case ch <- f:
			default: // a duplicate response: the first one is waiting
			}
		}
	case f.Method == "$/cancel_request":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(f.Params, &p) == nil {
			c.mu.Lock()
			cancel := c.inflight[string(p.RequestID)]
			c.mu.Unlock()
			if cancel != nil {
				cancel(errCancelRequest)
			}
		}
	case f.Method == "":
		_ = c.write(frame{ID: json.RawMessage("null"), Error: &rpcError{Code: codeInvalidRequest, Message: "not a request"}})
	case f.ID == nil: // a notification
		if _, err := c.handle(context.WithoutCancel(ctx), f.Method, f.Params); err != nil {
			c.log.Warn("acp notification", "method", f.Method, "err", err)
		}
	default:
		// A request runs to its end when the input ends (what a client
		// sent is done; the connection's life ends waits, see Agent.life);
		// only `$/cancel_request` cancels it.
		rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
		key := string(f.ID)
		c.mu.Lock()
		c.inflight[key] = cancel
		c.mu.Unlock()
		done := func(res any, err error) {
			c.mu.Lock()
			delete(c.inflight, key)
			c.mu.Unlock()
			cancel(nil)
			c.reply(f.ID, res, err)
		}
		res, err := c.handle(rctx, f.Method, f.Params)
		if l, ok := res.(later); ok && err == nil {
			c.wg.Go(func() { done(l()) })
			return
		}
		if rt, ok := res.(replyThen); ok && err == nil {
			done(rt.res, nil)
			rt.then()
			return
		}
		done(res, err)
	}
}

// reply answers a request.
func (c *conn) reply(id json.RawMessage, res any, err error) {
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			c.log.Error("acp: request failed", "id", string(id), "err", err)
			re = &rpcError{Code: codeInternal, Message: internalMessage}
		}
		_ = c.write(frame{ID: id, Error: re})
		return
	}
	if res == nil {
		res = struct{}{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		c.log.Error("acp: encode a result", "id", string(id), "err", err)
		_ = c.write(frame{ID: id, Error: &rpcError{Code: codeInternal, Message: internalMessage}})
		return
	}
	_ = c.write(frame{ID: id, Result: b})
}
