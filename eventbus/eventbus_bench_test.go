package eventbus_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// BenchmarkPublish publishes one message.part.delta to 1, 50 and 1000
// subscribers, each drained by its own goroutine (as the SSE writers are).
func BenchmarkPublish(b *testing.B) {
	data := json.RawMessage(`{"sessionID":"ses_x","messageID":"msg_x","partID":"prt_x","field":"text","delta":"hello "}`)
	for _, n := range []int{1, 50, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			bus := eventbus.New()
			subs := make([]*eventbus.Subscription, n)
			var wg sync.WaitGroup
			for i := range subs {
				subs[i] = bus.Subscribe(1<<16, nil)
				wg.Add(1)
				go func(s *eventbus.Subscription) {
					defer wg.Done()
					for range s.C {
					}
				}(subs[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				bus.Publish(&opencode.Event{ID: "evt_x", Type: opencode.EvPartDelta, SessionID: "ses_x", Data: data})
				if i%1024 == 1023 { // let slow drainers catch up: never cut anyone off
					for _, s := range subs {
						for len(s.C) > 1<<14 {
							runtime.Gosched()
						}
					}
				}
			}
			b.StopTimer()
			dropped := 0
			for _, s := range subs {
				if s.Dropped() {
					dropped++
				}
				s.Close()
			}
			wg.Wait()
			if dropped > 0 {
				b.Fatalf("%d subscribers cut off", dropped)
			}
		})
	}
}
