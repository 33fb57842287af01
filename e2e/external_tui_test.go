package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// withOwnModel is an opencode.json with a model of our own for our agents
// and titles (a stub answering "our own model", not what an agent says).
func withOwnModel(t *testing.T) map[string]any {
	ours := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: "our own model"}))
	return map[string]any{
		"model": "stub/stub-model", "small_model": "stub/stub-model",
		"provider": map[string]any{"stub": map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "Stub",
			"options": map[string]any{"baseURL": ours.URL(), "apiKey": "k"},
			"models":  map[string]any{"stub-model": map[string]any{"name": "Stub Model", "tool_call": true}}}}}
}

// TestTUIExternalAgent: the real TUI attached to our server whose
// opencode.json has an external agent (the real `opencode acp` on the
// chat-completions stub): Tab in the TUI's prompt switches to it, as to
// any primary agent, and a prompt to it streams the agent's answer on the
// screen, produced by the agent (its own stub), not by our model; the
// sidebar counts the tokens the agent reported (usage_update).
func TestTUIExternalAgent(t *testing.T) {
	t.Parallel()
	_, opencodeBin := binaries(t)
	answer := "relayed answer " + strings.ToLower(randomTag())
	agentStub := answering(t, answer)
	cfg := withOwnModel(t)
	cfg["agent"] = map[string]any{"relay": map[string]any{"description": "OpenCode over ACP",
		"acp": opencodeACP(t, opencodeBin, agentStub.URL())}}
	srv := startWithConfig(t, cfg)
	x := startTUI(t, srv)

	// Tab cycles the primary agents (build, plan, relay).
	pickAgent(t, x, "Relay")
	x.typeLine("say something")
	x.waitScreen(3*time.Minute, answer)

	// Stored once the agent's text ends (the screen shows its deltas).
	sid := srv.onlySession(t, 5*time.Second)
	checkFor(t, time.Minute, 200*time.Millisecond, func() error {
		var ms []struct {
			Info  struct{ Role, Agent, ProviderID string } `json:"info"`
			Parts []struct{ Type, Text string }            `json:"parts"`
		}
		if err := srv.getJSON("/session/"+sid+"/message", &ms); err != nil {
			return err
		}
		var by []string
		for _, m := range ms {
			for _, p := range m.Parts {
				if m.Info.Role == "assistant" && strings.Contains(p.Text, answer) {
					by = append(by, m.Info.Agent+"/"+m.Info.ProviderID)
				}
			}
		}
		if len(by) != 1 || by[0] != "relay/acp" {
			return fmt.Errorf("the answer is in assistant messages of %v, want one of relay/acp", by)
		}
		return nil
	})
	// The agent's usage_update is the message's tokens: the sidebar's
	// context figure counts them.
	checkFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if s := x.screen(); !regexp.MustCompile(`[1-9][0-9,]* tokens`).MatchString(s) {
			return fmt.Errorf("the sidebar shows no tokens of the agent's:\n%s", s)
		}
		return nil
	})
}
