package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// maxBody is the largest request body read; maxKey the longest
// Idempotency-Key kept (with the user message).

// MessageIDHeader names a response's msg_ ID in a POST /v1/responses:
// an instance of a cluster that forwards a response names it so, and a
// client may too; sent again with the same ID, the request is the same
// response (admission is idempotent by ID).
const MessageIDHeader = "OpenCode-Message-ID"
const (
	maxBody = 32 << 20
	maxKey  = 255
)

// Create serves POST /v1/responses: the request's input is admitted as a
// user message of a session (a new one, the conversation's, or the one
// previous_response_id is a turn of), queued behind a running turn, and
// the response is its turn: answered as JSON when the turn ends, or
// streamed as it runs.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	t, err := h.decodeRequest(body)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxKey {
		h.WriteError(w, r, invalid("", "invalid_idempotency_key", fmt.Sprintf("the Idempotency-Key header is longer than %d bytes", maxKey)))
		return
	}
	if v := r.Header.Get(MessageIDHeader); v != "" {
		if identifier.Check(identifier.Message, v) != nil {
			h.WriteError(w, r, invalid("", "invalid_message_id", "the "+MessageIDHeader+" header is not a msg_ ID"))
			return
		}
		t.messageID = v
	}
	if t.req.Delivery == "steer" {
		h.createSteer(w, r, t, key)
		return
	}
	if len(t.outputs) > 0 {
		h.continueTurn(w, r, t)
		return
	}
	ctx := r.Context()
	stream := t.req.Stream
	// A background response's stream is recorded from its admission.
	t.req.Stream = stream || t.req.Background
	in, existed, sub, err := h.admit(ctx, t, key)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if t.req.Background {
		h.createBackground(w, r, streamSpec{in: in, existed: existed}, sub, stream)
		return
	}
	if sub != nil {
		defer sub.Close()
		h.stream(w, r, in, existed, sub)
		return
	}
	if err := h.settle(ctx, in, ""); err != nil && ctx.Err() != nil {
		return // the client left; its turn goes on in the core
	}
	h.respond(w, r, in.ID)
}

// deleted is OpenAI's answer to a deletion.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// Delete serves DELETE /v1/responses/{id}: the response's user message
// and its output messages leave the session (OpenCode's message
// deletion: what the model is sent next no longer holds them). One still
// queued is revoked from the inbox first; a running one is a 409 (cancel
// it first); a continuation is deleted with its whole turn, by the
// turn's first response.
func (h *Handler) Delete(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	in, after, err := h.locate(ctx, id)
	if err == nil && after != "" {
		err = invalid("", "", fmt.Sprintf("'%s' continues response '%s' after client calls: delete that response, the turn's first", clip(id), in.ID))
	}
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	core := h.o.Core
	switch {
	case in.State == opencode.InputPending:
		if _, err := core.Revoke(ctx, in.SessionID, in.ID); err != nil {
			h.WriteError(w, r, err)
			return
		}
	case in.State == opencode.InputDelivered && in.Answer == "":
		h.WriteError(w, r, &opencode.Error{Code: opencode.EConflict, Message: fmt.Sprintf("Response '%s' is running: cancel it first", clip(id))})
		return
	case in.State == opencode.InputDelivered:
		resp, err := h.buildAt(ctx, in, "")
		if err != nil {
			h.WriteError(w, r, err)
			return
		}
		ids := []string{in.ID}
		for _, it := range resp.Output {
			if it.Type == "message" && !slices.Contains(ids, it.ID) {
				ids = append(ids, it.ID)
			}
		}
		for _, mid := range ids {
			if err := core.DeleteMessage(ctx, in.SessionID, mid); err != nil {
				h.WriteError(w, r, err)
				return
			}
		}
	}
	h.ends.del(id)
	writeJSON(w, http.StatusOK, deleted{ID: id, Object: "response", Deleted: true})
}

// Retrieve serves GET /v1/responses/{id}: the turn of any user message
// (whichever door admitted it), read from its session; with stream=true
// streamed again (background.go).
func (h *Handler) Retrieve(w http.ResponseWriter, r *http.Request, id string) {
	stream, after, err := retrieveParams(w, r)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if stream {
		h.restream(w, r, id, after)
		return
	}
	h.respond(w, r, id)
}

// Cancel serves POST /v1/responses/{id}/cancel: a response still queued
// is revoked from the inbox, a running one's turn is aborted (the
// session's abort: its pending steers go too), and the answer is the
// response once that is done; one already over is answered as it is.
func (h *Handler) Cancel(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	in, _, err := h.locate(ctx, id)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	switch {
	case in.State == opencode.InputPending:
		if _, err := h.o.Core.Revoke(ctx, in.SessionID, in.ID); err != nil {
			h.WriteError(w, r, err)
			return
		}
	case in.State == opencode.InputDelivered && in.Answer == "":
		// Delivered and not answered: the session's running turn is its.
		if err := h.o.Core.Abort(ctx, in.SessionID); err != nil {
			h.WriteError(w, r, err)
			return
		}
		if _, err := h.o.Core.Wait(ctx, in.SessionID, in.ID); err != nil && ctx.Err() != nil {
			return
		}
	}
	h.respond(w, r, id)
}

// inputMessage is an input item of GET /v1/responses/{id}/input_items: the
// response's user message, its text parts as input_text.
type inputMessage struct {
	ID      string      `json:"id"`
	Type    string      `json:"type"`
	Role    string      `json:"role"`
	Status  string      `json:"status"`
	Content []inputText `json:"content"`
}

type inputText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// InputItems serves GET /v1/responses/{id}/input_items: the user message
// the response is the turn of, as one message item under its msg_ ID.
func (h *Handler) InputItems(w http.ResponseWriter, r *http.Request, id string) {
	in, after, err := h.locate(r.Context(), id)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if after != "" {
		h.outputItems(w, r, in, after)
		return
	}
	msg := inputMessage{ID: in.ID, Type: "message", Role: "user", Status: statusCompleted, Content: []inputText{}}
	for _, p := range in.Parts {
		if p.Type == opencode.PartText && !p.Synthetic {
			msg.Content = append(msg.Content, inputText{Type: "input_text", Text: p.Text})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Object  string         `json:"object"`
		Data    []inputMessage `json:"data"`
		FirstID string         `json:"first_id"`
		LastID  string         `json:"last_id"`
		HasMore bool           `json:"has_more"`
	}{"list", []inputMessage{msg}, in.ID, in.ID, false})
}

// respond answers the response of input id as it stands.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request, id string) {
	in, after, err := h.locate(r.Context(), id)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	resp, err := h.buildAt(r.Context(), in, after)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// admit finds the request's session (creating a new one when it names
// none) and admits its input there; a stream's subscription is taken
// before the admission, so it holds every event of the turn. A request
// with an Idempotency-Key that was admitted before is admitted again
// under the same message ID: the core answers the earlier admission, or
// a conflict if the body differs.
func (h *Handler) admit(ctx context.Context, t *turn, key string) (*opencode.Input, bool, *eventbus.Subscription, error) {
	if key != "" {
		defer h.keys.lock(key)()
	}
	core := h.o.Core
	sid := t.session
	// fork: previous_response_id is a response whose turn is not the
	// session's last: the session is forked at the message after that
	// turn. inferred: a conversation's session found by what it holds.
	fork, inferred := "", false
	switch {
	case t.previous != "" && h.lastTurn(ctx, t.previous, &sid):
		// The session's last turn, as this process saw it end: no read.
	case t.previous != "":
		prev, _, err := h.locate(ctx, t.previous)
		if err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				return nil, false, nil, notFound("previous_response_id", "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", clip(t.previous)))
			}
			return nil, false, nil, err
		}
		sid = prev.SessionID
		if fork, err = h.forkPoint(ctx, prev); err != nil {
			return nil, false, nil, err
		}
	case sid != "":
		if _, err := core.GetSession(ctx, sid); err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				return nil, false, nil, notFound("conversation", "conversation_not_found", fmt.Sprintf("Conversation with id '%s' not found.", clip(sid)))
			}
			return nil, false, nil, err
		}
	case t.conversation:
		var err error
		if sid, err = h.inferSession(ctx, t); err != nil {
			return nil, false, nil, err
		}
		inferred = sid != ""
	}
	id := ""
	if t.messageID != "" {
		// Named and admitted before: a retry, answered where the first
		// went (the turn it followed may no longer be the last: no fork).
		if prev, err := core.FindInput(ctx, t.messageID); err == nil {
			sid, id, fork = prev.SessionID, t.messageID, ""
		}
	}
	if key != "" {
		if e, ok := h.keys.get(key); ok {
			if sid != "" && e.session != sid && fork == "" && !inferred {
				return nil, false, nil, &fieldError{&opencode.Error{Code: opencode.EConflict, Message: "this Idempotency-Key was sent before with a request on another conversation"}, "", "idempotency_key_reused"}
			}
			// A retry of a request that forked is the fork's: not forked
			// again.
			sid, id, fork = e.session, e.message, ""
		} else if sid != "" && fork == "" {
			var err error
			if id, err = h.keyed(ctx, sid, key); err != nil {
				return nil, false, nil, err
			}
		}
	}
	created := false
	if fork != "" {
		s, err := core.Fork(ctx, sid, fork)
		if err != nil {
			return nil, false, nil, err
		}
		sid, created = s.ID, true
	}
	var fresh []convItem
	last := "" // the session's last message: history follows it
	if t.conversation && id == "" {
		var conv []opencode.MessageWithParts
		if sid != "" {
			// One conversation of a session at a time: two would store
			// the same history twice.
			defer h.historyLock(sid)()
			var err error
			if conv, err = core.Messages(ctx, sid); err != nil {
				if created {
					h.dropSession(ctx, sid)
				}
				return nil, false, nil, err
			}
		}
		if n := len(conv); n > 0 {
			last = conv[n-1].Info.ID
		}
		var retry string
		var ok bool
		switch fresh, retry, ok = t.matchHistory(conv); {
		case !ok && inferred:
			// A conversation that left the session its IDs name (the
			// client edited it): a new session holds it.
			sid, fresh, last = "", t.history, ""
		case !ok:
			if created {
				h.dropSession(ctx, sid)
			}
			return nil, false, nil, conversationMismatch(sid)
		case sid != "" && retry == "":
			if err := h.checkWaiting(ctx, sid, t); err != nil {
				if created {
					h.dropSession(ctx, sid)
				}
				return nil, false, nil, err
			}
		case retry != "":
			// The conversation re-sent up to a user message the session
			// holds: that message's turn answers.
			if created {
				h.dropSession(ctx, sid)
			}
			in, err := h.find(ctx, retry)
			if err != nil {
				return nil, false, nil, err
			}
			var sub *eventbus.Subscription
			if t.req.Stream {
				sub = core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == in.SessionID && wanted(e) })
			}
			return in, true, sub, nil
		}
	}
	if sid == "" {
		sid, created = h.o.IDs.NewSession(), true
		if _, _, err := core.CreateSession(ctx, opencode.SessionOptions{ID: sid, Minted: true, Directory: h.o.Directory}); err != nil {
			return nil, false, nil, err
		}
	}
	if err := h.storeHistory(ctx, sid, fresh, last); err != nil {
		if created {
			h.dropSession(ctx, sid)
		}
		return nil, false, nil, err
	}
	if id == "" {
		id = t.messageID
	}
	minted := id == ""
	if minted {
		id = h.o.IDs.NewMessage()
	}
	var sub *eventbus.Subscription
	if t.req.Stream {
		sub = core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
	}
	in, existed, err := core.Admit(ctx, &opencode.Input{ID: id, SessionID: sid, Delivery: opencode.Queue,
		Parts: h.parts(t, key), Agent: t.agent, Model: t.model, Variant: t.variant, System: t.system, Minted: minted, ClientTools: t.tools})
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		if created {
			h.dropSession(ctx, sid)
		}
		if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Code == opencode.EConflict && key != "" {
			return nil, false, nil, &fieldError{oe, "", "idempotency_key_reused"}
		}
		if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Field == "clientTools" {
			return nil, false, nil, &fieldError{oe, "tools", "invalid_value"} // the core's check of the function tools
		}
		return nil, false, nil, err
	}
	if key != "" {
		h.keys.put(key, keyEntry{session: sid, message: id})
	}
	return in, existed, sub, nil
}

// lastTurn reports whether response id is a turn this process streamed
// to its end and is still its session's last (nothing was written to the
// session since: its runner's sequence is the one the turn ended at),
// setting sid to its session. False says nothing: the caller reads.
func (h *Handler) lastTurn(ctx context.Context, id string, sid *string) bool {
	e, ok := h.ends.get(id)
	if !ok {
		return false
	}
	seq, err := h.o.Core.LastSeq(ctx, e.session)
	if err != nil || seq != e.seq {
		return false
	}
	*sid = e.session
	return true
}

// forkPoint is where previous_response_id's session is forked: the
// message after the turn of prev (the response's input) when that turn
// has ended and is not the session's last ("" : the session goes on at
// its end, as for a turn still queued, running or waiting on client
// calls: the new input queues behind it).
func (h *Handler) forkPoint(ctx context.Context, prev *opencode.Input) (string, error) {
	if prev.State != opencode.InputDelivered || prev.Answer == "" {
		return "", nil
	}
	// The one message after the answer, if any (not the whole session).
	next, err := h.o.Core.MessagesPage(ctx, prev.SessionID, opencode.PageQuery{Anchor: prev.Answer, Limit: 1})
	if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Code == opencode.EInvalid {
		return "", nil // the answer is no message of the session
	}
	if err != nil || len(next) == 0 {
		return "", err
	}
	return next[0].Info.ID, nil
}

// keyed finds the user message a session holds under an Idempotency-Key
// ("" : none).
func (h *Handler) keyed(ctx context.Context, sid, key string) (string, error) {
	conv, err := h.o.Core.Messages(ctx, sid)
	if err != nil {
		return "", err
	}
	for _, m := range conv {
		if m.Info.Role == opencode.User {
			if meta := metaOf(m.Parts); meta != nil && meta.IdempotencyKey == key {
				return m.Info.ID, nil
			}
		}
	}
	inbox, err := h.o.Core.Inbox(ctx, sid)
	if err != nil {
		return "", err
	}
	for _, in := range inbox {
		if meta := metaOf(in.Parts); meta != nil && meta.IdempotencyKey == key {
			return in.ID, nil
		}
	}
	return "", nil
}

// model is one entry of GET /v1/models.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// Models serves GET /v1/models: the catalog's models of the connected
// providers as provider/model, then the primary agents by name (owned by
// "agent").
func (h *Handler) Models(w http.ResponseWriter, r *http.Request) {
	out := []model{}
	if c := h.o.Catalog.Get(); c != nil {
		for _, p := range c.Providers {
			if !p.Connected {
				continue
			}
			for _, m := range p.Models {
				out = append(out, model{ID: p.ID + "/" + m.ID, Object: "model", OwnedBy: p.ID})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	for _, a := range h.o.Core.Agents() {
		if a.Mode != "subagent" {
			out = append(out, model{ID: a.Name, Object: "model", OwnedBy: "agent"})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", out})
}

// readBody reads a request's body, at most maxBody bytes: a larger one is
// ETooLarge, one that cannot be read a bad request.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &opencode.Error{Code: opencode.ETooLarge, Message: fmt.Sprintf("the request is larger than %d bytes", maxBody)}
		}
		return nil, invalid("", "", "the body could not be read: "+err.Error())
	}
	return body, nil
}
