package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store/memory"
)

// TestInjectedIDs: the core mints every ID it creates (assistant message,
// its parts, log events) from the generator it is given, as it reads the
// clock it is given; a generator on a clock stopped at 0 makes them
// recognizable.
func TestInjectedIDs(t *testing.T) {
	ids := identifier.New(func() int64 { return 0 })
	st := memory.New()
	m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), IDs: ids,
		Provider: scripted.New(scripted.Config{Chunks: 2}), ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := m.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		t.Fatal(err)
	}
	in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "hi"}}}
	if _, _, err := m.Admit(ctx, in); err != nil {
		t.Fatal(err)
	}
	res, err := m.Wait(ctx, s.ID, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	stopped := func(id string) bool { return strings.HasPrefix(id[4:], "00000000") }
	if !stopped(res.Message.Info.ID) {
		t.Errorf("assistant message %s was not minted by the injected generator", res.Message.Info.ID)
	}
	for _, p := range res.Message.Parts {
		if !stopped(p.ID) {
			t.Errorf("%s part %s was not minted by the injected generator", p.Type, p.ID)
		}
	}
	evs, err := m.Events(ctx, s.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if !stopped(e.ID) {
			t.Errorf("event %s %s was not minted by the injected generator", e.Type, e.ID)
		}
	}
	// The client's own IDs are kept as given.
	if stopped(in.ID) {
		t.Fatal("test setup: the input ID looks injected")
	}
}
