package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
)

// TestErrorPath: the core's codes map by one table; unavailable is
// retryable; an internal error is logged with its cause and answered with
// a generic message, never its text.
func TestErrorPath(t *testing.T) {
	for code, want := range map[opencode.Code]int{opencode.EInvalid: -32602, opencode.ENotFound: -32002,
		opencode.EConflict: -32602, opencode.EUnavailable: -32001, opencode.EUnauthorized: -32000} {
		var re *rpcError
		if !errors.As(coreError(&opencode.Error{Code: code, Message: "m"}), &re) || re.Code != want {
			t.Errorf("%s: %+v, want %d", code, re, want)
		}
	}
	var re *rpcError
	_ = errors.As(coreError(&opencode.Error{Code: opencode.EUnavailable, Message: "retry", RetryAfter: 3}), &re)
	if d, _ := re.Data.(map[string]any); d["retryable"] != true || d["retryAfter"] != 3 {
		t.Errorf("unavailable data %+v", re.Data)
	}
	for _, err := range []error{
		&opencode.Error{Code: opencode.EInternal, Message: "db at /secret/path broke"},
		errors.New("raw /secret/path failure"),
	} {
		var out, logged bytes.Buffer
		c := newConn(strings.NewReader(""), &out, nil, slog.New(slog.NewTextHandler(&logged, nil)))
		c.reply(json.RawMessage("7"), nil, coreError(err))
		if strings.Contains(out.String(), "secret") || !strings.Contains(out.String(), `"code":-32603`) {
			t.Errorf("sent %s", out.String())
		}
		if !strings.Contains(logged.String(), "secret/path") {
			t.Errorf("the cause was not logged: %s", logged.String())
		}
	}
}
