package routes

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// The v2 permission and question routes: the same pending asks as the v1
// /permission and /question routes, in the v2 shapes (PermissionV2Request,
// QuestionV2Request), by location or by session.
func (s *Server) mountV2Asks(r chi.Router) {
	r.Get("/api/permission/request", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		dir := s.directory(r)
		data := []opencode.PermissionV2Request{}
		for _, p := range s.m.Permissions() {
			if s.inDirectory(r.Context(), p.SessionID, dir) {
				data = append(data, p.V2())
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": data})
		return nil
	}))
	r.Get("/api/question/request", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		dir := s.directory(r)
		data := []opencode.QuestionRequest{}
		for _, q := range s.m.Questions() {
			if s.inDirectory(r.Context(), q.SessionID, dir) {
				data = append(data, q)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"location": s.location(r), "data": data})
		return nil
	}))
	// "Always" replies hold for the session that gave them; none is saved
	// for a project, so there is nothing to list or remove.
	r.Get("/api/permission/saved", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"data": []any{}})
	})
	r.Delete("/api/permission/saved/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})

	r.Get("/api/session/{sessionID}/permission", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.v2AskSession(r)
		if err != nil {
			return err
		}
		data := []opencode.PermissionV2Request{}
		for _, p := range s.m.Permissions() {
			if p.SessionID == id {
				data = append(data, p.V2())
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data})
		return nil
	}))
	r.Post("/api/session/{sessionID}/permission", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.v2AskSession(r)
		if err != nil {
			return err
		}
		var b struct {
			ID        string                       `json:"id"`
			Action    *string                      `json:"action"`
			Resources *[]string                    `json:"resources"`
			Save      []string                     `json:"save"`
			Metadata  map[string]any               `json:"metadata"`
			Source    *opencode.PermissionV2Source `json:"source"`
			Agent     string                       `json:"agent"`
		}
		if err := decodeBody(r, &b, false); err != nil {
			return err
		}
		switch {
		case b.Action == nil:
			return missingKey("Payload", "action")
		case b.Resources == nil:
			return missingKey("Payload", "resources")
		case b.ID != "" && identifier.Check(identifier.Permission, b.ID) != nil:
			return badRequest("Payload", "id", "Expected a string starting with \"per\", got \""+b.ID+"\"")
		}
		rid, effect, err := s.m.AskPermission(detach(r.Context()), opencode.PermissionV2Request{ID: b.ID, SessionID: id,
			Action: *b.Action, Resources: *b.Resources, Save: b.Save, Metadata: b.Metadata, Source: b.Source}, b.Agent)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"id": rid, "effect": effect}})
		return nil
	}))
	r.Get("/api/session/{sessionID}/permission/{requestID}", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		p, err := s.v2Permission(r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": p.V2()})
		return nil
	}))
	r.Post("/api/session/{sessionID}/permission/{requestID}/reply", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		p, err := s.v2Permission(r)
		if err != nil {
			return err
		}
		var b permissionReplyBody
		if err := decodeBody(r, &b, false); err != nil {
			return err
		}
		if err := validate.Struct(b); err != nil {
			return validationError(err, "")
		}
		if err := s.m.ReplyPermissionWith(detach(r.Context()), p.ID, b.Reply, b.Message); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	r.Get("/api/session/{sessionID}/question", s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.v2AskSession(r)
		if err != nil {
			return err
		}
		data := []opencode.QuestionRequest{}
		for _, q := range s.m.Questions() {
			if q.SessionID == id {
				data = append(data, q)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": data})
		return nil
	}))
	answer := func(reject bool) http.HandlerFunc {
		return s.h(v2, func(w http.ResponseWriter, r *http.Request) error {
			q, err := s.v2Question(r)
			if err != nil {
				return err
			}
			answers, err := questionAnswers(r, reject)
			if err != nil {
				return err
			}
			if err := s.m.ReplyQuestion(detach(r.Context()), q.ID, answers, reject); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		})
	}
	r.Post("/api/session/{sessionID}/question/{requestID}/reply", answer(false))
	r.Post("/api/session/{sessionID}/question/{requestID}/reject", answer(true))
}

// inDirectory reports whether session id works in dir.
func (s *Server) inDirectory(ctx context.Context, id, dir string) bool {
	sess, err := s.m.GetSession(ctx, id)
	return err == nil && sess.Directory == dir
}

// v2AskSession is the {sessionID} of a v2 ask route: a session that exists.
func (s *Server) v2AskSession(r *http.Request) (string, error) {
	id, err := sessionID(r)
	if err != nil {
		return "", err
	}
	if _, err := s.m.GetSession(r.Context(), id); err != nil {
		return "", err
	}
	return id, nil
}

// v2Permission is the pending permission request of a v2 route's path.
func (s *Server) v2Permission(r *http.Request) (opencode.PermissionRequest, error) {
	id, err := s.v2AskSession(r)
	if err != nil {
		return opencode.PermissionRequest{}, err
	}
	rid := chi.URLParam(r, "requestID")
	if err := identifier.Check(identifier.Permission, rid); err != nil {
		return opencode.PermissionRequest{}, badRequest("Params", "requestID", "Expected a string starting with \"per\", got \""+rid+"\"")
	}
	for _, p := range s.m.Permissions() {
		if p.ID == rid && p.SessionID == id {
			return p, nil
		}
	}
	return opencode.PermissionRequest{}, &opencode.Error{Code: opencode.ENotFound, Resource: "permission", RequestID: rid,
		Message: "Permission request not found: " + rid}
}

// v2Question is the pending question of a v2 route's path.
func (s *Server) v2Question(r *http.Request) (opencode.QuestionRequest, error) {
	id, err := s.v2AskSession(r)
	if err != nil {
		return opencode.QuestionRequest{}, err
	}
	rid := chi.URLParam(r, "requestID")
	if err := identifier.Check(identifier.Question, rid); err != nil {
		return opencode.QuestionRequest{}, badRequest("Params", "requestID", "Expected a string starting with \"que\", got \""+rid+"\"")
	}
	for _, q := range s.m.Questions() {
		if q.ID == rid && q.SessionID == id {
			return q, nil
		}
	}
	return opencode.QuestionRequest{}, &opencode.Error{Code: opencode.ENotFound, Resource: "question", RequestID: rid,
		Message: "Question request not found: " + rid}
}
