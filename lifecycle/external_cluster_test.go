package lifecycle_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestExternalAgentCluster: two instances on one PostgreSQL database, a
// session of an external agent owned by A. A prompt through B is
// forwarded to A and answered by A's agent process, the only one, on the
// same agent session; B's /event streams it. Then A's lease is lost (it
// lives on, as a partitioned or frozen instance does): A stops its agent
// process at once, and the next prompt, through B, makes B the owner,
// whose new process continues the agent's session (session/load of the ID
// stored with ours); a prompt through A then goes to B's process, still
// the only one running.
func TestExternalAgentCluster(t *testing.T) {
	a, b, dir, dsn := externalPair(t)
	ca, cb := newClient(t, a), newClient(t, b)
	sid := ca.newSession()
	if got := ca.externalPrompt(sid, "first"); got.Info.Error != nil || got.text() != "echo: first" {
		t.Fatalf("first answer on A: %+v %q", got.Info.Error, got.text())
	}
	agentSession := ca.storedAgentSession(sid)
	pids := stubPIDs(dir)
	if len(pids) != 1 || a.Manager.ExternalPID(sid) != pids[0] {
		t.Fatalf("agent processes %v, A's %d: want one, A's", pids, a.Manager.ExternalPID(sid))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines, stop := sseLines(ctx, t, cb, "/event")
	defer stop()
	if got := cb.externalPrompt(sid, "through b"); got.Info.Error != nil || got.text() != "echo: through b" {
		t.Fatalf("answer through B: %+v %q", got.Info.Error, got.text())
	}
	if got := stubPIDs(dir); !slices.Equal(got, pids) || b.Manager.ExternalPID(sid) != 0 || a.Manager.ExternalPID(sid) != pids[0] {
		t.Errorf("after a prompt through B: agent processes %v, A's %d, B's %d; want A's %v alone",
			got, a.Manager.ExternalPID(sid), b.Manager.ExternalPID(sid), pids)
	}
	streamed := false
	for deadline := time.After(20 * time.Second); !streamed; {
		select {
		case l := <-lines:
			streamed = strings.Contains(l, `"message.part.delta"`) && strings.Contains(l, "echo: through b")
		case <-deadline:
			t.Fatal("B's /event did not stream the answer A's agent gave")
		}
	}

	// A's lease ends in the database; A finds out at its next renewal.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE instances SET expires_at = now() - interval '1 minute' WHERE addr = $1`, a.URL); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, "A's agent process stopped once A lost its lease", func() bool {
		return !alive(pids[0]) && a.Manager.ExternalPID(sid) == 0
	})
	if got := cb.externalPrompt(sid, "after a"); got.Info.Error != nil || got.text() != "echo: after a" {
		t.Fatalf("answer through B after A lost the session: %+v %q", got.Info.Error, got.text())
	}
	pids = stubPIDs(dir)
	if len(pids) != 2 || b.Manager.ExternalPID(sid) != pids[1] || a.Manager.ExternalPID(sid) != 0 {
		t.Fatalf("agent processes %v, A's %d, B's %d: want a second one, B's", pids, a.Manager.ExternalPID(sid), b.Manager.ExternalPID(sid))
	}
	if loads := stubLoads(dir); !slices.Equal(loads, []string{agentSession}) {
		t.Errorf("session/load calls %v, want B's process to load the stored agent session %s", loads, agentSession)
	}
	if got := ca.externalPrompt(sid, "through a"); got.Info.Error != nil || got.text() != "echo: through a" {
		t.Fatalf("answer through A: %+v %q", got.Info.Error, got.text())
	}
	ps := stubPrompts(t, dir)
	var texts []string
	for _, p := range ps {
		texts = append(texts, strings.Join(p.Texts, " "))
		if p.SessionID != agentSession {
			t.Errorf("prompt %q went to agent session %s, want %s", p.Texts, p.SessionID, agentSession)
		}
	}
	if want := []string{"first", "through b", "after a", "through a"}; !slices.Equal(texts, want) {
		t.Errorf("the agent's prompts %q, want %q", texts, want)
	}
	if got := stubPIDs(dir); len(got) != 2 || alive(got[0]) || !alive(got[1]) || a.Manager.ExternalPID(sid) != 0 {
		t.Errorf("agent processes %v (A's %d): want B's %d alone alive", got, a.Manager.ExternalPID(sid), pids[1])
	}
}

// TestExternalAgentClusterMidTurn: A's lease is lost while its agent
// answers (A lives on, under a new lease): A's agent process is stopped,
// an instance takes the session over (B's sweep, or A's own under its new
// lease: whichever finds the open turn first), closes the cut-off turn as
// interrupted without sending it to the agent again, and the next prompt
// (through A) runs on the new owner's process, the only one, which loads
// the agent's session.
func TestExternalAgentClusterMidTurn(t *testing.T) {
	a, b, dir, dsn := externalPair(t)
	ca, cb := newClient(t, a), newClient(t, b)
	sid := ca.newSession()
	live := recordLive(t, a, sid)
	ca.must("POST", "/session/"+sid+"/prompt_async", map[string]any{"agent": "stub",
		"parts": []any{map[string]any{"type": "text", "text": acpstub.Wait}}}, 204)
	checkFor(t, 20*time.Second, "the agent's first words on A", func() bool { return live.count("message.part.delta") >= 1 })
	agentSession := ca.storedAgentSession(sid)
	pids := stubPIDs(dir)
	if len(pids) != 1 || agentSession == "" {
		t.Fatalf("agent processes %v, agent session %q: want one of each", pids, agentSession)
	}

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `UPDATE instances SET expires_at = now() - interval '1 minute' WHERE addr = $1`, a.URL); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 20*time.Second, "A's agent process stopped once A lost its lease", func() bool { return !alive(pids[0]) })
	checkFor(t, 20*time.Second, "the cut-off turn closed by B", func() bool {
		as := assistants(cb.rawMessages(sid))
		return len(as) == 1 && as[0].Info.Error != nil
	})
	cb.waitIdle(sid)
	if as := assistants(cb.rawMessages(sid)); as[0].Info.Error.Name != "MessageAbortedError" {
		t.Errorf("the cut-off turn ended with %+v, want it interrupted", as[0].Info.Error)
	}
	if got := ca.externalPrompt(sid, "after"); got.Info.Error != nil || got.text() != "echo: after" {
		t.Fatalf("prompt after the takeover: %+v %q", got.Info.Error, got.text())
	}
	pids = stubPIDs(dir)
	pa, pb := a.Manager.ExternalPID(sid), b.Manager.ExternalPID(sid)
	if len(pids) != 2 || alive(pids[0]) || !alive(pids[1]) || (pa == pids[1]) == (pb == pids[1]) || pa+pb != pids[1] {
		t.Errorf("agent processes %v (A's %d, B's %d): want a second one alone, on one instance", pids, pa, pb)
	}
	if loads := stubLoads(dir); !slices.Equal(loads, []string{agentSession}) {
		t.Errorf("session/load calls %v, want the new owner's process to load %s", loads, agentSession)
	}
	var texts []string
	for _, p := range stubPrompts(t, dir) {
		texts = append(texts, p.Texts...)
	}
	if !slices.Equal(texts, []string{acpstub.Wait, "after"}) {
		t.Errorf("the agent got prompts %q, want the cut-off one once, then the next", texts)
	}
}

// TestExternalAgentClusterRelease: an owner that lets an idle session go
// (its runner evicted, the claim released) stops the session's agent
// process with it; the instance that takes the session next (B, through
// which the next prompt comes) starts the only process, which loads the
// agent session.
func TestExternalAgentClusterRelease(t *testing.T) {
	pg := pgtest.Need(t)
	dsn := pg.DSN(pg.FreshDB(t))
	dir := t.TempDir()
	checkStubsGone(t, dir)
	// A lets idle sessions go at once; B keeps them (what it runs stays
	// put). A starts first: each server's leak check counts the goroutines
	// started after it, and B's are gone by A's check.
	opts := testserver.Options{Postgres: dsn, Config: externalConfig(""), Directory: dir, IdleTimeout: 300 * time.Millisecond}
	a := testserver.Start(t, opts)
	opts.IdleTimeout = 0
	b := testserver.Start(t, opts)
	t.Cleanup(a.Stop) // before B's leak check (see TestExternalAgentCluster)
	ca, cb := newClient(t, a), newClient(t, b)
	sid := ca.newSession()
	if got := ca.externalPrompt(sid, "first"); got.Info.Error != nil || got.text() != "echo: first" {
		t.Fatalf("first answer on A: %+v %q", got.Info.Error, got.text())
	}
	agentSession := ca.storedAgentSession(sid)
	pids := stubPIDs(dir)
	if len(pids) != 1 {
		t.Fatalf("agent processes %v, want one", pids)
	}
	checkFor(t, 20*time.Second, "A's agent process stopped once A let the idle session go", func() bool {
		return !alive(pids[0]) && a.Manager.ExternalPID(sid) == 0
	})
	if got := cb.externalPrompt(sid, "through b"); got.Info.Error != nil || got.text() != "echo: through b" {
		t.Fatalf("answer through B: %+v %q", got.Info.Error, got.text())
	}
	pids = stubPIDs(dir)
	if pa, pb := a.Manager.ExternalPID(sid), b.Manager.ExternalPID(sid); len(pids) != 2 || pb != pids[1] || pa != 0 {
		t.Errorf("agent processes %v (A's %d, B's %d): want B's second one alone", pids, pa, pb)
	}
	if loads := stubLoads(dir); !slices.Equal(loads, []string{agentSession}) {
		t.Errorf("session/load calls %v, want B's process to load %s", loads, agentSession)
	}
}

// externalPair starts two instances A and B on one fresh PostgreSQL
// database, with the stub external agent and one project directory.
func externalPair(t *testing.T) (a, b *testserver.Server, dir, dsn string) {
	pg := pgtest.Need(t)
	dsn = pg.DSN(pg.FreshDB(t))
	dir = t.TempDir()
	checkStubsGone(t, dir)
	opts := testserver.Options{Postgres: dsn, Config: externalConfig(""), Directory: dir}
	a = testserver.Start(t, opts)
	b = testserver.Start(t, opts)
	// A stops before B's leak check: B's forwarded requests keep
	// connections to A open until A closes them.
	t.Cleanup(a.Stop)
	return a, b, dir, dsn
}
