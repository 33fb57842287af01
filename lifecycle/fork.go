package lifecycle

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

var forkSuffix = regexp.MustCompile(`^(.*) \(fork #(\d+)\)$`)

// forkTitle is OpenCode's: "<title> (fork #1)", a fork of a fork counts on.
func forkTitle(title string) string {
	if m := forkSuffix.FindStringSubmatch(title); m != nil {
		n, _ := strconv.Atoi(m[2])
		return m[1] + " (fork #" + strconv.Itoa(n+1) + ")"
	}
	return title + " (fork #1)"
}

// Fork copies a session into a new one: its messages before messageID (all
// of them when messageID is "" or not in the session), each message and
// part under a new ID of its own (they are new messages, with the original
// times), assistant parents remapped. Files are not touched.
func (m *Manager) Fork(ctx context.Context, sessionID, messageID string) (opencode.Session, error) {
	src, err := m.store.GetSession(ctx, sessionID)
	if err != nil {
		return opencode.Session{}, mapStoreErr(err, sessionID)
	}
	msgs, err := m.store.ListMessages(ctx, sessionID)
	if err != nil {
		return opencode.Session{}, mapStoreErr(err, sessionID)
	}
	if i := slices.IndexFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.ID == messageID }); i >= 0 {
		msgs = msgs[:i]
	}
	now := m.now()
	id := identifier.NewSession()
	s := opencode.Session{ID: id, Slug: slug(id), ProjectID: src.ProjectID, Directory: src.Directory, Path: src.Path,
		Title: forkTitle(src.Title), Version: opencode.Version, Time: opencode.SessionTime{Created: now, Updated: now}}
	b := &store.Batch{Session: &s, CreateOnly: true}
	newID := map[string]string{}
	var events []*opencode.Event
	for _, mp := range msgs {
		info := mp.Info
		newID[info.ID] = identifier.NewMessage()
		info.ID, info.SessionID = newID[info.ID], id
		if info.ParentID != "" {
			info.ParentID = newID[info.ParentID]
		}
		b.Messages = append(b.Messages, info)
		events = append(events, liveEvent(id, s.Directory, opencode.EvMessageUpdated, map[string]any{"sessionID": id, "info": info}))
		for _, p := range mp.Parts {
			p.ID, p.SessionID, p.MessageID = identifier.NewPart(), id, info.ID
			b.Parts = append(b.Parts, p)
			events = append(events, liveEvent(id, s.Directory, opencode.EvPartUpdated, map[string]any{"sessionID": id, "part": p, "time": now}))
		}
	}
	if err := m.store.Commit(ctx, id, b); err != nil {
		return opencode.Session{}, mapStoreErr(err, id)
	}
	m.publish(liveEvent(id, s.Directory, opencode.EvSessionCreated, map[string]any{"sessionID": id, "info": s}))
	for _, e := range events {
		m.publish(e)
	}
	return s, nil
}

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
		t := r.tx()
		t.durable(opencode.EvAgentSwitched, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": messageID, "agent": agent})
		t.session(s)
		if _, err = t.flush(); err == nil {
			r.sess = s
		}
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
		wire := map[string]any{"id": model.ID, "providerID": model.ProviderID}
		if model.Variant != "" {
			wire["variant"] = model.Variant
		}
		t := r.tx()
		t.durable(opencode.EvModelSwitched, 1, map[string]any{"timestamp": now, "sessionID": r.id,
			"messageID": messageID, "model": wire})
		t.session(s)
		if _, err = t.flush(); err == nil {
			r.sess = s
		}
	})
	if derr != nil {
		return derr
	}
	return err
}

// PageQuery selects a page of messages (store.PageQuery).
type PageQuery = store.PageQuery

// MessagesPage reads one page of a session's messages (see
// store.MessagesPage); an unknown anchor is an EInvalid error.
func (m *Manager) MessagesPage(ctx context.Context, sessionID string, q PageQuery) ([]opencode.MessageWithParts, error) {
	if _, err := m.GetSession(ctx, sessionID); err != nil {
		return nil, err
	}
	page, err := m.store.MessagesPage(ctx, sessionID, q)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &opencode.Error{Code: opencode.EInvalid, Message: "Invalid cursor: no message " + q.Anchor + " in this session"}
	}
	return page, err
}
