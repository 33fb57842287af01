package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
)

// Subtask is a task call as the lifecycle runs it: a child session of the
// calling one, its own agent, one prompt.
type Subtask struct {
	Description, Prompt, Agent string
	// TaskID resumes an earlier task's child session.
	TaskID string
}

// SubtaskResult is a finished subtask: its child session and the text of
// the subagent's last answer.
type SubtaskResult struct {
	SessionID string
	Text      string
	Metadata  map[string]any
}

// Subagent is an agent the task tool can start.
type Subagent struct{ Name, Description string }

// Task runs a subagent in a child session and returns its final answer
// (Call.Subtask does the running).
type Task struct {
	// Subagents are listed in the description.
	Subagents []Subagent
}

func (Task) Name() string { return "task" }

func (t Task) Description() string {
	var b strings.Builder
	b.WriteString(`Start a subagent that works on a task on its own, in a session of its own, and returns its final answer.

When to use it:
- Open-ended searches and research that would take many rounds of glob, grep and read.
- Independent pieces of work that can run side by side: start several tasks in one message.

When not to use it:
- Reading a known file, or searching for a specific symbol in two or three files: do that yourself.

Usage:
- description is a short (3-5 words) summary shown to the user; prompt is the complete task: the subagent sees nothing of this conversation, so say exactly what to do and what to report back.
- The subagent's answer is not shown to the user: summarize what matters for them.
- To continue an earlier task in the same subagent session, pass its task_id.
- Trust the subagent's answer, and say in the prompt whether it should only research or also change code.`)
	if len(t.Subagents) > 0 {
		b.WriteString("\n\nAvailable agent types and the tools they have access to:")
		for _, a := range t.Subagents {
			b.WriteString("\n- " + a.Name + ": " + a.Description)
		}
	}
	return b.String()
}

func (Task) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` +
		`"description":{"type":"string","description":"A short (3-5 words) description of the task"},` +
		`"prompt":{"type":"string","description":"The task for the agent to perform"},` +
		`"subagent_type":{"type":"string","description":"The type of specialized agent to use for this task"},` +
		`"task_id":{"type":"string","description":"This should only be set if you mean to resume a previous task (you can pass a prior task_id and the task will continue the same subagent session as before instead of creating a fresh one)"},` +
		`"command":{"type":"string","description":"The command that triggered this task"}},` +
		`"required":["description","prompt","subagent_type"]}`)
}

func (t Task) input(c Call) (Subtask, error) {
	var in struct {
		Description  string `json:"description"`
		Prompt       string `json:"prompt"`
		SubagentType string `json:"subagent_type"`
		TaskID       string `json:"task_id"`
	}
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return Subtask{}, err
	}
	if in.Description == "" || in.Prompt == "" || in.SubagentType == "" {
		return Subtask{}, errors.New("invalid input for tool task: description, prompt and subagent_type are required")
	}
	return Subtask{Description: in.Description, Prompt: in.Prompt, Agent: in.SubagentType, TaskID: in.TaskID}, nil
}

// Permission: "task", per subagent (plan may not start general).
func (t Task) Permission(c Call) (string, []string, error) {
	in, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "task", []string{in.Agent}, nil
}

// Run starts the subtask and answers as OpenCode does:
// <task id="ses_…" state="completed"><task_result>…</task_result></task>.
func (t Task) Run(ctx context.Context, c Call) (Result, error) {
	in, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	if c.Subtask == nil {
		return Result{}, errors.New("subagents cannot run here")
	}
	res, err := c.Subtask(ctx, in)
	if err != nil {
		return Result{}, err
	}
	out := strings.Join([]string{`<task id="` + res.SessionID + `" state="completed">`, "<task_result>", res.Text,
		"</task_result>", "</task>"}, "\n")
	return Result{Title: in.Description, Output: out, Metadata: res.Metadata}, nil
}
