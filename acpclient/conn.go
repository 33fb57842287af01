// Package acpclient is the client side of the Agent Client Protocol (ACP
// v1: JSON-RPC 2.0, newline-delimited, over an agent process's stdio): it
// starts an external agent (Claude Code, Codex, `opencode acp`...), sends
// it requests and hands its session updates and requests to the caller.
//
// It is a leaf: the core (lifecycle) drives it and maps what it receives
// onto its own messages and parts. Our own codec rather than
// github.com/coder/acp-go-sdk: that SDK is generated from an older schema
// (no `messageId` on chunks, which the core keeps one-to-one with its own
// message IDs), and the front door `acp` already made the same choice.
package acpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// ErrClosed is the error of a call on a connection that ended.
var ErrClosed = errors.New("connection to the agent closed")

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return e.Message + " (" + strconv.Itoa(e.Code) + ")" }

// JSON-RPC error codes this client answers with, and ACP's auth_required.
const (
	CodeAuthRequired   = -32000 // the agent's: authenticate first
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
)

// message is any JSON-RPC frame; which fields are set says which kind.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// Handlers receive what the agent sends on its own.
type Handlers struct {
	// Notify gets the agent's notifications (session/update) in the order
	// they arrive, on the reading goroutine: a response that follows them
	// is seen only after they were handled.
	Notify func(method string, params json.RawMessage)
	// Request answers the agent's requests (fs/*, session/request_permission),
	// each on its own goroutine; ctx ends with the connection. An
	// *RPCError goes back as it is, any other error as an internal error.
	Request func(ctx context.Context, method string, params json.RawMessage) (any, error)
}

// Conn is one JSON-RPC connection to an agent.
type Conn struct {
	w   io.Writer
	wmu sync.Mutex
	h   Handlers
	ids atomic.Int64

	mu    sync.Mutex
	calls map[string]chan message
	err   error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
}

// NewConn reads frames from r on its own goroutine until r ends, and
// writes frames to w.
func NewConn(r io.Reader, w io.Writer, h Handlers) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{w: w, h: h, calls: map[string]chan message{}, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go c.read(r)
	return c
}

// Done is closed once the connection ended and its request handlers returned.
func (c *Conn) Done() <-chan struct{} { return c.done }

func (c *Conn) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue // not a frame (a stray line): ACP has no way to answer it
		}
		switch {
		case m.Method != "" && len(m.ID) > 0:
			c.wg.Add(1)
			go c.serve(m)
		case m.Method != "":
			if c.h.Notify != nil {
				c.h.Notify(m.Method, m.Params)
			}
		case len(m.ID) > 0:
			c.mu.Lock()
			ch := c.calls[string(m.ID)]
			delete(c.calls, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
	c.mu.Lock()
	c.err = ErrClosed
	if err := sc.Err(); err != nil {
		c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	}
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, ch := range calls {
		close(ch)
	}
	c.cancel()
	c.wg.Wait()
	close(c.done)
}

// serve answers one request of the agent.
func (c *Conn) serve(m message) {
	defer c.wg.Done()
	out := message{JSONRPC: "2.0", ID: m.ID}
	var res any
	err := &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + m.Method}
	if c.h.Request != nil {
		var herr error
		res, herr = c.h.Request(c.ctx, m.Method, m.Params)
		err = nil
		if herr != nil && !errors.As(herr, &err) {
			err = &RPCError{Code: CodeInternal, Message: herr.Error()}
		}
	}
	if err != nil {
		out.Error = err
	} else {
		b, merr := json.Marshal(res)
		if merr != nil {
			out.Error = &RPCError{Code: CodeInternal, Message: merr.Error()}
		} else {
			out.Result = b
		}
	}
	_ = c.write(out)
}

func (c *Conn) write(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.w.Write(append(b, '\n'))
	return err
}

// Call sends a request and decodes its result into result (nil: dropped).
// It returns when the answer comes, ctx ends, or the connection ends.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	id := json.RawMessage(strconv.FormatInt(c.ids.Add(1), 10))
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.calls == nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.calls[string(id)] = ch
	c.mu.Unlock()
	if err := c.write(message{JSONRPC: "2.0", ID: id, Method: method, Params: p}); err != nil {
		c.forget(id)
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return err
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil && len(m.Result) > 0 {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	}
}

func (c *Conn) forget(id json.RawMessage) {
	c.mu.Lock()
	if c.calls != nil {
		delete(c.calls, string(id))
	}
	c.mu.Unlock()
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	return c.write(message{JSONRPC: "2.0", Method: method, Params: p})
}
