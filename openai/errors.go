package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/opencode-server/opencode-server/opencode"
)

// apiError is OpenAI's error object, the value of {"error": ...}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// fieldError is a core error about one request field: OpenAI's error
// names the parameter, and a code where OpenAI has one.
type fieldError struct {
	err         *opencode.Error
	param, code string
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// invalid is a 400 about param.
func invalid(param, code, msg string) error {
	return &fieldError{&opencode.Error{Code: opencode.EInvalid, Message: msg}, param, code}
}

// notFound is a 404 about param.
func notFound(param, code, msg string) error {
	return &fieldError{&opencode.Error{Code: opencode.ENotFound, Message: msg}, param, code}
}

// WriteError answers err in OpenAI's error shape, with the status and type
// of the one error table (opencode.Kinds); an internal error's cause goes
// to the log, not the client.
func (h *Handler) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client is gone
	}
	oe, k, body := apiErrorOf(err)
	if k.HTTP >= 500 {
		h.o.Logger.Log(r.Context(), k.Level(), "openai: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if k.HTTP == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(max(oe.RetryAfter, 1)))
	}
	writeJSON(w, k.HTTP, struct {
		Error apiError `json:"error"`
	}{body})
}

// apiErrorOf is err in OpenAI's shape: the status and type of the one
// error table (opencode.Kinds), the parameter and code a fieldError names;
// an internal error's cause stays out of the message (the log has it).
func apiErrorOf(err error) (*opencode.Error, opencode.Kind, apiError) {
	var oe *opencode.Error
	if !errors.As(err, &oe) {
		// The core maps store outages itself: anything untyped is a bug.
		oe = &opencode.Error{Code: opencode.EInternal, Cause: err}
	}
	k := opencode.KindOf(oe.Code)
	body := apiError{Message: oe.Message, Type: k.OpenAI}
	var fe *fieldError
	if errors.As(err, &fe) {
		if fe.param != "" {
			body.Param = &fe.param
		}
		if fe.code != "" {
			body.Code = &fe.code
		}
	}
	if k.HTTP >= 500 && (oe.Code == opencode.EInternal || body.Message == "") {
		body.Message = "Internal server error; the server's log has the cause"
	}
	return oe, k, body
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"the answer could not be encoded","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// asNotFound reports whether err is the core's not-found.
func asNotFound(err error, oe **opencode.Error) bool {
	return errors.As(err, oe) && (*oe).Code == opencode.ENotFound
}
