package lifecycle_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/lifecycle"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/sqlite"
)

var (
	resumeSessions = flag.Int("resume.sessions", 2000, "BenchmarkResume: sessions in the store")
	resumeMessages = flag.Int("resume.messages", 100, "BenchmarkResume: messages per session")
)

// BenchmarkResume is start-up on a SQLite store of many closed sessions
// with long histories (2,000 × 100 by default: 200,000 messages) and one
// session left open: Resume reads the open-session flags, not the
// histories.
func BenchmarkResume(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "opencode-server.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	open := true
	for i := range *resumeSessions {
		sid := fmt.Sprintf("ses_bench%06d", i)
		s := opencode.Session{ID: sid, Title: "bench", Directory: b.TempDir(), Version: opencode.Version}
		batch := &store.Batch{Session: &s}
		for j := range *resumeMessages {
			mid := fmt.Sprintf("msg_b%06d_%04d", i, j)
			role := opencode.User
			if j%2 == 1 {
				role = opencode.Assistant
			}
			done := int64(2)
			batch.Messages = append(batch.Messages, opencode.Message{ID: mid, SessionID: sid, Role: role,
				Time: opencode.MessageTime{Created: 1, Completed: &done}})
			batch.Parts = append(batch.Parts, opencode.Part{ID: "prt_" + mid[4:], SessionID: sid, MessageID: mid,
				Type: opencode.PartText, Text: "some history text of a message"})
		}
		if i == 0 {
			batch.Open = &open // the one session a restart must look at
		}
		if err := st.Commit(ctx, sid, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		m := lifecycle.New(lifecycle.Config{Store: st, Bus: eventbus.New(), Provider: scripted.New(scripted.Config{}),
			ProviderID: scripted.ProviderID, ModelID: scripted.ModelID})
		if err := m.Resume(ctx); err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
	b.ReportMetric(float64(*resumeSessions**resumeMessages), "messages")
	st.Close()
}
