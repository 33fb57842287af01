package lifecycle_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// v2Stub is the stub's environment that makes it an agent speaking only
// ACP v2 (it answers 2 to our v1 offer), taking session/inject.
var v2Stub = map[string]string{acpstub.V2Env: "1"}

// settledOn waits for the session's messages to be want and the session
// idle, and checks they still are then.
func (c *client) settledOn(sid string, want []string) {
	c.t.Helper()
	checkFor(c.t, 20*time.Second, "the messages "+strings.Join(want, " | "), func() bool {
		return slices.Equal(c.transcript(sid), want)
	})
	c.waitIdle(sid)
	if got := c.transcript(sid); !slices.Equal(got, want) {
		c.t.Errorf("messages once idle:\n%q\nwant\n%q", got, want)
	}
}

// TestExternalAgentInjectV2: a steer mid-turn to an ACP v2 agent that
// offers session/inject goes to it as mode steer with our message ID in
// _meta. Accepted and delivered (its user_message under the agent's ID),
// it joins the running turn where the agent took it, and what the agent
// says next answers it. Refused (no_running_turn: the work ended), it is
// the next prompt. Accepted but not delivered when the work goes idle,
// it is asked back (session/revoke_inject): revoked, it is the next
// prompt; already delivered, it joined the turn that just ended. Either
// way it ends delivered exactly once (a revoke is a 409) and the inbox is
// empty.
func TestExternalAgentInjectV2(t *testing.T) {
	for _, tc := range []struct {
		name     string
		steer    string
		want     []string
		prompts  []string
		outcomes []string // method:outcome, in order
	}{
		{"delivered", "turn left",
			[]string{"user:" + acpstub.Steered, "assistant:before.", "user:turn left", "assistant:after: turn left"},
			[]string{acpstub.Steered}, []string{"session/inject:accepted"}},
		{"no running turn", acpstub.Later,
			[]string{"user:" + acpstub.Steered, "assistant:before. ended", "user:" + acpstub.Later, "assistant:echo: " + acpstub.Later},
			[]string{acpstub.Steered, acpstub.Later}, []string{"session/inject:no_running_turn"}},
		{"undelivered, revoked", acpstub.Undelivered,
			[]string{"user:" + acpstub.Steered, "assistant:before. ended", "user:" + acpstub.Undelivered,
				"assistant:echo: " + acpstub.Undelivered},
			[]string{acpstub.Steered, acpstub.Undelivered}, []string{"session/inject:accepted", "session/revoke_inject:revoked"}},
		{"undelivered, already delivered", acpstub.Tardy,
			[]string{"user:" + acpstub.Steered, "assistant:before. ended", "user:" + acpstub.Tardy},
			[]string{acpstub.Steered}, []string{"session/inject:accepted", "session/revoke_inject:already_delivered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, sid, id := steeredSession(t, v2Stub, tc.steer)
			c.settledOn(sid, tc.want)
			ms := c.messages(sid)
			if ms[2].Info.ID != id {
				t.Errorf("the steer's message is %s, want our ID %s", ms[2].Info.ID, id)
			}
			if tc.name == "delivered" && ms[3].Info.ParentID != id {
				t.Errorf("the answer after the steer is parented on %s, want %s", ms[3].Info.ParentID, id)
			}
			ps := stubPrompts(t, srv.Directory)
			if got := promptTexts(ps); !slices.Equal(got, tc.prompts) {
				t.Errorf("the agent's prompts %q, want %q", got, tc.prompts)
			}
			if len(ps) == 2 && ps[1].MessageID != id {
				t.Errorf("the steer's prompt carries message ID %q, want %s", ps[1].MessageID, id)
			}
			var outcomes []string
			agentID := ""
			for _, s := range stubSteers(t, srv) {
				outcomes = append(outcomes, s.Method+":"+s.Outcome)
				switch s.Method {
				case acpclient.MethodSessionInject:
					agentID = s.AgentID
					if s.MessageID != id || strings.Join(s.Texts, " ") != tc.steer || s.IdleBehavior != "steer" {
						t.Errorf("the agent got inject %+v, want mode steer, %q, our ID %s", s, tc.steer, id)
					}
				case acpclient.MethodRevokeInject:
					if s.AgentID != agentID || agentID == "" {
						t.Errorf("revoke of %q, want the agent's ID of the inject %q", s.AgentID, agentID)
					}
				}
			}
			if !slices.Equal(outcomes, tc.outcomes) {
				t.Errorf("the agent's answers %q, want %q", outcomes, tc.outcomes)
			}
			if got := c.inboxIDs("/api/session/" + sid + "/inbox"); len(got) != 0 {
				t.Errorf("inbox after the turns: %v", got)
			}
			c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, 409)
		})
	}
}

// TestExternalAgentInjectV2Held: a steer the v2 agent accepted and has
// not delivered yet is the agent's: revoking it is a 409; it joins the
// turn when the agent delivers it.
func TestExternalAgentInjectV2Held(t *testing.T) {
	srv, c, sid, id := steeredSession(t, v2Stub, acpstub.Hold)
	checkFor(t, 20*time.Second, "the inject accepted", func() bool {
		return len(stubSteers(t, srv)) >= 1
	})
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, 409)
	release(t, srv)
	c.settledOn(sid, []string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Hold,
		"assistant:after: " + acpstub.Hold})
}

// TestExternalAgentResumeV2: after our restart a v2 agent's stored session
// is continued with session/resume (v2 has no session/load), and a plain
// prompt's end is the agent's idle.
func TestExternalAgentResumeV2(t *testing.T) {
	opts := restartable(t, "")
	for k, v := range v2Stub {
		opts.Config.Agent["stub"].ACP.Env[k] = v
	}
	srv := testserver.Start(t, opts)
	c := newClient(t, srv)
	sid := c.newSession()
	if got := c.externalPrompt(sid, acpstub.Two); got.text() != "second" {
		t.Fatalf("first answer %q, want the second of the agent's two messages", got.text())
	}
	if got := c.transcript(sid); !slices.Equal(got, []string{"user:" + acpstub.Two, "assistant:hello world", "assistant:second"}) {
		t.Errorf("messages %q", got)
	}
	first := c.storedAgentSession(sid)
	srv.Stop()

	srv = testserver.Start(t, opts)
	c = newClient(t, srv)
	if got := c.externalPrompt(sid, "again"); got.Info.Error != nil || got.text() != "echo: again" {
		t.Fatalf("answer after the restart: %+v %q", got.Info.Error, got.text())
	}
	ps := stubPrompts(t, opts.Directory)
	if loads := stubLoads(opts.Directory); !slices.Equal(loads, []string{first}) || len(ps) != 2 || ps[1].SessionID != first {
		t.Errorf("resumed %v, prompts %+v: want the stored session %s resumed and prompted", loads, ps, first)
	}
}

// TestExternalAgentV2Negotiation: initialize offers v1 unless the agent's
// config says protocolVersion 2; an agent that answers 2 anyway (it speaks
// only v2) is spoken to in v2. In v2 a steer mid-turn is a session/inject
// delivered into the turn; in v1, to this agent without steering, it waits
// as a queued input and is the next prompt.
func TestExternalAgentV2Negotiation(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		offer      int
		v2         bool
	}{
		{"v2 only, v1 offered", "1", 0, true},
		{"both, v1 offered", acpstub.V2Offered, 0, false},
		{"both, v2 offered", acpstub.V2Offered, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			checkStubsGone(t, dir)
			cfg := externalConfig("")
			cfg.Agent["stub"].ACP.Env[acpstub.V2Env] = tc.mode
			cfg.Agent["stub"].ACP.ProtocolVersion = tc.offer
			srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: dir})
			c := newClient(t, srv)
			sid := c.newSession()
			startSteered(t, srv, c, sid)
			c.must("POST", "/session/"+sid+"/prompt_async", v1Body(identifier.NewMessage(), "turn left", "steer"), 204)
			want := []string{"user:" + acpstub.Steered, "assistant:before.", "user:turn left", "assistant:after: turn left"}
			if !tc.v2 {
				release(t, srv)
				want = []string{"user:" + acpstub.Steered, "assistant:before. ended", "user:turn left", "assistant:echo: turn left"}
			}
			c.settledOn(sid, want)
			injects := 0
			for _, s := range stubSteers(t, srv) {
				if s.Method == acpclient.MethodSessionInject {
					injects++
				}
			}
			if tc.v2 != (injects == 1) {
				t.Errorf("%d session/inject sent (v2: %v)", injects, tc.v2)
			}
		})
	}
}

// TestExternalAgentInjectV2Abort: an abort while a steer is accepted by
// the v2 agent and not delivered asks it back before session/cancel (the
// agent would otherwise deliver it once idle, in work nobody follows);
// the steer, which the agent held, is delivered into the aborted turn,
// never left pending nor revoked by us, and never prompted again.
func TestExternalAgentInjectV2Abort(t *testing.T) {
	srv, c, sid, id := steeredSession(t, v2Stub, acpstub.Hold)
	checkFor(t, 20*time.Second, "the inject accepted", func() bool { return len(stubSteers(t, srv)) >= 1 })
	c.must("POST", "/session/"+sid+"/abort", nil, 200)
	c.waitIdle(sid)
	checkFor(t, 20*time.Second, "the agent's cancel", func() bool { return len(stubSteers(t, srv)) >= 3 })
	var got []string
	for _, s := range stubSteers(t, srv) {
		got = append(got, s.Method+":"+s.Outcome)
	}
	if want := []string{"session/inject:accepted", "session/revoke_inject:revoked", "session/cancel:"}; !slices.Equal(got, want) {
		t.Errorf("the agent got %q, want %q", got, want)
	}
	if got, want := c.transcript(sid), []string{"user:" + acpstub.Steered, "assistant:before.", "user:" + acpstub.Hold}; !slices.Equal(got, want) {
		t.Errorf("messages %q, want %q", got, want)
	}
	if got := c.inboxIDs("/api/session/" + sid + "/inbox"); len(got) != 0 {
		t.Errorf("inbox after the abort: %v, want the steer delivered", got)
	}
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+id, nil, 409)
	if got := promptTexts(stubPrompts(t, srv.Directory)); !slices.Equal(got, []string{acpstub.Steered}) {
		t.Errorf("the agent's prompts %q: the steer must not be prompted again", got)
	}
}

// TestExternalAgentStrictInitialize: an agent that refuses initialize
// because of v2's fields beside v1's (a strict v1 agent) is asked again
// with v1's alone, and answers.
func TestExternalAgentStrictInitialize(t *testing.T) {
	_, c := externalServerEnv(t, "", map[string]string{acpstub.StrictEnv: "1"})
	sid := c.newSession()
	if got := c.externalPrompt(sid, "hello"); got.Info.Error != nil || got.text() != "echo: hello" {
		t.Fatalf("answer of the strict agent: %+v %q", got.Info.Error, got.text())
	}
}
