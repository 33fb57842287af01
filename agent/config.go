package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/opencode-server/opencode-server/config"
)

// Resolve is the agents of a server: the built-in ones, then the agent
// markdown files of dirs (each dir's agent/ and agents/, later dirs
// overriding earlier ones; the file name is the agent's name, its front
// matter the settings, its body the prompt), then opencode.json's `agent`.
// A setting changes a built-in agent of the same name; `disable` removes
// it; a new name is a custom agent (mode "all" unless it says).
func Resolve(cfg map[string]config.AgentConfig, dirs []string) ([]Agent, error) {
	out := slices.Clone(Builtin)
	apply := func(name string, c config.AgentConfig) error {
		i := slices.IndexFunc(out, func(a Agent) bool { return a.Name == name })
		if c.Disable {
			if i >= 0 {
				out = slices.Delete(out, i, i+1)
			}
			return nil
		}
		var a Agent
		if i >= 0 {
			a = out[i]
			a.Rules = slices.Clone(a.Rules)
		} else {
			a = Agent{Name: name, Mode: "all"}
			if c.ACP != nil {
				a.Mode = "primary" // an external agent is one to talk to
			}
		}
		if c.ACP != nil {
			if c.ACP.Command == "" {
				return fmt.Errorf("agent %s: acp.command is required", name)
			}
			a.ACP = c.ACP
		}
		if c.Description != "" {
			a.Description = c.Description
		}
		if c.Mode != "" {
			a.Mode = c.Mode
		}
		if c.Prompt != "" {
			a.Prompt = c.Prompt
		}
		if c.Model != "" {
			a.Model = c.Model
		}
		if c.Temperature != nil {
			a.Temperature = c.Temperature
		}
		if c.TopP != nil {
			a.TopP = c.TopP
		}
		// tools: {"bash": false} is OpenCode's older way to deny a tool.
		tools := make([]string, 0, len(c.Tools))
		for t := range c.Tools {
			tools = append(tools, t)
		}
		slices.Sort(tools)
		for _, t := range tools {
			action := "deny"
			if c.Tools[t] {
				action = "allow"
			}
			a.Rules = append(a.Rules, Rule{Permission: PermissionOf(t), Pattern: "*", Action: action})
		}
		rules, err := ParseRules(c.Permission)
		if err != nil {
			return fmt.Errorf("agent %s: permission: %w", name, err)
		}
		a.Rules = append(a.Rules, rules...)
		if i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
		return nil
	}
	for _, dir := range dirs {
		for _, sub := range []string{"agent", "agents"} {
			files, _ := filepath.Glob(filepath.Join(dir, sub, "*.md"))
			slices.Sort(files)
			for _, f := range files {
				c, err := readAgentFile(f)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
				if err := apply(strings.TrimSuffix(filepath.Base(f), ".md"), c); err != nil {
					return nil, err
				}
			}
		}
	}
	names := make([]string, 0, len(cfg))
	for n := range cfg {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := apply(n, cfg[n]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readAgentFile reads an agent markdown file: YAML front matter between
// "---" lines (the fields of agent.<name>), then the prompt.
func readAgentFile(path string) (config.AgentConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return config.AgentConfig{}, err
	}
	text := string(b)
	var front, body string
	if rest, ok := strings.CutPrefix(text, "---"); ok {
		sc := bufio.NewScanner(strings.NewReader(rest))
		sc.Buffer(make([]byte, 64<<10), len(rest)+1)
		var fm []string
		off := 0
		for sc.Scan() {
			line := sc.Text()
			off += len(line) + 1
			if strings.TrimSpace(line) == "---" && len(fm) > 0 {
				break
			}
			fm = append(fm, line)
		}
		front, body = strings.Join(fm, "\n"), rest[min(off, len(rest)):]
	} else {
		body = text
	}
	var c config.AgentConfig
	if strings.TrimSpace(front) != "" {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(front), &m); err != nil {
			return c, fmt.Errorf("front matter: %w", err)
		}
		j, err := json.Marshal(m)
		if err != nil {
			return c, fmt.Errorf("front matter: %w", err)
		}
		if err := json.Unmarshal(j, &c); err != nil {
			return c, fmt.Errorf("front matter: %w", err)
		}
	}
	if p := strings.TrimSpace(body); p != "" {
		c.Prompt = p
	}
	return c, nil
}

// ProjectConfigDirs are the .opencode directories that apply to dir: from
// the root of its work tree down to dir itself (nearer ones later, so they
// override).
func ProjectConfigDirs(dir string) []string {
	root, _ := Worktree(dir)
	up := upward(dir, root)
	out := make([]string, 0, len(up))
	for i := len(up) - 1; i >= 0; i-- {
		out = append(out, filepath.Join(up[i], ".opencode"))
	}
	return out
}
