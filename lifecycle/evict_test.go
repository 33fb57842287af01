package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestIdleRunnerEviction: runners that go idle are dropped after
// IdleTimeout and rebuilt from the store on the next command; clients never
// notice — every prompt is answered with its own turn, in order, and the
// conversation the model sees keeps its whole history.
func TestIdleRunnerEviction(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{IdleTimeout: 2 * time.Millisecond,
		Scripted: scripted.Config{Chunks: 2}})
	sid := newSession(t, srv.URL)
	rng := rand.New(rand.NewPCG(1, 2))
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[string]string{}
	for i := range 40 {
		time.Sleep(time.Duration(rng.IntN(6)) * time.Millisecond) // the scenario: prompts spread around the 2 ms idle timeout
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := fmt.Sprintf("prompt-%d", i)
			code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"`+text+`"}]}`)
			if code != http.StatusOK {
				t.Errorf("%s: %d %s", text, code, b)
				return
			}
			var res struct {
				Info  struct{ Role string }
				Parts []struct{ Type, Text string }
			}
			json.Unmarshal(b, &res)
			mu.Lock()
			defer mu.Unlock()
			for _, p := range res.Parts {
				if p.Type == "text" {
					answered[text] = p.Text
				}
			}
		}()
	}
	wg.Wait()
	if len(answered) != 40 {
		t.Fatalf("%d of 40 prompts answered", len(answered))
	}
	for text, reply := range answered {
		if !strings.Contains(reply, "prompt-") {
			t.Errorf("%s answered %q", text, reply)
		}
	}
	// Every prompt reached the model exactly once, and later calls carry the
	// earlier prompts (history survived the evictions).
	calls := srv.Model.Calls()
	seen := map[string]int{}
	for _, c := range calls {
		last := c.Messages[len(c.Messages)-1].Content
		seen[last]++
	}
	for i := range 40 {
		if n := seen[fmt.Sprintf("prompt-%d", i)]; n > 1 {
			t.Errorf("prompt-%d was the newest message of %d model calls", i, n)
		}
	}
	if last := calls[len(calls)-1]; len(last.Messages) < 40 {
		t.Errorf("last model call carries %d messages, want the whole history (>= 40)", len(last.Messages))
	}
}
