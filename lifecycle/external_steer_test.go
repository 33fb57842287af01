package lifecycle_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

// steeringStub is the stub's environment that makes it a steering agent.
var steeringStub = map[string]string{acpstub.SteeringEnv: "1"}

// startSteered starts the stub's Steered prompt and waits for its first
// words: the prompt runs at the agent and waits for a steer.
func startSteered(t *testing.T, srv *testserver.Server, c *client, sid string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(srv.Directory, acpstub.SteersFile))
			t.Logf("messages %q; the agent's prompts %q, steers %s", c.transcript(sid), promptTexts(stubPrompts(t, srv.Directory)), b)
		}
	})
	live := recordLive(t, srv, sid)
	c.must("POST", "/session/"+sid+"/prompt_async", map[string]any{"agent": "stub",
		"parts": []any{map[string]any{"type": "text", "text": acpstub.Steered}}}, 204)
	checkFor(t, 20*time.Second, "the agent's first words", func() bool { return live.count("message.part.delta") >= 1 })
}

// steeredSession is a session of the stub (env) running its Steered
// prompt, and steer sent to it as a v1 steer under our message ID id.
func steeredSession(t *testing.T, env map[string]string, steer string) (srv *testserver.Server, c *client, sid, id string) {
	t.Helper()
	srv, c = externalServerEnv(t, "", env)
	sid = c.newSession()
	startSteered(t, srv, c, sid)
	id = identifier.NewMessage()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id, steer, "steer"), 204)
	return srv, c, sid, id
}

// transcript is the session's messages as role:text, in order.
func (c *client) transcript(sid string) []string {
	c.t.Helper()
	var out []string
	for _, m := range c.messages(sid) {
		out = append(out, m.Info.Role+":"+m.text())
	}
	return out
}

// settled waits for the session's turns to end, its last message the
// last of want, and checks its messages are want.
func (c *client) settled(sid string, want []string) {
	c.t.Helper()
	checkFor(c.t, 20*time.Second, "the turns' end", func() bool {
		ms := c.messages(sid)
		return len(ms) >= len(want) && ms[len(ms)-1].Info.Time.Completed != nil
	})
	c.waitIdle(sid)
	if got := c.transcript(sid); !slices.Equal(got, want) {
		c.t.Errorf("messages:\n%q\nwant\n%q", got, want)
	}
}

func release(t *testing.T, srv *testserver.Server) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(srv.Directory, acpstub.ReleaseFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func stubSteers(t *testing.T, srv *testserver.Server) []acpstub.Steer {
	t.Helper()
	return stubRecords[acpstub.Steer](t, filepath.Join(srv.Directory, acpstub.SteersFile))
}

func promptTexts(ps []acpstub.Prompt) []string {
	var out []string
	for _, p := range ps {
		out = append(out, strings.Join(p.Texts, " "))
	}
	return out
}

// TestExternalAgentSteer: a steer mid-turn to an agent that advertises
// steering goes to it as _session/steering (idleBehavior promptRequired,
// our message ID): injected, its user message is delivered into the
// running turn, shown before the rest of the reply (which is parented on
// it); promptRequired (the agent's turn ended), it stays pending and is the
// next prompt. An agent without steering gets the steer as the next
// prompt, held in the inbox until the turn ends. Either way the input ends
// delivered (a revoke is a 409) and the inbox empty.
func TestExternalAgentSteer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		steer    string
		release  bool // the agent does not take steers: the test ends its prompt
		want     []string
		prompts  []string
		outcomes []string
	}{
		{"injected", steeringStub, "turn left", false,
			[]string{"user:" + acpstub.Steered, "assistant:before.", "user:turn left", "assistant:after: turn left"},
			[]string{acpstub.Steered}, []string{"injected"}},
		// The agent answers injected after its prompt answered: the
		// turn's end waits for it, and the steer is not run again.
		{"injected as the turn ends", steeringStub, acpstub.Late, false,
			[]string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Late, "assistant:after: " + acpstub.Late},
			[]string{acpstub.Steered}, []string{"injected"}},
		{"prompt required", steeringStub, acpstub.Later, false,
			// What the agent says once a steer is sent is a new message
			// (it may be the steer's answer), then the steer's own turn.
			[]string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Later, "assistant: ended",
				"assistant:echo: " + acpstub.Later},
			[]string{acpstub.Steered, acpstub.Later}, []string{"promptRequired"}},
		{"no steering", nil, "queued one", true,
			[]string{"user:" + acpstub.Steered, "assistant:before. ended", "user:queued one", "assistant:echo: queued one"},
			[]string{acpstub.Steered, "queued one"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, sid, id := steeredSession(t, tc.env, tc.steer)
			if tc.release {
				if got := c.inboxIDs("/api/session/" + sid + "/inbox"); !slices.Equal(got, []string{id}) {
					t.Fatalf("inbox while the agent's turn runs: %v, want the steer %s held", got, id)
				}
				release(t, srv)
			}
			c.settled(sid, tc.want)
			ms := c.messages(sid)
			if last := ms[len(ms)-1]; ms[2].Info.ID != id || last.Info.ParentID != id {
				t.Errorf("the steer's message %s, its reply parented on %s: want our ID %s", ms[2].Info.ID, last.Info.ParentID, id)
			}
			ps := stubPrompts(t, srv.Directory)
			if got := promptTexts(ps); !slices.Equal(got, tc.prompts) {
				t.Errorf("the agent's prompts %q, want %q", got, tc.prompts)
			}
			if len(ps) == 2 && ps[1].MessageID != id {
				t.Errorf("the steer's prompt carries message ID %q, want %s", ps[1].MessageID, id)
			}
			var outcomes []string
			for _, s := range stubSteers(t, srv) {
				outcomes = append(outcomes, s.Outcome)
				if s.MessageID != id || strings.Join(s.Texts, " ") != tc.steer || s.IdleBehavior != "promptRequired" {
					t.Errorf("the agent got steer %+v, want %q with our ID %s and idleBehavior promptRequired", s, tc.steer, id)
				}
			}
			if !slices.Equal(outcomes, tc.outcomes) {
				t.Errorf("steering outcomes %q, want %q", outcomes, tc.outcomes)
			}
			if got := c.inboxIDs("/api/session/" + sid + "/inbox"); len(got) != 0 {
				t.Errorf("inbox after the turns: %v", got)
			}
			c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, 409)
		})
	}
}

// TestExternalAgentSteerRevoke: a steer still pending (the agent takes no
// steers) is revoked and never reaches the agent; one the agent has been
// sent (it holds its answer) is no longer revocable: a 409, and it is
// delivered into the turn when the agent answers injected.
func TestExternalAgentSteerRevoke(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		steer   string
		status  int
		want    []string
		prompts []string
	}{
		{"pending", nil, "never", 200,
			[]string{"user:" + acpstub.Steered, "assistant:before. ended"}, []string{acpstub.Steered}},
		{"sent", steeringStub, acpstub.Hold, 409,
			[]string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Hold, "assistant:after: " + acpstub.Hold},
			[]string{acpstub.Steered}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, sid, id := steeredSession(t, tc.env, tc.steer)
			c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, tc.status)
			release(t, srv)
			c.settled(sid, tc.want)
			if got := promptTexts(stubPrompts(t, srv.Directory)); !slices.Equal(got, tc.prompts) {
				t.Errorf("the agent's prompts %q, want %q", got, tc.prompts)
			}
			for _, s := range stubSteers(t, srv) {
				if tc.status == 200 || s.MessageID != id || s.Outcome != "injected" {
					t.Errorf("the agent got steer %+v", s)
				}
			}
		})
	}
}

// TestExternalAgentSteerAbort: abort sends session/cancel and ends the
// turn; a steer still pending is revoked with it (its message removed,
// never sent to the agent); one already sent to the agent is delivered
// into the aborted turn, not revoked.
func TestExternalAgentSteerAbort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		steer string
		want  []string
		// status of a revoke after the abort: 200 (already revoked), 409
		// (delivered).
		status int
	}{
		{"pending", nil, "dropped", []string{"user:" + acpstub.Steered, "assistant:before."}, 200},
		{"sent", steeringStub, acpstub.Hold, []string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Hold}, 409},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, sid, id := steeredSession(t, tc.env, tc.steer)
			t.Cleanup(func() { release(t, srv) }) // a held steer's answer
			c.must("POST", "/session/"+sid+"/abort", nil, 200)
			c.waitIdle(sid)
			checkFor(t, 10*time.Second, "session/cancel at the agent", func() bool {
				_, err := os.Stat(filepath.Join(srv.Directory, acpstub.CancelledFile))
				return err == nil
			})
			if got := c.transcript(sid); !slices.Equal(got, tc.want) {
				t.Errorf("messages:\n%q\nwant\n%q", got, tc.want)
			}
			if as := c.messages(sid); as[1].Info.Error == nil || as[1].Info.Error.Name != "MessageAbortedError" {
				t.Errorf("the aborted turn's message: %+v", as[1].Info)
			}
			c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, tc.status)
			if got := promptTexts(stubPrompts(t, srv.Directory)); !slices.Equal(got, []string{acpstub.Steered}) {
				t.Errorf("the agent's prompts %q, want only %q", got, acpstub.Steered)
			}
		})
	}
}

// TestExternalAgentSteerOrder: the agent streams its answer to a steer
// before it answers `_session/steering` (the stub's Early); the steer's
// delivery is still published before the first word that answers it, so a
// client (ACP v2's user_message, the TUI) shows them in that order.
func TestExternalAgentSteerOrder(t *testing.T) {
	srv, c := externalServerEnv(t, "", steeringStub)
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	startSteered(t, srv, c, sid)
	id := identifier.NewMessage()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id, acpstub.Early, "steer"), 204)
	c.settled(sid, []string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Early, "assistant:after: " + acpstub.Early})
	delivered, answered := -1, -1
	for i, e := range live.events() {
		switch {
		case e.Type == opencode.EvInboxDelivered && e.Data.MessageID == id && delivered < 0:
			delivered = i
		case e.Type == opencode.EvPartDelta && strings.Contains(string(e.Raw), "after: ") && answered < 0:
			answered = i
		}
	}
	if delivered < 0 || answered < 0 || delivered > answered {
		t.Errorf("the steer's delivery is event %d, the first word answering it %d: want the delivery first", delivered, answered)
	}
}
