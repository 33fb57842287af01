package identifier_test

import (
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
)

func BenchmarkNewMessage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = identifier.NewMessage()
	}
}

func BenchmarkNewSession(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = identifier.NewSession()
	}
}

// BenchmarkNewEventParallel mints from every P at once (the shared
// generator's contention).
func BenchmarkNewEventParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = identifier.NewEvent()
		}
	})
}
