package pty

import (
	"context"
	"sync"
)

// Client is one attached reader and writer of a terminal (a websocket).
// It reads the terminal's one buffer by its own position: what it is
// handed is the buffer's text, shared with every other client.
type Client struct {
	t         *term
	m         *Manager
	pos       position
	prefix    string   // sent before the replay (a cursor inside a surrogate pair)
	replayEnd position // the end of the output when it attached
	done      chan struct{}
	once      sync.Once
	Cursor    int64 // the offset after the replay, where Next continues
}

// Attach attaches a client to a running terminal from cursor, a UTF-16
// offset into its output as OpenCode counts it: -1 is the end (no
// replay), anything before what is kept is the start of what is kept.
func (m *Manager) Attach(dir, id string, cursor int64) (*Client, error) {
	m.mu.Lock()
	t := m.find(dir, id)
	if t == nil {
		m.mu.Unlock()
		return nil, ErrNotFound
	}
	if t.info.Status != Running {
		m.mu.Unlock()
		return nil, ErrExited
	}
	if t.clients >= m.o.Clients {
		m.mu.Unlock()
		return nil, ErrTooManyClients
	}
	t.clients++
	if t.idle != nil {
		t.idle.Stop()
	}
	m.mu.Unlock()
	t.mu.Lock()
	from, prefix := t.buf.seek(cursor)
	end := t.buf.end()
	t.mu.Unlock()
	return &Client{t: t, m: m, pos: from, prefix: prefix, replayEnd: end, done: make(chan struct{}), Cursor: end.unit}, nil
}

// Replay returns the next piece of the output from the requested cursor
// up to Cursor, at most max bytes (whole characters), nil at its end. A
// piece no longer kept by the time it is read is skipped: Cursor, sent
// after the replay, says where the client is.
func (c *Client) Replay(max int) []byte {
	if c.prefix != "" {
		p := []byte(c.prefix)
		c.prefix = ""
		return p
	}
	if c.pos.byte >= c.replayEnd.byte {
		return nil
	}
	c.t.mu.Lock()
	text, at, next := c.t.buf.read(c.pos, max)
	c.t.mu.Unlock()
	left := c.replayEnd.byte - at.byte
	if left <= 0 {
		c.pos = c.replayEnd
		return nil
	}
	if int64(len(text)) > left { // the replay's end is a character's
		text, next = text[:left], c.replayEnd
	}
	c.pos = next
	return text
}

// Next waits for more output after Cursor (the rest of the replay is
// skipped): the text, the buffer's own (never to be changed), and the
// offset it starts at (later than the end of the last text when output
// this client had not read yet is no longer kept). When the terminal ends
// it returns what is left, then io.EOF (its process exited), ErrRemoved
// or ErrClosed.
func (c *Client) Next(ctx context.Context, max int) ([]byte, int64, error) {
	if c.pos.byte < c.replayEnd.byte {
		c.pos, c.prefix = c.replayEnd, ""
	}
	for {
		c.t.mu.Lock()
		text, at, next := c.t.buf.read(c.pos, max)
		if len(text) > 0 {
			c.pos = next
			c.t.mu.Unlock()
			return text, at.unit, nil
		}
		if err := c.t.endErr; err != nil {
			c.t.mu.Unlock()
			return nil, c.pos.unit, err
		}
		ch := c.t.changed
		c.t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, c.pos.unit, ctx.Err()
		case <-c.done:
			return nil, c.pos.unit, ErrRemoved
		}
	}
}

// Write sends input to the terminal (nothing once its process exited).
func (c *Client) Write(p []byte) error {
	select {
	case <-c.t.ended:
		return nil
	default:
	}
	_, err := c.t.proc.Write(p)
	return err
}

// Detach detaches the client: a terminal left without one starts its idle
// timer.
func (c *Client) Detach() {
	c.once.Do(func() {
		close(c.done)
		c.m.mu.Lock()
		c.t.clients--
		last := c.t.clients == 0
		exited := c.t.info.Status == Exited
		if m := c.m; m.terms[c.t.info.ID] == c.t {
			m.idleLocked(c.t)
		}
		c.m.mu.Unlock()
		if last && exited {
			c.t.dropBuffer()
		}
	})
}
