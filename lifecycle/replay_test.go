package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// replayHistory is a session's sync history as OpenCode logs a v1 turn: the
// session, a user message and its text, the assistant's answer.
func replayHistory(sid string) []opencode.SyncEvent {
	ev := func(seq int64, typ string, data any) opencode.SyncEvent {
		b, _ := json.Marshal(data)
		return opencode.SyncEvent{ID: fmt.Sprintf("evt_%012xreplaytest%04d", 0x232d0ad9a001+seq, seq), AggregateID: sid, Seq: seq, Type: typ, Data: b}
	}
	info := map[string]any{"id": sid, "slug": "s", "projectID": "global", "directory": "/tmp", "title": "replayed",
		"version": "1.18.33", "time": map[string]any{"created": 1000, "updated": 1000}}
	user := map[string]any{"id": "msg_232d0b079001replayuser01", "sessionID": sid, "role": "user", "time": map[string]any{"created": 1001},
		"agent": "build", "model": map[string]any{"providerID": scripted.ProviderID, "modelID": scripted.ModelID}}
	asst := map[string]any{"id": "msg_232d0baec001replayasst01", "sessionID": sid, "role": "assistant",
		"time": map[string]any{"created": 1002, "completed": 1003}, "parentID": user["id"], "modelID": scripted.ModelID,
		"providerID": scripted.ProviderID, "mode": "build", "agent": "build", "path": map[string]any{"cwd": "/tmp", "root": "/"},
		"cost": 0, "tokens": map[string]any{"input": 1, "output": 1, "reasoning": 0, "cache": map[string]any{"read": 0, "write": 0}}, "finish": "stop"}
	part := func(id, msg, text string) map[string]any {
		return map[string]any{"sessionID": sid, "part": map[string]any{"id": id, "sessionID": sid, "messageID": msg, "type": "text", "text": text}, "time": 1001}
	}
	return []opencode.SyncEvent{
		ev(0, "session.created.1", map[string]any{"sessionID": sid, "info": info}),
		ev(1, "message.updated.1", map[string]any{"sessionID": sid, "info": user}),
		ev(2, "message.part.updated.1", part("prt_232d0b098001replaypart01", user["id"].(string), "the earlier question")),
		ev(3, "message.updated.1", map[string]any{"sessionID": sid, "info": asst}),
		ev(4, "message.part.updated.1", part("prt_232d0c3e9001replaypart02", asst["id"].(string), "the earlier answer")),
	}
}

// A replayed session is the runner's like any other: the next prompt's
// model call has the replayed conversation, and the turn's events follow
// the replayed ones in the log. Into a session whose runner is already in
// memory (made here first), the runner takes the replay over as well.
func TestReplayThenPrompt(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(map[bool]string{false: "new", true: "loaded"}[existing], func(t *testing.T) {
			srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Record: true}})
			c := newClient(t, srv)
			sid := "ses_dcd2f5268ffereplaytest0" + map[bool]string{false: "1", true: "2"}[existing]
			if existing {
				c.must("POST", "/api/session", map[string]any{"id": sid}, 200)
				c.must("GET", "/session/"+sid+"/message", nil, 200) // its runner runs
			}
			got, err := srv.Manager.Replay(context.Background(), replayHistory(sid))
			if err != nil || got != sid {
				t.Fatalf("Replay = %q, %v", got, err)
			}
			c.must("POST", "/session/"+sid+"/message", v1Body("", "and now?", ""), 200)
			calls := callsOf(srv, sid)
			if len(calls) == 0 {
				t.Fatal("no model call")
			}
			if u := userTexts(calls[len(calls)-1]); !slices.Contains(u, "the earlier question") || u[len(u)-1] != "and now?" {
				t.Errorf("the model was sent the user messages %q, want the replayed one before the prompt", u)
			}
			evs, err := srv.Manager.Events(context.Background(), sid, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Fatalf("log seqs: event %d has seq %d (%s)", i, e.Seq, e.Type)
				}
			}
			if len(evs) < 5 || evs[0].Type != opencode.EvMessageUpdated || !evs[len(evs)-1].IsV2() {
				t.Errorf("log: %d events, first %s, last %s; want the replayed ones, then the turn's", len(evs), evs[0].Type, evs[len(evs)-1].Type)
			}
		})
	}
}

// The same history posted twice, and by two clients at once, is one
// session with one log; a replay into a session that runs a turn waits
// for nothing and says it is busy.
func TestReplayIdempotentAndBusy(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 20, Delay: 20 * time.Millisecond}})
	ctx := context.Background()
	sid := "ses_dcd2f5268ffereplaytest03"
	h := replayHistory(sid)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = srv.Manager.Replay(ctx, h)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent replays: %v", errs)
		}
	}
	if _, err := srv.Manager.Replay(ctx, h); err != nil {
		t.Fatal(err)
	}
	evs, _ := srv.Manager.Events(ctx, sid, 0, 0)
	msgs, _ := srv.Manager.Messages(ctx, sid)
	if len(evs) != len(h)-1 || len(msgs) != 2 || len(msgs[0].Parts) != 1 || len(msgs[1].Parts) != 1 {
		t.Fatalf("after five replays: %d log events, %d messages %+v; want %d and 2 with a part each", len(evs), len(msgs), msgs, len(h)-1)
	}

	c := newClient(t, srv)
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body("", "slow", ""), 204)
	// Mid-turn (its text streaming, no durable event until it ends): a
	// history that has the session's log so far and one event more.
	var log []*opencode.Event
	checkFor(t, 5*time.Second, "the turn's text streams", func() bool {
		log, _ = srv.Manager.Events(ctx, sid, int64(len(h)-1), 0)
		return slices.ContainsFunc(log, func(e *opencode.Event) bool { return e.Type == opencode.EvTextStarted })
	})
	more := slices.Clone(h)
	for _, e := range log {
		more = append(more, opencode.SyncEvent{ID: e.ID, AggregateID: sid, Seq: e.Seq, Type: fmt.Sprintf("%s.%d", e.Type, max(e.Version, 1)), Data: e.Data})
	}
	next := int64(len(more))
	more = append(more, opencode.SyncEvent{ID: "evt_232d0ad9a0ffreplaytest0099", AggregateID: sid, Seq: next,
		Type: "session.next.retried.1", Data: json.RawMessage(`{"sessionID":"` + sid + `"}`)})
	_, err := srv.Manager.Replay(ctx, more)
	var oe *opencode.Error
	if !errors.As(err, &oe) || oe.Code != opencode.EBusy {
		t.Fatalf("replay into a running session: %v, want busy", err)
	}
	c.waitIdle(sid)
	// What the session already has is still the same: nothing new to write.
	if _, err := srv.Manager.Replay(ctx, more[:next]); err != nil {
		t.Fatalf("replay of what the session has, after its turn: %v", err)
	}
}

// A history that ends with session.deleted.1 leaves no session: a new one
// is not made, an existing one (replayed before) is deleted.
func TestReplayDeleted(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	deleted := func(sid string, seq int64) opencode.SyncEvent {
		return opencode.SyncEvent{ID: fmt.Sprintf("evt_232d0ad9a0ffreplaydel%04d", seq), AggregateID: sid, Seq: seq, Type: "session.deleted.1",
			Data: json.RawMessage(`{"sessionID":"` + sid + `","info":{"id":"` + sid + `"}}`)}
	}
	for _, tc := range []struct {
		name    string
		before  bool // the history is replayed first without its end
		session string
	}{{"new", false, "ses_dcd2f5268ffereplaytest04"}, {"existing", true, "ses_dcd2f5268ffereplaytest05"}} {
		h := replayHistory(tc.session)
		if tc.before {
			if _, err := srv.Manager.Replay(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := srv.Manager.Replay(ctx, append(h, deleted(tc.session, int64(len(h))))); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var oe *opencode.Error
		if _, err := srv.Manager.GetSession(ctx, tc.session); !errors.As(err, &oe) || oe.Code != opencode.ENotFound {
			t.Errorf("%s: after a history that ends deleted, GetSession = %v, want not found", tc.name, err)
		}
	}
}
