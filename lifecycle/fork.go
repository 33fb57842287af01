package lifecycle

import (
	"context"
	"regexp"
	"slices"
	"strconv"

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
// times), assistant parents remapped, the session's agent kept. Files are
// not touched.
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
	id := m.ids.NewSession()
	s := opencode.Session{ID: id, Slug: slug(id), ProjectID: src.ProjectID, WorkspaceID: src.WorkspaceID, Directory: src.Directory, Path: src.Path,
		Title: forkTitle(src.Title), Version: opencode.Version, Time: opencode.SessionTime{Created: now, Updated: now},
		// The fork keeps its source's agent. An external agent's session
		// (in Metadata) is not copied: the fork's first turn opens a new
		// one with session/new, and the agent gets none of the history.
		Agent: src.Agent}
	b := &store.Batch{Session: &s, CreateOnly: true}
	newID := map[string]string{}
	var events []*opencode.Event
	for _, mp := range msgs {
		info := mp.Info
		newID[info.ID] = m.ids.NewMessage()
		info.ID, info.SessionID = newID[info.ID], id
		if info.ParentID != "" {
			info.ParentID = newID[info.ParentID]
		}
		b.Messages = append(b.Messages, info)
		events = append(events, m.liveEvent(id, s.Directory, opencode.MessageUpdated{SessionID: id, Info: info}))
		for _, p := range mp.Parts {
			p.ID, p.SessionID, p.MessageID = m.ids.NewPart(), id, info.ID
			b.Parts = append(b.Parts, p)
			events = append(events, m.liveEvent(id, s.Directory, opencode.PartUpdated{SessionID: id, Part: p, Time: now}))
		}
	}
	if err := m.store.Commit(ctx, id, b); err != nil {
		return opencode.Session{}, mapStoreErr(err, id)
	}
	m.publish(m.liveEvent(id, s.Directory, opencode.SessionCreated{SessionID: id, Info: s}))
	for _, e := range events {
		m.publish(e)
	}
	return s, nil
}
