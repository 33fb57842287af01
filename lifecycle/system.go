package lifecycle

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"slices"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/tool"
)

// systemFor returns the builder of a step's system prompt (see package
// agent). It reads the project's instruction and skill files, so the model
// call's goroutine runs it, off the runner and overlapping the step's
// commit; everything it needs is captured now.
func (r *runner) systemFor(tu *turn) func() string {
	a, _ := r.m.agent(tu.agent)
	base := a.Prompt
	if base == "" {
		base = agent.BasePrompt(tu.model.ProviderID, tu.model.ModelID)
	}
	var userSystem string
	if n := len(tu.users); n > 0 {
		userSystem = tu.users[n-1].System
	}
	// As in OpenCode, only the agent's own rules decide whether skills are
	// listed.
	skillsOff := agent.Disabled("skill", a.Rules)
	m := r.m
	dir, pid, mid, now := r.sess.Directory, tu.model.ProviderID, tu.model.ModelID, m.cfg.Clock()
	return func() string {
		env := agent.NewEnv(dir, pid, mid, now)
		found := m.projectFiles(dir, env.Worktree)
		p := agent.Prompt{Base: base, Env: env, System: userSystem, SkillsOff: skillsOff, Instructions: found.instructions}
		if !skillsOff {
			p.Skills = found.skills
		}
		return p.String()
	}
}

// filesTTL is how long the instruction and skill files found for a
// directory are reused: a step reads them again once it has passed, so an
// edited AGENTS.md reaches the model within it, and a burst of steps does
// not walk the tree each time.
const filesTTL = 2 * time.Second

// foundFiles are a directory's instruction files and skills.
type foundFiles struct {
	at           time.Time
	instructions []agent.Instruction
	skills       []agent.Skill
}

// projectFiles finds (or reuses, within filesTTL) dir's instruction files
// and skills. Safe for concurrent use (model call goroutines).
func (m *Manager) projectFiles(dir, worktree string) foundFiles {
	m.filesMu.Lock()
	f, ok := m.files[dir]
	m.filesMu.Unlock()
	if ok && time.Since(f.at) < filesTTL {
		return f
	}
	cfg := m.cfg
	f = foundFiles{at: time.Now(),
		instructions: agent.FindInstructions(agent.InstructionSources{Home: cfg.Home, ConfigDir: cfg.ConfigDir,
			Directory: dir, Worktree: worktree, Config: cfg.Instructions, NoClaude: cfg.NoClaude, NoProject: cfg.NoProject}),
		skills: agent.FindSkills(agent.SkillSources{Home: cfg.Home, ConfigDir: cfg.ConfigDir, Directory: dir,
			Worktree: worktree, NoClaude: cfg.NoClaude})}
	m.filesMu.Lock()
	if m.files == nil {
		m.files = map[string]foundFiles{}
	}
	m.files[dir] = f
	m.filesMu.Unlock()
	return f
}

// rulesets are the permission rules of a call in the running turn, in
// OpenCode's order: the defaults, the agent's, the config's, the
// session's, then the "always" answers given in this session.
func (r *runner) rulesets() [][]Rule {
	var agentRules []Rule
	if r.turn != nil {
		if a, ok := r.m.agent(r.turn.agent); ok {
			agentRules = a.Rules
		}
	}
	sessionRules, _ := ParseRules(r.sess.Permission)
	return [][]Rule{DefaultRules, agentRules, r.m.cfg.Rules, sessionRules, r.approved}
}

// toolsFor is the tool list of a step: the tools the turn's rules do not
// deny outright (agent.Disabled), less those the latest prompt switched
// off (the v1 `tools` map). As OpenCode, a GPT model gets apply_patch
// instead of edit and write (usesApplyPatch).
func (r *runner) toolsFor(tu *turn) []provider.ToolSpec {
	var off map[string]bool
	if n := len(tu.users); n > 0 {
		off = tu.users[n-1].Tools
	}
	rulesets := r.rulesets()
	specs := r.m.specs
	if r.m.cfg.MoreTools != nil {
		specs = append(slices.Clip(specs), toolSpecs(r.m.cfg.MoreTools())...)
	}
	patch := usesApplyPatch(tu.model.ModelID)
	out := make([]provider.ToolSpec, 0, len(specs))
	for _, s := range specs {
		if s.Name == "apply_patch" && !patch || (s.Name == "edit" || s.Name == "write") && patch {
			continue
		}
		if on, set := off[s.Name]; set && !on {
			continue
		}
		if agent.Disabled(s.Name, rulesets...) {
			continue
		}
		if s.Name == "task" {
			// The subagents this agent may start, as OpenCode lists them.
			s.Description = tool.Task{Subagents: r.subagentsFor(rulesets)}.Description()
		}
		out = append(out, s)
	}
	// By name, as OpenCode sends them (MCP tools among the others).
	slices.SortFunc(out, func(a, b provider.ToolSpec) int { return strings.Compare(a.Name, b.Name) })
	// The client's tools after the server's, as the client listed them.
	return append(out, clientSpecs(tu.clientTools, specs)...)
}

// usesApplyPatch reports whether a model edits files with apply_patch
// rather than edit and write, as OpenCode's ToolRegistry.tools decides: a
// GPT model ("gpt-" in its ID) other than gpt-4* and the gpt-oss ones.
func usesApplyPatch(modelID string) bool {
	return strings.Contains(modelID, "gpt-") && !strings.Contains(modelID, "oss") && !strings.Contains(modelID, "gpt-4")
}

// reminderFor is the reminder the step adds to the last user message: plan
// mode's, or, once a session that used plan is back in build, the switch.
func (r *runner) reminderFor(tu *turn) string {
	switch {
	case tu.agent == "plan":
		return agent.PlanReminder
	case tu.agent == "build" && r.usedPlan:
		return agent.BuildSwitchReminder
	}
	return ""
}

// withReminder is msgs with reminder appended to the last user message,
// as a synthetic text the conversation does not keep.
func withReminder(msgs []provider.Message, reminder string) []provider.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			out := slices.Clone(msgs)
			m := out[i]
			// A synthetic text part of its own, after the message's parts.
			if m.Parts == nil {
				m.Parts = []provider.Part{{Type: provider.PartText, Text: m.Content}}
			}
			m.Parts = append(slices.Clip(m.Parts), provider.Part{Type: provider.PartText, Text: reminder})
			m.Content, m.Memo = "", nil
			out[i] = m
			return out
		}
	}
	return msgs
}

// agentModel is an agent's own model, if it has one the server serves.
func (r *runner) agentModel(name string) (opencode.MessageModel, bool) {
	a, ok := r.m.agent(name)
	if !ok || a.Model == "" {
		return opencode.MessageModel{}, false
	}
	pid, mid, ok := strings.Cut(a.Model, "/")
	if !ok || !r.m.HasModel(pid, mid) {
		return opencode.MessageModel{}, false
	}
	return opencode.MessageModel{ProviderID: pid, ModelID: mid}, true
}

// toolsPermission is a v1 tools map as session permission rules: allow or
// deny per tool (the edit tools share "edit").
func toolsPermission(tools map[string]bool) json.RawMessage {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	rules := make([]Rule, 0, len(names))
	for _, n := range names {
		action := "deny"
		if tools[n] {
			action = "allow"
		}
		rules = append(rules, Rule{Permission: agent.PermissionOf(n), Pattern: "*", Action: action})
	}
	b, _ := json.Marshal(rules)
	return b
}

// subagentsFor are the subagents the turn's rules let the task tool start
// (plan may not start general), for the task tool's description.
func (r *runner) subagentsFor(rulesets [][]Rule) []tool.Subagent {
	var out []tool.Subagent
	for _, a := range r.m.cfg.Agents {
		if a.Mode == "primary" || evaluate(rulesets, "task", a.Name) == "deny" {
			continue
		}
		out = append(out, tool.Subagent{Name: a.Name, Description: a.Description})
	}
	return out
}
