package routes

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// OpenCode 1.18.33's control plane: moving a session to another directory
// of its project (another worktree or a subdirectory), optionally with the
// local changes of the directory it leaves (MoveSession.moveSession). The
// move is a durable session.next.moved in the session's log; the session's
// directory (and path) change, so its next turn works there.

func (s *Server) mountControlPlane(r chi.Router) {
	r.Post("/experimental/control-plane/move-session", s.h(v1, s.moveSession))
}

// moveError is a failed move, as OpenCode answers it.
func moveError(w http.ResponseWriter, msg string) error {
	writeJSON(w, http.StatusBadRequest, map[string]any{"name": "MoveSessionError", "data": map[string]any{"message": msg}})
	return nil
}

const moveApplyFailed = "Unable to apply your changes in the destination directory. The files may conflict with existing changes."

func (s *Server) moveSession(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		SessionID   *string `json:"sessionID"`
		Destination *struct {
			Directory *string `json:"directory"`
		} `json:"destination"`
		MoveChanges *bool `json:"moveChanges"`
	}
	if err := decodeBody(r, &body, false); err != nil {
		return err
	}
	switch {
	case body.SessionID == nil:
		return badRequest("Payload", "sessionID", `Missing key at ["sessionID"]`)
	case body.Destination == nil:
		return badRequest("Payload", "destination", `Missing key at ["destination"]`)
	case body.Destination.Directory == nil:
		return badRequest("Payload", "destination.directory", `Missing key at ["destination"]["directory"]`)
	case !filepath.IsAbs(*body.Destination.Directory):
		return badRequest("Payload", "destination.directory", `Expected an absolute path at ["destination"]["directory"]`)
	}
	sid := *body.SessionID
	if err := checkID(identifier.Session, sid, "sessionID"); err != nil {
		return err
	}
	ctx := detach(r.Context())
	sess, err := s.m.GetSession(ctx, sid)
	if isNotFound(err) {
		return moveError(w, "Session not found: "+sid)
	} else if err != nil {
		return err
	}
	dest := filepath.Clean(*body.Destination.Directory)
	if dest == sess.Directory {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	_, from, err := s.projects.reg.Open(ctx, sess.Directory)
	if err != nil {
		return s.gitError(r, err)
	}
	_, to, err := s.projects.reg.Open(ctx, dest)
	if err != nil {
		return s.gitError(r, err)
	}
	if from.ID != to.ID {
		return moveError(w, "Destination directory belongs to another project")
	}
	changes := ""
	if body.MoveChanges != nil && *body.MoveChanges && from.Directory != to.Directory {
		src, ok, err := vcs.Discover(ctx, sess.Directory)
		if err != nil {
			return s.moveFailed(w, r, err, "")
		}
		if !ok {
			return moveError(w, "Source is not a Git repository")
		}
		if changes, err = vcs.CaptureChanges(ctx, src, sess.Directory); err != nil {
			return s.moveFailed(w, r, err, "")
		}
	}
	if changes != "" {
		_, ok, err := vcs.Discover(ctx, dest)
		if err != nil {
			return s.moveFailed(w, r, err, moveApplyFailed)
		}
		if !ok {
			return moveError(w, moveApplyFailed)
		}
		if err := vcs.ApplyChanges(ctx, dest, changes); err != nil {
			return s.moveFailed(w, r, err, moveApplyFailed)
		}
	}
	sub, err := filepath.Rel(to.Directory, dest)
	if err != nil || sub == "." {
		sub = ""
	}
	if _, err := s.m.UpdateSession(ctx, sid, opencode.SessionPatch{
		Move: &opencode.SessionMove{Directory: dest, Subdirectory: filepath.ToSlash(sub)}}); err != nil {
		return err
	}
	if changes != "" {
		src, ok, err := vcs.Discover(ctx, sess.Directory)
		if err != nil {
			return s.moveFailed(w, r, err, "")
		}
		if !ok {
			return moveError(w, "Source is not a Git repository")
		}
		if err := vcs.DiscardChanges(ctx, src, sess.Directory); err != nil {
			return s.moveFailed(w, r, err, "")
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// moveFailed answers a git step of a move that failed: with msg when set
// (OpenCode's words for a failed apply), else with what git said; a git
// that did not answer in time is a 503.
func (s *Server) moveFailed(w http.ResponseWriter, r *http.Request, err error, msg string) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, vcs.ErrNoGit) {
		return s.gitError(r, err)
	}
	if msg == "" {
		msg = err.Error()
	}
	return moveError(w, msg)
}
