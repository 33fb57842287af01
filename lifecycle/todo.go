package lifecycle

import (
	"context"
	"encoding/json"

	"github.com/opencode-server/opencode-server/opencode"
)

// todosOf is the todo list of a todowrite call's input.
func todosOf(input json.RawMessage) []opencode.Todo {
	var in struct {
		Todos []opencode.Todo `json:"todos"`
	}
	_ = json.Unmarshal(input, &in)
	if in.Todos == nil {
		return []opencode.Todo{}
	}
	return in.Todos
}

// setTodos takes a completed todowrite call's list as the session's, and
// announces it (todo.updated, after the commit that stores the call).
func (r *runner) setTodos(t *outbox, input json.RawMessage) {
	r.todos = todosOf(input)
	t.live(opencode.TodoUpdated{SessionID: r.id, Todos: r.todos})
}

// Todos is GET /session/{id}/todo: the session's todo list, from its
// latest todowrite call ([] when it has none).
func (m *Manager) Todos(ctx context.Context, sessionID string) ([]opencode.Todo, error) {
	var out []opencode.Todo
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) {
		if err = r.ensureHistory(); err == nil {
			out = append([]opencode.Todo{}, r.todos...)
		}
	})
	if derr != nil {
		return nil, derr
	}
	return out, err
}
