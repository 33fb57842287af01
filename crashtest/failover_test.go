package crashtest

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// TestScaleOutStorePause: two instances on one PostgreSQL database; A's
// connection to it goes silent (a proxy stops forwarding) under running
// turns of A's sessions, long enough for A's commits to fail and its lease
// to lapse, so B takes the sessions over. Once A's network is back, A does
// not keep retrying what B now runs: A answers the sessions' requests at
// once (forwarded to B), its GET /session/status never says "retry" for
// them, and once B has answered every input both instances show them idle.
func TestScaleOutStorePause(t *testing.T) {
	pg := pgtest.Need(t)
	db := pg.FreshDB(t)
	proxy := startProxy(t, pg.Addr())
	dir := t.TempDir()
	args := []string{"--store", "postgres", "--lease-ttl", clusterTTL.String(), "--scripted-chunks", "40", "--scripted-delay", "50ms"}
	a := startServer(t, filepath.Join(dir, "a"), filepath.Join(dir, "a.log"), append(args, "--postgres-url", pgtest.URLAt(proxy.addr(), db))...)
	b := startServer(t, filepath.Join(dir, "b"), filepath.Join(dir, "b.log"), append(args, "--postgres-url", pg.URL(db))...)
	ca, cb := newClient(a.url), newClient(b.url)
	defer ca.close()
	defer cb.close()
	logs := func() string { return tail(a.logPath, 30) + "\n" + tail(b.logPath, 30) }
	conn, err := pgx.Connect(context.Background(), pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	prompt := func(id, delivery, text string) []byte {
		return mustJSON(map[string]any{"messageID": id, "delivery": delivery,
			"parts": []any{map[string]any{"type": "text", "text": text}}})
	}
	// Sessions created on A (so A owns them), each with a turn running and
	// an input queued behind it.
	sids := make([]string, 3)
	acked := map[string][]string{}
	for i := range sids {
		sid := newID("ses")
		sids[i] = sid
		if st, body, err := ca.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
			t.Fatalf("create on A: %d %v %s", st, err, body)
		}
		for j, d := range []string{"steer", "queue"} {
			id := newID("msg")
			if st, body, err := ca.do("POST", "/session/"+sid+"/prompt_async", prompt(id, d, "input "+strconv.Itoa(j))); err != nil || st != 204 {
				t.Fatalf("prompt on A: %d %v %s", st, err, body)
			}
			acked[sid] = append(acked[sid], id)
		}
	}
	status := func(cl *client) map[string]struct{ Type string } {
		out := map[string]struct{ Type string }{}
		if err := cl.getJSON("/session/status", &out); err != nil {
			return nil
		}
		return out
	}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		st := status(ca)
		for _, sid := range sids {
			if st[sid].Type != "busy" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the turns did not start on A\n%s", logs())
	}

	// A's database goes silent: its commits fail at their deadline, its
	// lease lapses, and B takes every session over.
	proxy.partition()
	if !poll(clusterTTL+15*time.Second, 50*time.Millisecond, func() bool {
		for _, sid := range sids {
			if ownerOf(t, conn, sid) != b.url {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("B did not take A's sessions over\n%s", logs())
	}
	proxy.heal()
	healed := time.Now()

	// A answers each session's request at once (B runs it).
	for _, sid := range sids {
		id := newID("msg")
		r := ca.timedRequest("POST", "/session/"+sid+"/prompt_async", prompt(id, "queue", "after the pause"), 30*time.Second)
		if r.err != nil || r.status != 204 || r.took > 5*time.Second {
			t.Errorf("a prompt to %s through A after the pause: %d %v in %v: %s\n%s", sid, r.status, r.err, r.took.Round(time.Millisecond), clip(r.body), tail(a.logPath, 40))
			continue
		}
		acked[sid] = append(acked[sid], id)
	}
	// Every input is answered (by B), and then both instances show the
	// sessions idle: A never says "retry" for a session B runs.
	for _, sid := range sids {
		if !poll(30*time.Second, 50*time.Millisecond, func() bool {
			for _, st := range []map[string]struct{ Type string }{status(ca)} {
				if st[sid].Type == "retry" {
					t.Errorf("A's status says retry for %s, %v after its network came back", sid, time.Since(healed).Round(time.Millisecond))
					return true
				}
			}
			return answeredOf(cb, sid, acked[sid]) == len(acked[sid])
		}) {
			t.Fatalf("%d of %d inputs of %s answered\n%s", answeredOf(cb, sid, acked[sid]), len(acked[sid]), sid, logs())
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if !poll(10*time.Second, 50*time.Millisecond, func() bool {
		sa, sb := status(ca), status(cb)
		if sa == nil || sb == nil {
			return false
		}
		for _, sid := range sids {
			if _, ok := sa[sid]; ok {
				return false
			}
			if _, ok := sb[sid]; ok {
				return false
			}
		}
		return true
	}) {
		t.Errorf("after every input was answered, status on A %v, on B %v: want the sessions idle on both\n%s", status(ca), status(cb), logs())
	}
}
