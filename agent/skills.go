package agent

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Skill is a SKILL.md file: instructions the model loads with the skill
// tool when a task matches its description.
type Skill struct {
	Name, Description string
	Location          string // the SKILL.md path
}

// SkillSources are where skills are looked for.
type SkillSources struct {
	Home                string
	ConfigDir           string // ~/.config/opencode
	Directory, Worktree string
	NoClaude            bool
}

// FindSkills finds the skills OpenCode finds: SKILL.md files under
// ~/.claude/skills and ~/.agents/skills, under the .claude/skills,
// .agents/skills and .opencode/{skill,skills} directories from the working
// directory up to the work tree root, and under the global config
// directory's skill and skills. A skill needs a name and a description in
// its front matter; the first of a name wins. Sorted by name.
func FindSkills(src SkillSources) []Skill {
	var roots []string
	if src.Home != "" {
		if !src.NoClaude {
			roots = append(roots, filepath.Join(src.Home, ".claude", "skills"))
		}
		roots = append(roots, filepath.Join(src.Home, ".agents", "skills"))
	}
	for _, d := range upward(src.Directory, src.Worktree) {
		if !src.NoClaude {
			roots = append(roots, filepath.Join(d, ".claude", "skills"))
		}
		roots = append(roots, filepath.Join(d, ".agents", "skills"),
			filepath.Join(d, ".opencode", "skill"), filepath.Join(d, ".opencode", "skills"))
	}
	if src.ConfigDir != "" {
		roots = append(roots, filepath.Join(src.ConfigDir, "skill"), filepath.Join(src.ConfigDir, "skills"))
	}
	byName := map[string]Skill{}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // a missing root, an unreadable directory
			}
			if d.IsDir() || d.Name() != "SKILL.md" {
				return nil
			}
			if s, ok := readSkill(p); ok {
				if _, dup := byName[s.Name]; !dup {
					byName[s.Name] = s
				}
			}
			return nil
		})
	}
	out := make([]Skill, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// readSkill reads a SKILL.md's front matter (name, description).
func readSkill(p string) (Skill, bool) {
	f, err := os.Open(p)
	if err != nil {
		return Skill{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != "---" {
		return Skill{}, false
	}
	s := Skill{Location: p}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "---" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch strings.TrimSpace(k) {
		case "name":
			s.Name = v
		case "description":
			s.Description = v
		}
	}
	return s, s.Name != "" && s.Description != ""
}

// SkillBody is a skill's instructions: the file after its front matter.
func SkillBody(s Skill) (string, error) {
	b, err := os.ReadFile(s.Location)
	if err != nil {
		return "", err
	}
	text := string(b)
	if rest, ok := strings.CutPrefix(text, "---"); ok {
		if i := strings.Index(rest, "\n---"); i >= 0 {
			text = strings.TrimLeft(rest[i+4:], "\r\n")
		}
	}
	return text, nil
}

// skillsBlock lists the skills as OpenCode's system prompt does, in an
// <available_skills> element.
func skillsBlock(skills []Skill) string {
	var b strings.Builder
	b.WriteString("Skills are instructions and workflows for particular kinds of task.\n")
	b.WriteString("When a task matches a skill's description, load that skill with the skill tool.\n")
	if len(skills) == 0 {
		b.WriteString("No skills are currently available.")
		return b.String()
	}
	b.WriteString("<available_skills>")
	for _, s := range skills {
		b.WriteString("\n  <skill>\n    <name>" + xmlEscape(s.Name) + "</name>\n    <description>" + xmlEscape(s.Description) +
			"</description>\n    <location>" + xmlEscape(s.Location) + "</location>\n  </skill>")
	}
	b.WriteString("\n</available_skills>")
	return b.String()
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
