package opencode

import (
	"log/slog"
	"net/http"
)

// Kind is how one error code goes out on every protocol. Kinds is the one
// table the front doors map the core's errors by (as wtf keeps one codes
// map): each reads its own column.
type Kind struct {
	// HTTP is the status; V1 the name of the v1 shape {name, data:{message}},
	// V2 the tag of the v2 shape {_tag, message, ...}.
	HTTP   int
	V1, V2 string
	// RPC is the JSON-RPC error code ACP answers with; 0: an internal
	// error, answered as a generic -32603 with its cause only in the log.
	RPC int
	// AGUI is the code of an AG-UI RUN_ERROR or refused run.
	AGUI string
	// OpenAI is the error type of the OpenAI door's
	// {"error": {"message", "type", "param", "code"}}, as OpenAI names
	// its errors of that status.
	OpenAI string
}

// JSON-RPC codes of the table: the spec's invalid params and method not
// found, ACP's auth required and resource not found, and our retryable
// unavailable (with data.retryable).
const (
	RPCInvalidParams  = -32602
	RPCMethodNotFound = -32601
	RPCAuthRequired   = -32000
	RPCUnavailable    = -32001
	RPCNotFound       = -32002
)

// Kinds is the table. A v2 not-found names what was not found (Session…,
// Message…) where the routes know it; a revoked input is a v2 conflict.
var Kinds = map[Code]Kind{
	EInvalid:      {http.StatusBadRequest, "BadRequest", "InvalidRequestError", RPCInvalidParams, "INVALID_INPUT", "invalid_request_error"},
	EUnauthorized: {http.StatusUnauthorized, "UnauthorizedError", "UnauthorizedError", RPCAuthRequired, "UNAUTHORIZED", "authentication_error"},
	EForbidden:    {http.StatusForbidden, "ForbiddenError", "ForbiddenError", RPCInvalidParams, "FORBIDDEN", "permission_error"},
	ENotFound:     {http.StatusNotFound, "NotFoundError", "NotFoundError", RPCNotFound, "NOT_FOUND", "invalid_request_error"},
	EMethod:       {http.StatusMethodNotAllowed, "MethodNotAllowedError", "MethodNotAllowedError", RPCMethodNotFound, "METHOD_NOT_ALLOWED", "invalid_request_error"},
	EConflict:     {http.StatusConflict, "ConflictError", "ConflictError", RPCInvalidParams, "CONFLICT", "invalid_request_error"},
	ERevoked:      {http.StatusConflict, "MessageRevokedError", "ConflictError", RPCInvalidParams, "MESSAGE_REVOKED", "invalid_request_error"},
	EBusy:         {http.StatusConflict, "SessionBusyError", "SessionBusyError", RPCInvalidParams, "SESSION_BUSY", "invalid_request_error"},
	ETooLarge:     {http.StatusRequestEntityTooLarge, "PayloadTooLargeError", "PayloadTooLargeError", RPCInvalidParams, "TOO_LARGE", "invalid_request_error"},
	ETooMany:      {http.StatusTooManyRequests, "TooManyRequestsError", "TooManyRequestsError", RPCUnavailable, "TOO_MANY_REQUESTS", "rate_limit_error"},
	EUnavailable:  {http.StatusServiceUnavailable, "ServiceUnavailableError", "ServiceUnavailableError", RPCUnavailable, "UNAVAILABLE", "server_error"},
	EInternal:     {http.StatusInternalServerError, "UnknownError", "UnknownError", 0, "INTERNAL", "server_error"},
}

// KindOf is code's row; a code the table lacks is internal.
func KindOf(code Code) Kind {
	if k, ok := Kinds[code]; ok {
		return k
	}
	return Kinds[EInternal]
}

// Level is the level a front door logs a failed request of this kind at:
// an outage the server expects and tells the client to retry (503
// unavailable, 429 too many) at WARN, so that the internal errors (500)
// stand out at ERROR.
func (k Kind) Level() slog.Level {
	if k.HTTP == http.StatusServiceUnavailable || k.HTTP == http.StatusTooManyRequests {
		return slog.LevelWarn
	}
	return slog.LevelError
}
