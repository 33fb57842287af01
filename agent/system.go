package agent

import (
	"runtime"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/vcs"
)

// Env is where the agent runs, as the environment block tells the model.
type Env struct {
	// Directory is the session's working directory; Worktree the root of
	// its git work tree ("/" outside git, as OpenCode says).
	Directory, Worktree string
	Git                 bool
	Platform            string // runtime.GOOS
	Now                 time.Time
	ProviderID, ModelID string
}

// NewEnv describes dir for a model at time now.
func NewEnv(dir, providerID, modelID string, now time.Time) Env {
	root, git := Worktree(dir)
	return Env{Directory: dir, Worktree: root, Git: git, Platform: runtime.GOOS, Now: now,
		ProviderID: providerID, ModelID: modelID}
}

// Worktree is the root of the git work tree dir is in (vcs.Root: the
// nearest .git entry, no git run), or "/" and false outside git, as
// OpenCode tells the model.
func Worktree(dir string) (string, bool) {
	if root, ok := vcs.Root(dir); ok {
		return root, true
	}
	return "/", false
}

// block is the environment block: the model line, then <env> with
// OpenCode's five lines (two-space indent, the date as JavaScript's
// toDateString writes it).
func (e Env) block() string {
	git := "no"
	if e.Git {
		git = "yes"
	}
	return "You are powered by the model named " + e.ModelID + ". The exact model ID is " + e.ProviderID + "/" + e.ModelID + "\n" +
		"Here is some useful information about the environment you are running in:\n" +
		"<env>\n" +
		"  Working directory: " + e.Directory + "\n" +
		"  Workspace root folder: " + e.Worktree + "\n" +
		"  Is directory a git repo: " + git + "\n" +
		"  Platform: " + e.Platform + "\n" +
		"  Today's date: " + e.Now.Format("Mon Jan 02 2006") + "\n" +
		"</env>"
}

// Prompt is the system prompt of one model call.
type Prompt struct {
	// Base is the agent's own prompt, or the model's (BasePrompt).
	Base         string
	Env          Env
	Instructions []Instruction
	// Skills are listed unless the agent may not use the skill tool
	// (SkillsOff).
	Skills    []Skill
	SkillsOff bool
	// System is the latest user message's own system text (v1 `system`).
	System string
}

// String joins the sections with single newlines into the one system
// message OpenCode sends: base, environment, instruction files, skills, the
// prompt's system text.
func (p Prompt) String() string {
	parts := []string{p.Base, p.Env.block()}
	for _, in := range p.Instructions {
		parts = append(parts, "Instructions from: "+in.Source+"\n"+in.Content)
	}
	if !p.SkillsOff {
		parts = append(parts, skillsBlock(p.Skills))
	}
	if p.System != "" {
		parts = append(parts, p.System)
	}
	out := parts[:0]
	for _, s := range parts {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, "\n")
}
