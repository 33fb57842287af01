// Package agent is what the model is told: the built-in agents (build,
// plan, general, explore) with their prompts and permission rules, and the
// system prompt of a turn as OpenCode 1.18.33 assembles it for the v1
// routes — a base prompt (the agent's own, else the model's), the
// environment block, the instruction files (AGENTS.md and friends, config
// `instructions`), the available skills, and the prompt's own `system`
// text, joined by newlines into one system message.
//
// The structure, the section headers and the lookup rules follow OpenCode
// (facts carry over); the prose of the prompts is ours.
package agent
