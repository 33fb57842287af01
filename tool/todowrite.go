package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// TodoWrite replaces the session's todo list. The tool only checks and
// echoes the list; lifecycle keeps it (the session's latest list), answers
// GET /session/{id}/todo and publishes todo.updated, as OpenCode does.
type TodoWrite struct{}

func (TodoWrite) Name() string { return "todowrite" }

func (TodoWrite) Description() string {
	return `Keep a structured todo list for the current session: it organizes multi-step work and shows the user your progress.

When to use it:
- The task needs three or more distinct steps, or the user gave a list of things to do.
- The work is non-trivial and benefits from planning, or the user asks for a todo list.
- New instructions arrive mid-task: add them as todos.
- When you start a task, mark it in_progress (ideally one at a time); when you finish it, mark it completed right away, and add follow-up tasks you discovered.

Skip it for a single straightforward task, or a purely informational question.

Each call sends the whole list: every todo with its content, status (pending, in_progress, completed, cancelled) and priority (high, medium, low). Mark a task completed only when it is fully done; if you are blocked, keep it in_progress and add a todo for what is blocking.`
}

func (TodoWrite) Parameters() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"todos":{"type":"array","items":{"type":"object","properties":{` +
		`"content":{"type":"string","description":"Brief description of the task"},` +
		`"status":{"type":"string","description":"Current status of the task: pending, in_progress, completed, cancelled"},` +
		`"priority":{"type":"string","description":"Priority level of the task: high, medium, low"}},` +
		`"required":["content","status","priority"]},"description":"The updated todo list"}},"required":["todos"]}`)
}

func (t TodoWrite) input(c Call) ([]opencode.Todo, error) {
	var in struct {
		Todos *[]opencode.Todo `json:"todos"`
	}
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return nil, err
	}
	if in.Todos == nil {
		return nil, fmt.Errorf("invalid input for tool todowrite: todos is required")
	}
	for i, td := range *in.Todos {
		var missing []string
		for k, v := range map[string]string{"content": td.Content, "status": td.Status, "priority": td.Priority} {
			if v == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("invalid input for tool todowrite: todos[%d] needs %s", i, strings.Join(missing, ", "))
		}
	}
	return *in.Todos, nil
}

func (t TodoWrite) Permission(c Call) (string, []string, error) {
	if _, err := t.input(c); err != nil {
		return "", nil, err
	}
	return "todowrite", []string{"*"}, nil
}

// Run answers with the list as OpenCode does: the count of unfinished todos
// as title, the list as indented JSON, and the list in the metadata.
func (t TodoWrite) Run(_ context.Context, c Call) (Result, error) {
	todos, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	open := 0
	for _, td := range todos {
		if td.Status != "completed" {
			open++
		}
	}
	out, _ := json.MarshalIndent(todos, "", "  ")
	if len(todos) == 0 {
		out = []byte("[]")
	}
	return Result{Title: fmt.Sprintf("%d todos", open), Output: string(out), Metadata: map[string]any{"todos": todos}}, nil
}
