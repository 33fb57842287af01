package lifecycle_test

import "testing"

// TestExternalAgentFork: a fork of a session whose agent is external keeps
// that agent (a prompt naming none goes to it) and opens a new session of
// the agent's (session/new, not a load of the source's): the agent gets
// the fork's new prompt alone, none of the history before it. The source
// goes on in its own agent session.
func TestExternalAgentFork(t *testing.T) {
	srv, c := externalServer(t, "")
	dir := srv.Directory
	sid := c.newSession()
	if got := c.externalPrompt(sid, "first"); got.text() != "echo: first" {
		t.Fatalf("first answer %q", got.text())
	}
	source := c.storedAgentSession(sid)
	var fork struct {
		ID    string `json:"id"`
		Agent string `json:"agent"`
	}
	c.must("POST", "/session/"+sid+"/fork", map[string]any{}, 200).json(t, &fork)
	if fork.Agent != "stub" {
		t.Errorf("the fork's agent %q, want the source's (stub)", fork.Agent)
	}
	// No agent named: the fork's own.
	var got v1Message
	c.must("POST", "/session/"+fork.ID+"/message", map[string]any{
		"parts": []any{map[string]any{"type": "text", "text": "in the fork"}}}, 200).json(t, &got)
	if got.Info.Error != nil || got.text() != "echo: in the fork" {
		t.Fatalf("the fork's answer: %+v %q, want the external agent's", got.Info.Error, got.text())
	}
	ps := stubPrompts(t, dir)
	if len(ps) != 2 {
		t.Fatalf("the agent got %d prompts, want 2: %+v", len(ps), ps)
	}
	forked := c.storedAgentSession(fork.ID)
	if forked == "" || forked == source || ps[1].SessionID != forked {
		t.Errorf("the fork's prompt went to agent session %q, %q stored; want a new one (the source's is %q)", ps[1].SessionID, forked, source)
	}
	if len(ps[1].Texts) != 1 || ps[1].Texts[0] != "in the fork" {
		t.Errorf("the fork's prompt to the agent %q, want its new text alone", ps[1].Texts)
	}
	if loads := stubLoads(dir); len(loads) > 0 {
		t.Errorf("session/load %v: the fork must not load the source's agent session", loads)
	}
	if got := c.externalPrompt(sid, "source again"); got.text() != "echo: source again" {
		t.Fatalf("the source's answer %q", got.text())
	}
	if ps := stubPrompts(t, dir); len(ps) != 3 || ps[2].SessionID != source || c.storedAgentSession(sid) != source {
		t.Errorf("the source's next prompt went to %+v, want its own agent session %q", ps, source)
	}
}
