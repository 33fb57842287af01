package routes_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

// BenchmarkEventStream is the /event (v1 frame) and /global/event path end
// to end over loopback: an event published on the bus is encoded, written,
// flushed and read by 1 or 50 SSE clients. One op is one message.part.delta
// event delivered to every client.
func BenchmarkEventStream(b *testing.B) {
	for _, path := range []string{"/event", "/global/event"} {
		for _, n := range []int{1, 50} {
			b.Run(fmt.Sprintf("path=%s/subs=%d", path, n), func(b *testing.B) { benchStream(b, path, n) })
		}
	}
}

func benchStream(b *testing.B, path string, n int) {
	srv := testserver.Start(b, testserver.Options{Heartbeat: time.Hour})
	tr := &http.Transport{MaxIdleConnsPerHost: -1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var got atomic.Int64
	var wg sync.WaitGroup
	var bodies []interface{ Close() error }
	for range n {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
		r := bufio.NewReaderSize(resp.Body, 64<<10)
		if _, err := r.ReadSlice('\n'); err != nil { // server.connected
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				if bytes.Contains(line, []byte(`message.part.delta`)) {
					got.Add(1)
				}
			}
		}()
	}
	data := json.RawMessage(`{"sessionID":"ses_bench","messageID":"msg_bench","partID":"prt_bench","field":"text","delta":"a typical streamed chunk of model text "}`)
	b.ReportAllocs()
	b.ResetTimer()
	var sent int64
	for b.Loop() {
		srv.Bus.Publish(&opencode.Event{ID: identifier.NewEvent(), Type: opencode.EvPartDelta, SessionID: "ses_bench",
			Directory: srv.Directory, Data: data})
		sent++
		if sent%512 == 0 { // stay well inside the subscriber queue
			for got.Load() < (sent-256)*int64(n) {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	for got.Load() < sent*int64(n) {
		time.Sleep(20 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(sent*int64(n))/b.Elapsed().Seconds(), "frames/s")
	for _, body := range bodies {
		body.Close()
	}
	wg.Wait()
}
