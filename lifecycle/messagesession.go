package lifecycle

import (
	"context"
	"errors"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// MessageSession returns the session that holds a message, whichever it
// is: a front door that names responses by assistant message IDs (the
// OpenAI door's continuations after client tool calls) finds their
// session by it. A message no session holds is ENotFound.
func (m *Manager) MessageSession(ctx context.Context, messageID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	sid, err := m.store.MessageSession(ctx, messageID)
	if errors.Is(err, store.ErrNotFound) {
		return "", &opencode.Error{Code: opencode.ENotFound, Message: "Message not found: " + messageID}
	}
	return sid, err
}
