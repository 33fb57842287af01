package lifecycle_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestPromptWhileBusyIsShown: a prompt (a steer, as v1 prompts are) posted
// while a turn runs is stored and announced at once under its own ID
// (OpenCode's TUI marks it QUEUED); a replace swaps its parts, a revoke
// removes it, and a delivered one stays the same message, answered by the
// turn's next step. (A step here is 3 s of streaming: the window for the
// replace and the revoke.)
func TestPromptWhileBusyIsShown(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 30, Delay: 100 * time.Millisecond}})
	c := newClient(t, srv)
	events := eventLog(t, srv.URL)
	sid := c.newSession()

	c.must("POST", "/session/"+sid+"/prompt_async", v1Body("", "first", ""), 204)
	waitFor(t, events, func(f frame) bool { return f.Type == "message.part.delta" })

	keep, drop := newID(), newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(keep, "kept v1", ""), 204)
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(drop, "dropped", ""), 204)

	// Both are announced and listed before the first turn ends.
	for _, id := range []string{keep, drop} {
		waitFor(t, events, func(f frame) bool {
			var p struct {
				Info struct{ ID, Role string }
			}
			json.Unmarshal(f.Properties, &p)
			return f.Type == "message.updated" && p.Info.ID == id && p.Info.Role == "user"
		})
	}
	ids := func() []string {
		var out []string
		for _, m := range c.messages(sid) {
			out = append(out, m.Info.ID+":"+m.text())
		}
		return out
	}
	if got := ids(); !slices.Contains(got, keep+":kept v1") || !slices.Contains(got, drop+":dropped") {
		t.Fatalf("while busy, messages = %v", got)
	}

	// Replace swaps the shown message's text; revoke removes the other.
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+keep, map[string]any{"prompt": map[string]any{"text": "kept v2"}}, 200)
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+drop, nil, 200)
	waitFor(t, events, func(f frame) bool {
		var p struct{ MessageID string }
		json.Unmarshal(f.Properties, &p)
		return f.Type == "message.removed" && p.MessageID == drop
	})
	got := ids()
	if !slices.Contains(got, keep+":kept v2") || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, drop) }) {
		t.Fatalf("after replace and revoke, messages = %v", got)
	}

	// Delivered: the same message, answered by the next turn.
	c.waitIdle(sid)
	ms := c.messages(sid)
	var order []string
	for _, m := range ms {
		order = append(order, m.Info.Role)
		if m.Info.ID == drop {
			t.Errorf("revoked message %s came back", drop)
		}
	}
	last := ms[len(ms)-1]
	if last.Info.Role != "assistant" || last.Info.ParentID != keep || !strings.Contains(last.text(), "kept v2") {
		t.Errorf("last message = %+v %q, want the answer to %s", last.Info, last.text(), keep)
	}
	n := 0
	for _, m := range ms {
		if m.Info.ID == keep {
			n++
			if len(m.Parts) != 1 || m.text() != "kept v2" {
				t.Errorf("delivered message parts = %+v", m.Parts)
			}
		}
	}
	if n != 1 {
		t.Errorf("message %s listed %d times: %v", keep, n, order)
	}
}

// waitFor reads frames until one matches (10 s at most).
func waitFor(t *testing.T, ch <-chan frame, match func(frame) bool) frame {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-ch:
			if match(f) {
				return f
			}
		case <-deadline:
			t.Fatal("timed out waiting for an event")
		}
	}
}
