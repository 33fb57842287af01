package lifecycle

import (
	"context"
	"encoding/json"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// startShellStep opens the assistant message of a shell turn and runs the
// command as a bash tool call in it.
func (r *runner) startShellStep(command string) {
	now := r.m.now()
	tu := r.turn
	r.steps++
	st := &step{n: r.steps, shell: true, streamed: true}
	st.msg = opencode.Message{ID: r.m.ids.NewMessage(), SessionID: r.id, Role: opencode.Assistant,
		Time: opencode.MessageTime{Created: now}, ParentID: tu.parentID, ModelID: tu.model.ModelID,
		ProviderID: tu.model.ProviderID, Mode: tu.agent, Agent: tu.agent,
		Path: opencode.MessagePath{Cwd: r.sess.Directory, Root: r.sess.Directory}}
	tu.step = st
	r.outbox().message(st.msg)
	args, _ := json.Marshal(map[string]string{"command": command})
	r.toolCall(st, &provider.ToolCall{ID: "call_" + r.m.ids.NewPart()[4:], Name: "bash", Arguments: args})
}

// CommandExecuted announces that a slash command's turn ended, as OpenCode
// does after the session goes idle; messageID is the command's answer.
func (m *Manager) CommandExecuted(ctx context.Context, sessionID, name, arguments, messageID string) error {
	return m.do(ctx, sessionID, func(r *runner) {
		r.publishLive(opencode.CommandExecuted{Name: name, SessionID: sessionID, Arguments: arguments, MessageID: messageID})
	})
}

// subtaskOf is the subtask part of a batch's last input, if any: its turn
// runs the task call first (OpenCode's handleSubtask).
func subtaskOf(batch []*opencode.Input) *opencode.Part {
	if len(batch) == 0 {
		return nil
	}
	parts := batch[len(batch)-1].Parts
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Type == opencode.PartSubtask {
			return &parts[i]
		}
	}
	return nil
}

// subtaskSummarize is the synthetic user message after a command's subtask.
const subtaskSummarize = "Summarize the task tool output above and continue with your task."

// startSubtaskStep opens the assistant message of a subtask part, under
// the subagent's name, and runs the part as a task call in it.
func (r *runner) startSubtaskStep(sub opencode.Part) {
	now := r.m.now()
	tu := r.turn
	r.steps++
	st := &step{n: r.steps, shell: true, streamed: true, subtask: &sub}
	model := tu.model
	if sub.Model != nil && r.m.HasModel(sub.Model.ProviderID, sub.Model.ModelID) {
		model = *sub.Model
	}
	st.msg = opencode.Message{ID: r.m.ids.NewMessage(), SessionID: r.id, Role: opencode.Assistant,
		Time: opencode.MessageTime{Created: now}, ParentID: tu.parentID, ModelID: model.ModelID,
		ProviderID: model.ProviderID, Mode: sub.Agent, Agent: sub.Agent,
		Path: opencode.MessagePath{Cwd: r.sess.Directory, Root: r.sess.Directory}}
	tu.step = st
	r.outbox().message(st.msg)
	// The task tool's input in OpenCode's key order.
	args, _ := json.Marshal(struct {
		Prompt       string `json:"prompt"`
		Description  string `json:"description"`
		SubagentType string `json:"subagent_type"`
		Command      string `json:"command,omitempty"`
	}{sub.Prompt, sub.Description, sub.Agent, sub.Command})
	r.toolCall(st, &provider.ToolCall{ID: "call_" + r.m.ids.NewPart()[4:], Name: "task", Arguments: args})
}

// syntheticUser adds a user message of one synthetic text to the running
// turn (no input: the server wrote it), which the next model call follows.
func (r *runner) syntheticUser(t *outbox, text string, now int64) {
	tu := r.turn
	msg := opencode.Message{ID: r.m.ids.NewMessage(), SessionID: r.id, Role: opencode.User,
		Time: opencode.MessageTime{Created: now}, Agent: tu.agent,
		Model: &opencode.MessageModel{ProviderID: tu.model.ProviderID, ModelID: tu.model.ModelID}}
	p := opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: msg.ID, Type: opencode.PartText, Text: text, Synthetic: true}
	t.message(msg)
	t.part(p, now)
	tu.parentID = msg.ID
	r.remember(opencode.MessageWithParts{Info: msg, Parts: []opencode.Part{p}})
}
