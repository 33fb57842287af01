package routes

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/opencode-server/opencode-server/opencode"
)

// family is the error vocabulary of a route: v1 routes answer
// {name, data:{message}}, /api routes {_tag, message, ...}.
type family int

const (
	v1 family = iota
	v2
)

// httpError is a decoding or routing error: status and client message, with
// an optional field and kind for the v2 shape.
type httpError struct {
	Status int
	Msg    string
	Field  string
	Kind   string
}

func (e *httpError) Error() string { return e.Msg }

func badRequest(kind, field, msg string) *httpError {
	return &httpError{Status: http.StatusBadRequest, Msg: msg, Field: field, Kind: kind}
}

// statusOf is the one table from core error codes to HTTP statuses.
var statusOf = map[opencode.Code]int{
	opencode.EInvalid:     http.StatusBadRequest,
	opencode.ENotFound:    http.StatusNotFound,
	opencode.EConflict:    http.StatusConflict,
	opencode.ERevoked:     http.StatusConflict,
	opencode.EUnavailable: http.StatusServiceUnavailable,
	opencode.EInternal:    http.StatusInternalServerError,
}

// writeError maps err to the route family's error shape. It is the only
// place errors become responses; 5xx causes go to the log, not the client.
func writeError(w http.ResponseWriter, r *http.Request, fam family, log *slog.Logger, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone; nobody reads an answer
	}
	var he *httpError
	if errors.As(err, &he) {
		if fam == v1 {
			data := map[string]any{"message": he.Msg}
			if he.Kind != "" {
				data["kind"] = he.Kind
			}
			name := "BadRequest"
			switch he.Status {
			case http.StatusNotFound:
				name = "NotFoundError"
			case http.StatusUnauthorized:
				name = "UnauthorizedError"
			case http.StatusRequestEntityTooLarge:
				name = "PayloadTooLargeError"
			case http.StatusMethodNotAllowed:
				name = "MethodNotAllowedError"
			case http.StatusTooManyRequests:
				name = "TooManyRequestsError"
			case http.StatusForbidden:
				name = "ForbiddenError"
			}
			writeJSON(w, he.Status, map[string]any{"name": name, "data": data})
			return
		}
		tag := "InvalidRequestError"
		switch he.Status {
		case http.StatusNotFound:
			tag = "NotFoundError"
		case http.StatusUnauthorized:
			tag = "UnauthorizedError"
		case http.StatusRequestEntityTooLarge:
			tag = "PayloadTooLargeError"
		case http.StatusMethodNotAllowed:
			tag = "MethodNotAllowedError"
		case http.StatusTooManyRequests:
			tag = "TooManyRequestsError"
		case http.StatusForbidden:
			tag = "ForbiddenError"
		}
		body := map[string]any{"_tag": tag, "message": he.Msg}
		if he.Kind != "" {
			body["kind"] = he.Kind
		}
		if he.Field != "" {
			body["field"] = he.Field
		}
		writeJSON(w, he.Status, body)
		return
	}

	var oe *opencode.Error
	if !errors.As(err, &oe) {
		oe = &opencode.Error{Code: opencode.EInternal}
	}
	status := statusOf[oe.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	msg := oe.Message
	if status >= 500 {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		if oe.Code == opencode.EInternal {
			msg = "Unexpected server error. Check server logs for details."
		}
	}
	if fam == v1 {
		name := map[opencode.Code]string{
			opencode.EInvalid: "BadRequest", opencode.ENotFound: "NotFoundError", opencode.EConflict: "ConflictError",
			opencode.ERevoked: "MessageRevokedError", opencode.EUnavailable: "ServiceUnavailableError",
			opencode.EInternal: "UnknownError",
		}[oe.Code]
		writeJSON(w, status, map[string]any{"name": name, "data": map[string]any{"message": msg}})
		return
	}
	body := map[string]any{"message": msg}
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
		default:
			body["_tag"] = "NotFoundError"
		}
	case opencode.EConflict, opencode.ERevoked:
		body["_tag"] = "ConflictError"
		// OpenCode names the conflicting record itself: its ID.
		if oe.MessageID != "" {
			body["resource"] = oe.MessageID
		} else if oe.Resource != "" {
			body["resource"] = oe.Resource
		}
	case opencode.EInvalid:
		body["_tag"] = "InvalidRequestError"
		if oe.Field != "" {
			body["field"] = oe.Field
		}
	case opencode.EUnavailable:
		body["_tag"] = "ServiceUnavailableError"
	default:
		body["_tag"] = "UnknownError"
	}
	writeJSON(w, status, body)
}
