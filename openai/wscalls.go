package openai

// Client calls over the WebSocket: a response.create of
// function_call_output items continues the turn as POST /v1/responses
// does (continue.go), streamed on the socket; and a steer accepted into a
// response that ended with client calls while its turn waits for their
// outputs is answered response.steer.pending (OpenAI's
// waiting_for_required_input): it stays in the inbox, durable, and the
// runner delivers it at the model call after the outputs, where it
// steers the continuation (its successor, the steer's response, carries
// the rest of the turn).

import (
	"context"
	"fmt"
	"slices"

	"github.com/opencode-server/opencode-server/opencode"
)

// requiredInput is a stub of response.steer.pending: a call whose output
// the client owes.
type requiredInput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

type steerPending struct {
	Type           string          `json:"type"`
	SequenceNumber int64           `json:"sequence_number"`
	Reason         string          `json:"reason"`
	RequiredInput  []requiredInput `json:"required_input"`
	Steer          steerInfo       `json:"steer"`
}

// sendPending answers steer in pending on ch's lane.
func (c *socket) sendPending(ch *chain, in *opencode.Input, target string, req []requiredInput) {
	c.sendEvent(ch.lane, func(seq int64) any {
		return steerPending{Type: "response.steer.pending", SequenceNumber: seq, Reason: "waiting_for_required_input",
			RequiredInput: req, Steer: steerInfo{ID: in.ID, PreviousResponseID: target}}
	})
}

// stillWaiting reports whether any of the calls still waits for the
// client in the session.
func (c *socket) stillWaiting(sid string, req []requiredInput) bool {
	ids, err := c.h.o.Core.WaitingClientCalls(c.ctx, sid)
	if err != nil {
		c.h.o.Logger.Warn("openai: the waiting client calls could not be read", "session", sid, "err", err)
		return false
	}
	return slices.ContainsFunc(req, func(r requiredInput) bool { return slices.Contains(ids, r.CallID) })
}

// handedOver records that ch's response (of input in's turn, streamed by
// s) ended with client calls the turn waits on, and answers pending the
// steers accepted into the chain that still wait in the inbox (after the
// response's response.completed, as OpenAI sends it).
func (c *socket) handedOver(ch *chain, in *opencode.Input, s *streamer) {
	var req []requiredInput
	for _, cs := range s.tc.order {
		req = append(req, requiredInput{Type: "function_call_output", CallID: cs.item.CallID, Name: cs.item.Name})
	}
	if len(req) == 0 || !c.stillWaiting(in.SessionID, req) {
		return
	}
	c.mu.Lock()
	ch.handed = req
	steers := ch.steers
	ch.steers = nil
	c.mu.Unlock()
	for _, st := range steers {
		now, err := c.h.find(c.ctx, st.ID)
		if err != nil || now.State != opencode.InputPending {
			continue // delivered (its successor streams) or taken back (settleSteer answers)
		}
		c.sendPending(ch, st, metaPrevious(st), req)
	}
}

// metaPrevious is the response a steer was aimed at.
func metaPrevious(in *opencode.Input) string {
	if m := metaOf(in.Parts); m != nil {
		return m.PreviousResponseID
	}
	return ""
}

// pendIfHanded answers an accepted steer pending at once if its target's
// chain ended with client calls that still wait; else the chain answers
// it pending if it ends so.
func (c *socket) pendIfHanded(ch *chain, in *opencode.Input, target string) {
	c.mu.Lock()
	req := ch.handed
	if req == nil {
		ch.steers = append(ch.steers, in)
	}
	c.mu.Unlock()
	if req != nil && c.stillWaiting(in.SessionID, req) {
		c.sendPending(ch, in, target, req)
	}
}

// continueCalls runs a response.create of function_call_output items:
// handed to the waiting calls (every one of that response, at once, as
// over HTTP), and the continuation streamed on the socket, named by the
// assistant message that made the calls; a steer delivered at its first
// model call steers it, and its successor follows on the lane.
func (c *socket) continueCalls(t *turn, lane string) {
	if t.conversation {
		c.release()
		c.fail(lane, invalid("input", "unsupported_value", "over the WebSocket, function_call_output items go alone, with the previous_response_id of the response whose calls they answer (or its conversation): send a whole conversation with POST /v1/responses"))
		return
	}
	sid, err := c.h.callsSession(c.ctx, t)
	var ho *handed
	if err == nil {
		ho, err = c.h.handOver(c.ctx, sid, t.outputs, "input", true)
	}
	if err != nil {
		c.release()
		c.fail(lane, err)
		return
	}
	ch := &chain{done: make(chan struct{}), lane: lane}
	if !c.claim(ho.after, ch) {
		ho.sub.Close()
		c.release()
		c.fail(lane, &fieldError{&opencode.Error{Code: opencode.EConflict, Message: fmt.Sprintf("response %s is streamed on this connection already", ho.after)}, "input", "response_already_streamed"})
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.release()
		defer ho.sub.Close()
		c.stream(ch, streamSpec{in: ho.in, after: ho.after, skip: ho.skip, existed: ho.existed}, ho.sub)
	}()
}

// callsSession is the session a request of function_call_output items
// answers calls in: previous_response_id's, or conversation's.
func (h *Handler) callsSession(ctx context.Context, t *turn) (string, error) {
	var oe *opencode.Error
	switch {
	case t.previous != "":
		prev, _, err := h.locate(ctx, t.previous)
		if err != nil {
			if asNotFound(err, &oe) {
				err = notFound("previous_response_id", "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", clip(t.previous)))
			}
			return "", err
		}
		return prev.SessionID, nil
	case t.session == "":
		return "", invalid("previous_response_id", "missing_required_parameter", "function_call_output items answer the calls of a response: give its previous_response_id (or its conversation)")
	}
	if _, err := h.o.Core.GetSession(ctx, t.session); err != nil {
		if asNotFound(err, &oe) {
			err = notFound("conversation", "conversation_not_found", fmt.Sprintf("Conversation with id '%s' not found.", clip(t.session)))
		}
		return "", err
	}
	return t.session, nil
}
