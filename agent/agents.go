package agent

import (
	"encoding/json"

	"github.com/opencode-server/opencode-server/config"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Rule is one permission rule, OpenCode's {permission, pattern, action}.
// Rule sets are evaluated in order and the last matching rule wins.
type Rule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     string `json:"action"` // allow, ask, deny
}

// Agent is an agent: a built-in one, or one from the config.
type Agent struct {
	Name        string
	Description string
	Mode        string // primary, subagent, all
	// Native marks the built-in agents.
	Native bool
	// Prompt replaces the model's base prompt when set.
	Prompt string
	// Model ("provider/model") is the agent's own model, used when a
	// prompt names none; Temperature and TopP its sampling settings.
	Model             string
	Temperature, TopP *float64
	// Rules apply after the server's defaults and before the config's and
	// the session's own.
	Rules []Rule
	// ACP, when set, makes it an external agent: that process produces its
	// turns, not our model loop.
	ACP *config.ACPConfig
}

// Builtin are OpenCode 1.18.33's four visible agents with the permissions
// that make them what they are: plan may not edit (except its plan files),
// general may not keep a todo list, explore may only look.
var Builtin = []Agent{
	{Name: "build", Mode: "primary", Native: true, Description: "The default agent. Executes tools based on configured permissions.",
		Rules: []Rule{{"question", "*", "allow"}, {"plan_enter", "*", "allow"}}},
	{Name: "plan", Mode: "primary", Native: true, Description: "Plan mode. Disallows all edit tools.",
		Rules: []Rule{{"question", "*", "allow"}, {"plan_exit", "*", "allow"}, {"task", "general", "deny"},
			{"edit", "*", "deny"}, {"edit", ".opencode/plans/*.md", "allow"}}},
	{Name: "general", Mode: "subagent", Native: true,
		Description: "General-purpose agent for researching complex questions and executing multi-step tasks. Use this agent to execute multiple units of work in parallel.",
		Rules:       []Rule{{"todowrite", "*", "deny"}}},
	{Name: "explore", Mode: "subagent", Native: true, Prompt: explorePrompt,
		Description: "Fast agent specialized for exploring codebases. Use this when you need to quickly find files by patterns, search code for keywords, or answer questions about the codebase.",
		Rules: []Rule{{"*", "*", "deny"}, {"grep", "*", "allow"}, {"glob", "*", "allow"}, {"list", "*", "allow"},
			{"bash", "*", "allow"}, {"webfetch", "*", "allow"}, {"websearch", "*", "allow"}, {"read", "*", "allow"}}},
}

// Lookup finds a built-in agent by name.
func Lookup(name string) (Agent, bool) {
	for _, a := range Builtin {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// PermissionOf is the permission a tool's calls need: the edit tools share
// "edit", every other tool is its own.
func PermissionOf(tool string) string {
	switch tool {
	case "edit", "write", "apply_patch", "patch":
		return "edit"
	}
	return tool
}

// Disabled reports whether a tool is left out of the model's tool list
// under rulesets, as OpenCode decides: only when the last rule matching its
// permission is a blanket deny (pattern "*"). A narrower deny keeps the
// tool in the list and refuses the call (plan's edits).
func Disabled(tool string, rulesets ...[]Rule) bool {
	perm := PermissionOf(tool)
	var last *Rule
	for _, rs := range rulesets {
		for i := range rs {
			if Wildcard(rs[i].Permission, perm) {
				last = &rs[i]
			}
		}
	}
	return last != nil && last.Pattern == "*" && last.Action == "deny"
}

var wildcardCache sync.Map // pattern -> *regexp.Regexp

// Wildcard matches s against an OpenCode wildcard pattern: `*` is any run
// of characters, `?` one character.
func Wildcard(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	if v, ok := wildcardCache.Load(pattern); ok {
		return v.(*regexp.Regexp).MatchString(s)
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString("(?s:.*)")
		case '?':
			b.WriteString("(?s:.)")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return false
	}
	wildcardCache.Store(pattern, re)
	return re.MatchString(s)
}

// ParseRules decodes a session's or config's permission rules: either
// OpenCode's rule list, or the config map form {"bash": "allow"} /
// {"bash": {"git *": "allow", "*": "ask"}}.
func ParseRules(raw json.RawMessage) ([]Rule, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []Rule
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// "*" first so specific permissions override it; then by name.
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "*") != (keys[j] == "*") {
			return keys[i] == "*"
		}
		return keys[i] < keys[j]
	})
	var out []Rule
	for _, k := range keys {
		var action string
		if json.Unmarshal(m[k], &action) == nil {
			out = append(out, Rule{Permission: k, Pattern: "*", Action: action})
			continue
		}
		var pats map[string]string
		if err := json.Unmarshal(m[k], &pats); err != nil {
			return nil, err
		}
		pk := make([]string, 0, len(pats))
		for p := range pats {
			pk = append(pk, p)
		}
		sort.Slice(pk, func(i, j int) bool { return len(pk[i]) < len(pk[j]) || len(pk[i]) == len(pk[j]) && pk[i] < pk[j] })
		for _, p := range pk {
			out = append(out, Rule{Permission: k, Pattern: p, Action: pats[p]})
		}
	}
	return out, nil
}
