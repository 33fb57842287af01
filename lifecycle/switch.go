package lifecycle

import (
	"context"

	"github.com/opencode-server/opencode-server/opencode"
)

// SwitchAgent makes agent the session's agent for its next turns, with a
// session.next.agent.switched record (messageID names it), as OpenCode
// logs every switch.
func (m *Manager) SwitchAgent(ctx context.Context, sessionID, messageID, agent string) error {
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) {
		now := r.m.now()
		s := r.sess
		s.Agent = agent
		s.Time.Updated = now
		t := r.outbox()
		t.durable(opencode.AgentSwitched{InputHeader: r.inputHeader(now, messageID), Agent: agent})
		_, err = r.saveSession(t, s)
	})
	if derr != nil {
		return derr
	}
	return err
}

// SwitchModel makes model the session's model for its next turns; the same
// model again changes nothing.
func (m *Manager) SwitchModel(ctx context.Context, sessionID, messageID string, model opencode.ModelRef) error {
	var err error
	derr := m.do(ctx, sessionID, func(r *runner) {
		variant := func(v string) string {
			if v == "" {
				return "default"
			}
			return v
		}
		if cur := r.sess.Model; cur != nil && cur.ID == model.ID && cur.ProviderID == model.ProviderID &&
			variant(cur.Variant) == variant(model.Variant) {
			return
		}
		now := r.m.now()
		s := r.sess
		s.Model = &opencode.ModelRef{ID: model.ID, ProviderID: model.ProviderID}
		s.Time.Updated = now
		t := r.outbox()
		t.durable(opencode.ModelSwitched{InputHeader: r.inputHeader(now, messageID),
			Model: opencode.ModelRef{ID: model.ID, ProviderID: model.ProviderID, Variant: model.Variant}})
		_, err = r.saveSession(t, s)
	})
	if derr != nil {
		return derr
	}
	return err
}
