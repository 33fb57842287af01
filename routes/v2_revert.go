package routes

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// The v2 compaction and revert routes, over the same core as /summarize,
// /revert and /unrevert.
func (s *Server) mountV2Revert(r chi.Router) {
	// Compaction with the session's model; 204 once it is admitted (it
	// runs as the session's next turn, durable from now).
	r.Post("/api/session/{sessionID}/compact", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		sess, err := s.m.GetSession(r.Context(), id)
		if err != nil {
			return err
		}
		if sess.Model == nil {
			return badRequest("Payload", "", "Session "+id+" has no model yet: nothing to compact")
		}
		in := opencode.CompactInput(id, s.ids.NewMessage(), s.ids.NewPart(),
			&opencode.MessageModel{ProviderID: sess.Model.ProviderID, ModelID: sess.Model.ID}, false)
		if _, _, err := s.m.Admit(detach(r.Context()), in); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	r.Post("/api/session/{sessionID}/revert/stage", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		var b struct {
			MessageID *string `json:"messageID"`
			Files     *bool   `json:"files"`
		}
		if err := decodeBody(r, &b, false); err != nil {
			return err
		}
		if b.MessageID == nil {
			return missingKey("Payload", "messageID")
		}
		if err := checkID(identifier.Message, *b.MessageID, "messageID"); err != nil {
			return err
		}
		if b.Files != nil && !*b.Files {
			// A revert here always puts the files back with the messages.
			return badRequest("Payload", "files", "files: false is not supported: a revert restores the files")
		}
		sess, err := s.m.Revert(detach(r.Context()), id, *b.MessageID, "")
		if err != nil {
			return err
		}
		state := opencode.SessionRevert{MessageID: *b.MessageID}
		if sess.Revert != nil {
			state = *sess.Revert
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": state})
		return nil
	}))
	r.Post("/api/session/{sessionID}/revert/commit", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		if err := s.m.CommitRevert(detach(r.Context()), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	r.Post("/api/session/{sessionID}/revert/clear", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := sessionID(r)
		if err != nil {
			return err
		}
		if _, err := s.m.Unrevert(detach(r.Context()), id); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
}
