package openai

// The Responses WebSocket in a cluster: a response.create for a session
// another live instance runs, or a response.steer aimed at a response of
// such a session, goes to that instance over a WebSocket of this socket's
// own (one per instance), as the client sent it; every frame that
// instance sends comes back to the client as it is. So steers, their
// answers, successors and lanes work as on the owner's own socket, and
// the session keeps one runner (HTTP requests are forwarded by routes).

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/opencode-server/opencode-server/opencode"
)

// relayed reports whether a client frame was sent on to the instance that
// runs its session.
func (c *socket) relayed(typ string, data []byte, lane string) bool {
	if c.forwarded || !c.h.o.Core.Clustered() || (typ != "response.create" && typ != "response.steer") {
		return false
	}
	var ref struct {
		Previous     string          `json:"previous_response_id"`
		Conversation json.RawMessage `json:"conversation"`
	}
	if json.Unmarshal(data, &ref) != nil {
		return false // answered here, as malformed
	}
	if typ == "response.steer" && c.chainOf(ref.Previous) != nil {
		return false // a response of this socket
	}
	sid := ""
	var conv struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(ref.Conversation, &sid) != nil && json.Unmarshal(ref.Conversation, &conv) == nil {
		sid = conv.ID
	}
	if sid == "" && ref.Previous != "" {
		if in, err := c.h.o.Core.FindInput(c.ctx, ref.Previous); err == nil {
			sid = in.SessionID
		} else if s, err := c.h.o.Core.MessageSession(c.ctx, ref.Previous); err == nil {
			sid = s
		}
	}
	if !strings.HasPrefix(sid, "ses_") {
		return false
	}
	addr, err := c.h.o.Core.Owner(c.ctx, sid)
	if err != nil || addr == "" {
		return false // this instance runs it (or answers why not)
	}
	up, err := c.upstream(addr)
	if err == nil {
		ctx, cancel := context.WithTimeout(c.ctx, wsWriteTimeout)
		err = up.Write(ctx, websocket.MessageText, data)
		cancel()
	}
	if err != nil {
		c.h.o.Logger.Warn("openai: relay to the session's owner failed", "session", sid, "owner", addr, "err", err)
		c.dropUpstream(addr, up)
		c.fail(lane, &opencode.Error{Code: opencode.EUnavailable, SessionID: sid,
			Message: "The instance running session " + sid + " does not answer; retry"})
	}
	return true
}

// upstream is this socket's WebSocket to the instance at addr, dialled
// on first use; its frames are sent to the client as they come.
func (c *socket) upstream(addr string) (*websocket.Conn, error) {
	c.mu.Lock()
	up := c.ups[addr]
	c.mu.Unlock()
	if up != nil {
		return up, nil
	}
	hdr := http.Header{opencode.ForwardedHeader: {"1"}}
	if a := c.auth; a != "" {
		hdr.Set("Authorization", a)
	}
	u := "ws" + strings.TrimPrefix(strings.TrimRight(addr, "/"), "http") + "/v1/responses"
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	up, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: hdr})
	cancel()
	if err != nil {
		return nil, err
	}
	up.SetReadLimit(maxBody)
	c.mu.Lock()
	if c.ups == nil {
		c.ups = map[string]*websocket.Conn{}
	}
	c.ups[addr] = up
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.dropUpstream(addr, up)
		for {
			_, b, err := up.Read(c.ctx)
			if err != nil {
				if c.ctx.Err() == nil {
					c.h.o.Logger.Warn("openai: the session owner's socket ended", "owner", addr, "err", err)
					c.fail("", &opencode.Error{Code: opencode.EUnavailable,
						Message: "The instance at " + addr + " running this socket's responses went away; their turns go on there"})
				}
				return
			}
			if c.send(b) != nil {
				return
			}
		}
	}()
	return up, nil
}

// dropUpstream closes a socket to another instance and forgets it.
func (c *socket) dropUpstream(addr string, up *websocket.Conn) {
	if up == nil {
		return
	}
	c.mu.Lock()
	if c.ups[addr] == up {
		delete(c.ups, addr)
	}
	c.mu.Unlock()
	up.CloseNow()
}

// closeUpstreams ends the sockets to other instances with the client's.
func (c *socket) closeUpstreams() {
	c.mu.Lock()
	ups := c.ups
	c.ups = nil
	c.mu.Unlock()
	for _, up := range ups {
		_ = up.Close(websocket.StatusNormalClosure, "client gone")
	}
}
