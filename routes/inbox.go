package routes

// The inbox routes, shared by v1 and v2 (the family decides the error
// shapes): list, revoke and replace pending inputs.

import (
	"net/http"

	"github.com/opencode-server/opencode-server/opencode"
)

func inputView(in *opencode.Input) map[string]any {
	a := in.Admitted()
	return map[string]any{"id": in.ID, "sessionID": in.SessionID, "delivery": in.Delivery, "prompt": a.Prompt,
		"admittedSeq": in.AdmittedSeq, "timeCreated": in.TimeCreated, "parts": in.Parts}
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	ins, err := s.m.Inbox(r.Context(), id)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(ins))
	for i, in := range ins {
		out[i] = inputView(in)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
	return nil
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) error {
	id, mid, err := sessionAndMessage(r)
	if err != nil {
		return err
	}
	ok, err := s.m.Revoke(detach(r.Context()), id, mid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"revoked": ok})
	return nil
}

type patchInboxBody struct {
	Delivery *opencode.Delivery `json:"delivery,omitempty"`
	Prompt   *promptInputV2     `json:"prompt,omitempty"`
}

func (s *Server) patchInbox(w http.ResponseWriter, r *http.Request) error {
	id, mid, err := sessionAndMessage(r)
	if err != nil {
		return err
	}
	var b patchInboxBody
	if err := decodeBody(r, &b, false); err != nil {
		return err
	}
	if b.Delivery == nil && b.Prompt == nil {
		return badRequest("Payload", "", "Expected delivery and/or prompt")
	}
	if b.Delivery != nil && !b.Delivery.Valid() {
		return badRequest("Payload", "delivery", "Expected \"steer\" or \"queue\" at [\"delivery\"]")
	}
	var parts []opencode.Part
	if b.Prompt != nil {
		if err := validate.Struct(b.Prompt); err != nil {
			return validationError(err, "prompt.")
		}
		parts = s.decodeV2Prompt(b.Prompt)
	}
	in, err := s.m.Replace(detach(r.Context()), id, mid, b.Delivery, parts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": inputView(in)})
	return nil
}
