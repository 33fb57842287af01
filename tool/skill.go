package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/opencode-server/opencode-server/agent"
)

// Skill loads a skill (a SKILL.md listed in the system prompt) into the
// conversation: its instructions and a sample of the files next to it.
type Skill struct {
	// Home and ConfigDir are where global skills are looked for (see
	// agent.SkillSources).
	Home, ConfigDir string
	NoClaude        bool
}

func (Skill) Name() string { return "skill" }

func (Skill) Description() string {
	return `Load a skill when the task at hand matches one of the skills listed in the system prompt (<available_skills>).

The skill's instructions are added to the conversation, with the path of its directory: scripts, references and other files it mentions are relative to that directory.

The name must be one of the listed skills.`
}

func (Skill) Parameters() json.RawMessage {
	return schema([]string{"name"}, str("name", "The name of the skill from available_skills"))
}

func (t Skill) find(c Call) (agent.Skill, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return agent.Skill{}, err
	}
	if in.Name == "" {
		return agent.Skill{}, fmt.Errorf("invalid input for tool skill: name is required")
	}
	root, _ := agent.Worktree(c.Dir)
	skills := agent.FindSkills(agent.SkillSources{Home: t.Home, ConfigDir: t.ConfigDir, Directory: c.Dir, Worktree: root, NoClaude: t.NoClaude})
	var names []string
	for _, s := range skills {
		if s.Name == in.Name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	avail := "none"
	if len(names) > 0 {
		avail = strings.Join(names, ", ")
	}
	return agent.Skill{}, fmt.Errorf("skill %q not found; available skills: %s", in.Name, avail)
}

func (t Skill) Permission(c Call) (string, []string, error) {
	s, err := t.find(c)
	if err != nil {
		return "", nil, err
	}
	return "skill", []string{s.Name}, nil
}

// skillFiles is how many of a skill's other files are listed.
const skillFiles = 10

// Run answers as OpenCode's skill tool does: the skill's content in a
// <skill_content> element with its base directory and up to ten of its
// files.
func (t Skill) Run(_ context.Context, c Call) (Result, error) {
	s, err := t.find(c)
	if err != nil {
		return Result{}, err
	}
	body, err := agent.SkillBody(s)
	if err != nil {
		return Result{}, err
	}
	dir := filepath.Dir(s.Location)
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(files) >= skillFiles {
			return filepath.SkipAll
		}
		if !d.IsDir() && p != s.Location {
			files = append(files, "<file>"+p+"</file>")
		}
		return nil
	})
	out := strings.Join([]string{
		`<skill_content name="` + s.Name + `">`,
		"# Skill: " + s.Name,
		"",
		strings.TrimSpace(body),
		"",
		"Base directory for this skill: " + dir,
		"Relative paths in this skill (e.g., scripts/, reference/) are relative to this base directory.",
		"Note: file list is sampled.",
		"",
		"<skill_files>",
		strings.Join(files, "\n"),
		"</skill_files>",
		"</skill_content>",
	}, "\n")
	return Result{Title: "Loaded skill: " + s.Name, Output: out, Metadata: map[string]any{"name": s.Name, "dir": dir}}, nil
}
