package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEnvBlock: the model line and <env> exactly as OpenCode writes them.
func TestEnvBlock(t *testing.T) {
	e := Env{Directory: "/p/pkg", Worktree: "/p", Git: true, Platform: "linux",
		Now: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), ProviderID: "mock", ModelID: "mock-model"}
	want := "You are powered by the model named mock-model. The exact model ID is mock/mock-model\n" +
		"Here is some useful information about the environment you are running in:\n" +
		"<env>\n  Working directory: /p/pkg\n  Workspace root folder: /p\n  Is directory a git repo: yes\n" +
		"  Platform: linux\n  Today's date: Sun Nov 29 2026\n</env>"
	if got := e.block(); got != want {
		t.Errorf("env block:\n%s\nwant:\n%s", got, want)
	}
	e.Git, e.Worktree, e.Now = false, "/", time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	if got := e.block(); !strings.Contains(got, "Workspace root folder: /\n  Is directory a git repo: no") ||
		!strings.Contains(got, "Today's date: Mon Jan 05 2026") {
		t.Errorf("env block outside git:\n%s", got)
	}
}

// TestFindInstructions: global first (AGENTS.md over ~/.claude/CLAUDE.md),
// then the project's first file name with hits, nearest first, up to the
// work tree root and no further, then config entries; duplicates and
// empty files left out.
func TestFindInstructions(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	cfgDir := filepath.Join(home, ".config", "opencode")
	proj := filepath.Join(root, "proj")
	dir := filepath.Join(proj, "pkg", "sub")
	write(t, filepath.Join(cfgDir, "AGENTS.md"), "global")
	write(t, filepath.Join(home, ".claude", "CLAUDE.md"), "claude global")
	write(t, filepath.Join(root, "AGENTS.md"), "above the work tree")
	write(t, filepath.Join(proj, "AGENTS.md"), "root")
	write(t, filepath.Join(proj, "CLAUDE.md"), "claude root")
	write(t, filepath.Join(proj, "pkg", "AGENTS.md"), "pkg")
	write(t, filepath.Join(dir, "CONTEXT.md"), "context")
	write(t, filepath.Join(proj, "docs", "a.md"), "doc a")
	write(t, filepath.Join(proj, "docs", "b.md"), "doc b")
	write(t, filepath.Join(proj, "docs", "empty.md"), "  \n")
	write(t, filepath.Join(root, "abs", "x.txt"), "absolute")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	got := FindInstructions(InstructionSources{Home: home, ConfigDir: cfgDir, Directory: dir, Worktree: proj,
		Config: []string{"docs/*.md", filepath.Join(root, "abs", "*.txt"), "AGENTS.md", "https://example.com/rules.md"}})
	var names []string
	for _, in := range got {
		rel, _ := filepath.Rel(root, in.Source)
		names = append(names, rel+"="+in.Content)
	}
	want := []string{"home/.config/opencode/AGENTS.md=global", "proj/pkg/AGENTS.md=pkg", "proj/AGENTS.md=root",
		"proj/docs/a.md=doc a", "proj/docs/b.md=doc b", "abs/x.txt=absolute"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("instructions\n got %v\nwant %v", names, want)
	}
	// No AGENTS.md anywhere: CLAUDE.md; NoClaude: CONTEXT.md.
	os.Remove(filepath.Join(proj, "AGENTS.md"))
	os.Remove(filepath.Join(proj, "pkg", "AGENTS.md"))
	os.Remove(filepath.Join(cfgDir, "AGENTS.md"))
	got = FindInstructions(InstructionSources{Home: home, ConfigDir: cfgDir, Directory: dir, Worktree: proj})
	if len(got) != 2 || got[0].Content != "claude global" || got[1].Content != "claude root" {
		t.Errorf("CLAUDE.md fallback: %+v", got)
	}
	got = FindInstructions(InstructionSources{Home: home, ConfigDir: cfgDir, Directory: dir, Worktree: proj, NoClaude: true})
	if len(got) != 1 || got[0].Content != "context" {
		t.Errorf("NoClaude: %+v", got)
	}
}

// TestSkills: SKILL.md files with a name and a description, the first of a
// name wins, sorted; the block lists them, or says there are none.
func TestSkills(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	proj := filepath.Join(root, "proj")
	write(t, filepath.Join(proj, ".opencode", "skill", "review", "SKILL.md"), "---\nname: review\ndescription: Review code <carefully>\n---\nRead every line.\n")
	write(t, filepath.Join(home, ".claude", "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: \"Ship it\"\n---\nSteps.\n")
	write(t, filepath.Join(home, ".agents", "skills", "review", "SKILL.md"), "---\nname: review\ndescription: shadowed\n---\n")
	write(t, filepath.Join(proj, ".opencode", "skills", "nodesc", "SKILL.md"), "---\nname: nodesc\n---\n")
	got := FindSkills(SkillSources{Home: home, Directory: proj, Worktree: proj})
	if len(got) != 2 || got[0].Name != "deploy" || got[1].Name != "review" || got[1].Description != "shadowed" {
		t.Fatalf("skills: %+v", got)
	}
	block := skillsBlock(got)
	if !strings.Contains(block, "<available_skills>\n  <skill>\n    <name>deploy</name>\n    <description>Ship it</description>") ||
		!strings.HasSuffix(block, "</skill>\n</available_skills>") {
		t.Errorf("skills block:\n%s", block)
	}
	body, err := SkillBody(Skill{Location: filepath.Join(proj, ".opencode", "skill", "review", "SKILL.md")})
	if err != nil || body != "Read every line.\n" {
		t.Errorf("skill body %q, %v", body, err)
	}
	if b := skillsBlock(nil); !strings.HasSuffix(b, "No skills are currently available.") {
		t.Errorf("empty skills block:\n%s", b)
	}
	if !strings.Contains(skillsBlock([]Skill{{Name: "x", Description: "a<b", Location: "/l"}}), "a&lt;b") {
		t.Error("descriptions are not XML-escaped")
	}
}

// TestPromptOrder: base, environment, instruction files, skills, then the
// prompt's own system text, one newline apart.
func TestPromptOrder(t *testing.T) {
	p := Prompt{Base: "BASE\n", Env: Env{Directory: "/d", Worktree: "/", Platform: "linux", Now: time.Unix(0, 0).UTC(), ProviderID: "p", ModelID: "m"},
		Instructions: []Instruction{{"/d/AGENTS.md", "rules"}}, Skills: []Skill{{"s", "desc", "/d/s/SKILL.md"}}, System: "EXTRA"}
	s := p.String()
	order := []string{"BASE\n\nYou are powered by", "</env>\nInstructions from: /d/AGENTS.md\nrules\nSkills are", "</available_skills>\nEXTRA"}
	for _, o := range order {
		if !strings.Contains(s, o) {
			t.Errorf("system prompt lacks %q:\n%s", o, s)
		}
	}
	p.SkillsOff, p.System = true, ""
	if s := p.String(); strings.Contains(s, "skill") || !strings.HasSuffix(s, "rules") {
		t.Errorf("skills off:\n%s", s)
	}
}

// TestDisabled: a tool leaves the list only under a blanket deny that is
// the last rule for its permission.
func TestDisabled(t *testing.T) {
	plan, _ := Lookup("plan")
	explore, _ := Lookup("explore")
	base := []Rule{{"*", "*", "allow"}}
	for _, c := range []struct {
		tool  string
		rules [][]Rule
		off   bool
	}{
		{"write", [][]Rule{base, plan.Rules}, false}, // plan's edit deny is narrowed by an allow: refused per call
		{"edit", [][]Rule{base, {{"edit", "*", "deny"}}}, true},
		{"write", [][]Rule{base, {{"edit", "*", "deny"}}}, true},
		{"bash", [][]Rule{base, explore.Rules}, false},
		{"edit", [][]Rule{base, explore.Rules}, true},
		{"skill", [][]Rule{explore.Rules}, true},
		{"bash", [][]Rule{base, {{"bash", "*", "deny"}}, {{"bash", "*", "allow"}}}, false},
	} {
		if got := Disabled(c.tool, c.rules...); got != c.off {
			t.Errorf("Disabled(%s, %v) = %v, want %v", c.tool, c.rules, got, c.off)
		}
	}
}

func TestBasePrompt(t *testing.T) {
	for _, c := range []struct {
		provider, model string
		want            string
	}{
		{"openai", "gpt-4o", autonomousPrompt},
		{"openai", "o3-mini", autonomousPrompt},
		{"openai", "gpt-5.1-codex", gptPrompt},
		{"openai", "gpt-5", gptPrompt},
		{"google", "gemini-2.5-pro", geminiPrompt},
		{"anthropic", "claude-sonnet-4-5", claudePrompt},
		{"moonshotai", "k2", kimiPrompt},
		{"openrouter", "kimi-k2", kimiPrompt},
		{"stub", "mock-model", defaultPrompt},
		{"ollama", "qwen2.5-coder:7b", defaultPrompt},
	} {
		if BasePrompt(c.provider, c.model) != c.want {
			t.Errorf("BasePrompt(%s, %s) is not the expected prompt", c.provider, c.model)
		}
	}
}
