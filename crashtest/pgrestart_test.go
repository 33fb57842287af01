package crashtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// TestPostgresRestartDrainsQueue: PostgreSQL restarts under a running turn
// with inputs queued behind it; once it is back the session continues and
// every queued input is answered within the lease TTL + 5 s, with no
// client request to the session (only reads of what is stored).
func TestPostgresRestartDrainsQueue(t *testing.T) {
	pg := pgtest.StartFor(t)
	dir := t.TempDir()
	srv := startServer(t, filepath.Join(dir, "data"), filepath.Join(dir, "server.log"), "--store", "postgres",
		"--postgres-url", pg.URL(pg.FreshDB(t)), "--lease-ttl", clusterTTL.String(),
		"--scripted-chunks", "10", "--scripted-delay", "40ms")
	cl := newClient(srv.url)
	defer cl.close()
	sid := newID("ses")
	if st, body, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create: %d %v %s", st, err, body)
	}
	var ids []string
	for i, d := range []string{"steer", "queue", "queue", "queue"} {
		id := newID("msg")
		ids = append(ids, id)
		st, body, err := cl.do("POST", "/session/"+sid+"/prompt_async", mustJSON(map[string]any{"messageID": id, "delivery": d,
			"parts": []any{map[string]any{"type": "text", "text": "input " + string(rune('a'+i))}}}))
		if err != nil || st != 204 {
			t.Fatalf("prompt %d: %d %v %s", i, st, err, body)
		}
	}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		var status map[string]any
		return cl.getJSON("/session/status", &status) == nil && status[sid] != nil
	}) {
		t.Fatal("the first turn did not start")
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	answered := func() int { return answeredOf(cl, sid, ids[1:]) }
	limit := clusterTTL + 5*time.Second + 2*time.Second // + the three turns' own time
	if !poll(limit, 50*time.Millisecond, func() bool { return answered() == 3 }) {
		t.Fatalf("%d of the 3 queued inputs answered %v after the restart\n%s", answered(), time.Since(back), tail(srv.logPath, 30))
	}
	t.Logf("all queued inputs answered %v after the restart", time.Since(back).Round(10*time.Millisecond))
}
