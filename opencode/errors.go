package opencode

import (
	"errors"
	"fmt"
)

// Code is the short list of error kinds of the core; routes maps each to an
// HTTP status and OpenCode's error shapes in one table.
type Code string

// Error codes.
const (
	EInvalid     Code = "invalid"
	ENotFound    Code = "not_found"
	EConflict    Code = "conflict"
	ERevoked     Code = "revoked"
	EUnavailable Code = "unavailable"
	EInternal    Code = "internal"
)

// Error is a typed core error. Message is safe to show to clients.
type Error struct {
	Code    Code
	Message string
	// Optional details used by the v2 error shapes.
	Field     string
	Resource  string
	SessionID string
	MessageID string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCodeOf returns the code of err, EInternal for untyped errors.
func ErrorCodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// SessionNotFound is the error for an unknown session.
func SessionNotFound(id string) *Error {
	return &Error{Code: ENotFound, Message: "Session not found: " + id, SessionID: id, Resource: "session"}
}

// MessageNotFound is the error for an unknown message.
func MessageNotFound(sessionID, id string) *Error {
	return &Error{Code: ENotFound, Message: "Message not found: " + id, SessionID: sessionID, MessageID: id, Resource: "message"}
}
