package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// slow starts a server whose model calls take about chunks*delay.
func slow(t *testing.T, chunks int, delay time.Duration) (*testserver.Server, *client) {
	t.Helper()
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: chunks, Delay: delay}})
	return srv, newClient(t, srv)
}

func waitCalls(t *testing.T, srv *testserver.Server, sid string, n int) {
	t.Helper()
	checkFor(t, 10*time.Second, fmt.Sprintf("%d model calls", n), func() bool { return len(callsOf(srv, sid)) >= n })
}

// wantCalls checks the user messages of every model call of the session.
func wantCalls(t *testing.T, srv *testserver.Server, sid string, want ...[]string) {
	t.Helper()
	calls := callsOf(srv, sid)
	got := make([][]string, len(calls))
	for i, c := range calls {
		got[i] = userTexts(c)
	}
	if len(got) != len(want) {
		t.Fatalf("model calls: want %d, got %d: %q", len(want), len(got), got)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("model call %d: user messages want %q, got %q", i+1, want[i], got[i])
		}
	}
}

func newID() string { return identifier.NewMessage() }

// seqIndex returns the index in evs of the first event of typ (about
// messageID if not empty) at or after from, or -1.
func seqIndex(evs []durableEvent, from int, typ, messageID string) int {
	for i := from; i < len(evs); i++ {
		if evs[i].Type == typ && (messageID == "" || evs[i].d.MessageID == messageID) {
			return i
		}
	}
	return -1
}

// turnCheck checks the durable log: each step after the first of a turn
// follows the previous step's end with only the promotion of the given
// steers in between.
func checkBoundary(t *testing.T, evs []durableEvent, stepEnded int, steers ...string) {
	t.Helper()
	if stepEnded < 0 || evs[stepEnded].Type != "session.next.step.ended" {
		t.Fatalf("event %d is not a step end: %v", stepEnded, eventTypes(evs))
	}
	var want []string
	for _, id := range steers {
		want = append(want, "session.next.prompted("+id+")", "session.inbox.delivered("+id+")")
	}
	want = append(want, "session.next.step.started")
	end := stepEnded + 1 + len(want)
	if end > len(evs) {
		t.Fatalf("log ends early after step end at %d: %v", stepEnded, eventTypes(evs[stepEnded:]))
	}
	got := eventTypes(evs[stepEnded+1 : end])
	if !slices.Equal(got, want) {
		t.Fatalf("boundary after event %d: want %v, got %v", stepEnded, want, got)
	}
}

// TestC1V2SteerThenQueue replays trace c1: a v2 prompt, a steer once the
// first model call runs, then a queued prompt.
func TestC1V2SteerThenQueue(t *testing.T) {
	srv, c := slow(t, 6, 30*time.Millisecond)
	sid := c.newSession()
	live := recordLive(t, srv, sid)

	first := c.promptV2(sid, "", "first prompt", "")
	if first.AdmittedSeq != 1 || first.Delivery != "steer" || first.Prompt.Text != "first prompt" || first.SessionID != sid {
		t.Fatalf("first admission: %+v", first)
	}
	waitCalls(t, srv, sid, 1)
	steer := c.promptV2(sid, "", "STEERED message", "steer")
	queue := c.promptV2(sid, "", "QUEUED message", "queue")
	if steer.AdmittedSeq <= first.AdmittedSeq || queue.AdmittedSeq <= steer.AdmittedSeq {
		t.Fatalf("admittedSeq not increasing: %d %d %d", first.AdmittedSeq, steer.AdmittedSeq, queue.AdmittedSeq)
	}
	if steer.Delivery != "steer" || queue.Delivery != "queue" || steer.PromotedSeq != nil || queue.PromotedSeq != nil {
		t.Fatalf("admissions: %+v %+v", steer, queue)
	}
	c.waitIdle(sid)

	wantCalls(t, srv, sid,
		[]string{"first prompt"},
		[]string{"first prompt", "STEERED message"},
		[]string{"first prompt", "STEERED message", "QUEUED message"})
	calls := callsOf(srv, sid)
	if got := lastUser(calls[1]); got != "STEERED message" {
		t.Errorf("call 2 last user message: %q", got)
	}
	// Call 2 carries call 1's answer before the steer.
	roles := func(r provider.Request) (out []string) {
		for _, m := range r.Messages {
			out = append(out, m.Role)
		}
		return out
	}
	if got := roles(calls[1]); !slices.Equal(got, []string{"user", "assistant", "user"}) {
		t.Errorf("call 2 roles: %v", got)
	}
	if got := roles(calls[2]); !slices.Equal(got, []string{"user", "assistant", "user", "assistant", "user"}) {
		t.Errorf("call 3 roles: %v", got)
	}

	// Two turns: the steer kept the first going, the queued input got its own.
	live.expect(t, "session.idle", 2, "turns")
	evs := c.history(sid, 100)
	firstEnd := seqIndex(evs, 0, "session.next.step.ended", "")
	checkBoundary(t, evs, firstEnd, steer.ID)
	qp := seqIndex(evs, 0, "session.next.prompted", queue.ID)
	secondEnd := seqIndex(evs, firstEnd+1, "session.next.step.ended", "")
	if qp < 0 || secondEnd < 0 || qp < secondEnd {
		t.Errorf("queued input promoted at %d, before the steered step ended at %d: %v", qp, secondEnd, eventTypes(evs))
	}

	// The v2 views: promotedSeq set now, user messages under the admitted IDs.
	var again struct {
		Data admitted `json:"data"`
	}
	c.must("POST", "/api/session/"+sid+"/prompt", v2Body(steer.ID, "STEERED message", "steer"), 200).json(t, &again)
	if again.Data.AdmittedSeq != steer.AdmittedSeq || again.Data.PromotedSeq == nil ||
		*again.Data.PromotedSeq != evs[seqIndex(evs, 0, "session.next.prompted", steer.ID)].Durable.Seq {
		t.Errorf("re-admission of the steer: %+v", again.Data)
	}
	var msgs struct {
		Data []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"data"`
	}
	c.must("GET", "/api/session/"+sid+"/message?order=asc", nil, 200).json(t, &msgs)
	var users []string
	for _, m := range msgs.Data {
		if m.Type == "user" {
			users = append(users, m.ID+"="+m.Text)
		}
	}
	want := []string{first.ID + "=first prompt", steer.ID + "=STEERED message", queue.ID + "=QUEUED message"}
	if !slices.Equal(users, want) {
		t.Errorf("v2 user messages: want %v, got %v", want, users)
	}
	if len(msgs.Data) != 6 {
		t.Errorf("want 6 messages (3 user, 3 assistant), got %d", len(msgs.Data))
	}
}

// TestC2MultiCallOrdering: several steers are promoted together at one
// boundary in admission order, queued inputs each get a turn in FIFO order,
// and a steer during a queued turn joins that turn.
func TestC2MultiCallOrdering(t *testing.T) {
	srv, c := slow(t, 5, 30*time.Millisecond)
	sid := c.newSession()
	live := recordLive(t, srv, sid)

	a := c.promptV2(sid, "", "A", "")
	waitCalls(t, srv, sid, 1)
	b := c.promptV2(sid, "", "B", "steer")
	q1 := c.promptV2(sid, "", "Q1", "queue")
	cc := c.promptV2(sid, "", "C", "steer")
	q2 := c.promptV2(sid, "", "Q2", "queue")
	waitCalls(t, srv, sid, 3) // Q1's turn
	s3 := c.promptV2(sid, "", "S3", "steer")
	c.waitIdle(sid)

	wantCalls(t, srv, sid,
		[]string{"A"},
		[]string{"A", "B", "C"},
		[]string{"A", "B", "C", "Q1"},
		[]string{"A", "B", "C", "Q1", "S3"},
		[]string{"A", "B", "C", "Q1", "S3", "Q2"})
	live.expect(t, "session.idle", 3, "turns")
	evs := c.history(sid, 7) // small pages on purpose
	ends := []int{}
	for i, e := range evs {
		if e.Type == "session.next.step.ended" {
			ends = append(ends, i)
		}
	}
	if len(ends) != 5 {
		t.Fatalf("want 5 step ends, got %v", eventTypes(evs))
	}
	checkBoundary(t, evs, ends[0], b.ID, cc.ID)
	checkBoundary(t, evs, ends[2], s3.ID)

	// Each assistant message answers the latest user message of its turn.
	msgs := c.messages(sid)
	var parent []string
	for _, m := range msgs {
		if m.Info.Role == "assistant" {
			parent = append(parent, m.Info.ParentID)
		}
	}
	if want := []string{a.ID, cc.ID, q1.ID, s3.ID, q2.ID}; !slices.Equal(parent, want) {
		t.Errorf("assistant parentIDs: want %v, got %v", want, parent)
	}
	// Every call's conversation extends the previous one.
	calls := callsOf(srv, sid)
	for i := 1; i < len(calls); i++ {
		prev, cur := calls[i-1].Messages, calls[i].Messages
		if len(cur) <= len(prev) || !reflect.DeepEqual(cur[:len(prev)], prev) {
			t.Errorf("call %d does not extend call %d", i+1, i)
		}
	}
}

// TestC3V1PromptAsyncWhileBusy: a v1 prompt_async while a turn runs is a
// steer: it joins the running turn at the next boundary.
func TestC3V1PromptAsyncWhileBusy(t *testing.T) {
	srv, c := slow(t, 6, 30*time.Millisecond)
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	id1, id2 := newID(), newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id1, "first v1", ""), 204)
	waitCalls(t, srv, sid, 1)
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id2, "second v1", ""), 204)
	c.waitIdle(sid)

	wantCalls(t, srv, sid, []string{"first v1"}, []string{"first v1", "second v1"})
	live.expect(t, "session.idle", 1, "turns")
	msgs := c.messages(sid)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Info.Role+":"+m.Info.ParentID)
	}
	if len(msgs) != 4 || msgs[0].Info.ID != id1 || msgs[2].Info.ID != id2 || msgs[3].Info.ParentID != id2 || msgs[1].Info.ParentID != id1 {
		t.Errorf("messages: %v", got)
	}
	evs := c.history(sid, 100)
	checkBoundary(t, evs, seqIndex(evs, 0, "session.next.step.ended", ""), id2)
}

// TestDIdempotencyV1 replays trace d for the v1 routes.
func TestDIdempotencyV1(t *testing.T) {
	srv, c := slow(t, 3, 5*time.Millisecond)
	sid := c.newSession()
	id := newID()
	var r1, r2 v1Message
	c.must("POST", "/session/"+sid+"/message", v1Body(id, "dup v1", ""), 200).json(t, &r1)
	if r1.Info.Role != "assistant" || r1.Info.ParentID != id || r1.Info.Finish != "stop" {
		t.Fatalf("first answer: %+v", r1.Info)
	}
	c.must("POST", "/session/"+sid+"/message", v1Body(id, "dup v1", ""), 200).json(t, &r2)
	if r2.Info.ID != r1.Info.ID {
		t.Errorf("second blocking POST answered %s, want the same assistant message %s", r2.Info.ID, r1.Info.ID)
	}
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id, "dup v1", ""), 204)
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id, "dup v1", "steer"), 204)
	c.waitIdle(sid)

	for _, body := range []map[string]any{v1Body(id, "dup v1 changed", ""), v1Body(id, "dup v1", "queue")} {
		for _, route := range []string{"/message", "/prompt_async"} {
			r := c.must("POST", "/session/"+sid+route, body, 409)
			var e namedErr
			r.json(t, &e)
			if e.Name != "ConflictError" {
				t.Errorf("%s conflicting re-admission: %s", route, r)
			}
		}
	}
	c.waitIdle(sid)
	wantCalls(t, srv, sid, []string{"dup v1"})
	msgs := c.messages(sid)
	if len(msgs) != 2 || msgs[0].Info.ID != id || len(msgs[0].Parts) != 1 || msgs[0].Parts[0].Text != "dup v1" {
		t.Errorf("messages after re-admissions: %+v", msgs)
	}
	evs := c.history(sid, 100)
	if n := len(eventsOf(evs, "session.next.prompt.admitted")); n != 1 {
		t.Errorf("admitted events: %d", n)
	}
	if n := len(eventsOf(evs, "session.next.prompted")); n != 1 {
		t.Errorf("prompted events: %d", n)
	}
	// An assistant message ID is not an input ID.
	r := c.must("POST", "/session/"+sid+"/prompt_async", v1Body(r1.Info.ID, "steal", ""), 409)
	if !strings.Contains(string(r.Body), "ConflictError") {
		t.Errorf("assistant ID reuse: %s", r)
	}
	c.must("POST", "/session/"+sid+"/message", v1Body(r1.Info.ID, "steal", ""), 409)
	c.waitIdle(sid)
	wantCalls(t, srv, sid, []string{"dup v1"})
}

// TestDIdempotencyV2 replays trace d for the v2 route, plus cross-family and
// concurrent re-admissions.
func TestDIdempotencyV2(t *testing.T) {
	srv, c := slow(t, 3, 20*time.Millisecond)
	sid := c.newSession()
	other := c.newSession()
	id := newID()
	a1 := c.promptV2(sid, id, "dup v2", "")
	a2 := c.promptV2(sid, id, "dup v2", "")
	if a2.AdmittedSeq != a1.AdmittedSeq || a2.TimeCreated != a1.TimeCreated || a2.ID != id {
		t.Errorf("immediate re-admission: %+v vs %+v", a2, a1)
	}
	c.waitIdle(sid)
	a3 := c.promptV2(sid, id, "dup v2", "steer")
	if a3.AdmittedSeq != a1.AdmittedSeq || a3.PromotedSeq == nil {
		t.Errorf("re-admission after idle: %+v", a3)
	}
	for name, tc := range map[string]struct {
		sid  string
		body map[string]any
	}{
		"different text":     {sid, v2Body(id, "dup v2 changed", "")},
		"different delivery": {sid, v2Body(id, "dup v2", "queue")},
		"different session":  {other, v2Body(id, "dup v2", "")},
	} {
		r := c.must("POST", "/api/session/"+tc.sid+"/prompt", tc.body, 409)
		var e struct {
			Tag string `json:"_tag"`
		}
		r.json(t, &e)
		if e.Tag != "ConflictError" {
			t.Errorf("%s: %s", name, r)
		}
	}
	// v1 and v2 are views of the same inputs: the same content through v1 is
	// the same admission.
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(id, "dup v2", ""), 204)

	// An assistant message ID cannot be an input ID.
	msgs := c.messages(sid)
	if len(msgs) != 2 || msgs[1].Info.Role != "assistant" {
		t.Fatalf("messages: %+v", msgs)
	}
	c.must("POST", "/api/session/"+sid+"/prompt", v2Body(msgs[1].Info.ID, "steal", ""), 409)

	// Concurrent duplicates: one admission, one answer.
	id2 := newID()
	var wg sync.WaitGroup
	seqs := make([]int64, 8)
	for i := range seqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := c.do(context.Background(), "POST", "/api/session/"+sid+"/prompt", v2Body(id2, "concurrent dup", "queue"))
			var out struct {
				Data admitted `json:"data"`
			}
			if r.Err != nil || r.Status != 200 || json.Unmarshal(r.Body, &out) != nil {
				t.Errorf("concurrent duplicate %d: %v %s", i, r.Err, r)
				return
			}
			seqs[i] = out.Data.AdmittedSeq
		}()
	}
	wg.Wait()
	for _, s := range seqs {
		if s != seqs[0] {
			t.Errorf("concurrent duplicates got different admittedSeq: %v", seqs)
			break
		}
	}
	c.waitIdle(sid)
	c.waitIdle(other)

	wantCalls(t, srv, sid, []string{"dup v2"}, []string{"dup v2", "concurrent dup"})
	if n := len(callsOf(srv, other)); n != 0 {
		t.Errorf("other session: %d model calls", n)
	}
	msgs = c.messages(sid)
	if len(msgs) != 4 || msgs[0].Info.ID != id || len(msgs[0].Parts) != 1 || msgs[2].Info.ID != id2 || len(msgs[2].Parts) != 1 {
		t.Errorf("messages: %+v", msgs)
	}
	evs := c.history(sid, 100)
	for _, mid := range []string{id, id2} {
		n := 0
		for _, e := range eventsOf(evs, "session.next.prompt.admitted") {
			if e.d.MessageID == mid {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s admitted %d times", mid, n)
		}
	}
	if evs := c.history(other, 100); len(evs) != 0 {
		t.Errorf("other session log: %v", eventTypes(evs))
	}
}

// TestE2InterruptMidStream replays trace e2: v2 interrupt during a model
// call, then interrupt and abort on the idle session.
func TestE2InterruptMidStream(t *testing.T) {
	srv, c := slow(t, 20, 25*time.Millisecond)
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	in := c.promptV2(sid, "", "please stream slowly", "")
	checkFor(t, 10*time.Second, "streamed text", func() bool {
		for _, e := range live.events() {
			if e.Type == "session.next.text.delta" {
				return true
			}
		}
		return false
	})
	c.must("POST", "/api/session/"+sid+"/interrupt", nil, 204)
	c.waitIdle(sid)

	evs := c.history(sid, 100)
	failed := eventsOf(evs, "session.next.step.failed")
	started := eventsOf(evs, "session.next.step.started")
	if len(failed) != 1 || len(started) != 1 || len(eventsOf(evs, "session.next.step.ended")) != 0 {
		t.Fatalf("log: %v", eventTypes(evs))
	}
	if f := failed[0].d; f.AssistantMessageID != started[0].d.AssistantMessageID || f.Error == nil ||
		f.Error.Type != "unknown" || f.Error.Message != "Provider turn interrupted" {
		t.Errorf("step.failed: %s", failed[0].Data)
	}
	msgs := c.messages(sid)
	if len(msgs) != 2 || msgs[0].Info.ID != in.ID {
		t.Fatalf("messages: %+v", msgs)
	}
	asst := msgs[1]
	if asst.Info.Error == nil || asst.Info.Error.Name != "MessageAbortedError" || asst.Info.Time.Completed == nil {
		t.Errorf("aborted assistant message: %+v", asst.Info)
	}
	if full := "You said: please stream slowly"; asst.text() == "" || asst.text() == full || !strings.HasPrefix(full, asst.text()) {
		t.Errorf("partial text kept: %q", asst.text())
	}
	var v2 struct {
		Data map[string]any `json:"data"`
	}
	c.must("GET", "/api/session/"+sid+"/message/"+asst.Info.ID, nil, 200).json(t, &v2)
	if v2.Data["finish"] != "error" {
		t.Errorf("v2 assistant finish: %v", v2.Data)
	}
	live.expect(t, "session.error", 1, "one aborted call")
	// Idle: no-ops.
	c.must("POST", "/api/session/"+sid+"/interrupt", nil, 204)
	if r := c.must("POST", "/session/"+sid+"/abort", nil, 200); strings.TrimSpace(string(r.Body)) != "true" {
		t.Errorf("idle abort: %s", r)
	}
	if n := len(c.history(sid, 100)); n != len(evs) {
		t.Errorf("idle interrupt/abort appended %d events", n-len(evs))
	}
	if n := len(callsOf(srv, sid)); n != 1 {
		t.Errorf("model calls: %d", n)
	}
	c.must("POST", "/api/session/"+identifier.NewSession()+"/interrupt", nil, 404)
}

// TestE1AbortBlockingPost: the blocking POST of the aborted turn answers
// with the aborted assistant message.
func TestE1AbortBlockingPost(t *testing.T) {
	srv, c := slow(t, 20, 25*time.Millisecond)
	sid := c.newSession()
	id := newID()
	ch := make(chan resp, 1)
	go func() {
		ch <- c.do(context.Background(), "POST", "/session/"+sid+"/message", v1Body(id, "abort me", ""))
	}()
	waitCalls(t, srv, sid, 1)
	if r := c.must("POST", "/session/"+sid+"/abort", nil, 200); strings.TrimSpace(string(r.Body)) != "true" {
		t.Errorf("abort: %s", r)
	}
	var r resp
	select {
	case r = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("blocking POST did not answer after abort")
	}
	var m v1Message
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("blocking POST: %v %s", r.Err, r)
	}
	r.json(t, &m)
	if m.Info.Role != "assistant" || m.Info.ParentID != id || m.Info.Error == nil || m.Info.Error.Name != "MessageAbortedError" {
		t.Errorf("blocking POST answer: %s", r)
	}
	c.waitIdle(sid)
}

// TestAbortRevokesSteersKeepsQueued: abort cancels the turn and its pending
// steers (their blocking POSTs answer 409 at once); queued inputs run next.
func TestAbortRevokesSteersKeepsQueued(t *testing.T) {
	srv, c := slow(t, 15, 30*time.Millisecond)
	sid := c.newSession()
	c.promptV2(sid, "", "A", "")
	waitCalls(t, srv, sid, 1)
	s1 := c.promptV2(sid, "", "S1", "steer")
	q1 := c.promptV2(sid, "", "Q1", "queue")
	s2 := newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(s2, "S2", ""), 204)
	q2 := newID()
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(q2, "Q2", "queue"), 204)
	s3 := newID()
	ch := make(chan resp, 1)
	go func() {
		ch <- c.do(context.Background(), "POST", "/session/"+sid+"/message", v1Body(s3, "S3", "steer"))
	}()
	checkFor(t, 5*time.Second, "S3 pending", func() bool {
		return slices.Contains(c.inboxIDs("/api/session/"+sid+"/inbox"), s3)
	})
	if got, want := c.inboxIDs("/session/"+sid+"/inbox"), []string{s1.ID, q1.ID, s2, q2, s3}; !slices.Equal(got, want) {
		t.Fatalf("inbox before abort: want %v, got %v", want, got)
	}
	c.must("POST", "/session/"+sid+"/abort", nil, 200)
	select {
	case r := <-ch:
		var e namedErr
		if r.Err != nil || r.Status != 409 || json.Unmarshal(r.Body, &e) != nil || e.Name != "MessageRevokedError" {
			t.Errorf("blocking POST of a revoked steer: %v %s", r.Err, r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("blocking POST of a revoked steer did not answer")
	}
	if got := c.inboxIDs("/api/session/" + sid + "/inbox"); slices.Contains(got, s1.ID) || slices.Contains(got, s2) ||
		slices.Contains(got, s3) || !slices.Contains(got, q2) {
		t.Errorf("inbox after abort: %v", got)
	}
	c.waitIdle(sid)

	wantCalls(t, srv, sid, []string{"A"}, []string{"A", "Q1"}, []string{"A", "Q1", "Q2"})
	evs := c.history(sid, 100)
	for _, id := range []string{s1.ID, s2, s3} {
		i := seqIndex(evs, 0, "session.inbox.cancelled", id)
		if i < 0 || evs[i].d.Reason != "aborted" || evs[i].d.Delivery != "steer" {
			t.Errorf("cancelled event of %s: %v", id, evs)
		}
		if seqIndex(evs, 0, "session.next.prompted", id) >= 0 {
			t.Errorf("revoked %s was promoted", id)
		}
		c.must("GET", "/session/"+sid+"/message/"+id, nil, 404)
	}
	for _, id := range []string{q1.ID, q2} {
		if seqIndex(evs, 0, "session.inbox.cancelled", id) >= 0 || seqIndex(evs, 0, "session.next.prompted", id) < 0 {
			t.Errorf("queued %s: %v", id, eventTypes(evs))
		}
	}
	fail := seqIndex(evs, 0, "session.next.step.failed", "")
	if fail < 0 || fail > seqIndex(evs, 0, "session.inbox.cancelled", s1.ID) {
		t.Errorf("step.failed should precede the cancellations: %v", eventTypes(evs))
	}
	// Revoke answers agree: revoked steers true, delivered queued 409.
	var rv struct {
		Revoked bool `json:"revoked"`
	}
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+s1.ID, nil, 200).json(t, &rv)
	if !rv.Revoked {
		t.Error("revoke of an aborted steer: revoked=false")
	}
	c.must("DELETE", "/api/session/"+sid+"/inbox/"+q1.ID, nil, 409)
	// Re-posting a revoked input is idempotent: still revoked, nothing runs.
	r := c.must("POST", "/session/"+sid+"/message", v1Body(s3, "S3", "steer"), 409)
	if !strings.Contains(string(r.Body), "MessageRevokedError") {
		t.Errorf("blocking re-POST of a revoked input: %s", r)
	}
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(s2, "S2", ""), 204)
	c.waitIdle(sid)
	if n := len(callsOf(srv, sid)); n != 3 {
		t.Errorf("model calls after re-posting revoked inputs: %d", n)
	}
}

// TestBlockingPostRevokedAnswersAtOnce: DELETE of a pending input answers
// its blocking POST with 409 while the session is still busy.
func TestBlockingPostRevokedAnswersAtOnce(t *testing.T) {
	srv, c := slow(t, 20, 40*time.Millisecond)
	sid := c.newSession()
	c.promptV2(sid, "", "long", "")
	waitCalls(t, srv, sid, 1)
	q := newID()
	ch := make(chan resp, 1)
	go func() {
		ch <- c.do(context.Background(), "POST", "/session/"+sid+"/message", v1Body(q, "queued", "queue"))
	}()
	checkFor(t, 5*time.Second, "queued input pending", func() bool {
		return slices.Contains(c.inboxIDs("/api/session/"+sid+"/inbox"), q)
	})
	start := time.Now()
	var rv struct {
		Revoked bool `json:"revoked"`
	}
	c.must("DELETE", "/session/"+sid+"/inbox/"+q, nil, 200).json(t, &rv)
	if !rv.Revoked {
		t.Error("revoked=false")
	}
	select {
	case r := <-ch:
		if r.Err != nil || r.Status != 409 || !strings.Contains(string(r.Body), "MessageRevokedError") {
			t.Errorf("blocking POST: %v %s", r.Err, r)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("blocking POST of a revoked input did not answer")
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Errorf("blocking POST answered after %v", d)
	}
	if srv.Manager.Status()[sid] != "busy" {
		t.Error("session went idle: the answer should not wait for the turn")
	}
	c.waitIdle(sid)
	if n := len(callsOf(srv, sid)); n != 1 {
		t.Errorf("model calls: %d", n)
	}
}

// TestInboxRevokeReplace exercises the inbox routes on both paths and the
// inbox events on the durable log and on /event.
func TestInboxRevokeReplace(t *testing.T) {
	srv, c := slow(t, 15, 30*time.Millisecond)
	sid := c.newSession()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines, stop := sseLines(ctx, t, c, "/event")
	defer stop()

	c.promptV2(sid, "", "A", "")
	waitCalls(t, srv, sid, 1)
	var ids []string
	for i := 1; i <= 4; i++ {
		ids = append(ids, c.promptV2(sid, "", fmt.Sprintf("Q%d original", i), "queue").ID)
	}
	q1, q2, q3, q4 := ids[0], ids[1], ids[2], ids[3]
	if got := c.inboxIDs("/api/session/" + sid + "/inbox"); !slices.Equal(got, ids) {
		t.Fatalf("v2 inbox: %v", got)
	}
	if got := c.inboxIDs("/session/" + sid + "/inbox"); !slices.Equal(got, ids) {
		t.Fatalf("v1 inbox: %v", got)
	}

	type patched struct {
		Data struct {
			ID       string `json:"id"`
			Delivery string `json:"delivery"`
			Prompt   struct {
				Text string `json:"text"`
			} `json:"prompt"`
		} `json:"data"`
	}
	var p patched
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+q1, map[string]any{"prompt": map[string]any{"text": "Q1 REPLACED"}}, 200).json(t, &p)
	if p.Data.ID != q1 || p.Data.Prompt.Text != "Q1 REPLACED" || p.Data.Delivery != "queue" {
		t.Errorf("v2 replace: %+v", p.Data)
	}
	c.must("PATCH", "/session/"+sid+"/inbox/"+q2, map[string]any{"prompt": map[string]any{"text": "Q2 REPLACED"}, "delivery": "queue"}, 200).json(t, &p)
	if p.Data.ID != q2 || p.Data.Prompt.Text != "Q2 REPLACED" {
		t.Errorf("v1 replace: %+v", p.Data)
	}
	var rv struct {
		Revoked bool `json:"revoked"`
	}
	for _, path := range []string{"/api/session/" + sid + "/inbox/" + q3, "/api/session/" + sid + "/inbox/" + q3,
		"/session/" + sid + "/inbox/" + q4, "/session/" + sid + "/inbox/" + newID()} {
		rv.Revoked = false
		c.must("DELETE", path, nil, 200).json(t, &rv)
		if !rv.Revoked {
			t.Errorf("DELETE %s: revoked=false", path)
		}
	}
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+q3, map[string]any{"delivery": "steer"}, 409)
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+newID(), map[string]any{"delivery": "steer"}, 404)
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+q1, map[string]any{"delivery": "later"}, 400)
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+q1, map[string]any{}, 400)
	if got := c.inboxIDs("/api/session/" + sid + "/inbox"); !slices.Equal(got, []string{q1, q2}) {
		t.Errorf("inbox after edits: %v", got)
	}
	c.waitIdle(sid)

	wantCalls(t, srv, sid, []string{"A"}, []string{"A", "Q1 REPLACED"}, []string{"A", "Q1 REPLACED", "Q2 REPLACED"})
	// Delivered: no more revoke or replace, on either path.
	r := c.must("DELETE", "/api/session/"+sid+"/inbox/"+q1, nil, 409)
	if !strings.Contains(string(r.Body), `"_tag":"ConflictError"`) {
		t.Errorf("v2 revoke of a delivered input: %s", r)
	}
	r = c.must("DELETE", "/session/"+sid+"/inbox/"+q2, nil, 409)
	if !strings.Contains(string(r.Body), `"name":"ConflictError"`) {
		t.Errorf("v1 revoke of a delivered input: %s", r)
	}
	c.must("PATCH", "/session/"+sid+"/inbox/"+q1, map[string]any{"prompt": map[string]any{"text": "late"}}, 409)
	if got := c.inboxIDs("/session/" + sid + "/inbox"); len(got) != 0 {
		t.Errorf("inbox when idle: %v", got)
	}

	evs := c.history(sid, 100)
	count := func(typ, id string) int {
		n := 0
		for _, e := range eventsOf(evs, typ) {
			if e.d.MessageID == id {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		typ  string
		id   string
		want int
	}{
		{"session.inbox.replaced", q1, 1}, {"session.inbox.replaced", q2, 1},
		{"session.inbox.delivery.changed", q2, 0}, // same delivery: no change
		{"session.inbox.cancelled", q3, 1}, {"session.inbox.cancelled", q4, 1},
		{"session.inbox.delivered", q1, 1}, {"session.inbox.delivered", q2, 1},
		{"session.inbox.delivered", q3, 0}, {"session.inbox.enqueued", q4, 1},
	} {
		if n := count(tc.typ, tc.id); n != tc.want {
			t.Errorf("%s(%s): want %d, got %d", tc.typ, tc.id, tc.want, n)
		}
	}
	if e := evs[seqIndex(evs, 0, "session.inbox.replaced", q1)]; e.d.Prompt == nil || e.d.Prompt.Text != "Q1 REPLACED" {
		t.Errorf("replaced event: %s", e.Data)
	}
	if e := evs[seqIndex(evs, 0, "session.next.prompted", q1)]; e.d.Prompt == nil || e.d.Prompt.Text != "Q1 REPLACED" {
		t.Errorf("prompted event of a replaced input: %s", e.Data)
	}
	for _, e := range evs {
		if strings.Contains(string(e.Data), "original") && e.d.MessageID != q3 && e.d.MessageID != q4 &&
			e.Type != "session.next.prompt.admitted" && e.Type != "session.inbox.enqueued" {
			t.Errorf("replaced text still in %s: %s", e.Type, e.Data)
		}
	}

	// The same inbox events reach /event, with their message IDs.
	want := map[string]bool{}
	for _, k := range []string{"session.inbox.enqueued/" + q1, "session.inbox.replaced/" + q1, "session.inbox.cancelled/" + q3,
		"session.inbox.cancelled/" + q4, "session.inbox.delivered/" + q2} {
		want[k] = true
	}
	deadline := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("/event ended; missing %v", want)
			}
			var f struct {
				Type       string    `json:"type"`
				Properties eventData `json:"properties"`
			}
			if json.Unmarshal([]byte(l), &f) == nil {
				delete(want, f.Type+"/"+f.Properties.MessageID)
			}
		case <-deadline:
			t.Fatalf("/event: missing %v", want)
		}
	}
}

// TestDeliveryChangeQueueToSteer: a queued input switched to steer joins
// the running turn at its next boundary; a steer switched to queue waits for
// its own turn.
func TestDeliveryChangeQueueToSteer(t *testing.T) {
	srv, c := slow(t, 10, 30*time.Millisecond)
	sid := c.newSession()
	live := recordLive(t, srv, sid)
	c.promptV2(sid, "", "A", "")
	waitCalls(t, srv, sid, 1)
	q1 := c.promptV2(sid, "", "Q1", "queue")
	q2 := c.promptV2(sid, "", "Q2", "queue")
	s := c.promptV2(sid, "", "S", "steer")
	var p struct {
		Data struct {
			Delivery string `json:"delivery"`
		} `json:"data"`
	}
	c.must("PATCH", "/api/session/"+sid+"/inbox/"+q2.ID, map[string]any{"delivery": "steer"}, 200).json(t, &p)
	if p.Data.Delivery != "steer" {
		t.Errorf("patched delivery: %v", p.Data.Delivery)
	}
	c.must("PATCH", "/session/"+sid+"/inbox/"+s.ID, map[string]any{"delivery": "queue"}, 200).json(t, &p)
	if p.Data.Delivery != "queue" {
		t.Errorf("patched delivery: %v", p.Data.Delivery)
	}
	c.waitIdle(sid)
	wantCalls(t, srv, sid,
		[]string{"A"},
		[]string{"A", "Q2"},
		[]string{"A", "Q2", "Q1"},
		[]string{"A", "Q2", "Q1", "S"})
	live.expect(t, "session.idle", 3, "turns")
	evs := c.history(sid, 100)
	checkBoundary(t, evs, seqIndex(evs, 0, "session.next.step.ended", ""), q2.ID)
	for id, d := range map[string]string{q2.ID: "steer", s.ID: "queue"} {
		i := seqIndex(evs, 0, "session.inbox.delivery.changed", id)
		if i < 0 || evs[i].d.Delivery != d {
			t.Errorf("delivery.changed(%s): %v", id, eventTypes(evs))
		}
	}
	// The re-admission of a changed input conflicts (its delivery changed).
	c.must("POST", "/api/session/"+sid+"/prompt", v2Body(q2.ID, "Q2", "queue"), 409)
	c.must("POST", "/api/session/"+sid+"/prompt", v2Body(q1.ID, "Q1", "queue"), 200)
}

// TestWaitRoute: /wait answers at once on an idle session and 404 on an
// unknown one.
func TestWaitRoute(t *testing.T) {
	_, c := slow(t, 3, 30*time.Millisecond)
	sid := c.newSession()
	start := time.Now()
	c.waitIdle(sid)
	if d := time.Since(start); d > time.Second {
		t.Errorf("wait on an idle session took %v", d)
	}
	c.promptV2(sid, "", "x", "")
	c.waitIdle(sid)
	if st := c.srv.Manager.Status(); st[sid] != "" {
		t.Errorf("status after wait: %v", st)
	}
	c.must("POST", "/api/session/"+identifier.NewSession()+"/wait", nil, 404)
}

// TestBlockingRetryAfterTurnAnswersLastAssistant: a blocking POST whose
// input's turn is already over (an idempotent retry, or a wait that
// registers late) answers like one that waited: the LAST assistant message
// of the turn the input went into — not the input's own user message, and
// not an assistant message from the middle of the turn.
func TestBlockingRetryAfterTurnAnswersLastAssistant(t *testing.T) {
	srv, c := slow(t, 6, 30*time.Millisecond)
	sid := c.newSession()
	aID := newID()
	ch := make(chan resp, 1)
	go func() { ch <- c.do(context.Background(), "POST", "/session/"+sid+"/message", v1Body(aID, "A", "")) }()
	waitCalls(t, srv, sid, 1)
	b := c.promptV2(sid, "", "B", "steer")
	cc := c.promptV2(sid, "", "C", "steer")
	var first v1Message
	r := <-ch
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("blocking POST: %v %s", r.Err, r)
	}
	r.json(t, &first)
	c.waitIdle(sid)
	wantCalls(t, srv, sid, []string{"A"}, []string{"A", "B", "C"})
	msgs := c.messages(sid)
	last := msgs[len(msgs)-1]
	if last.Info.Role != "assistant" || last.Info.ParentID != cc.ID {
		t.Fatalf("last message: %+v", last.Info)
	}
	if first.Info.ID != last.Info.ID {
		t.Errorf("blocking POST that waited answered %s, want the turn's last assistant message %s", first.Info.ID, last.Info.ID)
	}
	for _, in := range []struct{ id, text string }{{aID, "A"}, {b.ID, "B"}, {cc.ID, "C"}} {
		var got v1Message
		r := c.must("POST", "/session/"+sid+"/message", v1Body(in.id, in.text, ""), 200)
		r.json(t, &got)
		if got.Info.ID != last.Info.ID {
			t.Errorf("blocking re-POST of %s (%s) after the turn answered %s message %s (parent %s), want the turn's last assistant message %s",
				in.text, in.id, got.Info.Role, got.Info.ID, got.Info.ParentID, last.Info.ID)
		}
	}
	if n := len(callsOf(srv, sid)); n != 2 {
		t.Errorf("model calls: %d", n)
	}
}

// TestSameIDConcurrentSessions: one ID admitted concurrently into two
// sessions is admitted once; the loser gets 409 and its log stays empty
// and gapless.
func TestSameIDConcurrentSessions(t *testing.T) {
	for _, sqlite := range []bool{false, true} {
		t.Run(fmt.Sprintf("sqlite=%v", sqlite), func(t *testing.T) {
			srv := testserver.Start(t, testserver.Options{SQLite: sqlite, Scripted: scripted.Config{Chunks: 1}})
			c := newClient(t, srv)
			for i := range 6 {
				s1, s2 := c.newSession(), c.newSession()
				id := newID()
				text := fmt.Sprintf("contended %d", i)
				var wg sync.WaitGroup
				res := make([]resp, 2)
				for j, sid := range []string{s1, s2} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res[j] = c.do(context.Background(), "POST", "/api/session/"+sid+"/prompt", v2Body(id, text, ""))
					}()
				}
				wg.Wait()
				ok := 0
				for j, r := range res {
					switch {
					case r.Err == nil && r.Status == 200:
						ok++
					case r.Err == nil && r.Status == 409:
					default:
						t.Fatalf("admission %d: %v %s", j, r.Err, r)
					}
				}
				if ok != 1 {
					t.Fatalf("iteration %d: %d sessions admitted %s: %s / %s", i, ok, id, res[0], res[1])
				}
				c.waitIdle(s1)
				c.waitIdle(s2)
				for j, sid := range []string{s1, s2} {
					evs := c.history(sid, 100) // checks gaplessness
					if res[j].Status == 409 && len(evs) != 0 {
						t.Errorf("loser session log: %v", eventTypes(evs))
					}
					if res[j].Status == 200 && len(eventsOf(evs, "session.next.prompted")) != 1 {
						t.Errorf("winner session log: %v", eventTypes(evs))
					}
					// The loser's next admission gets the next seq, not a gap.
					a := c.promptV2(sid, "", fmt.Sprintf("after %d/%d", i, j), "")
					if a.AdmittedSeq != int64(len(evs)+1) {
						t.Errorf("next admission in %s got seq %d after %d events", sid, a.AdmittedSeq, len(evs))
					}
					c.waitIdle(sid)
					c.history(sid, 100)
				}
			}
		})
	}
}
