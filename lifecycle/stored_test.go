package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// TestWhatAClientSeesIsStored: every state event a client receives
// announces something already stored, and GET /session/status flips to
// idle only once the turn's end is stored. Three witnesses:
//   - a store wrapper that remembers every committed message and part
//     version, checked against each event on the bus as it is published;
//   - a v1 client on /event that refetches every message it is told about
//     (GET /session/{id}/message/{messageID}) the moment it is told, as the
//     TUI does, on a real SQLite file;
//   - the commit that closes a turn, during which the session must still
//     be busy.
//
// The workload mixes a tool turn, steers shown while busy, queued inputs,
// a revoke, a replace and an abort.
func TestWhatAClientSeesIsStored(t *testing.T) {
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sqlite"}[sqlite], func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(4), stubmodel.WithDelay(3*time.Millisecond))
			var (
				mu   sync.Mutex
				errs []string
				srv  *testserver.Server
			)
			fail := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				if len(errs) < 20 {
					errs = append(errs, fmt.Sprintf(format, args...))
				}
			}
			w := &storetest.Witness{Delay: time.Millisecond}
			closing := 0
			w.Before = func(sid string, b *store.Batch) {
				if b.Open != nil && !*b.Open && srv != nil {
					mu.Lock()
					closing++
					mu.Unlock()
					if srv.Manager.Status()[sid] != "busy" {
						fail("session %s reported idle before the commit that ends its turn", sid)
					}
				}
			}
			srv = testserver.Start(t, testserver.Options{SQLite: sqlite, Config: stubConfig(stub.URL(), ""),
				WrapStore: func(s store.Store) store.Store { w.Store = s; return w }})
			sub := srv.Manager.Subscribe(1<<14, nil)
			checked := make(chan struct{})
			go func() {
				defer close(checked)
				for e := range sub.C {
					if err := w.Check(e); err != nil {
						fail("%v", err)
					}
				}
			}()
			c := newClient(t, srv)
			sid := c.newSession()

			// The refetching client: told of a message, it reads it at once.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lines, stop := sseLines(ctx, t, c, "/event")
			var (
				smu     sync.Mutex
				seen    = map[string]bool{}
				missing = map[string]bool{}
				removed = map[string]bool{}
			)
			refetched := make(chan struct{})
			go func() {
				defer close(refetched)
				for line := range lines {
					var f struct {
						Type       string `json:"type"`
						Properties struct {
							Info struct {
								ID string `json:"id"`
							} `json:"info"`
							MessageID string `json:"messageID"`
						} `json:"properties"`
					}
					if json.Unmarshal([]byte(line), &f) != nil {
						continue
					}
					switch f.Type {
					case opencode.EvMessageUpdated:
						id := f.Properties.Info.ID
						r := c.do(ctx, "GET", "/session/"+sid+"/message/"+id, nil)
						smu.Lock()
						seen[id] = true
						if r.Status != http.StatusOK {
							missing[id] = true
						}
						smu.Unlock()
					case opencode.EvMessageRemoved:
						smu.Lock()
						removed[f.Properties.MessageID] = true
						smu.Unlock()
					}
				}
			}()

			// A tool turn, answered by a blocking prompt.
			c.must("POST", "/session/"+sid+"/message", v1Body("", `call:bash {"command":"echo one","description":"echo"} then: first done`, ""), 200)
			// While a turn runs: steers (shown at once), queued inputs, a
			// revoke of a shown steer, a replace of a queued one.
			// Its tool waits for gate: the inbox changes below happen
			// before the turn's next model call, however loaded the machine.
			gate := filepath.Join(t.TempDir(), "gate")
			c.must("POST", "/session/"+sid+"/prompt_async", v1Body("", `call:bash {"command":"while [ ! -e `+gate+` ]; do sleep 0.02; done; echo two","description":"wait"} then: second done`, ""), 204)
			checkFor(t, 5*time.Second, "busy", func() bool { return srv.Manager.Status()[sid] == "busy" })
			c.promptV2(sid, "", "steer me", "steer")
			gone := c.promptV2(sid, "", "revoke me", "steer")
			q1 := c.promptV2(sid, "", "queued one", "queue")
			c.promptV2(sid, "", "queued two", "queue")
			c.must("DELETE", "/api/session/"+sid+"/inbox/"+gone.ID, nil, 200)
			c.must("PATCH", "/api/session/"+sid+"/inbox/"+q1.ID, map[string]any{"prompt": map[string]any{"text": "queued one, replaced"}}, 200)
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			c.waitIdle(sid)
			// An aborted turn.
			c.must("POST", "/session/"+sid+"/prompt_async", v1Body("", `call:bash {"command":"sleep 5","description":"long"}`, ""), 204)
			checkFor(t, 5*time.Second, "the long bash call to run", func() bool {
				return bytes.Contains(c.must("GET", "/session/"+sid+"/message", nil, 200).Body, []byte(`"status":"running"`))
			})
			c.must("POST", "/session/"+sid+"/abort", nil, 200)
			c.waitIdle(sid)
			c.must("POST", "/session/"+sid+"/message", v1Body("", "last words", ""), 200)

			// Let the refetching client catch up, then stop it.
			msgs := c.messages(sid)
			checkFor(t, 5*time.Second, "the refetching client to see every message", func() bool {
				smu.Lock()
				defer smu.Unlock()
				for _, m := range msgs {
					if !seen[m.Info.ID] {
						return false
					}
				}
				return true
			})
			stop()
			<-refetched
			srv.Stop()
			sub.Close()
			<-checked

			for id := range missing {
				if !removed[id] {
					fail("GET of message %s, announced by message.updated, was not found (and it was never removed)", id)
				}
			}
			if closing < 3 {
				t.Errorf("%d turn-closing commits seen, want at least 3", closing)
			}
			if len(seen) < 8 {
				t.Errorf("the /event client saw %d messages, want at least 8", len(seen))
			}
			for _, e := range errs {
				t.Error(e)
			}
		})
	}
}
