package agent

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/opencode-server/opencode-server/config"
)

func TestResolve(t *testing.T) {
	global, project := t.TempDir(), t.TempDir()
	write(t, filepath.Join(global, "agent", "reviewer.md"), "---\ndescription: Global reviewer\nmode: subagent\n---\nGlobal prompt.\n")
	write(t, filepath.Join(project, "agents", "reviewer.md"), "---\ndescription: Reviews code\nmode: subagent\ntemperature: 0.2\ntools:\n  bash: false\n  write: false\n---\n\nYou review code.\n")
	write(t, filepath.Join(project, "agent", "docs.md"), "Write documentation.\n")
	temp := 0.7
	cfg := map[string]config.AgentConfig{
		"plan":    {Description: "My plan", Model: "stub/stub-model"},
		"general": {Disable: true},
		"ops":     {Prompt: "Run operations.", Temperature: &temp, Permission: json.RawMessage(`{"edit":"deny","bash":{"rm *":"deny"}}`)},
	}
	agents, err := Resolve(cfg, []string{global, project})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Agent{}
	var names []string
	for _, a := range agents {
		byName[a.Name] = a
		names = append(names, a.Name)
	}
	if _, ok := byName["general"]; ok {
		t.Error("a disabled agent is still there")
	}
	plan := byName["plan"]
	if plan.Description != "My plan" || plan.Model != "stub/stub-model" || !plan.Native || len(plan.Rules) != 5 {
		t.Errorf("plan = %+v", plan)
	}
	rv := byName["reviewer"]
	if rv.Description != "Reviews code" || rv.Mode != "subagent" || rv.Prompt != "You review code." || rv.Temperature == nil || *rv.Temperature != 0.2 || rv.Native {
		t.Errorf("reviewer = %+v", rv)
	}
	if !Disabled("bash", rv.Rules) || !Disabled("edit", rv.Rules) || Disabled("read", rv.Rules) {
		t.Errorf("reviewer rules %+v", rv.Rules)
	}
	docs := byName["docs"]
	if docs.Mode != "all" || docs.Prompt != "Write documentation." {
		t.Errorf("docs = %+v", docs)
	}
	ops := byName["ops"]
	if ops.Prompt != "Run operations." || *ops.Temperature != 0.7 || !Disabled("write", ops.Rules) || Disabled("bash", ops.Rules) {
		t.Errorf("ops = %+v", ops)
	}
	if len(names) != 6 { // build, plan, explore, reviewer, docs, ops
		t.Errorf("agents %v", names)
	}
	if _, err := Resolve(map[string]config.AgentConfig{"bad": {Permission: json.RawMessage(`[1]`)}}, nil); err == nil {
		t.Error("a bad permission was accepted")
	}
}
