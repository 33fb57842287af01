package routes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/routes"
)

// failingCore answers every session read with err; nothing else is used.
type failingCore struct {
	routes.Core
	err error
}

func (c failingCore) GetSession(context.Context, string) (opencode.Session, error) {
	return opencode.Session{}, c.err
}

// TestErrorShapes: every core error code reaches the client through the
// one table, in the v1 shape {name, data} and the v2 shape {_tag, ...},
// with its status; a cause stays in the log.
func TestErrorShapes(t *testing.T) {
	cause := errors.New("secret disk detail")
	for _, c := range []struct {
		err        error
		status     int
		v1Name     string
		v2Tag      string
		v2Details  map[string]any
		hideDetail bool
	}{
		{opencode.SessionNotFound("ses_x"), 404, "NotFoundError", "SessionNotFoundError", map[string]any{"sessionID": "ses_x"}, false},
		{opencode.MessageNotFound("ses_x", "msg_y"), 404, "NotFoundError", "MessageNotFoundError", map[string]any{"sessionID": "ses_x", "messageID": "msg_y"}, false},
		{&opencode.Error{Code: opencode.EInvalid, Message: "bad", Field: "parts", Kind: "Payload"}, 400, "BadRequest", "InvalidRequestError", map[string]any{"field": "parts", "kind": "Payload"}, false},
		{&opencode.Error{Code: opencode.EConflict, Message: "taken", MessageID: "msg_y"}, 409, "ConflictError", "ConflictError", map[string]any{"resource": "msg_y"}, false},
		{&opencode.Error{Code: opencode.ERevoked, Message: "revoked", MessageID: "msg_y"}, 409, "MessageRevokedError", "ConflictError", map[string]any{"resource": "msg_y"}, false},
		{&opencode.Error{Code: opencode.EUnavailable, Message: "retry", Cause: cause}, 503, "ServiceUnavailableError", "ServiceUnavailableError", nil, true},
		// A session waiting for its background retry says when.
		{&opencode.Error{Code: opencode.EUnavailable, Message: "retried in 7 s", RetryAfter: 7}, 503, "ServiceUnavailableError", "ServiceUnavailableError", nil, false},
		{&opencode.Error{Code: opencode.ETooLarge, Message: "big"}, 413, "PayloadTooLargeError", "PayloadTooLargeError", nil, false},
		{&opencode.Error{Code: opencode.ETooMany, Message: "many"}, 429, "TooManyRequestsError", "TooManyRequestsError", nil, false},
		{&opencode.Error{Code: opencode.EForbidden, Message: "no"}, 403, "ForbiddenError", "ForbiddenError", nil, false},
		{cause, 500, "UnknownError", "UnknownError", nil, true},
		// The core types a store outage itself (lifecycle's storeErr): a
		// raw one reaching routes would be a bug, answered as internal.
		{fmt.Errorf("get session: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), 500, "UnknownError", "UnknownError", nil, true},
	} {
		h := routes.New(routes.Config{Manager: failingCore{err: c.err}, Directory: t.TempDir()})
		for _, path := range []string{"/session/ses_x", "/api/session/ses_x"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, loopbackRequest(http.MethodGet, path, nil))
			b, _ := io.ReadAll(rec.Body)
			if rec.Code != c.status {
				t.Errorf("%v on %s: status %d, want %d", c.err, path, rec.Code, c.status)
			}
			want := ""
			if c.status == 503 {
				want = "1"
				if oe, ok := c.err.(*opencode.Error); ok && oe.RetryAfter > 0 {
					want = strconv.Itoa(oe.RetryAfter)
				}
			}
			if ra := rec.Header().Get("Retry-After"); ra != want {
				t.Errorf("%v on %s: Retry-After %q, want %q", c.err, path, ra, want)
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("%s: %s", path, b)
			}
			if c.hideDetail && strings.Contains(string(b), "secret disk detail") {
				t.Errorf("%s: the cause reached the client: %s", path, b)
			}
			if path == "/session/ses_x" {
				if body["name"] != c.v1Name {
					t.Errorf("%v v1: name %v, want %s (%s)", c.err, body["name"], c.v1Name, b)
				}
				continue
			}
			if body["_tag"] != c.v2Tag {
				t.Errorf("%v v2: _tag %v, want %s (%s)", c.err, body["_tag"], c.v2Tag, b)
			}
			for k, v := range c.v2Details {
				if body[k] != v {
					t.Errorf("%v v2: %s = %v, want %v", c.err, k, body[k], v)
				}
			}
		}
	}
}

// TestErrorLogLevels: a failed request is logged at the level its kind
// says (opencode.Kind.Level): an outage the client is told to retry (a
// 503, a store that cannot be reached or is full) at WARN, an internal
// error at ERROR, so expected outages do not drown the real ones.
func TestErrorLogLevels(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string // the level logged, "" none
	}{
		{"unavailable", &opencode.Error{Code: opencode.EUnavailable, Message: "retry"}, "WARN"},
		{"retry after", &opencode.Error{Code: opencode.EUnavailable, Message: "retried in 7 s", RetryAfter: 7}, "WARN"},
		{"untyped outage", fmt.Errorf("commit: %w", syscall.ENOSPC), "ERROR"}, // the core types it: see above
		{"internal", errors.New("a bug"), "ERROR"},
		{"internal code", &opencode.Error{Code: opencode.EInternal, Message: "broken"}, "ERROR"},
		{"not found", opencode.SessionNotFound("ses_x"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := routes.New(routes.Config{Manager: failingCore{err: c.err}, Directory: t.TempDir(), Logger: log})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, loopbackRequest(http.MethodGet, "/session/ses_x", nil))
			var got []string
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "request failed") {
					_, rest, _ := strings.Cut(line, "level=")
					level, _, _ := strings.Cut(rest, " ")
					got = append(got, level)
				}
			}
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("status %d logged at %v, want not logged", rec.Code, got)
			case c.want != "" && (len(got) != 1 || got[0] != c.want):
				t.Errorf("status %d logged at %v, want once at %s\n%s", rec.Code, got, c.want, logs.String())
			}
		})
	}
}
