package lifecycle_test

import (
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/acpstub"
)

// TestExternalAgentFork: a fork of a session whose agent is external keeps
// that agent (a prompt naming none goes to it) and opens a new session of
// the agent's (session/new, not a load of the source's): the fork's first
// prompt carries the conversation the fork copied (a text block marked as
// the conversation so far, before the new text), the next ones do not.
// The source goes on in its own agent session, never sent its history.
func TestExternalAgentFork(t *testing.T) {
	srv, c := externalServer(t, "")
	dir := srv.Directory
	sid := c.newSession()
	if got := c.externalPrompt(sid, "first"); got.text() != "echo: first" {
		t.Fatalf("first answer %q", got.text())
	}
	if got := c.externalPrompt(sid, "second"); got.text() != "echo: second" {
		t.Fatalf("second answer %q", got.text())
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
	if len(ps) != 3 {
		t.Fatalf("the agent got %d prompts, want 3: %+v", len(ps), ps)
	}
	for _, p := range ps[:2] {
		if p.History != "" {
			t.Errorf("the source's prompt %q was sent a history %q", p.Texts, p.History)
		}
	}
	forked := c.storedAgentSession(fork.ID)
	if forked == "" || forked == source || ps[2].SessionID != forked {
		t.Errorf("the fork's prompt went to agent session %q, %q stored; want a new one (the source's is %q)", ps[2].SessionID, forked, source)
	}
	if len(ps[2].Texts) != 1 || ps[2].Texts[0] != "in the fork" {
		t.Errorf("the fork's prompt to the agent %q, want its new text after the history", ps[2].Texts)
	}
	h := ps[2].History
	want := []string{"[User]: first", "[Assistant]: echo: first", "[User]: second", "[Assistant]: echo: second"}
	at := 0
	for _, w := range want {
		i := strings.Index(h[at:], w)
		if i < 0 {
			t.Fatalf("the fork's history block %q lacks %q (in order: %q)", h, w, want)
		}
		at += i + len(w)
	}
	if strings.Contains(h, "in the fork") || !strings.HasPrefix(h, acpstub.HistoryMarker) {
		t.Errorf("the fork's history block %q: want the marked conversation before the new prompt only", h)
	}
	var next v1Message
	c.must("POST", "/session/"+fork.ID+"/message", map[string]any{
		"parts": []any{map[string]any{"type": "text", "text": "fork again"}}}, 200).json(t, &next)
	if ps := stubPrompts(t, dir); len(ps) != 4 || ps[3].History != "" || ps[3].SessionID != forked {
		t.Errorf("the fork's next prompt %+v: want it on the same agent session %s without the history again", ps[3:], forked)
	}
	if loads := stubLoads(dir); len(loads) > 0 {
		t.Errorf("session/load %v: the fork must not load the source's agent session", loads)
	}
	if got := c.externalPrompt(sid, "source again"); got.text() != "echo: source again" {
		t.Fatalf("the source's answer %q", got.text())
	}
	if ps := stubPrompts(t, dir); len(ps) != 5 || ps[4].SessionID != source || ps[4].History != "" || c.storedAgentSession(sid) != source {
		t.Errorf("the source's next prompt went to %+v, want its own agent session %q", ps, source)
	}
}
