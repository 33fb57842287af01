// Package command is OpenCode's slash commands: the built-in ones, those of
// opencode.json's "command", and markdown files in .opencode/command/ (or
// commands/) of the project and of the global config directory. A command
// is a prompt template; running it expands $ARGUMENTS and $1..$N and sends
// the result as a prompt.
package command

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/opencode"
)

// Command is one command as GET /command lists it.
type Command struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Agent       string `json:"agent,omitempty"`
	Model       string `json:"model,omitempty"`
	Source      string `json:"source"`
	Template    string `json:"template"`
	Subtask     bool   `json:"subtask,omitempty"`
	// NoSubtask: the command says subtask: false (a subagent's command
	// then runs in the session itself).
	NoSubtask bool     `json:"-"`
	Hints     []string `json:"hints"`
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
			cmd.Subtask, cmd.NoSubtask = *c.Subtask, !*c.Subtask
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
			Template: strings.TrimSpace(body), Source: "command", Subtask: meta["subtask"] == "true", NoSubtask: meta["subtask"] == "false"}
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

// argsRE splits a command's arguments as OpenCode does: "[Image N]", a
// quoted string, or a run of non-space, non-quote characters.
var argsRE = regexp.MustCompile(`(?i)(?:\[Image\s+\d+\]|"[^"]*"|'[^']*'|[^\s"']+)`)

// numbered is a $1..$N placeholder.
var numbered = regexp.MustCompile(`\$(\d+)`)

// Expand fills a template as OpenCode's command() does: $1..$N with the
// arguments (quotes group words; the highest placeholder takes the rest),
// then $ARGUMENTS with all of them as given. A template with neither gets
// the arguments appended.
func Expand(template, arguments string) string {
	var args []string
	for _, a := range argsRE.FindAllString(arguments, -1) {
		// One quote off each end, as OpenCode's quoteTrimRegex.
		a = strings.TrimPrefix(strings.TrimPrefix(a, `"`), `'`)
		a = strings.TrimSuffix(strings.TrimSuffix(a, `"`), `'`)
		args = append(args, a)
	}
	nums := numbered.FindAllStringSubmatch(template, -1)
	last := 0
	for _, m := range nums {
		n, _ := strconv.Atoi(m[1])
		last = max(last, n)
	}
	out := numbered.ReplaceAllStringFunc(template, func(m string) string {
		n, _ := strconv.Atoi(m[1:])
		switch {
		case n < 1 || n > len(args):
			return ""
		case n == last:
			return strings.Join(args[n-1:], " ")
		}
		return args[n-1]
	})
	hasArgs := strings.Contains(template, "$ARGUMENTS")
	out = strings.ReplaceAll(out, "$ARGUMENTS", arguments)
	if len(nums) == 0 && !hasArgs && strings.TrimSpace(arguments) != "" {
		out += "\n\n" + arguments
	}
	return strings.TrimSpace(out)
}

// shellRE is a template's “!`cmd` “ (OpenCode's ConfigMarkdown.shell).
var shellRE = regexp.MustCompile("!`([^`]+)`")

// RunShell replaces each “!`cmd` “ of an expanded template with what the
// command printed, run with bash in dir (OpenCode runs them before the
// prompt is sent; a command that fails still gives its output).
func RunShell(ctx context.Context, template, dir string) string {
	if !strings.Contains(template, "!`") {
		return template
	}
	return strings.TrimSpace(shellRE.ReplaceAllStringFunc(template, func(m string) string {
		cmd := exec.CommandContext(ctx, "bash", "-c", shellRE.FindStringSubmatch(m)[1])
		cmd.Dir = dir
		cmd.WaitDelay = time.Second
		// Its stdout only, as printed; a command that fails still gives
		// what it printed, one that cannot start gives nothing (OpenCode's
		// nothrow).
		out, _ := cmd.Output()
		return string(out)
	}))
}

// fileRE is an @reference in a template (OpenCode's ConfigMarkdown.files):
// not after a word character or a backtick.
var fileRE = regexp.MustCompile("(?:^|[^\\w`])@(\\.?[^\\s`,.]*(?:\\.[^\\s`,.]+)*)")

// Reference is an @name of a template: a file or directory that exists
// (Path set, absolute), else maybe an agent's name.
type Reference struct {
	Name  string
	Path  string
	IsDir bool
}

// References lists a template's @references once each, in order: paths
// relative to worktree (or ~/ for home), which exist or not.
func References(template, worktree, home string) []Reference {
	var out []Reference
	seen := map[string]bool{}
	for _, m := range fileRE.FindAllStringSubmatch(template, -1) {
		name := m[1]
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		p := filepath.Join(worktree, name)
		if strings.HasPrefix(name, "~/") {
			p = filepath.Join(home, name[2:])
		} else if filepath.IsAbs(name) {
			p = filepath.Clean(name)
		}
		ref := Reference{Name: name}
		if fi, err := os.Stat(p); err == nil {
			ref.Path, ref.IsDir = p, fi.IsDir()
		}
		out = append(out, ref)
	}
	return out
}

// Prompt is a command's prompt as OpenCode builds it: the template with
// the arguments filled in and each !`cmd` replaced by its output (run in
// dir), then a part for each @reference: a file or directory of the
// worktree (read at admission), or an agent (isAgent). newID mints part IDs.
func Prompt(ctx context.Context, template, arguments, dir, home string, isAgent func(string) bool, newID func() string) []opencode.Part {
	text := RunShell(ctx, Expand(template, arguments), dir)
	parts := []opencode.Part{{ID: newID(), Type: opencode.PartText, Text: text}}
	worktree := dir
	if wt, ok := agent.Worktree(dir); ok {
		worktree = wt
	}
	for _, ref := range References(text, worktree, home) {
		switch {
		case ref.Path == "":
			if isAgent != nil && isAgent(ref.Name) {
				parts = append(parts, opencode.Part{ID: newID(), Type: opencode.PartAgent, Name: ref.Name})
			}
		case ref.IsDir:
			parts = append(parts, opencode.Part{ID: newID(), Type: opencode.PartFile, Mime: "application/x-directory",
				URL: FileURL(ref.Path), Filename: ref.Name})
		default:
			parts = append(parts, opencode.Part{ID: newID(), Type: opencode.PartFile, Mime: "text/plain",
				URL: FileURL(ref.Path), Filename: ref.Name})
		}
	}
	return parts
}

// FileURL is path as a file:// URL (what Node's pathToFileURL gives).
func FileURL(path string) string {
	return (&url.URL{Scheme: "file", Path: path}).String()
}
