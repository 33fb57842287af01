// Package command is OpenCode's slash commands: the built-in ones, those of
// opencode.json's "command", and markdown files in .opencode/command/ (or
// commands/) of the project and of the global config directory. A command
// is a prompt template; running it expands $ARGUMENTS and $1..$N and sends
// the result as a prompt.
package command

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/opencode-server/opencode-server/config"
)

// Command is one command as GET /command lists it.
type Command struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Agent       string   `json:"agent,omitempty"`
	Model       string   `json:"model,omitempty"`
	Source      string   `json:"source"`
	Template    string   `json:"template"`
	Subtask     bool     `json:"subtask,omitempty"`
	Hints       []string `json:"hints"`
}

// builtin are OpenCode's own commands (our words for the same jobs).
var builtin = []Command{
	{Name: "init", Description: "guided AGENTS.md setup", Template: `Create or update AGENTS.md at the root of this repository: a short file of instructions for coding agents working here.

Keep only what an agent would likely get wrong without it: how to build, test and lint (exact commands, including how to run a single test), the layout of the code where it is not obvious, conventions the code follows that differ from the language's defaults, and traps (generated files, required environment, slow or flaky steps). Leave out anything a quick look at the files already tells.

Read README files, manifests, build and CI configuration and existing agent instruction files (AGENTS.md, CLAUDE.md, .cursor rules, .github/copilot-instructions.md) first. If AGENTS.md exists, improve it rather than starting over.

User's focus or constraints:
$ARGUMENTS`},
	{Name: "review", Description: "review changes [commit|branch|pr], defaults to uncommitted", Subtask: true, Template: `Review code changes and report the problems you find, most serious first: bugs, broken edge cases, security issues, missing tests, and code that does not follow the project's conventions. For each, name the file and line, say why it is wrong, and suggest a fix. Do not change any file.

What to review: $ARGUMENTS
With nothing given, review the uncommitted changes (git diff and git status). A commit hash means that commit (git show); a branch name means its difference from the default branch; a pull request number or URL means that pull request (gh pr diff).`},
}

// List returns every command available in dir: built-ins, then config
// commands, then markdown files (project files override global ones, and
// both override config and built-ins of the same name), sorted as OpenCode
// lists them (built-ins first, then by name).
func List(dir string, cfg map[string]config.CommandConfig, globalDir string) []Command {
	byName := map[string]Command{}
	for _, c := range builtin {
		c.Source = "command"
		c.Hints = Hints(c.Template)
		byName[c.Name] = c
	}
	for name, c := range cfg {
		cmd := Command{Name: name, Description: c.Description, Agent: c.Agent, Model: c.Model, Template: c.Template, Source: "command"}
		if c.Subtask != nil {
			cmd.Subtask = *c.Subtask
		}
		cmd.Hints = Hints(cmd.Template)
		byName[name] = cmd
	}
	var dirs []string
	if globalDir != "" {
		dirs = append(dirs, filepath.Join(globalDir, "command"), filepath.Join(globalDir, "commands"))
	}
	dirs = append(dirs, filepath.Join(dir, ".opencode", "command"), filepath.Join(dir, ".opencode", "commands"))
	for _, d := range dirs {
		for _, c := range readDir(d) {
			byName[c.Name] = c
		}
	}
	out := make([]Command, 0, len(byName))
	for _, c := range byName {
		out = append(out, c)
	}
	rank := func(c Command) int {
		for i, b := range builtin {
			if b.Name == c.Name {
				return i
			}
		}
		return len(builtin)
	}
	sort.Slice(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Find returns the command called name in dir.
func Find(dir string, cfg map[string]config.CommandConfig, globalDir, name string) (Command, bool) {
	for _, c := range List(dir, cfg, globalDir) {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// readDir reads the *.md commands of one directory (subdirectories give
// names like "git/commit").
func readDir(root string) []Command {
	var out []Command
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		name := strings.TrimSuffix(filepath.ToSlash(rel), ".md")
		meta, body := frontmatter(string(b))
		c := Command{Name: name, Description: meta["description"], Agent: meta["agent"], Model: meta["model"],
			Template: strings.TrimSpace(body), Source: "command", Subtask: meta["subtask"] == "true"}
		c.Hints = Hints(c.Template)
		out = append(out, c)
		return nil
	})
	return out
}

// frontmatter splits a markdown file's leading "---" block of "key: value"
// lines from its body.
func frontmatter(s string) (map[string]string, string) {
	meta := map[string]string{}
	rest, ok := strings.CutPrefix(s, "---\n")
	if !ok {
		return meta, s
	}
	head, body, ok := strings.Cut(rest, "\n---")
	if !ok {
		return meta, s
	}
	sc := bufio.NewScanner(strings.NewReader(head))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			meta[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return meta, strings.TrimPrefix(body, "\n")
}

var placeholder = regexp.MustCompile(`\$(ARGUMENTS|\d+)`)

// Hints lists the placeholders a template uses, $1..$N in order, then
// $ARGUMENTS.
func Hints(template string) []string {
	hints := []string{}
	seen := map[string]bool{}
	var nums []string
	for _, m := range placeholder.FindAllString(template, -1) {
		if seen[m] {
			continue
		}
		seen[m] = true
		if m != "$ARGUMENTS" {
			nums = append(nums, m)
		}
	}
	sort.Strings(nums)
	hints = append(hints, nums...)
	if seen["$ARGUMENTS"] {
		hints = append(hints, "$ARGUMENTS")
	}
	return hints
}

// Expand fills a template: $1..$N with the arguments split on spaces (the
// last placeholder takes the rest), $ARGUMENTS with all of them. A template
// without placeholders gets the arguments appended.
func Expand(template, arguments string) string {
	args := strings.Fields(arguments)
	last := 0
	for _, m := range placeholder.FindAllStringSubmatch(template, -1) {
		if m[1] != "ARGUMENTS" {
			n := 0
			for _, r := range m[1] {
				n = n*10 + int(r-'0')
			}
			last = max(last, n)
		}
	}
	used := false
	out := placeholder.ReplaceAllStringFunc(template, func(m string) string {
		used = true
		if m == "$ARGUMENTS" {
			return arguments
		}
		n := 0
		for _, r := range m[1:] {
			n = n*10 + int(r-'0')
		}
		switch {
		case n < 1 || n > len(args):
			return ""
		case n == last:
			return strings.Join(args[n-1:], " ")
		}
		return args[n-1]
	})
	if !used && strings.TrimSpace(arguments) != "" {
		out += "\n\n" + arguments
	}
	return strings.TrimSpace(out)
}
