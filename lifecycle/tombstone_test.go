package lifecycle_test

import (
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/store"
)

// TestRevokeBeforeAdmit: a revoke that overtakes its prompt (another
// connection, a retry racing a cancel) leaves a durable tombstone; the
// prompt is refused with 409 MessageRevokedError on every path, before and
// after a restart, and never runs. Tombstones are bounded per session: the
// oldest is forgotten once store.MaxTombstones newer ones exist.
func TestRevokeBeforeAdmit(t *testing.T) {
	dir := t.TempDir()
	srv := testserver.Start(t, testserver.Options{SQLite: true, DataDir: dir})
	c := newClient(t, srv)
	sid := c.newSession()
	early := newID()
	var rv struct {
		Revoked bool `json:"revoked"`
	}
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+early, nil, 200).json(t, &rv)
	if !rv.Revoked {
		t.Fatalf("revoke of a not yet admitted ID answered revoked:false")
	}
	refused := func(c *client, what string) {
		t.Helper()
		r := c.must("POST", "/api/session/"+sid+"/prompt", v2Body(early, "too late", "queue"), 409)
		if !strings.Contains(string(r.Body), `"_tag":"ConflictError"`) || !strings.Contains(string(r.Body), early) {
			t.Errorf("%s: v2 prompt of a revoked ID: %s", what, r)
		}
		r = c.must("POST", "/session/"+sid+"/prompt_async", v1Body(early, "too late", ""), 409)
		if !strings.Contains(string(r.Body), `"name":"MessageRevokedError"`) {
			t.Errorf("%s: v1 prompt of a revoked ID: %s", what, r)
		}
		c.must("POST", "/session/"+sid+"/message", v1Body(early, "too late", ""), 409)
		// Revoking it again is still true; replacing it says revoked.
		c.must("DELETE", "/session/"+sid+"/inbox/"+early, nil, 200)
		c.must("PATCH", "/api/session/"+sid+"/inbox/"+early, map[string]any{"delivery": "steer"}, 409)
		if ids := c.inboxIDs("/api/session/" + sid + "/inbox"); len(ids) != 0 {
			t.Errorf("%s: inbox holds %v", what, ids)
		}
	}
	refused(c, "before a restart")
	if n := len(callsOf(srv, sid)); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}

	// Durable: a restarted server refuses it too.
	srv.Stop()
	srv = testserver.Start(t, testserver.Options{SQLite: true, DataDir: dir})
	c = newClient(t, srv)
	refused(c, "after a restart")
	if n := len(callsOf(srv, sid)); n != 0 {
		t.Fatalf("the model was called %d times after the restart", n)
	}
	// Other IDs are admitted as ever.
	c.promptV2(sid, "", "still works", "queue")
	c.waitIdle(sid)

	// Bounded: after MaxTombstones more, the first is forgotten and its
	// ID admits again.
	for range store.MaxTombstones {
		c.must("DELETE", "/api/session/"+sid+"/inbox/"+newID(), nil, 200)
	}
	c.promptV2(sid, early, "admitted at last", "queue")
	c.waitIdle(sid)
	if got := lastUser(callsOf(srv, sid)[len(callsOf(srv, sid))-1]); got != "admitted at last" {
		t.Errorf("last model call saw %q", got)
	}
}
