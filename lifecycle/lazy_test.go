package lifecycle_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
)

// countingStore counts whole-history reads.
type countingStore struct {
	store.Store
	lists atomic.Int64
}

func (c *countingStore) ListMessages(ctx context.Context, id string) ([]opencode.MessageWithParts, error) {
	c.lists.Add(1)
	return c.Store.ListMessages(ctx, id)
}

// TestColdCommandsSkipHistory: a runner rebuilt for a session with nothing
// to resume does not read its history for an inbox listing or an abort; the
// next turn reads it, and the model sees the whole conversation.
func TestColdCommandsSkipHistory(t *testing.T) {
	st := &countingStore{Store: memory.New()}
	model := scripted.New(scripted.Config{Record: true})
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: model,
		ProviderID: scripted.ProviderID, ModelID: scripted.ModelID, IdleTimeout: time.Millisecond})
	defer m.Close()
	ctx := context.Background()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(text string) {
		t.Helper()
		in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
			Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
		if _, _, err := m.Admit(ctx, in); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Wait(ctx, s.ID, in.ID); err != nil {
			t.Fatal(err)
		}
	}
	prompt("first")
	// The runner is evicted (polled: without it the test proves nothing).
	checkFor(t, 5*time.Second, "the runner's eviction", func() bool { return !m.Resident(s.ID) })
	before := st.lists.Load()
	if _, err := m.Inbox(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Abort(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if n := st.lists.Load() - before; n != 0 {
		t.Errorf("a cold inbox listing and abort read the history %d times", n)
	}
	prompt("second")
	reqs := model.Calls()
	last := reqs[len(reqs)-1]
	var texts []string
	for _, msg := range last.Messages {
		texts = append(texts, msg.Content)
	}
	if len(last.Messages) != 3 || last.Messages[0].Content != "first" || last.Messages[2].Content != "second" {
		t.Errorf("the second turn's model saw %q, want the whole conversation", texts)
	}
}
