package routes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestNonReadingStreamDoesNotHoldPrompts: a /global/event client (it
// receives every session's events) connects and never reads, its receive
// buffer tiny; large noReply prompts fill its connection until the
// server's writes to it block. Then 30 blocking POSTs, 5 sessions at a
// time, each take under a second: a blocking POST waits for the streams
// that receive its session's events, but gives up on one that makes no
// progress.
func TestNonReadingStreamDoesNotHoldPrompts(t *testing.T) {
	e := start(t, testserver.Options{Scripted: scripted.Config{Chunks: 4}})
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(1024)
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.ts.URL+"/global/event", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read

	filler := e.createSession()
	big, _ := json.Marshal(map[string]any{"noReply": true,
		"parts": []any{map[string]any{"type": "text", "text": strings.Repeat("x", 1<<20)}}})
	for range 3 {
		st0 := time.Now()
		if st, b := e.do("POST", "/session/"+filler+"/message", string(big)); st != 200 {
			t.Fatalf("filler: %d %.200s", st, b)
		}
		t.Logf("filler %v", time.Since(st0))
	}

	sessions := make([]string, 5)
	for i := range sessions {
		sessions[i] = e.createSession()
	}
	var (
		mu    sync.Mutex
		worst time.Duration
		slow  []time.Duration
		wg    sync.WaitGroup
	)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := sessions[i%len(sessions)]
			body := fmt.Sprintf(`{"parts":[{"type":"text","text":"prompt %d"}]}`, i)
			start := time.Now()
			st, b := e.do("POST", "/session/"+sid+"/message", body)
			d := time.Since(start)
			if st != 200 {
				t.Errorf("POST %d: %d %.200s", i, st, b)
			}
			mu.Lock()
			worst = max(worst, d)
			if d > time.Second {
				slow = append(slow, d)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(slow) > 0 {
		t.Errorf("%d of 30 blocking POSTs took over 1 s next to a stream that does not read: %v", len(slow), slow)
	}
	t.Logf("slowest blocking POST: %v", worst)
}
