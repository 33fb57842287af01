package lifecycle

import "github.com/opencode-server/opencode-server/opencode"

// PublishLive puts a live event that belongs to no session (the TUI
// control routes' tui.* events) on this instance's bus and, in a cluster,
// on every other live instance's, so a TUI attached to any instance sees
// it. Nothing is stored: e must not be durable nor name a session.
func (m *Manager) PublishLive(e *opencode.Event) {
	if e.Durable || e.SessionID != "" {
		panic("lifecycle: PublishLive of a durable or session event " + e.Type)
	}
	m.publish(e)
}
