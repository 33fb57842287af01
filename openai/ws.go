package openai

// OpenAI's WebSocket mode of the Responses API, as openai-go v3.98.0's
// Responses.Connect and Beta.Responses.Connect speak it: a GET upgrade on
// /v1/responses, JSON text frames both ways. response.create runs a
// response as POST /v1/responses with stream: true does (the same
// admission, the same events); response.steer is the core's steer into
// the response's running turn (steer.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

const (
	// wsQueue is how many frames may wait for a client that does not
	// read before it is cut off; wsWriteTimeout how long one frame may
	// take to go out.
	wsQueue        = 4096
	wsWriteTimeout = 10 * time.Second
	// maxSocketResponses bounds the responses one socket streams at once.
	maxSocketResponses = 16
)

// errSlow is a client cut off for not reading its frames.
var errSlow = errors.New("the client does not read its frames")

// socket is one Responses WebSocket: a reader taking the client's
// commands in order, a writer sending frames from a bounded queue, and
// one chain goroutine per response streamed (a response, then the
// successors its steers start).
type socket struct {
	h      *Handler
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	out    chan []byte
	wg     sync.WaitGroup

	mu sync.Mutex
	// seq numbers the socket's own events (steer answers, errors); a
	// response's events are numbered by its stream, from 0, as over SSE.
	seq int64
	// chains is every response streamed on the socket: the done channel
	// of the chain streaming it, and the stream_id its create gave.
	chains map[string]*chain
	// acks are the steers being admitted: closed once their accepted (or
	// failed) event is queued, so a successor's response.created never
	// goes out before its steer's answer.
	acks   map[string]chan struct{}
	active int
	// ups are this socket's sockets to other instances of a cluster
	// (ws_relay.go), by address; auth is the client's Authorization, sent
	// on; forwarded: this socket is another instance's relay, served here.
	ups       map[string]*websocket.Conn
	auth      string
	forwarded bool
}

type chain struct {
	done chan struct{}
	lane string
	// handed (under socket.mu) are the client calls the chain's last
	// response ended with, while its turn waits for their outputs (nil:
	// none); steers are the steers accepted into the chain's responses
	// and not answered pending yet.
	handed []requiredInput
	steers []*opencode.Input
}

// Connect serves GET /v1/responses upgraded to a WebSocket (routes checks
// the Host, the Origin and the auth before, as for every socket).
func (h *Handler) Connect(w http.ResponseWriter, r *http.Request) {
	// The socket outlives the server's request timeouts; writes get a
	// deadline each.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // origin checked by routes
	if err != nil {
		return // Accept answered
	}
	ws.SetReadLimit(maxBody)
	ctx, cancel := context.WithCancel(context.Background())
	c := &socket{h: h, ws: ws, ctx: ctx, cancel: cancel, out: make(chan []byte, wsQueue),
		chains: map[string]*chain{}, acks: map[string]chan struct{}{},
		auth: r.Header.Get("Authorization"), forwarded: r.Header.Get(opencode.ForwardedHeader) != ""}
	c.serve()
}

func (c *socket) serve() {
	defer c.ws.CloseNow()
	c.wg.Add(2)
	go c.write()
	go func() {
		defer c.wg.Done()
		select {
		case <-c.h.o.Done:
			// The close frame first (Close is bounded by its own
			// handshake timeout), then everything of the socket stops.
			_ = c.ws.Close(websocket.StatusGoingAway, "server closing")
			c.cancel()
		case <-c.ctx.Done():
		}
	}()
	for {
		typ, data, err := c.ws.Read(c.ctx)
		if err != nil {
			break // the client closed or went away, or was cut off
		}
		c.handle(typ, data)
	}
	c.closeUpstreams()
	c.cancel()
	c.wg.Wait()
}

// write sends the queued frames; a frame that cannot go out in
// wsWriteTimeout cuts the client off.
func (c *socket) write() {
	defer c.wg.Done()
	for {
		select {
		case b := <-c.out:
			ctx, cancel := context.WithTimeout(c.ctx, wsWriteTimeout)
			err := c.ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.h.o.Logger.Debug("openai: websocket write failed, closing", "err", err)
				c.cancel()
				return
			}
		case <-c.ctx.Done():
			return
		}
	}
}

// send queues a frame; a client whose queue is full is cut off, never
// waited for.
func (c *socket) send(b []byte) error {
	select {
	case <-c.ctx.Done():
		return c.ctx.Err()
	default:
	}
	select {
	case c.out <- b:
		return nil
	default:
		c.h.o.Logger.Warn("openai: a websocket client does not read its frames: cut off")
		c.cancel()
		return errSlow
	}
}

// sendEvent queues one of the socket's own events (a steer answer, an
// error), numbered on the socket, on a response's lane if it has one.
func (c *socket) sendEvent(lane string, v func(seq int64) any) {
	c.mu.Lock()
	seq := c.seq
	c.seq++
	c.mu.Unlock()
	b, err := json.Marshal(v(seq))
	if err != nil {
		c.h.o.Logger.Error("openai: a websocket event could not be encoded", "err", err)
		return
	}
	_ = c.send(withLane(b, lane))
}

// withLane adds stream_id to an event object (the SDK routes a lane's
// events by it).
func withLane(b []byte, lane string) []byte {
	if lane == "" || len(b) < 2 || b[len(b)-1] != '}' {
		return b
	}
	q, _ := json.Marshal(lane)
	out := make([]byte, 0, len(b)+len(q)+14)
	out = append(out, b[:len(b)-1]...)
	out = append(out, `,"stream_id":`...)
	out = append(out, q...)
	return append(out, '}')
}

// wsError is OpenAI's WebSocket error event. It is the one event with a
// top-level "error" key.
type wsError struct {
	Type           string   `json:"type"`
	SequenceNumber int64    `json:"sequence_number"`
	Status         int      `json:"status"`
	Error          apiError `json:"error"`
}

// fail answers a command that failed with an error event: the status,
// type and code of the one error table, as the HTTP door answers.
func (c *socket) fail(lane string, err error) {
	_, k, body := apiErrorOf(err)
	if k.HTTP >= 500 {
		c.h.o.Logger.Log(c.ctx, k.Level(), "openai: websocket command failed", "err", err)
	}
	c.sendEvent(lane, func(seq int64) any { return wsError{Type: "error", SequenceNumber: seq, Status: k.HTTP, Error: body} })
}

// handle takes one client frame; the reader takes them in order, so two
// steers are admitted in the order they were sent.
func (c *socket) handle(typ websocket.MessageType, data []byte) {
	if typ != websocket.MessageText {
		c.fail("", invalid("", "invalid_type", "frames are JSON text: a binary frame was sent"))
		return
	}
	var env struct {
		Type     *string `json:"type"`
		StreamID *string `json:"stream_id"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		c.fail("", invalid("", "invalid_json", "the frame is not a JSON object: "+err.Error()))
		return
	}
	lane := ""
	if env.StreamID != nil {
		lane = *env.StreamID
		if !validLane(lane) {
			c.fail("", invalid("stream_id", "invalid_value", "stream_id must be 1-256 ASCII letters, digits, underscores, hyphens or periods"))
			return
		}
	}
	if env.Type != nil && c.relayed(*env.Type, data, lane) {
		return
	}
	switch {
	case env.Type == nil:
		c.fail(lane, invalid("type", "missing_required_parameter", "the event has no type"))
	case *env.Type == "response.create":
		c.create(data, lane)
	case *env.Type == "response.steer":
		c.steer(data)
	case *env.Type == "response.inject":
		c.fail(lane, invalid("type", "unsupported_value", "response.inject is not supported: send function_call_output items in a response.create with previous_response_id"))
	default:
		c.fail(lane, invalid("type", "invalid_value", fmt.Sprintf("unknown event type %q: send response.create or response.steer", clip(*env.Type))))
	}
}

func validLane(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		if !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.') {
			return false
		}
	}
	return true
}

// create runs response.create: the frame is a POST /v1/responses body
// (stream is implied; stream_id picks the lane), admitted as one, and its
// response streamed on the socket.
func (c *socket) create(data []byte, lane string) {
	t, err := c.h.decodeRequest(data)
	switch {
	case err != nil:
	case t.req.Delivery == "steer":
		err = invalid("delivery", "invalid_value", "over the WebSocket a steer is a response.steer event")
	case t.req.Background:
		// As OpenAI's: a socket's responses stream on it.
		err = invalid("background", "unsupported_parameter", "background is not supported over the WebSocket: use POST /v1/responses")
	}
	if err != nil {
		c.fail(lane, err)
		return
	}
	t.req.Stream = true
	c.mu.Lock()
	full := c.active >= maxSocketResponses
	if !full {
		c.active++
	}
	c.mu.Unlock()
	if full {
		c.fail(lane, &fieldError{&opencode.Error{Code: opencode.ETooMany, Message: fmt.Sprintf("this socket already streams %d responses: wait for one to end", maxSocketResponses)}, "", "too_many_responses"})
		return
	}
	if len(t.outputs) > 0 {
		c.continueCalls(t, lane)
		return
	}
	in, existed, sub, err := c.h.admit(c.ctx, t, "")
	if err != nil {
		c.release()
		c.fail(lane, err)
		return
	}
	ch := &chain{done: make(chan struct{}), lane: lane}
	c.claim(in.ID, ch)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.release()
		defer sub.Close()
		c.stream(ch, streamSpec{in: in, existed: existed}, sub)
	}()
}

func (c *socket) release() {
	c.mu.Lock()
	c.active--
	c.mu.Unlock()
}

// claim records that ch streams response id; false if the socket
// already streams (or streamed) it.
func (c *socket) claim(id string, ch *chain) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.chains[id]; ok {
		return false
	}
	if len(c.chains) >= maxChains {
		// A long-lived socket forgets the responses that ended (at most
		// maxSocketResponses stream at once): a steer naming one is then "not a
		// response of this connection" rather than refused as completed.
		for k, v := range c.chains {
			select {
			case <-v.done:
				delete(c.chains, k)
			default:
			}
		}
	}
	c.chains[id] = ch
	return true
}

// maxChains bounds the responses a socket remembers.
const maxChains = 1024

func (c *socket) chainOf(id string) *chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chains[id]
}

// stream streams a response and then each successor a steer starts, to
// the end of the turn (or to client calls it waits on: the steers
// accepted meanwhile are then answered pending), then closes ch.done.
func (c *socket) stream(ch *chain, sp streamSpec, sub *eventbus.Subscription) {
	defer close(ch.done)
	s := c.streamer(sp.in, sp.skip, ch.lane)
	s.mine = sp.after != ""
	for {
		ok := c.h.follow(c.ctx, s, sp, sub)
		if ok && s.successor == "" && s.tc.cut != "" {
			c.handedOver(ch, sp.in, s)
		}
		if !ok || s.successor == "" {
			return
		}
		next, err := c.h.find(c.ctx, s.successor)
		if err != nil {
			c.h.o.Logger.Warn("openai: a steer's successor could not be read", "response", s.successor, "err", err)
			return
		}
		if !c.claim(next.ID, ch) {
			return
		}
		succ := c.streamer(next, nil, ch.lane)
		// Its delivery was mapped by the response it ended.
		succ.mine, succ.last = true, s.last
		s, sp = succ, streamSpec{in: next}
	}
}

// streamer is a response's streamer writing to the socket; before a
// steered response's terminal event it waits for its steer's answer.
func (c *socket) streamer(in *opencode.Input, skip map[string]bool, lane string) *streamer {
	s := c.h.newStreamer(c.ctx, in, skip)
	s.emit = func(_ string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return c.send(withLane(b, lane))
	}
	s.settle = c.awaitAck
	return s
}

// awaitAck waits until the answer to steer id, if this socket is
// admitting it, is queued.
func (c *socket) awaitAck(id string) {
	c.mu.Lock()
	ack := c.acks[id]
	c.mu.Unlock()
	if ack != nil {
		select {
		case <-ack:
		case <-c.ctx.Done():
		}
	}
}

// steerEvent is response.steer: input for the running response
// previous_response_id.
type steerEvent struct {
	PreviousResponseID string          `json:"previous_response_id"`
	Input              json.RawMessage `json:"input"`
}

// steerInfo is the steer of response.steer.accepted and .failed.
type steerInfo struct {
	ID                 string          `json:"id,omitempty"`
	PreviousResponseID string          `json:"previous_response_id"`
	Input              json.RawMessage `json:"input,omitempty"`
}

type steerAccepted struct {
	Type           string    `json:"type"`
	SequenceNumber int64     `json:"sequence_number"`
	Steer          steerInfo `json:"steer"`
}

type steerFailed struct {
	Type           string    `json:"type"`
	SequenceNumber int64     `json:"sequence_number"`
	Error          steerErr  `json:"error"`
	Steer          steerInfo `json:"steer"`
}

type steerErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

// steer runs response.steer: admitted into the target's running turn
// (the target must be a response of this socket), answered accepted with
// the steer's msg_ ID once durable, or failed with OpenAI's code. An
// accepted steer is then either streamed as the successor response or,
// if an abort or revoke takes it back, answered failed.
func (c *socket) steer(data []byte) {
	var ev steerEvent
	err := json.Unmarshal(data, &ev)
	input := ev.Input
	if len(input) == 0 {
		input = json.RawMessage(`""`)
	}
	refuse := func(lane, id, code, msg string) {
		c.sendEvent(lane, func(seq int64) any {
			return steerFailed{Type: "response.steer.failed", SequenceNumber: seq, Error: steerErr{Code: code, Message: msg, Type: "invalid_request_error"},
				Steer: steerInfo{ID: id, PreviousResponseID: ev.PreviousResponseID, Input: input}}
		})
	}
	if err != nil {
		refuse("", "", "invalid_input", "The event is not a valid response.steer: "+err.Error())
		return
	}
	texts, err := steerInput(ev.Input)
	if err != nil {
		var fe *fieldError
		msg := err.Error()
		if errors.As(err, &fe) {
			msg = fe.err.Message
		}
		refuse("", "", "invalid_input", msg)
		return
	}
	target := c.chainOf(ev.PreviousResponseID)
	if target == nil {
		refuse("", "", "response_not_found", fmt.Sprintf("Response '%s' is not a response of this connection.", clip(ev.PreviousResponseID)))
		return
	}
	id := c.h.o.IDs.NewMessage()
	ack := make(chan struct{})
	c.mu.Lock()
	c.acks[id] = ack
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.acks, id)
		c.mu.Unlock()
		close(ack)
	}()
	in, _, _, failure, err := c.h.steer(c.ctx, ev.PreviousResponseID, &turn{texts: texts, previous: ev.PreviousResponseID}, "", id, true, false)
	switch {
	case err != nil:
		c.fail(target.lane, err)
	case failure != nil:
		refuse(target.lane, "", failure.code, failure.message)
	default:
		c.sendEvent(target.lane, func(seq int64) any {
			return steerAccepted{Type: "response.steer.accepted", SequenceNumber: seq, Steer: steerInfo{ID: in.ID, PreviousResponseID: ev.PreviousResponseID}}
		})
		c.pendIfHanded(target, in, ev.PreviousResponseID)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.settleSteer(in, target, func(msg string) { refuse(target.lane, in.ID, "response_not_active", msg) })
		}()
	}
}

// settleSteer makes sure an accepted steer is answered: once its turn is
// over and the chain that streamed its target has ended, a steer that
// chain did not stream as a successor is answered failed if it was
// revoked (an abort took it back), else streamed from the log (it
// started a turn of its own after the target's ended).
func (c *socket) settleSteer(in *opencode.Input, target *chain, refuse func(string)) {
	_, err := c.h.o.Core.Wait(c.ctx, in.SessionID, in.ID)
	if c.ctx.Err() != nil {
		return
	}
	select {
	case <-target.done:
	case <-c.ctx.Done():
		return
	}
	ch := &chain{done: make(chan struct{}), lane: target.lane}
	if !c.claim(in.ID, ch) {
		return // streamed as a successor
	}
	var oe *opencode.Error
	if errors.As(err, &oe) && oe.Code == opencode.ERevoked {
		close(ch.done)
		refuse("The steer was taken back before it was delivered (the response was cancelled): " + oe.Message)
		return
	}
	now, ferr := c.h.find(c.ctx, in.ID)
	if ferr != nil {
		close(ch.done)
		c.fail(target.lane, ferr)
		return
	}
	sub := c.h.o.Core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == in.SessionID && wanted(e) })
	defer sub.Close()
	c.stream(ch, streamSpec{in: now, existed: true}, sub)
}
