package lifecycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
)

// readsDown is a store none of whose reads answer while down is set.
type readsDown struct {
	store.Store
	down atomic.Bool
}

var errReadDeadline = context.DeadlineExceeded

func (s *readsDown) fail() bool { return s.down.Load() }

func (s *readsDown) GetSession(ctx context.Context, id string) (opencode.Session, error) {
	if s.fail() {
		return opencode.Session{}, errReadDeadline
	}
	return s.Store.GetSession(ctx, id)
}

func (s *readsDown) ListSessions(ctx context.Context) ([]opencode.Session, error) {
	if s.fail() {
		return nil, errReadDeadline
	}
	return s.Store.ListSessions(ctx)
}

func (s *readsDown) ListMessages(ctx context.Context, id string) ([]opencode.MessageWithParts, error) {
	if s.fail() {
		return nil, errReadDeadline
	}
	return s.Store.ListMessages(ctx, id)
}

func (s *readsDown) GetMessage(ctx context.Context, sid, id string) (opencode.MessageWithParts, error) {
	if s.fail() {
		return opencode.MessageWithParts{}, errReadDeadline
	}
	return s.Store.GetMessage(ctx, sid, id)
}

func (s *readsDown) MessagesPage(ctx context.Context, id string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	if s.fail() {
		return nil, errReadDeadline
	}
	return s.Store.MessagesPage(ctx, id, q)
}

func (s *readsDown) GetInput(ctx context.Context, id string) (*opencode.Input, error) {
	if s.fail() {
		return nil, errReadDeadline
	}
	return s.Store.GetInput(ctx, id)
}

func (s *readsDown) Events(ctx context.Context, id string, after int64, limit int) ([]*opencode.Event, error) {
	if s.fail() {
		return nil, errReadDeadline
	}
	return s.Store.Events(ctx, id, after, limit)
}

// TestReadsOutageTyped: every exported read of the core answers a store
// outage as the core's EUnavailable, the store's error its cause, so each
// front door says "retry". Before the one mapping ListSessions, FindInput
// and Admit (its read of the message ID) let the raw error out (internal,
// where a door did not map it itself) and Input answered it as a 404.
func TestReadsOutageTyped(t *testing.T) {
	ctx := context.Background()
	st := &readsDown{Store: memory.New()}
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{}),
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	sid := identifier.NewSession()
	if _, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: sid}); err != nil {
		t.Fatal(err)
	}
	st.down.Store(true)
	defer st.down.Store(false)
	mid := identifier.NewMessage()
	for name, call := range map[string]func() error{
		"GetSession":   func() error { _, err := m.GetSession(ctx, sid); return err },
		"ListSessions": func() error { _, err := m.ListSessions(ctx); return err },
		"Messages":     func() error { _, err := m.Messages(ctx, sid); return err },
		"Message":      func() error { _, err := m.Message(ctx, sid, mid); return err },
		"MessagesPage": func() error { _, err := m.MessagesPage(ctx, sid, opencode.PageQuery{Limit: 5}); return err },
		"Events":       func() error { _, err := m.Events(ctx, sid, 0, 0); return err },
		"Input":        func() error { _, err := m.Input(ctx, sid, mid); return err },
		"FindInput":    func() error { _, err := m.FindInput(ctx, mid); return err },
		"Admit": func() error {
			_, _, err := m.Admit(ctx, &opencode.Input{ID: mid, SessionID: sid, Delivery: opencode.Queue,
				Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "hi"}}})
			return err
		},
	} {
		err := call()
		var oe *opencode.Error
		if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable || !errors.Is(err, errReadDeadline) {
			t.Errorf("%s during an outage: %v, want EUnavailable caused by the store's error", name, err)
		}
	}
}
