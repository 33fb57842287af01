package routes

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/vcs"
)

// family is the error vocabulary of a route: v1 routes answer
// {name, data:{message}}, /api routes {_tag, message, ...}.
type family int

const (
	v1 family = iota
	v2
)

// badRequest is a 400 naming what is wrong: kind says which part of the
// request ("Payload", "Query", "Params"), field the JSON path or parameter.
func badRequest(kind, field, msg string) *opencode.Error {
	return &opencode.Error{Code: opencode.EInvalid, Message: msg, Field: field, Kind: kind}
}

// missingKey is OpenCode's 400 for a required key the request lacks, in
// the real server's words.
func missingKey(kind, field string) *opencode.Error {
	return badRequest(kind, field, "Missing key\n  at [\""+field+"\"]")
}

// writeError maps err to the route family's error shape. It is the only
// place errors become responses; 5xx causes go to the log, not the client.
func writeError(w http.ResponseWriter, r *http.Request, fam family, log *slog.Logger, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone; nobody reads an answer
	}
	// The core maps its store's outages itself (lifecycle/storeerr.go), as
	// every front door sees them: an error that is no *opencode.Error is
	// a bug, internal. The one exception is routes' own: the project
	// registry, which routes calls without the core, could not save.
	var oe *opencode.Error
	if !errors.As(err, &oe) {
		oe = &opencode.Error{Code: opencode.EInternal, Cause: err}
		var se *vcs.SaveError
		if errors.As(err, &se) {
			oe = &opencode.Error{Code: opencode.EUnavailable, Cause: err,
				Message: "The project registry cannot be written now; retry the request"}
		}
	}
	k := opencode.KindOf(oe.Code) // the one table (opencode.Kinds): HTTP, v1, v2 columns
	msg := oe.Message
	if k.HTTP == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(max(oe.RetryAfter, 1)))
	}
	if k.HTTP >= 500 {
		log.Log(r.Context(), k.Level(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		if oe.Code == opencode.EInternal || msg == "" {
			msg = "Unexpected server error. Check server logs for details."
		}
	}
	if oe.Code == opencode.EBusy {
		// OpenCode answers this one in the tagged shape on every route.
		writeJSON(w, k.HTTP, map[string]any{"_tag": k.V2, "sessionID": oe.SessionID, "message": msg})
		return
	}
	if tag := askNotFound(oe); tag != "" {
		// So are these (POST /permission/{id}/reply, /question/{id}/reply).
		writeJSON(w, k.HTTP, map[string]any{"_tag": tag, "requestID": oe.RequestID, "message": msg})
		return
	}
	if fam == v1 {
		data := map[string]any{"message": msg}
		if oe.Kind != "" {
			data["kind"] = oe.Kind
		}
		writeJSON(w, k.HTTP, map[string]any{"name": k.V1, "data": data})
		return
	}
	body := map[string]any{"_tag": k.V2, "message": msg}
	if oe.Kind != "" {
		body["kind"] = oe.Kind
	}
	if oe.Field != "" {
		body["field"] = oe.Field
	}
	switch oe.Code {
	case opencode.ENotFound:
		switch {
		case oe.MessageID != "":
			body["_tag"] = "MessageNotFoundError"
			body["sessionID"] = oe.SessionID
			body["messageID"] = oe.MessageID
		case oe.SessionID != "":
			body["_tag"] = "SessionNotFoundError"
			body["sessionID"] = oe.SessionID
		}
	case opencode.EConflict, opencode.ERevoked:
		// OpenCode names the conflicting record itself: its ID.
		if oe.MessageID != "" {
			body["resource"] = oe.MessageID
		} else if oe.Resource != "" {
			body["resource"] = oe.Resource
		}
	}
	writeJSON(w, k.HTTP, body)
}

// askNotFound is the tag of a permission or question request that is not
// pending ("" for any other error).
func askNotFound(oe *opencode.Error) string {
	if oe.Code != opencode.ENotFound || oe.RequestID == "" {
		return ""
	}
	return map[string]string{"permission": "PermissionNotFoundError", "question": "QuestionNotFoundError"}[oe.Resource]
}
