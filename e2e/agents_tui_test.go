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

// TestTUIExternalRealAgents: the real TUI attached to our server with a
// real agent (Claude Code, claude-agent-acp 0.101.0 on the Anthropic stub;
// Codex, codex-acp 2.6.0 on the Responses stub) as an external agent: Tab
// picks it, a prompt to it asks for a tool call, the agent's permission
// request (Claude Code asks; Codex runs it on its own) is the TUI's
// permission dialog, answered there (Enter on "Allow once"), and the tool
// runs and the agent's final answer shows on the screen.
func TestTUIExternalRealAgents(t *testing.T) {
	t.Parallel()
	node22, dir := agentsProject(t)
	for _, a := range realAgents {
		if a.name == "codex-openai" {
			continue // codex again; only its provider differs
		}
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			project := t.TempDir()
			answer, final := a.name+" answer "+randomTag(), a.name+" tool done "+strings.ToLower(randomTag())
			acp, made := a.start(t, node22, dir, project, agentScript(answer, final, func(tools []string) stubmodel.ToolCall {
				return a.call(project, tools)
			}))
			cfg := withOwnModel(t)
			cfg["permission"] = map[string]any{"edit": "ask", "bash": "ask"}
			cfg["agent"] = map[string]any{a.name: map[string]any{"description": a.name + " over ACP", "acp": acp}}
			srv := startServer(t, serverOptions{config: writeConfig(t, cfg), dir: project})
			x := startTUI(t, srv)
			pickAgent(t, x, strings.ToUpper(a.name[:1])+a.name[1:])
			x.typeLine(toolPrompt)
			if a.asks {
				x.waitScreen(3*time.Minute, "Allow once")
				x.must("send-keys", "-t", x.target, "Enter")
			}
			x.waitScreen(3*time.Minute, final)
			if _, err := os.Stat(filepath.Join(project, made)); err != nil {
				t.Errorf("the tool call did not run: %v", err)
			}
		})
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
