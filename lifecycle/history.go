package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// StoreHistory stores msgs, user and assistant messages a client brings
// from elsewhere (an AG-UI frontend moving a chat into a new thread), as
// the end of a session's conversation: in one commit, with no turn, the
// next turn's model call reading them as the conversation before it. It
// goes through a sync replay's plan and commit (one write, the same
// checks: a message of another session is refused), and logs OpenCode's
// message.updated.1 and message.part.updated.1 for each message and part,
// so /sync/history carries the history; unlike a replay it publishes
// them. The caller gives the IDs (msg_, prt_) and the content; the core
// fills in the session, the times (a finished tool call's too), the user
// messages' agent and model (the session's) and an assistant message's
// parent, agent and finish.
// A session with a running turn is busy: the history would land inside
// the turn.
func (m *Manager) StoreHistory(ctx context.Context, sessionID string, msgs []opencode.MessageWithParts) error {
	if len(msgs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for i, mp := range msgs {
		if mp.Info.Role != opencode.User && mp.Info.Role != opencode.Assistant {
			return opencode.Errorf(opencode.EInvalid, "history message %d: role %q is not user or assistant", i, mp.Info.Role)
		}
		if err := identifier.Check(identifier.Message, mp.Info.ID); err != nil {
			return opencode.Errorf(opencode.EInvalid, "history message %d: %v", i, err)
		}
		for _, part := range mp.Parts {
			if err := identifier.Check(identifier.Part, part.ID); err != nil {
				return opencode.Errorf(opencode.EInvalid, "history message %d: %v", i, err)
			}
			if seen[part.ID] {
				return opencode.Errorf(opencode.EInvalid, "history message %d: part %s is given twice", i, part.ID)
			}
			seen[part.ID] = true
		}
		if seen[mp.Info.ID] {
			return opencode.Errorf(opencode.EInvalid, "history message %d: message %s is given twice", i, mp.Info.ID)
		}
		seen[mp.Info.ID] = true
	}
	return m.planAndCommit(ctx, sessionID, func() (*replayPlan, error) { return m.planHistory(ctx, sessionID, msgs) })
}

func (m *Manager) planHistory(ctx context.Context, id string, msgs []opencode.MessageWithParts) (*replayPlan, error) {
	rctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	sess, err := m.store.GetSession(rctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	latest, err := m.store.LastSeq(rctx, id)
	if err != nil {
		return nil, mapStoreErr(err, id)
	}
	p := &replayPlan{m: m, id: id, latest: latest, sess: sess, msgs: map[string]*planMsg{}, v1: map[string]bool{},
		ctx: rctx, publish: true, unit: "message"}
	now := m.now()
	agent := sess.Agent
	if agent == "" {
		agent = "build"
	}
	for i, in := range msgs {
		pm, err := p.message(in.Info.ID, i)
		if err != nil {
			return nil, err
		}
		if pm.mp.Info.ID != "" {
			return nil, &opencode.Error{Code: opencode.EConflict, SessionID: id, MessageID: in.Info.ID, Resource: "message",
				Message: fmt.Sprintf("Message %s is in session %s already", in.Info.ID, id)}
		}
		info := in.Info
		info.SessionID = id
		info.Time = opencode.MessageTime{Created: now}
		if info.Role == opencode.User {
			p.lastUser = info.ID
			p.unset = append(p.unset, pm)
		} else {
			if info.ParentID, err = p.parent(); err != nil {
				return nil, err
			}
			info.Agent, info.Mode = agent, agent
			info.Path = opencode.MessagePath{Cwd: sess.Directory, Root: sess.Directory}
			info.Time.Completed = &now
			info.Finish = "stop"
			for _, part := range in.Parts {
				if part.Type == opencode.PartTool {
					info.Finish = "tool-calls"
				}
			}
		}
		pm.mp.Info, pm.write = info, true
		for _, part := range in.Parts {
			part.SessionID, part.MessageID = id, info.ID
			if st := part.State; st != nil && st.Time == nil {
				c := *st
				c.Time = &opencode.ToolTime{Start: now, End: &now}
				if c.Metadata == nil {
					c.Metadata = json.RawMessage("{}")
				}
				part.State = &c
			}
			pm.putPart(part)
		}
	}
	p.finishUsers()
	for _, pm := range p.order {
		p.events = append(p.events, m.historyEvent(id, opencode.MessageUpdated{SessionID: id, Info: pm.mp.Info}))
		for _, part := range pm.mp.Parts {
			p.events = append(p.events, m.historyEvent(id, opencode.PartUpdated{SessionID: id, Part: part, Time: now}))
		}
	}
	return p, nil
}

// historyEvent is a durable v1 event of the history, as a replay logs one.
func (m *Manager) historyEvent(sessionID string, pl opencode.Payload) *opencode.Event {
	return &opencode.Event{ID: m.ids.NewEvent(), Type: pl.EventType(), Version: opencode.EventVersion(pl),
		SessionID: sessionID, Durable: true, Data: mustJSON(pl)}
}
