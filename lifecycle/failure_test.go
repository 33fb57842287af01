package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestFailedCommitStopsCleanly: when a commit of a running turn fails, the
// turn stops, the blocking prompt waiting on it gets a 503 (EUnavailable),
// nothing of the failed work is visible, and the session works again on the
// next command from what is stored: the cut-off turn is closed by recovery.
func TestFailedCommitStopsCleanly(t *testing.T) {
	for _, kind := range []struct {
		name  string
		match func(string, *store.Batch) bool
	}{
		{"step end", func(_ string, b *store.Batch) bool {
			for _, p := range b.Parts {
				if p.Type == opencode.PartStepFinish {
					return true
				}
			}
			return false
		}},
		{"step start", func(_ string, b *store.Batch) bool {
			for _, p := range b.Parts {
				if p.Type == opencode.PartStepStart {
					return true
				}
			}
			return false
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			st := &storetest.Failing{Store: memory.New()}
			bus := eventbus.New()
			m := lifecycle.New(lifecycle.Config{Store: st, Bus: bus, Provider: scripted.New(scripted.Config{Chunks: 3, Delay: 5 * time.Millisecond}),
				ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, _, err := m.CreateSession(ctx, lifecycle.SessionOptions{ID: identifier.NewSession()})
			if err != nil {
				t.Fatal(err)
			}
			prompt := func(text string) error {
				in := &opencode.Input{ID: identifier.NewMessage(), SessionID: s.ID, Delivery: opencode.Steer,
					Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: text}}}
				if _, _, err := m.Admit(ctx, in); err != nil {
					return err
				}
				_, err := m.Wait(ctx, s.ID, in.ID)
				return err
			}
			st.FailNext(kind.match)
			err = prompt("first")
			var oe *opencode.Error
			if !errors.As(err, &oe) || oe.Code != opencode.EUnavailable {
				t.Fatalf("the blocking prompt of the failed turn got %v, want EUnavailable", err)
			}
			if st.Failed() != 1 {
				t.Fatalf("%d commits failed, want 1", st.Failed())
			}
			if _, busy := m.Status()[s.ID]; busy {
				t.Error("the session is still busy after its runner stopped")
			}
			// The next prompt is answered; the stored conversation has no
			// assistant message left open.
			if err := prompt("second"); err != nil {
				t.Fatalf("the next prompt after the failure: %v", err)
			}
			msgs, err := m.Messages(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, mp := range msgs {
				if mp.Info.Role == opencode.Assistant && mp.Info.Time.Completed == nil {
					t.Errorf("assistant message %s is left open", mp.Info.ID)
				}
			}
			last := msgs[len(msgs)-1]
			if last.Info.Role != opencode.Assistant || last.Info.Error != nil {
				t.Errorf("the last message is %s with error %+v, want the second turn's answer", last.Info.Role, last.Info.Error)
			}
		})
	}
}
