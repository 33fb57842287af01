package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestTUIExternalClaude: the real TUI attached to our server with Claude
// Code (claude-agent-acp 0.101.0 on the Anthropic stub) as an external
// agent: Tab picks it, a prompt to it asks for a tool call, the agent's
// permission request is the TUI's permission dialog, answered there
// (Enter on "Allow once"), and the tool runs and the agent's final answer
// shows on the screen.
func TestTUIExternalClaude(t *testing.T) {
	t.Parallel()
	node22, dir := agentsProject(t)
	claude := realAgents[0]
	answer, final := "claude answer "+randomTag(), "claude tool done "+strings.ToLower(randomTag())
	acp, made := claude.start(t, node22, dir, "", agentScript(answer, final, func(tools []string) stubmodel.ToolCall {
		return claude.call("", tools)
	}))
	cfg := withOwnModel(t)
	cfg["permission"] = map[string]any{"edit": "ask", "bash": "ask"}
	cfg["agent"] = map[string]any{"claude": map[string]any{"description": "Claude Code", "acp": acp}}
	srv := startWithConfig(t, cfg)
	x := startTUI(t, srv)
	pickAgent(t, x, "Claude")
	x.typeLine(toolPrompt)
	x.waitScreen(3*time.Minute, "Allow once")
	x.must("send-keys", "-t", x.target, "Enter")
	x.waitScreen(2*time.Minute, final)
	if _, err := os.Stat(filepath.Join(srv.Dir, made)); err != nil {
		t.Errorf("the tool call allowed in the TUI did not run: %v", err)
	}
}

// pickAgent presses Tab in the TUI's prompt until its footer names the
// primary agent name (it cycles build, plan, then the others): one Tab
// at a time, each seen taken.
func pickAgent(t *testing.T, x *tmux, name string) {
	t.Helper()
	// The prompt box's footer: "┃  Build · Stub Model ..." (the agent's
	// name may be anywhere else on the screen too).
	footer := regexp.MustCompile(`┃\s+(` + regexp.QuoteMeta(name) + `|Plan|Build)\b`)
	picked := func() string {
		m := footer.FindAllStringSubmatch(x.screen(), -1)
		if m == nil {
			return ""
		}
		return m[len(m)-1][1]
	}
	for i := 0; picked() != name; i++ {
		if i == 5 {
			t.Fatalf("Tab never reached the agent %s; screen:\n%s", name, x.screen())
		}
		before := picked()
		x.must("send-keys", "-t", x.target, "Tab")
		checkFor(t, 5*time.Second, 100*time.Millisecond, func() error {
			if picked() != before {
				return nil
			}
			return fmt.Errorf("the Tab was not taken (still %s)", before)
		})
	}
}
