package opencode

import (
	"fmt"
)

// Code is the short list of error kinds of the core; routes maps each to an
// HTTP status and OpenCode's error shapes in one table.
type Code string

// Error codes. routes keeps the one table from a code to its HTTP status
// and its names in the v1 and v2 error shapes.
const (
	EInvalid      Code = "invalid"
	ENotFound     Code = "not_found"
	EConflict     Code = "conflict"
	ERevoked      Code = "revoked"
	EBusy         Code = "busy" // the session runs a turn: OpenCode's SessionBusyError
	EUnavailable  Code = "unavailable"
	EInternal     Code = "internal"
	EUnauthorized Code = "unauthorized"
	EForbidden    Code = "forbidden"
	EMethod       Code = "method_not_allowed"
	ETooLarge     Code = "too_large"
	ETooMany      Code = "too_many_requests"
)

// Error is a typed core error. Message is safe to show to clients; Cause,
// if set, is what went wrong underneath, for the log only (as tsweb keeps
// the public message apart from the internal error).
type Error struct {
	Code    Code
	Message string
	// Optional details used by the error shapes.
	Field     string // the request field at fault (EInvalid)
	Kind      string // which part of the request: "Payload", "Query", "Params"
	Resource  string
	SessionID string
	MessageID string
	RequestID string // a permission or question request (ENotFound)
	// RetryAfter is when a retry may succeed, in whole seconds (EUnavailable;
	// 0: soon).
	RetryAfter int
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.Cause.Error()
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause, so errors.Is and errors.As see through.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// SessionNotFound is the error for an unknown session.
func SessionNotFound(id string) *Error {
	return &Error{Code: ENotFound, Message: "Session not found: " + id, SessionID: id, Resource: "session"}
}

// MessageNotFound is the error for an unknown message.
func MessageNotFound(sessionID, id string) *Error {
	return &Error{Code: ENotFound, Message: "Message not found: " + id, SessionID: sessionID, MessageID: id, Resource: "message"}
}
