package crashtest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// TestScaleOutAGUI: AG-UI runs posted to an instance that does not run the
// session are answered by the one that does, in both forms (the thread in
// the body, and in the path): the stream comes through, the session stays
// with its owner, and each run admits its one message there. A sync replay
// of the session (its thread too only in the body) is forwarded likewise.
func TestScaleOutAGUI(t *testing.T) {
	pg := pgtest.Need(t)
	db := pg.FreshDB(t)
	url := pg.URL(db)
	dir, project := clusterDirs(t)
	srvs, cls := startInstances(t, dir, project, url, []string{"a", "b"})
	urls := []string{srvs[0].url, srvs[1].url}
	a, b := cls[0], cls[1]
	sid := newID("ses")
	if st, body, err := a.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create on A: %d %v %s", st, err, body)
	}
	conn, err := pgx.Connect(t.Context(), pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for i, path := range []string{"/agui", "/agui/" + sid} {
		text := []string{"through the body", "through the path"}[i]
		st, body, err := b.do("POST", path, mustJSON(map[string]any{"threadId": sid, "runId": "run-" + text,
			"messages": []any{map[string]any{"id": newID("msg"), "role": "user", "content": text}}}))
		if err != nil || st != 200 {
			t.Fatalf("POST %s on B: %d %v %s", path, st, err, body)
		}
		var got strings.Builder
		var last map[string]any
		for _, line := range bytes.Split(body, []byte("\n")) {
			d, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			var e map[string]any
			if err := json.Unmarshal(d, &e); err != nil {
				t.Fatalf("frame %s: %v", d, err)
			}
			if e["type"] == "TEXT_MESSAGE_CONTENT" {
				got.WriteString(e["delta"].(string))
			}
			last = e
		}
		if !strings.Contains(got.String(), text) || last["type"] != "RUN_FINISHED" {
			t.Errorf("POST %s on B streamed %q, ending %v\n%s", path, got.String(), last, body)
		}
		if owner := ownerOf(t, conn, sid); owner != urls[0] {
			t.Errorf("after POST %s on B the session is owned by %q, want A (%s)", path, owner, urls[0])
		}
	}
	var msgs []json.RawMessage
	if err := a.getJSON("/session/"+sid+"/message", &msgs); err != nil || len(msgs) != 4 {
		t.Errorf("A has %d messages (%v), want 4: two runs, one message and its reply each", len(msgs), err)
	}

	// The session's own history replayed through B: A has it all (the
	// replay is idempotent) and answers.
	st, body, err := b.do("POST", "/sync/history", []byte("{}"))
	if err != nil || st != 200 {
		t.Fatalf("POST /sync/history on B: %d %v %s", st, err, body)
	}
	var history []map[string]any
	if err := json.Unmarshal(body, &history); err != nil {
		t.Fatal(err)
	}
	var events []any
	for _, e := range history {
		if e["aggregate_id"] == sid {
			events = append(events, map[string]any{"id": e["id"], "aggregateID": sid, "seq": e["seq"], "type": e["type"], "data": e["data"]})
		}
	}
	if len(events) == 0 {
		t.Fatalf("no history of %s in %s", sid, body)
	}
	st, body, err = b.do("POST", "/sync/replay", mustJSON(map[string]any{"directory": project, "events": events}))
	if err != nil || st != 200 || !bytes.Contains(body, []byte(sid)) {
		t.Errorf("POST /sync/replay on B of A's session: %d %v %s", st, err, body)
	}
	if owner := ownerOf(t, conn, sid); owner != urls[0] {
		t.Errorf("after the replay through B the session is owned by %q, want A (%s)", owner, urls[0])
	}
	// A handled it (its log has the replay), not B.
	if la, lb := tail(filepath.Join(dir, "a.log"), 400), tail(filepath.Join(dir, "b.log"), 400); !strings.Contains(la, "sync replay") || strings.Contains(lb, "sync replay") {
		t.Errorf("the replay was not handled by the session's owner A:\nA: %s\nB: %s", la, lb)
	}
}
