package agent

import (
	"os"
	"path/filepath"
	"strings"
)

// Instruction is one instruction file as the system prompt carries it.
type Instruction struct {
	Source  string // its absolute path
	Content string
}

// InstructionSources are where instructions come from.
type InstructionSources struct {
	// Home is the user's home directory; ConfigDir the global config
	// directory (~/.config/opencode).
	Home, ConfigDir string
	// Directory and Worktree bound the project lookup (see Env).
	Directory, Worktree string
	// Config is opencode.json's `instructions`: files, globs (relative ones
	// are looked for from Directory up to Worktree), http(s) URLs (not
	// fetched here: the server has no network; they are skipped).
	Config []string
	// NoClaude skips CLAUDE.md files (OPENCODE_DISABLE_CLAUDE_CODE_PROMPT),
	// NoProject the project's own files (OPENCODE_DISABLE_PROJECT_CONFIG).
	NoClaude, NoProject bool
}

// projectFiles are the names looked for in the project, in order: all
// hits of the first name that has any are used.
var projectFiles = []string{"AGENTS.md", "CLAUDE.md", "CONTEXT.md"}

// FindInstructions reads the instruction files in OpenCode's order: the
// global one (~/.config/opencode/AGENTS.md, else ~/.claude/CLAUDE.md), the
// project's (AGENTS.md, else CLAUDE.md, else CONTEXT.md, every hit from
// the working directory up to the work tree root, nearest first), then the
// config's `instructions`. A path is used once; empty or unreadable files
// are left out.
func FindInstructions(src InstructionSources) []Instruction {
	var paths []string
	seen := map[string]bool{}
	add := func(p string) {
		if abs, err := filepath.Abs(p); err == nil && !seen[abs] {
			seen[abs] = true
			paths = append(paths, abs)
		}
	}
	global := []string{filepath.Join(src.ConfigDir, "AGENTS.md")}
	if !src.NoClaude && src.Home != "" {
		global = append(global, filepath.Join(src.Home, ".claude", "CLAUDE.md"))
	}
	for _, p := range global {
		if isFile(p) {
			add(p)
			break
		}
	}
	if !src.NoProject {
		for _, name := range projectFiles {
			if name == "CLAUDE.md" && src.NoClaude {
				continue
			}
			hits := findUp(name, src.Directory, src.Worktree)
			for _, h := range hits {
				add(h)
			}
			if len(hits) > 0 {
				break
			}
		}
	}
	for _, entry := range src.Config {
		if strings.HasPrefix(entry, "http://") || strings.HasPrefix(entry, "https://") {
			continue
		}
		if rest, ok := strings.CutPrefix(entry, "~/"); ok && src.Home != "" {
			entry = filepath.Join(src.Home, rest)
		}
		if filepath.IsAbs(entry) {
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(entry), filepath.Base(entry)))
			for _, m := range matches {
				if isFile(m) {
					add(m)
				}
			}
			continue
		}
		dirs := []string{src.ConfigDir}
		if !src.NoProject {
			dirs = upward(src.Directory, src.Worktree)
		}
		for _, d := range dirs {
			matches, _ := filepath.Glob(filepath.Join(d, entry))
			for _, m := range matches {
				if isFile(m) {
					add(m)
				}
			}
		}
	}
	var out []Instruction
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		out = append(out, Instruction{Source: p, Content: string(b)})
	}
	return out
}

// upward lists dir and its parents up to and including stop (or the
// filesystem root if stop is not above dir), nearest first.
func upward(dir, stop string) []string {
	var out []string
	for d := filepath.Clean(dir); ; {
		out = append(out, d)
		if d == filepath.Clean(stop) {
			return out
		}
		parent := filepath.Dir(d)
		if parent == d {
			return out
		}
		d = parent
	}
}

// findUp is every file called name from dir up to stop, nearest first.
func findUp(name, dir, stop string) []string {
	var out []string
	for _, d := range upward(dir, stop) {
		if p := filepath.Join(d, name); isFile(p) {
			out = append(out, p)
		}
	}
	return out
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
