package openai

// Steering a running response: OpenAI's response.steer (over the
// WebSocket, ws.go) and this door's HTTP form of it, a POST
// /v1/responses with "delivery": "steer". Both are the core's steer
// admission aimed at the response's turn (lifecycle's SteerInto): the
// steer's user message ID is the steering ID and the ID of the successor
// response that carries the rest of the turn.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// steerFailure is a steer not admitted, with OpenAI's response.steer.failed
// code; kind is the core's error code the HTTP form answers with.
type steerFailure struct {
	kind          opencode.Code
	param         string
	code, message string
}

func (f *steerFailure) err() error {
	return &fieldError{&opencode.Error{Code: f.kind, Message: f.message}, f.param, f.code}
}

// steer admits texts as a steer into the running turn of response target,
// under ID id (minted: new, no earlier admission can hold it). With
// subscribe, the session's events are subscribed to before the admission,
// so a stream of the successor holds every event of it. Refused, nothing
// is admitted and the failure says why in OpenAI's codes.
func (h *Handler) steer(ctx context.Context, target string, t *turn, key, id string, minted, subscribe bool) (*opencode.Input, bool, *eventbus.Subscription, *steerFailure, error) {
	prev, err := h.o.Core.FindInput(ctx, target)
	if err != nil {
		var oe *opencode.Error
		if asNotFound(err, &oe) {
			return nil, false, nil, &steerFailure{opencode.ENotFound, "previous_response_id", "response_not_found",
				fmt.Sprintf("Response with id '%s' not found.", clip(target))}, nil
		}
		return nil, false, nil, nil, err
	}
	sid := prev.SessionID
	var sub *eventbus.Subscription
	if subscribe {
		sub = h.o.Core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
	}
	in, existed, refused, err := h.o.Core.SteerInto(ctx, &opencode.Input{ID: id, SessionID: sid, Parts: h.parts(t, key), Minted: minted}, target)
	if err != nil || refused != "" {
		if sub != nil {
			sub.Close()
		}
		if err != nil {
			return nil, false, nil, nil, err
		}
		return nil, false, nil, h.refusal(ctx, target, refused), nil
	}
	return in, existed, sub, nil, nil
}

// refusal is the failure for a steer the core refused.
func (h *Handler) refusal(ctx context.Context, target string, why opencode.SteerRefusal) *steerFailure {
	f := &steerFailure{kind: opencode.EConflict, param: "previous_response_id"}
	switch why {
	case opencode.SteerNotStarted:
		f.code, f.message = "response_not_active", fmt.Sprintf("Response '%s' is queued: its turn has not started, so there is nothing to steer yet.", target)
	case opencode.SteerSuperseded:
		f.code, f.message = "response_not_active", fmt.Sprintf("Response '%s' was already steered: its turn goes on as a later response; steer that one.", target)
	case opencode.SteerUnsupported:
		f.kind, f.code, f.message = opencode.EInvalid, "steering_not_supported", "The agent running this response takes no steering input; send a new response after it."
	case opencode.SteerTooMany:
		f.code, f.message = "too_many_pending_steers", fmt.Sprintf("Response '%s' already has %d steers waiting for its next model call.", target, opencode.MaxPendingSteers)
	default:
		f.code, f.message = "response_already_completed", fmt.Sprintf("Response '%s' has completed and takes no more steering input; send a new response with previous_response_id.", target)
		if in, err := h.o.Core.FindInput(ctx, target); err == nil && in.State == opencode.InputRevoked {
			f.code, f.message = "response_not_active", fmt.Sprintf("Response '%s' was cancelled before it ran.", target)
		}
	}
	return f
}

// steeredBy reports whether user message id is a steer delivered into the
// turn of input in after it (so in's response ended there, steered).
func (h *Handler) steeredBy(ctx context.Context, in *opencode.Input, id string) (bool, error) {
	if id == in.ID {
		return false, nil
	}
	u, err := h.o.Core.FindInput(ctx, id)
	if err != nil {
		var oe *opencode.Error
		if asNotFound(err, &oe) {
			return false, nil // no input: a message the core made (a subtask's summary request)
		}
		return false, err
	}
	// One turn's inputs get one answer, recorded when it ends ("" for all
	// while it runs; turns of a session never overlap).
	return u.SessionID == in.SessionID && u.State == opencode.InputDelivered && u.Delivery == opencode.Steer &&
		u.PromotedSeq > in.PromotedSeq && u.Answer == in.Answer, nil
}

// steerInput reads a steer's input: a string, or user message items whose
// content is a string or input_text parts (OpenAI's steer takes user
// messages only).
func steerInput(raw json.RawMessage) ([]string, error) {
	t := turn{req: createRequest{Input: raw}}
	if err := t.decodeInput(); err != nil {
		return nil, err
	}
	if t.system != "" || len(t.outputs) > 0 || len(t.texts) == 0 {
		return nil, invalid("input", "invalid_value", "a steer takes user messages only")
	}
	return t.texts, nil
}

// createSteer serves POST /v1/responses with "delivery": "steer": the
// input is admitted into the running turn of previous_response_id, and
// the response is its successor (the steer's user message): streamed
// from the moment it is admitted, or answered when the turn ends. A steer
// the core refuses is a 409 (400 for steering_not_supported, 404 for an
// unknown response) with OpenAI's steer failure code.
func (h *Handler) createSteer(w http.ResponseWriter, r *http.Request, t *turn, key string) {
	ctx := r.Context()
	if key != "" {
		defer h.keys.lock(key)()
	}
	id, minted := "", true
	if key != "" {
		if e, ok := h.keys.get(key); ok {
			id, minted = e.message, false
		} else if prev, err := h.o.Core.FindInput(ctx, t.previous); err == nil {
			if id, err = h.keyed(ctx, prev.SessionID, key); err != nil {
				h.WriteError(w, r, err)
				return
			}
			minted = id == ""
		}
	}
	if minted {
		id = h.o.IDs.NewMessage()
	}
	in, existed, sub, failure, err := h.steer(ctx, t.previous, t, key, id, minted, t.req.Stream)
	if err != nil {
		if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Code == opencode.EConflict && key != "" {
			err = &fieldError{oe, "", "idempotency_key_reused"}
		}
		h.WriteError(w, r, err)
		return
	}
	if failure != nil {
		h.WriteError(w, r, failure.err())
		return
	}
	if key != "" {
		h.keys.put(key, keyEntry{session: in.SessionID, message: in.ID})
	}
	if sub != nil {
		defer sub.Close()
		h.stream(w, r, in, existed, sub)
		return
	}
	if _, err := h.o.Core.Wait(ctx, in.SessionID, in.ID); err != nil && ctx.Err() != nil {
		return
	}
	h.respond(w, r, in.ID)
}

// checkDelivery validates the delivery extension: a steer names the
// running response it steers and brings only input (and metadata): it
// joins that turn under the turn's model, agent and instructions.
func (t *turn) checkDelivery() error {
	switch t.req.Delivery {
	case "", "queue":
		return nil
	case "steer":
	default:
		return invalid("delivery", "invalid_value", fmt.Sprintf("delivery %q is not one of steer, queue", clip(t.req.Delivery)))
	}
	switch {
	case t.previous == "":
		return invalid("previous_response_id", "missing_required_parameter", "a steer (delivery steer) needs previous_response_id: the running response it steers")
	case len(t.outputs) > 0:
		return invalid("input", "unsupported_value", "a steer is user input: function_call_output items go in a request without delivery steer")
	case len(t.req.Tools) > 0:
		return invalid("tools", "unsupported_parameter", "a steer joins the running turn with its tools: tools cannot be given with delivery steer")
	case t.req.Model != "":
		return invalid("model", "unsupported_parameter", "a steer joins the running turn under its model: model cannot be given with delivery steer")
	case t.system != "":
		return invalid("instructions", "unsupported_parameter", "a steer joins the running turn under its instructions: instructions and system messages cannot be given with delivery steer")
	case t.variant != "":
		return invalid("reasoning", "unsupported_parameter", "a steer joins the running turn under its model's variant: reasoning.effort cannot be given with delivery steer")
	}
	return nil
}
