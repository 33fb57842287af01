package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// subtaskFunc is the tool.Call.Subtask of a task call in the running turn:
// it runs the subagent in a child session (see runSubtask).
func (r *runner) subtaskFunc(progress func(map[string]any)) func(context.Context, tool.Subtask) (tool.SubtaskResult, error) {
	parent := r.sess
	model := r.turn.model
	return func(ctx context.Context, t tool.Subtask) (tool.SubtaskResult, error) {
		return r.m.runSubtask(ctx, parent, model, t, progress)
	}
}

// runSubtask runs a task call as OpenCode does: a child session of the
// caller (parentID; title "DESCRIPTION (@AGENT subagent)"; the caller's
// denials plus todowrite and task denied, so a subagent neither keeps the
// parent's todo list nor starts subagents of its own), or the earlier one
// task_id names; the tool part's metadata names the child at once, so
// clients can follow it; one prompt with the subagent's agent and the
// caller's model; its events stream like any session's. The answer is the
// text of the subagent's last message. Aborting the caller aborts it.
func (m *Manager) runSubtask(ctx context.Context, parent opencode.Session, model opencode.MessageModel, t tool.Subtask,
	progress func(map[string]any)) (tool.SubtaskResult, error) {
	a, ok := m.agent(t.Agent)
	if !ok || a.Mode == "primary" {
		return tool.SubtaskResult{}, fmt.Errorf("Unknown agent type: %s is not a valid agent type", t.Agent)
	}
	var child opencode.Session
	if t.TaskID != "" {
		if s, err := m.GetSession(ctx, t.TaskID); err == nil && s.ParentID == parent.ID {
			child = s
		}
	}
	if child.ID == "" {
		rules := childRules(parent, a)
		perm, _ := json.Marshal(rules)
		var err error
		child, _, err = m.CreateSession(context.WithoutCancel(ctx), opencode.SessionOptions{ID: m.ids.NewSession(), Minted: true,
			ParentID: parent.ID, Title: t.Description + " (@" + a.Name + " subagent)", Agent: a.Name,
			Directory: parent.Directory, Permission: perm})
		if err != nil {
			return tool.SubtaskResult{}, err
		}
	}
	meta := map[string]any{"parentSessionId": parent.ID, "sessionId": child.ID,
		"model": map[string]any{"modelID": model.ModelID, "providerID": model.ProviderID}}
	if progress != nil {
		progress(meta)
	}
	in := &opencode.Input{ID: m.ids.NewMessage(), Minted: true, SessionID: child.ID, Delivery: opencode.Queue,
		Agent: a.Name, Model: &model, Parts: []opencode.Part{{ID: m.ids.NewPart(), Type: opencode.PartText, Text: t.Prompt}}}
	if _, _, err := m.Admit(context.WithoutCancel(ctx), in); err != nil {
		return tool.SubtaskResult{}, err
	}
	res, err := m.Wait(ctx, child.ID, in.ID)
	if ctx.Err() != nil {
		_ = m.Abort(context.WithoutCancel(ctx), child.ID)
		return tool.SubtaskResult{}, ctx.Err()
	}
	if err != nil {
		return tool.SubtaskResult{}, fmt.Errorf("Subagent failed (task_id: %s): %w", child.ID, err)
	}
	msg := res.Message
	if msg.Info.Error != nil {
		text, _ := msg.Info.Error.Data["message"].(string)
		if text == "" {
			text = msg.Info.Error.Name
		}
		return tool.SubtaskResult{}, fmt.Errorf("Subagent failed (task_id: %s): %s", child.ID, text)
	}
	out := tool.SubtaskResult{SessionID: child.ID, Metadata: meta}
	for i := len(msg.Parts) - 1; i >= 0; i-- {
		if msg.Parts[i].Type == opencode.PartText {
			out.Text = msg.Parts[i].Text
			break
		}
	}
	return out, nil
}

// childRules are a subagent session's own rules: the caller session's
// denials, then todowrite and task denied unless the subagent's rules say
// otherwise.
func childRules(parent opencode.Session, a agent.Agent) []Rule {
	parentRules, _ := ParseRules(parent.Permission)
	var out []Rule
	for _, r := range parentRules {
		if r.Action == "deny" || r.Permission == "external_directory" {
			out = append(out, r)
		}
	}
	mentions := func(p string) bool {
		return slices.ContainsFunc(a.Rules, func(r Rule) bool { return r.Permission == p })
	}
	for _, p := range []string{"todowrite", "task"} {
		if !mentions(p) {
			out = append(out, Rule{Permission: p, Pattern: "*", Action: "deny"})
		}
	}
	return out
}
