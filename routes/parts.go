package routes

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// mountParts serves the edits of the stored conversation: delete a
// message, update or delete one part. The next model call reads the
// conversation as edited.
func (s *Server) mountParts(r chi.Router) {
	r.Delete("/session/{sessionID}/message/{messageID}", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		id, mid, err := sessionAndMessage(r)
		if err != nil {
			return err
		}
		if err := s.m.DeleteMessage(detach(r.Context()), id, mid); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, true)
		return nil
	}))
	r.Delete("/session/{sessionID}/message/{messageID}/part/{partID}", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		id, mid, pid, err := sessionMessagePart(r)
		if err != nil {
			return err
		}
		if err := s.m.DeletePart(detach(r.Context()), id, mid, pid); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, true)
		return nil
	}))
	r.Patch("/session/{sessionID}/message/{messageID}/part/{partID}", s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		id, mid, pid, err := sessionMessagePart(r)
		if err != nil {
			return err
		}
		var p opencode.Part
		if err := decodeBody(r, &p, false); err != nil {
			return err
		}
		if p.ID != pid || p.MessageID != mid || p.SessionID != id {
			return badRequest("Payload", "", "The part's id, messageID and sessionID must be the ones in the path")
		}
		if !editableParts[p.Type] {
			return badRequest("Payload", "type", "Unknown part type: "+p.Type)
		}
		out, err := s.m.UpdatePart(detach(r.Context()), p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}))
}

// editableParts are the part types a client may store with PATCH.
var editableParts = map[string]bool{
	opencode.PartText: true, opencode.PartReasoning: true, opencode.PartTool: true, opencode.PartFile: true,
	opencode.PartAgent: true, opencode.PartSubtask: true, opencode.PartPatch: true, opencode.PartCompaction: true,
	opencode.PartStepStart: true, opencode.PartStepFinish: true,
}

// sessionMessagePart are the {sessionID}, {messageID} and {partID} of a route.
func sessionMessagePart(r *http.Request) (string, string, string, error) {
	id, mid, err := sessionAndMessage(r)
	if err != nil {
		return "", "", "", err
	}
	pid := chi.URLParam(r, "partID")
	if err := identifier.Check(identifier.Part, pid); err != nil {
		return "", "", "", badRequest("Params", "partID", "Invalid partID: expected an ID starting with \"prt_\"")
	}
	return id, mid, pid, nil
}
