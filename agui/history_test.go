package agui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider"
)

// turnCalls are the model calls of turns (not of titles).
func turnCalls(calls []provider.Request) []provider.Request {
	var out []provider.Request
	for _, c := range calls {
		if c.Purpose == "" {
			out = append(out, c)
		}
	}
	return out
}

// TestHistoryIsStored: a run that brings a conversation the thread does
// not hold (2,000 messages, alternating user and assistant, one assistant
// with a tool call and its result) stores it as the conversation in order,
// with the client's IDs kept and its assistant texts as it sent them, and
// makes one model call, for the new message after the last assistant
// message, whose request holds the whole history. The same run again
// admits nothing. (The old code ran a turn for each of the 1,000 user
// messages and replaced the client's assistant messages.)
func TestHistoryIsStored(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	defer srv.Stop()
	thread := identifier.NewSession()
	const n = 2000
	var msgs []any
	for i := range n {
		if i%2 == 0 {
			msgs = append(msgs, user(fmt.Sprintf("c-user-%d", i), fmt.Sprintf("question %d", i)))
			continue
		}
		a := map[string]any{"id": fmt.Sprintf("c-asst-%d", i), "role": "assistant", "content": fmt.Sprintf("answer %d", i)}
		if i == 1 {
			a["toolCalls"] = []any{map[string]any{"id": "call-h1", "type": "function",
				"function": map[string]any{"name": "lookup", "arguments": `{"q":"x"}`}}}
			msgs = append(msgs, a, map[string]any{"id": "c-tool-1", "role": "tool", "toolCallId": "call-h1", "content": "found x"})
			continue
		}
		msgs = append(msgs, a)
	}
	msgs = append(msgs, user("c-new", "the new question"))
	body := input(thread, "run-1", msgs...)

	st, evs, raw := run(t, srv.URL, body)
	if st != 200 {
		t.Fatalf("status %d: %s", st, raw)
	}
	if fin := evs[len(evs)-1]; fin.s("type") != "RUN_FINISHED" {
		t.Fatalf("run ended %v", fin)
	}
	if got := text(evs, "assistant"); got != "You said: the new question" {
		t.Errorf("streamed text %q", got)
	}
	calls := turnCalls(srv.Model.Calls())
	if len(calls) != 1 {
		t.Fatalf("%d model calls, want 1", len(calls))
	}
	// The model was sent the history as the conversation.
	var users, assistants int
	for _, m := range calls[0].Messages {
		switch m.Role {
		case "user":
			users++
		case "assistant":
			if want := fmt.Sprintf("answer %d", 2*assistants+1); !strings.Contains(m.Content+fmt.Sprint(m.Parts), want) {
				t.Fatalf("assistant message %d sent to the model as %+v, want %q", assistants, m, want)
			}
			assistants++
		case "tool":
			if m.ToolCallID != "call-h1" || m.Content != "found x" {
				t.Errorf("tool result sent to the model: %+v", m)
			}
		}
	}
	if users != n/2+1 || assistants != n/2 {
		t.Errorf("the model got %d user and %d assistant messages, want %d and %d", users, assistants, n/2+1, n/2)
	}

	stored := messages(t, srv.URL, thread)
	if len(stored) != n+2 {
		t.Fatalf("%d stored messages, want %d (the history, the new message, its reply)", len(stored), n+2)
	}
	for i, m := range stored[:n] {
		role, client, txt := "user", fmt.Sprintf("c-user-%d", i), fmt.Sprintf("question %d", i)
		if i%2 == 1 {
			role, client, txt = "assistant", fmt.Sprintf("c-asst-%d", i), fmt.Sprintf("answer %d", i)
		}
		if m.Info.Role != role || identifier.Check(identifier.Message, m.Info.ID) != nil || len(m.Parts) == 0 ||
			m.Parts[0].Metadata.AGUI.ClientMessageID != client || m.Parts[0].Text != txt {
			t.Fatalf("stored message %d: %+v, want a %s %q under client ID %s", i, m, role, txt, client)
		}
	}
	if p := stored[1].Parts; len(p) != 2 || p[1].Type != "tool" || p[1].CallID != "call-h1" || p[1].State == nil ||
		p[1].State.Status != "completed" || p[1].State.Output != "found x" {
		t.Errorf("the assistant's tool call is stored as %+v", p)
	}
	if stored[n].Info.Role != "user" || stored[n].Parts[0].Metadata.AGUI.ClientMessageID != "c-new" || stored[n+1].Info.Role != "assistant" {
		t.Errorf("the new turn is stored as %+v, %+v", stored[n], stored[n+1])
	}
	snap := evs[1]["messages"].([]any)
	if id := snap[0].(map[string]any)["id"]; id != stored[0].Info.ID {
		t.Errorf("the snapshot's first message is %v, stored as %s", id, stored[0].Info.ID)
	}

	// The same run again (its answer was lost): nothing new.
	body["runId"] = "run-2"
	_, again, _ := run(t, srv.URL, body)
	if fin := again[len(again)-1]; fin.s("type") != "RUN_FINISHED" {
		t.Errorf("the repeated run ended %v", fin)
	}
	if got := len(messages(t, srv.URL, thread)); got != n+2 {
		t.Errorf("%d stored messages after the repeated run, want %d", got, n+2)
	}
	if got := len(turnCalls(srv.Model.Calls())); got != 1 {
		t.Errorf("%d model calls after the repeated run, want 1", got)
	}
}

// TestHistoryRefused: a history that cannot be stored is refused before
// any event and admits nothing: while a turn runs (it would land inside
// the turn) and when a msg_ ID of it is another session's.
func TestHistoryRefused(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedSlow()})
	defer srv.Stop()
	other := identifier.NewSession()
	_, evs, _ := run(t, srv.URL, input(other, "o1", user("o-u1", "hello")))
	taken := evs[1]["messages"].([]any)[0].(map[string]any)["id"].(string)

	busy := identifier.NewSession()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = run(t, srv.URL, input(busy, "b1", user("b-u1", "a long answer please")))
	}()
	defer func() { <-done }() // the turn's run ends before the test
	deadline := time.Now().Add(10 * time.Second)
	for srv.Manager.Status()[busy] != "busy" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if srv.Manager.Status()[busy] != "busy" {
		t.Fatal("the turn is not running")
	}
	for _, c := range []struct {
		name, thread, firstID string
		status                int
		code                  string
	}{
		{"while a turn runs", busy, "h-u1", 409, "SESSION_BUSY"},
		{"another session's message", identifier.NewSession(), taken, 409, "CONFLICT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _, raw := run(t, srv.URL, input(c.thread, "h1", user(c.firstID, "old question"),
				map[string]any{"id": "h-a1", "role": "assistant", "content": "old answer"}, user("h-u2", "new question")))
			if st != c.status || !strings.Contains(raw, `"code":"`+c.code+`"`) {
				t.Errorf("status %d %s, want %d %s", st, raw, c.status, c.code)
			}
			for _, m := range messages(t, srv.URL, c.thread) {
				for _, p := range m.Parts {
					if strings.Contains(p.Text, "question") && p.Text != "a long answer please" {
						t.Errorf("the refused run stored %q", p.Text)
					}
				}
			}
		})
	}
}
