package lifecycle_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

func benchInput(sid string, noReply bool, d opencode.Delivery) *opencode.Input {
	return &opencode.Input{ID: identifier.NewMessage(), SessionID: sid, Delivery: d, NoReply: noReply,
		Parts: []opencode.Part{{ID: identifier.NewPart(), Type: opencode.PartText, Text: "benchmark prompt"}}}
}

// BenchmarkAdmit is Manager.Admit end to end (durable before it returns):
// noReply inputs (admission + user message, no turn) and whole text turns
// (admission, then WaitIdle), on the memory and the SQLite store.
func BenchmarkAdmit(b *testing.B) {
	for _, sqlite := range []bool{false, true} {
		storeName := "memory"
		if sqlite {
			storeName = "sqlite"
		}
		b.Run(fmt.Sprintf("store=%s/noReply", storeName), func(b *testing.B) {
			srv, s := benchSession(b, sqlite)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := srv.Manager.Admit(ctx, benchInput(s.ID, true, opencode.Steer)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("store=%s/turn", storeName), func(b *testing.B) {
			srv, s := benchSession(b, sqlite)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := srv.Manager.Admit(ctx, benchInput(s.ID, false, opencode.Steer)); err != nil {
					b.Fatal(err)
				}
				if err := srv.Manager.WaitIdle(ctx, s.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdmitParallel admits noReply inputs to 8 sessions from every P at
// once (cross-session contention on the manager and the store).
func BenchmarkAdmitParallel(b *testing.B) {
	for _, sqlite := range []bool{false, true} {
		name := "memory"
		if sqlite {
			name = "sqlite"
		}
		b.Run("store="+name, func(b *testing.B) {
			srv := testserver.Start(b, testserver.Options{SQLite: sqlite})
			ctx := context.Background()
			var ids []string
			for range 8 {
				s, _, err := srv.Manager.CreateSession(ctx, opencode.SessionOptions{ID: identifier.NewSession()})
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, s.ID)
			}
			b.ReportAllocs()
			b.SetParallelism(4)
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(n.Add(1))
				for pb.Next() {
					i++
					if _, _, err := srv.Manager.Admit(ctx, benchInput(ids[i%len(ids)], true, opencode.Queue)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// benchSession starts a server and creates one session on it.
func benchSession(b *testing.B, sqlite bool) (*testserver.Server, opencode.Session) {
	b.Helper()
	srv := testserver.Start(b, testserver.Options{SQLite: sqlite})
	s, _, err := srv.Manager.CreateSession(context.Background(), opencode.SessionOptions{ID: identifier.NewSession()})
	if err != nil {
		b.Fatal(err)
	}
	return srv, s
}
