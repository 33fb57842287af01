package routes

import (
	"net/http"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// revertBody is POST /session/{id}/revert.
type revertBody struct {
	MessageID string `json:"messageID" validate:"required"`
	PartID    string `json:"partID,omitempty"`
}

// revert is the TUI's /undo: the files go back to before the message, the
// session is marked reverted (the TUI hides the messages from there on).
func (s *Server) revert(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b revertBody
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	if err := checkID(identifier.Message, b.MessageID, "messageID"); err != nil {
		return err
	}
	if b.PartID != "" {
		if err := checkID(identifier.Part, b.PartID, "partID"); err != nil {
			return err
		}
	}
	sess, err := s.m.Revert(detach(r.Context()), id, b.MessageID, b.PartID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// unrevert is /redo: files and messages back as before the revert.
func (s *Server) unrevert(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	sess, err := s.m.Unrevert(detach(r.Context()), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}

// summarizeBody is POST /session/{id}/summarize.
type summarizeBody struct {
	ProviderID string `json:"providerID" validate:"required"`
	ModelID    string `json:"modelID" validate:"required"`
	Auto       bool   `json:"auto,omitempty"`
}

// summarize is /compact: a compaction turn summarizes the conversation
// with the given model; later turns start from the summary.
func (s *Server) summarize(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b summarizeBody
	if err := decodeValid(r, &b); err != nil {
		return err
	}
	if !s.m.HasModel(b.ProviderID, b.ModelID) {
		return badRequest("Payload", "modelID", "Model not found: "+b.ProviderID+"/"+b.ModelID)
	}
	in := opencode.CompactInput(id, s.ids.NewMessage(), s.ids.NewPart(), &opencode.MessageModel{ProviderID: b.ProviderID, ModelID: b.ModelID}, b.Auto)
	if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
		return err
	}
	if _, err := s.m.Wait(r.Context(), id, in.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// forkBody is POST /session/{id}/fork.
type forkBody struct {
	MessageID string `json:"messageID,omitempty"`
}

// fork copies the session (up to a message) into a new one.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	var b forkBody
	if err := decodeBody(r, &b, true); err != nil {
		return err
	}
	if b.MessageID != "" {
		if err := checkID(identifier.Message, b.MessageID, "messageID"); err != nil {
			return err
		}
	}
	sess, err := s.m.Fork(detach(r.Context()), id, b.MessageID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sess)
	return nil
}
