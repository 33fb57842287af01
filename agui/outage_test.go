package agui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
	"github.com/opencode-server/opencode-server/store/storetest"
)

// downAfterAdmit is a store whose input reads go down right after an
// admission is stored: the run's message is admitted, then the run's own
// read of it meets the outage.
type downAfterAdmit struct{ *storetest.Failing }

func (s downAfterAdmit) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	err := s.Failing.Commit(ctx, sessionID, b)
	if err == nil && len(b.Admit) > 0 {
		s.SetInputsDown(true)
	}
	return err
}

// TestRunStoreOutage: a run that meets a store outage is told to retry,
// as HTTP and ACP are: before the stream a 503 UNAVAILABLE with
// Retry-After (the core let the admission's read error out raw: a 500
// INTERNAL), within it a RUN_ERROR UNAVAILABLE (its read of the admitted
// message answered NOT_FOUND, with the store's error as the message).
func TestRunStoreOutage(t *testing.T) {
	unavailable := opencode.KindOf(opencode.EUnavailable).AGUI
	t.Run("admission", func(t *testing.T) {
		st := &storetest.Failing{}
		srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { st.Store = s; return st }})
		defer srv.Stop()
		thread := identifier.NewSession()
		if status, _, _ := run(t, srv.URL, input(thread, "r0", user("u0", "before"))); status != 200 {
			t.Fatalf("the first run: %d", status)
		}
		st.SetInputsDown(true)
		status, _, raw := run(t, srv.URL, input(thread, "r1", user("u0", "before"), user("u1", "during the outage")))
		st.SetInputsDown(false)
		var body struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(raw), &body); status != 503 || err != nil || body.Error.Code != unavailable {
			t.Fatalf("a run during an outage: %d %s, want 503 %s", status, raw, unavailable)
		}
		if strings.Contains(raw, "timed out") {
			t.Errorf("the store's error reached the client: %s", raw)
		}
	})
	t.Run("stream", func(t *testing.T) {
		st := &storetest.Failing{}
		srv := testserver.Start(t, testserver.Options{WrapStore: func(s store.Store) store.Store { st.Store = s; return downAfterAdmit{st} }})
		defer srv.Stop()
		defer st.SetInputsDown(false)
		status, evs, raw := run(t, srv.URL, input(identifier.NewSession(), "r1", user("u1", "admitted, then the outage")))
		if status != 200 || len(evs) == 0 {
			t.Fatalf("the run: %d %s", status, raw)
		}
		last := evs[len(evs)-1]
		if last.s("type") != "RUN_ERROR" || last.s("code") != unavailable {
			t.Fatalf("the run ended %v, want RUN_ERROR %s\n%s", last, unavailable, raw)
		}
		if strings.Contains(last.s("message"), "timed out") {
			t.Errorf("the store's error reached the client: %v", last)
		}
	})
}
