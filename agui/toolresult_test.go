package agui_test

import (
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

var confirmTool = []any{map[string]any{"name": "confirm_choice", "description": "Ask the user to confirm a choice",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"choice": map[string]any{"type": "string"}}}}}

// frontendCall runs a turn that calls the frontend tool and returns the
// run's snapshot (the history a client holds) and the pending call's ID.
func frontendCall(t *testing.T, url, thread string) ([]any, string) {
	t.Helper()
	body := input(thread, "r1", user("u1", `call:confirm_choice {"choice":"blue"} then: confirmed`))
	body["tools"] = confirmTool
	_, evs, raw := run(t, url, body)
	out, _ := evs[len(evs)-1]["outcome"].(map[string]any)
	pend, _ := out["pendingToolCallIds"].([]any)
	if len(pend) != 1 {
		t.Fatalf("run ended %v, want one pending call\n%s", evs[len(evs)-1], raw)
	}
	return evs[1]["messages"].([]any), pend[0].(string)
}

// resultRun is the next run of a client that holds hist and sends a tool
// message for callID, after its own copy of the assistant message that
// made the call (none for a call never made: an assistant message of the
// client with a call the thread does not hold is history).
func resultRun(thread, runID string, hist []any, callID, toolMsgID, content string, made bool) map[string]any {
	msgs := append([]any{}, hist...)
	if made {
		msgs = append(msgs, map[string]any{"id": "asst-" + runID, "role": "assistant",
			"toolCalls": []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": "confirm_choice", "arguments": `{"choice":"blue"}`}}}})
	}
	msgs = append(msgs, map[string]any{"id": toolMsgID, "role": "tool", "toolCallId": callID, "content": content})
	body := input(thread, runID, msgs...)
	body["tools"] = confirmTool
	return body
}

// refused checks that a run ended RUN_ERROR NOT_FOUND saying the call is
// not waiting, and that the session holds what it held before.
func refused(t *testing.T, url, thread string, evs []ev, before int) {
	t.Helper()
	last := evs[len(evs)-1]
	if last.s("type") != "RUN_ERROR" || last.s("code") != "NOT_FOUND" || !strings.Contains(last.s("message"), "not waiting") {
		t.Errorf("the run ended %v, want RUN_ERROR NOT_FOUND (the call is not waiting)", last)
	}
	if n := len(messages(t, url, thread)); n != before {
		t.Errorf("%d messages after the refused run, were %d", n, before)
	}
}

// TestToolResultNotWaiting: a tool message for a call that does not wait
// for the client (never made, or answered with another result) is
// RUN_ERROR NOT_FOUND and admits nothing, where the old code answered
// RUN_FINISHED success and dropped it; the same result again (a re-sent
// run) is no error.
func TestToolResultNotWaiting(t *testing.T) {
	srv, _ := toolServer(t)
	defer srv.Stop()
	thread := identifier.NewSession()
	hist, callID := frontendCall(t, srv.URL, thread)
	_, evs, raw := run(t, srv.URL, resultRun(thread, "r2", hist, callID, "tool-uuid-1", "the user confirmed blue", true))
	if got := text(evs, "assistant"); got != "Done. confirmed" {
		t.Fatalf("the round trip's text %q\n%s", got, raw)
	}
	before := len(messages(t, srv.URL, thread))
	for _, c := range []struct {
		name, callID, content string
		refused               bool
	}{
		{"never made", "call_never_made", "a result", true},
		{"answered, another result", callID, "the user chose red", true},
		{"answered, the same result again", callID, "the user confirmed blue", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, evs, _ := run(t, srv.URL, resultRun(thread, "r-"+strings.ReplaceAll(c.name, " ", "-"), hist, c.callID, "tool-uuid-2", c.content, c.callID == callID))
			if c.refused {
				refused(t, srv.URL, thread, evs, before)
				return
			}
			if last := evs[len(evs)-1]; last.s("type") != "RUN_FINISHED" {
				t.Errorf("the re-sent result ended %v", last)
			}
		})
	}
}

// TestToolResultAfterRestart: a frontend call waits for its client when
// the server restarts; the result the client posts after it is refused
// (RUN_ERROR NOT_FOUND, nothing admitted), not answered success and
// dropped as the old code did.
func TestToolResultAfterRestart(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}}
	srv := testserver.Start(t, testserver.Options{Config: cfg, SQLite: true})
	thread := identifier.NewSession()
	hist, callID := frontendCall(t, srv.URL, thread)
	srv.Stop()

	srv = testserver.Start(t, testserver.Options{Config: cfg, SQLite: true, DataDir: srv.DataDir, Directory: srv.Directory})
	defer srv.Stop()
	users := func() int {
		n := 0
		for _, m := range messages(t, srv.URL, thread) {
			if m.Info.Role == "user" {
				n++
			}
		}
		return n
	}
	before := users()
	_, evs, _ := run(t, srv.URL, resultRun(thread, "r2", hist, callID, "tool-late", "the user confirmed blue", true))
	last := evs[len(evs)-1]
	if last.s("type") != "RUN_ERROR" || last.s("code") != "NOT_FOUND" || !strings.Contains(last.s("message"), "not waiting") {
		t.Errorf("the late result's run ended %v, want RUN_ERROR NOT_FOUND (the call is not waiting)", last)
	}
	if n := users(); n != before {
		t.Errorf("%d user messages after the refused run, were %d", n, before)
	}
	for _, m := range messages(t, srv.URL, thread) {
		for _, p := range m.Parts {
			if p.State != nil && p.State.Output == "the user confirmed blue" {
				t.Errorf("the refused result was stored: %+v", p)
			}
		}
	}
}
