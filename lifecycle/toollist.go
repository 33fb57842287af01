package lifecycle

import (
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/provider"
)

// ToolIDs is every tool a model may be offered (GET /experimental/tool/ids):
// the built-in ones and those MCP servers add.
func (m *Manager) ToolIDs() []string {
	specs := m.allSpecs()
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Tools is what a model is offered before any agent's or session's rules
// (GET /experimental/tool): apply_patch for the GPT models that edit with
// it, edit and write for the others, sorted by name as they are sent.
func (m *Manager) Tools(modelID string) []provider.ToolSpec {
	patch := usesApplyPatch(modelID)
	var out []provider.ToolSpec
	for _, s := range m.allSpecs() {
		if s.Name == "apply_patch" && !patch || (s.Name == "edit" || s.Name == "write") && patch {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b provider.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (m *Manager) allSpecs() []provider.ToolSpec {
	specs := m.specs
	if m.cfg.MoreTools != nil {
		specs = append(slices.Clip(specs), toolSpecs(m.cfg.MoreTools())...)
	}
	return specs
}

// Skills are the skills found for a directory (GET /skill), as the model's
// system prompt lists them.
func (m *Manager) Skills(dir string) []agent.Skill {
	env := agent.NewEnv(dir, "", "", m.cfg.Clock())
	return m.projectFiles(dir, env.Worktree).skills
}
