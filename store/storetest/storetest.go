// Package storetest is the conformance suite every store.Store passes:
// store/memory (the reference semantics) and store/sqlite run it from their
// tests. Values are compared in their JSON shapes, the shapes clients see,
// because a persistent store round-trips them through encoding/json.
package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Opener returns a fresh, empty store. The suite closes it (exactly once);
// the opener only cleans up what Close does not (temporary directories).
type Opener func(t *testing.T) store.Store

// Run runs the conformance suite against stores made by open.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		f    func(*testing.T, store.Store)
	}{
		{"Sessions", testSessions},
		{"DeleteSessionCascades", testDeleteCascades},
		{"Messages", testMessages},
		{"OrphanPartFailsBatch", testOrphanPartFailsBatch},
		{"PartOfMessageInBatch", testPartOfMessageInBatch},
		{"DeleteMessages", testDeleteMessages},
		{"MessagesPage", testMessagesPage},
		{"NoAliasing", testNoAliasing},
		{"PartIDsUnique", testPartIDsUnique},
		{"OpenSessions", testOpenSessions},
		{"AdmitConflict", testAdmitConflict},
		{"BatchAllOrNothing", testAllOrNothing},
		{"CancelledContext", testCancelled},
		{"PendingInputs", testPendingInputs},
		{"TombstonesBounded", testTombstonesBounded},
		{"GetInputAcrossSessions", testGetInputAcrossSessions},
		{"InputClientTools", testInputClientTools},
		{"Events", testEvents},
		{"EventsAfterLimit", testEventsAfterLimit},
		{"EventsIndependentSessions", testEventsIndependent},
		{"ConcurrentSessions", testConcurrentSessions},
		{"ConcurrentSameSession", testConcurrentSameSession},
		{"CreateOnly", testCreateOnly},
		{"AdmitAndUpdateInOneBatch", testAdmitAndUpdate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.f(t, s)
		})
	}
	t.Run("Model", func(t *testing.T) { testModel(t, open) })
}

// ---- fixtures ----

// NewSession returns a session fixture.
func NewSession(id string) *opencode.Session {
	return &opencode.Session{ID: id, Slug: "slug-" + id, ProjectID: "prj_1", Directory: "/work/" + id,
		Title: "Session " + id, Version: opencode.Version, Metadata: json.RawMessage(`{"k":"v"}`),
		Time: opencode.SessionTime{Created: 1700000000000, Updated: 1700000000001}}
}

// UserMessage returns a user message fixture.
func UserMessage(sessionID, id string) opencode.Message {
	return opencode.Message{ID: id, SessionID: sessionID, Role: opencode.User, Agent: "build",
		Model: &opencode.MessageModel{ProviderID: "anthropic", ModelID: "claude"},
		Time:  opencode.MessageTime{Created: 1700000000100}, Tools: map[string]bool{"bash": true}}
}

// AssistantMessage returns an assistant message fixture.
func AssistantMessage(sessionID, id, parentID string) opencode.Message {
	done := int64(1700000000300)
	return opencode.Message{ID: id, SessionID: sessionID, Role: opencode.Assistant, ParentID: parentID,
		ModelID: "claude", ProviderID: "anthropic", Mode: "build", Agent: "build",
		Path: opencode.MessagePath{Cwd: "/work", Root: "/work"}, Cost: 0.25, Finish: "stop",
		Tokens: opencode.Tokens{Input: 10, Output: 20, Cache: opencode.CacheUsage{Read: 3}},
		Time:   opencode.MessageTime{Created: 1700000000200, Completed: &done}}
}

// TextPart returns a text part fixture.
func TextPart(sessionID, messageID, id, text string) opencode.Part {
	return opencode.Part{ID: id, SessionID: sessionID, MessageID: messageID, Type: opencode.PartText, Text: text,
		Time: &opencode.PartTime{Start: 1}}
}

// ToolPart returns a completed tool part fixture.
func ToolPart(sessionID, messageID, id string) opencode.Part {
	out := "ok"
	return opencode.Part{ID: id, SessionID: sessionID, MessageID: messageID, Type: opencode.PartTool,
		CallID: "call_" + id, Tool: "bash", State: &opencode.ToolState{Status: "completed",
			Input: json.RawMessage(`{"cmd":"ls"}`), Output: &out, Title: "ls",
			Time: &opencode.ToolTime{Start: 5}}}
}

// NewInput returns a pending input fixture.
func NewInput(sessionID, id string) *opencode.Input {
	return &opencode.Input{ID: id, SessionID: sessionID, Delivery: opencode.Queue, State: opencode.InputPending,
		Parts:       []opencode.Part{TextPart(sessionID, id, "prt_"+id, "hello "+id)},
		Agent:       "build",
		Fingerprint: "fp-" + id, TimeCreated: 1700000000050}
}

// NewEvent returns a durable event fixture (Seq unset).
func NewEvent(sessionID, id string, n int) *opencode.Event {
	return &opencode.Event{ID: id, Type: opencode.EvPromptAdmitted, SessionID: sessionID,
		Directory: "/work/" + sessionID, Version: 2, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

// ---- helpers ----

// tb is the part of testing.TB that *rapid.T also has.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

func commit(t tb, s store.Store, sid string, b *store.Batch) {
	t.Helper()
	if err := s.Commit(context.Background(), sid, b); err != nil {
		t.Fatalf("Commit(%s): %v", sid, err)
	}
}

func jsonOf(t tb, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func eqJSON(t tb, what string, got, want any) {
	t.Helper()
	if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
		t.Fatalf("%s:\n got  %s\n want %s", what, g, w)
	}
}

func wantErr(t tb, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func eqEvent(t tb, what string, got, want *opencode.Event) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.SessionID != want.SessionID ||
		got.Directory != want.Directory || got.Seq != want.Seq || got.Version != want.Version ||
		got.Durable != want.Durable || string(got.Data) != string(want.Data) {
		t.Fatalf("%s: got {%s %s %s %s seq=%d v=%d durable=%v %s}, want {%s %s %s %s seq=%d v=%d durable=%v %s}", what,
			got.ID, got.Type, got.SessionID, got.Directory, got.Seq, got.Version, got.Durable, got.Data,
			want.ID, want.Type, want.SessionID, want.Directory, want.Seq, want.Version, want.Durable, want.Data)
	}
}

func sessionIDs(t tb, s store.Store) []string {
	t.Helper()
	all, err := s.ListSessions(context.Background())
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	ids := make([]string, len(all))
	for i, x := range all {
		ids[i] = x.ID
	}
	return ids
}

func messageIDs(t tb, s store.Store, sid string) []string {
	t.Helper()
	ms, err := s.ListMessages(context.Background(), sid)
	if err != nil {
		t.Fatalf("ListMessages(%s): %v", sid, err)
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.Info.ID
	}
	return ids
}

func partIDs(mp opencode.MessageWithParts) []string {
	ids := make([]string, len(mp.Parts))
	for i, p := range mp.Parts {
		ids[i] = p.ID
	}
	return ids
}

func pendingIDs(t tb, s store.Store, sid string) []string {
	t.Helper()
	ins, err := s.PendingInputs(context.Background(), sid)
	if err != nil {
		t.Fatalf("PendingInputs(%s): %v", sid, err)
	}
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = in.ID
		if i > 0 && ins[i-1].Order >= in.Order {
			t.Fatalf("PendingInputs(%s): order not increasing: %d then %d", sid, ins[i-1].Order, in.Order)
		}
	}
	return ids
}

func eqStrings(t tb, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func lastSeq(t tb, s store.Store, sid string) int64 {
	t.Helper()
	n, err := s.LastSeq(context.Background(), sid)
	if err != nil {
		t.Fatalf("LastSeq(%s): %v", sid, err)
	}
	return n
}

func events(t tb, s store.Store, sid string, after int64, limit int) []*opencode.Event {
	t.Helper()
	evs, err := s.Events(context.Background(), sid, after, limit)
	if err != nil {
		t.Fatalf("Events(%s, %d, %d): %v", sid, after, limit, err)
	}
	return evs
}

// checkGapless checks that the log of sid is 1..n without holes.
func checkGapless(t tb, s store.Store, sid string, n int64) []*opencode.Event {
	t.Helper()
	evs := events(t, s, sid, 0, 0)
	if int64(len(evs)) != n {
		t.Fatalf("%s: %d events, want %d", sid, len(evs), n)
	}
	for i, e := range evs {
		if e.Seq != int64(i)+1 || !e.Durable {
			t.Fatalf("%s: event %d has seq %d durable %v", sid, i, e.Seq, e.Durable)
		}
	}
	if got := lastSeq(t, s, sid); got != n {
		t.Fatalf("%s: LastSeq = %d, want %d", sid, got, n)
	}
	return evs
}

// ---- tests ----

func testSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, err := s.GetSession(ctx, "ses_a")
	wantErr(t, "GetSession(missing)", err, store.ErrNotFound)
	eqStrings(t, "ListSessions(empty)", sessionIDs(t, s), nil)
	wantErr(t, "Commit to missing session", s.Commit(ctx, "ses_a", &store.Batch{Events: []*opencode.Event{NewEvent("ses_a", "e", 1)}}), store.ErrNotFound)

	for _, id := range []string{"ses_c", "ses_a", "ses_b"} { // creation order, not ID order
		commit(t, s, id, &store.Batch{Session: NewSession(id)})
	}
	eqStrings(t, "ListSessions", sessionIDs(t, s), []string{"ses_c", "ses_a", "ses_b"})
	got, err := s.GetSession(ctx, "ses_a")
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "GetSession", got, NewSession("ses_a"))
	if n := lastSeq(t, s, "ses_a"); n != 0 {
		t.Fatalf("LastSeq of a new session = %d", n)
	}

	// Replacing keeps the creation position.
	upd := NewSession("ses_c")
	upd.Title = "renamed"
	arch := 1.5
	upd.Time.Archived = &arch
	upd.Summary = &opencode.SessionSummary{Additions: 3}
	commit(t, s, "ses_c", &store.Batch{Session: upd})
	eqStrings(t, "ListSessions after update", sessionIDs(t, s), []string{"ses_c", "ses_a", "ses_b"})
	got, _ = s.GetSession(ctx, "ses_c")
	eqJSON(t, "GetSession after update", got, upd)
	all, _ := s.ListSessions(ctx)
	eqJSON(t, "ListSessions values", all, []*opencode.Session{upd, NewSession("ses_a"), NewSession("ses_b")})

	if err := s.DeleteSession(ctx, "ses_a"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteSession twice", s.DeleteSession(ctx, "ses_a"), store.ErrNotFound)
	_, err = s.GetSession(ctx, "ses_a")
	wantErr(t, "GetSession(deleted)", err, store.ErrNotFound)
	eqStrings(t, "ListSessions after delete", sessionIDs(t, s), []string{"ses_c", "ses_b"})

	// Re-created, it is the newest.
	commit(t, s, "ses_a", &store.Batch{Session: NewSession("ses_a")})
	eqStrings(t, "ListSessions after re-create", sessionIDs(t, s), []string{"ses_c", "ses_b", "ses_a"})
}

// populate fills session sid with two messages with parts, two inputs (one
// delivered) and three events.
func populate(t tb, s store.Store, sid string) {
	t.Helper()
	in1, in2 := NewInput(sid, sid+"_in1"), NewInput(sid, sid+"_in2")
	commit(t, s, sid, &store.Batch{Session: NewSession(sid), Admit: []*opencode.Input{in1, in2},
		Events: []*opencode.Event{NewEvent(sid, sid+"_e1", 1), NewEvent(sid, sid+"_e2", 2)}})
	del := *in1
	del.State = opencode.InputDelivered
	del.PromotedSeq = 2
	commit(t, s, sid, &store.Batch{
		Messages: []opencode.Message{UserMessage(sid, in1.ID), AssistantMessage(sid, sid+"_m2", in1.ID)},
		Parts: []opencode.Part{TextPart(sid, in1.ID, sid+"_p1", "hi"), ToolPart(sid, sid+"_m2", sid+"_p2"),
			TextPart(sid, sid+"_m2", sid+"_p3", "done")},
		Inputs: []*opencode.Input{&del},
		Events: []*opencode.Event{NewEvent(sid, sid+"_e3", 3)},
	})
}

func testDeleteCascades(t *testing.T, s store.Store) {
	ctx := context.Background()
	populate(t, s, "ses_x")
	populate(t, s, "ses_y")
	if err := s.DeleteSession(ctx, "ses_x"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ses_x_in1", "ses_x_m2"} {
		if ok, err := s.MessageExists(ctx, id); err != nil || ok {
			t.Fatalf("MessageExists(%s) after delete = %v, %v", id, ok, err)
		}
	}
	for _, id := range []string{"ses_x_in1", "ses_x_in2"} {
		_, err := s.GetInput(ctx, id)
		wantErr(t, "GetInput after delete", err, store.ErrNotFound)
	}
	_, err := s.ListMessages(ctx, "ses_x")
	wantErr(t, "ListMessages after delete", err, store.ErrNotFound)
	_, err = s.GetMessage(ctx, "ses_x", "ses_x_m2")
	wantErr(t, "GetMessage after delete", err, store.ErrNotFound)
	_, err = s.PendingInputs(ctx, "ses_x")
	wantErr(t, "PendingInputs after delete", err, store.ErrNotFound)
	_, err = s.Events(ctx, "ses_x", 0, 0)
	wantErr(t, "Events after delete", err, store.ErrNotFound)
	_, err = s.LastSeq(ctx, "ses_x")
	wantErr(t, "LastSeq after delete", err, store.ErrNotFound)

	// The other session is untouched.
	eqStrings(t, "ses_y messages", messageIDs(t, s, "ses_y"), []string{"ses_y_in1", "ses_y_m2"})
	eqStrings(t, "ses_y pending", pendingIDs(t, s, "ses_y"), []string{"ses_y_in2"})
	checkGapless(t, s, "ses_y", 3)

	// Its IDs are free again, and a re-created session starts empty.
	commit(t, s, "ses_x", &store.Batch{Session: NewSession("ses_x"), Admit: []*opencode.Input{NewInput("ses_x", "ses_x_in1")}})
	eqStrings(t, "re-created messages", messageIDs(t, s, "ses_x"), nil)
	eqStrings(t, "re-created pending", pendingIDs(t, s, "ses_x"), []string{"ses_x_in1"})
	checkGapless(t, s, "ses_x", 0)
	commit(t, s, "ses_x", &store.Batch{Events: []*opencode.Event{NewEvent("ses_x", "again", 1)}})
	checkGapless(t, s, "ses_x", 1)
}

func testMessages(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_m"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	commit(t, s, "ses_other", &store.Batch{Session: NewSession("ses_other"),
		Messages: []opencode.Message{UserMessage("ses_other", "msg_o")}})
	eqStrings(t, "empty session", messageIDs(t, s, sid), nil)
	if ms, _ := s.ListMessages(ctx, sid); len(ms) != 0 {
		t.Fatalf("ListMessages(empty) = %v", ms)
	}

	m1, m2 := UserMessage(sid, "msg_1"), AssistantMessage(sid, "msg_2", "msg_1")
	p1, p2 := TextPart(sid, "msg_1", "prt_1", "question"), TextPart(sid, "msg_2", "prt_2", "answer")
	p3 := ToolPart(sid, "msg_2", "prt_3")
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{m1, m2}, Parts: []opencode.Part{p1, p2, p3}})
	// A message whose ID sorts first is still created last.
	m0 := UserMessage(sid, "msg_0")
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{m0}})
	eqStrings(t, "creation order", messageIDs(t, s, sid), []string{"msg_1", "msg_2", "msg_0"})

	// Replacing a message and a part keeps both positions; a new part goes last.
	m1b := m1
	m1b.Summary = &opencode.UserSummary{Title: "t", Diffs: []json.RawMessage{}}
	m2b := m2
	m2b.Error = &opencode.NamedError{Name: "APIError", Data: map[string]any{"message": "boom"}}
	m2b.Finish = "error"
	p2b := p2
	p2b.Text = "answer, longer"
	p0 := TextPart(sid, "msg_2", "prt_0", "late")
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{m2b, m1b}, Parts: []opencode.Part{p0, p2b}})
	eqStrings(t, "order after replace", messageIDs(t, s, sid), []string{"msg_1", "msg_2", "msg_0"})

	ms, err := s.ListMessages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "ListMessages", ms, []opencode.MessageWithParts{
		{Info: m1b, Parts: []opencode.Part{p1}},
		{Info: m2b, Parts: []opencode.Part{p2b, p3, p0}},
		{Info: m0, Parts: []opencode.Part{}},
	})

	got, err := s.GetMessage(ctx, sid, "msg_2")
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "GetMessage", got, opencode.MessageWithParts{Info: m2b, Parts: []opencode.Part{p2b, p3, p0}})
	got, err = s.GetMessage(ctx, sid, "msg_0")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Parts) != 0 {
		t.Fatalf("GetMessage(no parts) has %d parts", len(got.Parts))
	}
	_, err = s.GetMessage(ctx, sid, "msg_missing")
	wantErr(t, "GetMessage(missing)", err, store.ErrNotFound)
	_, err = s.GetMessage(ctx, sid, "msg_o")
	wantErr(t, "GetMessage(of another session)", err, store.ErrNotFound)
	_, err = s.GetMessage(ctx, "ses_missing", "msg_1")
	wantErr(t, "GetMessage(missing session)", err, store.ErrNotFound)
	_, err = s.ListMessages(ctx, "ses_missing")
	wantErr(t, "ListMessages(missing session)", err, store.ErrNotFound)

	for id, want := range map[string]bool{"msg_1": true, "msg_0": true, "msg_o": true, "msg_missing": false, "prt_1": false} {
		ok, err := s.MessageExists(ctx, id)
		if err != nil || ok != want {
			t.Fatalf("MessageExists(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	for id, want := range map[string]string{"msg_1": sid, "msg_o": "ses_other"} {
		if got, err := s.MessageSession(ctx, id); err != nil || got != want {
			t.Fatalf("MessageSession(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
	for _, id := range []string{"msg_missing", "prt_1"} {
		_, err := s.MessageSession(ctx, id)
		wantErr(t, "MessageSession("+id+")", err, store.ErrNotFound)
	}
	eqStrings(t, "other session", messageIDs(t, s, "ses_other"), []string{"msg_o"})
}

// testOpenSessions: the sessions a restart must resume are those flagged
// open and those with pending inputs, oldest first; clearing the flag and
// delivering the inputs takes a session off the list.
func testOpenSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	yes, no := true, false
	commit(t, s, "ses_o1", &store.Batch{Session: NewSession("ses_o1")})
	commit(t, s, "ses_o2", &store.Batch{Session: NewSession("ses_o2"), Open: &yes})
	commit(t, s, "ses_o3", &store.Batch{Session: NewSession("ses_o3"), Admit: []*opencode.Input{NewInput("ses_o3", "msg_o3")}})
	commit(t, s, "ses_o4", &store.Batch{Session: NewSession("ses_o4")})
	open := func() []string {
		ids, err := s.OpenSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = slices.DeleteFunc(ids, func(id string) bool { return !strings.HasPrefix(id, "ses_o") })
		// SessionOpen says the same of each session.
		for _, id := range []string{"ses_o1", "ses_o2", "ses_o3", "ses_o4"} {
			one, err := s.SessionOpen(ctx, id)
			if err != nil || one != slices.Contains(ids, id) {
				t.Fatalf("SessionOpen(%s) = %v, %v; OpenSessions lists %v", id, one, err, ids)
			}
		}
		return ids
	}
	eqStrings(t, "open", open(), []string{"ses_o2", "ses_o3"})
	if _, err := s.SessionOpen(ctx, "ses_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SessionOpen(missing) = %v, want ErrNotFound", err)
	}
	// A batch that may skip the fsync is committed and read like any other.
	commit(t, s, "ses_o1", &store.Batch{NoSync: true, Messages: []opencode.Message{AssistantMessage("ses_o1", "msg_o1", "")}})
	if _, err := s.GetMessage(ctx, "ses_o1", "msg_o1"); err != nil {
		t.Errorf("a NoSync batch is not readable: %v", err)
	}
	commit(t, s, "ses_o2", &store.Batch{Open: &no})
	in := NewInput("ses_o3", "msg_o3")
	in.State = opencode.InputDelivered
	commit(t, s, "ses_o3", &store.Batch{Inputs: []*opencode.Input{in}, Open: &yes})
	commit(t, s, "ses_o4", &store.Batch{Open: &yes})
	eqStrings(t, "after", open(), []string{"ses_o3", "ses_o4"})
}

// testPartIDsUnique: an admitted input's part ID must not be in use by a
// stored part (any session) or another input's part, nor twice in one
// batch; a refused batch admits nothing; deleting a session frees its IDs.
func testPartIDsUnique(t *testing.T, s store.Store) {
	ctx := context.Background()
	const a, b = "ses_pa", "ses_pb"
	commit(t, s, a, &store.Batch{Session: NewSession(a), Messages: []opencode.Message{AssistantMessage(a, "msg_pa1", "")},
		Parts: []opencode.Part{TextPart(a, "msg_pa1", "prt_stored", "x")}, Admit: []*opencode.Input{NewInput(a, "msg_pa2")}})
	commit(t, s, b, &store.Batch{Session: NewSession(b)})
	withPart := func(id, partID string) *opencode.Input {
		in := NewInput(b, id)
		in.Parts[0].ID = partID
		return in
	}
	twice := NewInput(b, "msg_pb3")
	twice.Parts = append(twice.Parts, twice.Parts[0])
	for _, tc := range []struct {
		name  string
		admit []*opencode.Input
		part  string
	}{
		{"a stored part of another session", []*opencode.Input{withPart("msg_pb1", "prt_stored")}, "prt_stored"},
		{"another input's part", []*opencode.Input{withPart("msg_pb2", "prt_msg_pa2")}, "prt_msg_pa2"},
		{"twice in one input", []*opencode.Input{twice}, "prt_msg_pb3"},
		{"two inputs of one batch", []*opencode.Input{withPart("msg_pb4", "prt_same"), withPart("msg_pb5", "prt_same")}, "prt_same"},
	} {
		err := s.Commit(ctx, b, &store.Batch{Admit: tc.admit})
		var pce *store.PartConflictError
		if !errors.As(err, &pce) || pce.ID != tc.part || !errors.Is(err, store.ErrConflict) {
			t.Errorf("%s: Commit = %v, want a PartConflictError for %s", tc.name, err, tc.part)
		}
		for _, in := range tc.admit {
			if _, err := s.GetInput(ctx, in.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: input %s was admitted by a refused batch", tc.name, in.ID)
			}
		}
	}
	commit(t, s, b, &store.Batch{Admit: []*opencode.Input{withPart("msg_pb6", "prt_fresh")}})
	if err := s.DeleteSession(ctx, a); err != nil {
		t.Fatal(err)
	}
	commit(t, s, b, &store.Batch{Admit: []*opencode.Input{withPart("msg_pb7", "prt_msg_pa2")}})
}

// testNoAliasing: what a caller committed or read is its own: changing it
// afterwards (the tool state of a part, a session's metadata, an input's
// parts, an event's data) changes nothing in the store.
func testNoAliasing(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_alias"
	sess := NewSession(sid)
	msg := UserMessage(sid, "msg_a1")
	part := ToolPart(sid, "msg_a1", "prt_a1")
	in := NewInput(sid, "msg_a2")
	ev := &opencode.Event{ID: "evt_a1", Type: "x", SessionID: sid, Data: json.RawMessage(`{"v":1}`)}
	commit(t, s, sid, &store.Batch{Session: sess, Messages: []opencode.Message{msg}, Parts: []opencode.Part{part},
		Admit: []*opencode.Input{in}, Events: []*opencode.Event{ev}})
	want, err := s.ListMessages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)

	// Change everything that was committed.
	sess.Title = "changed"
	sess.Metadata[2] = 'X'
	*part.State.Output = "changed"
	part.State.Input[2] = 'X'
	msg.Tools["bash"] = false
	in.Parts[0].Text = "changed"
	ev.Data[2] = 'X'
	// And everything that was read.
	got, _ := s.ListMessages(ctx, sid)
	got[0].Parts[0].State.Title = "changed"
	got[0].Info.Tools["read"] = true
	gs, _ := s.GetSession(ctx, sid)
	gs.Metadata[2] = 'Y'
	gi, _ := s.GetInput(ctx, "msg_a2")
	gi.Parts[0].Text = "changed too"
	evs, _ := s.Events(ctx, sid, 0, 0)
	evs[0].Data[2] = 'Y'

	after, _ := s.ListMessages(ctx, sid)
	if b, _ := json.Marshal(after); string(b) != string(wantJSON) {
		t.Errorf("messages changed through a caller's copy:\n got %s\nwant %s", b, wantJSON)
	}
	if gs2, _ := s.GetSession(ctx, sid); gs2.Title == "changed" || string(gs2.Metadata) != `{"k":"v"}` {
		t.Errorf("session changed through a caller's copy: %+v %s", gs2.Title, gs2.Metadata)
	}
	if gi2, _ := s.GetInput(ctx, "msg_a2"); gi2.Parts[0].Text != NewInput(sid, "msg_a2").Parts[0].Text {
		t.Errorf("input changed through a caller's copy: %q", gi2.Parts[0].Text)
	}
	if evs2, _ := s.Events(ctx, sid, 0, 0); string(evs2[0].Data) != `{"v":1}` {
		t.Errorf("event changed through a caller's copy: %s", evs2[0].Data)
	}
	if ev.Seq != 1 {
		t.Errorf("the committed event did not learn its seq: %d", ev.Seq)
	}
}

// testMessagesPage: pages in both orders, forward and backward from an
// anchor, match cutting the whole list; an unknown anchor is ErrNotFound.
func testMessagesPage(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_page"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("msg_p%d", i)
		ids = append(ids, id)
		commit(t, s, sid, &store.Batch{Messages: []opencode.Message{UserMessage(sid, id)},
			Parts: []opencode.Part{TextPart(sid, id, fmt.Sprintf("prt_p%d", i), id)}})
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	for _, tc := range []struct {
		q    opencode.PageQuery
		want []string
	}{
		{opencode.PageQuery{Limit: 3}, ids[:3]},
		{opencode.PageQuery{Limit: 3, Desc: true}, rev[:3]},
		{opencode.PageQuery{Anchor: "msg_p2", Limit: 3}, ids[3:6]},
		{opencode.PageQuery{Anchor: "msg_p5", Limit: 3}, ids[6:]},
		{opencode.PageQuery{Anchor: "msg_p5", Limit: 3, Before: true}, ids[2:5]},
		{opencode.PageQuery{Anchor: "msg_p1", Limit: 3, Before: true}, ids[:1]},
		{opencode.PageQuery{Anchor: "msg_p4", Limit: 2, Desc: true}, []string{"msg_p3", "msg_p2"}},
		{opencode.PageQuery{Anchor: "msg_p4", Limit: 2, Desc: true, Before: true}, []string{"msg_p6", "msg_p5"}},
		{opencode.PageQuery{Anchor: "msg_p6", Limit: 2}, nil},
		{opencode.PageQuery{}, ids},
	} {
		page, err := s.MessagesPage(ctx, sid, tc.q)
		if err != nil {
			t.Fatalf("%+v: %v", tc.q, err)
		}
		var got []string
		for _, mp := range page {
			got = append(got, mp.Info.ID)
			if len(mp.Parts) != 1 || mp.Parts[0].Text != mp.Info.ID {
				t.Errorf("%+v: parts of %s = %+v", tc.q, mp.Info.ID, mp.Parts)
			}
		}
		eqStrings(t, fmt.Sprintf("page %+v", tc.q), got, tc.want)
	}
	if _, err := s.MessagesPage(ctx, sid, opencode.PageQuery{Anchor: "msg_nope"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown anchor: %v", err)
	}
	if _, err := s.MessagesPage(ctx, "ses_nope", opencode.PageQuery{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
}

// testDeleteMessages: a batch removes messages with their parts, and single
// parts, in this session only; unknown IDs are ignored.
func testDeleteMessages(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_del"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	commit(t, s, "ses_del2", &store.Batch{Session: NewSession("ses_del2"),
		Messages: []opencode.Message{UserMessage("ses_del2", "msg_x")}, Parts: []opencode.Part{TextPart("ses_del2", "msg_x", "prt_x", "other")}})
	m1, m2 := UserMessage(sid, "msg_d1"), UserMessage(sid, "msg_d2")
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{m1, m2}, Parts: []opencode.Part{
		TextPart(sid, "msg_d1", "prt_d1", "a"), TextPart(sid, "msg_d2", "prt_d2", "b"), TextPart(sid, "msg_d2", "prt_d3", "c")}})
	commit(t, s, sid, &store.Batch{DeleteMessages: []string{"msg_d1", "msg_nope", "msg_x"}, DeleteParts: []string{"prt_d2", "prt_nope", "prt_x"}})
	eqStrings(t, "after delete", messageIDs(t, s, sid), []string{"msg_d2"})
	ms, err := s.ListMessages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "parts left", ms, []opencode.MessageWithParts{{Info: m2, Parts: []opencode.Part{TextPart(sid, "msg_d2", "prt_d3", "c")}}})
	if ok, _ := s.MessageExists(ctx, "msg_d1"); ok {
		t.Error("a deleted message still exists")
	}
	if _, err := s.GetMessage(ctx, sid, "msg_d1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMessage(deleted) = %v, want ErrNotFound", err)
	}
	// Another session's message and part are untouched.
	other, err := s.ListMessages(ctx, "ses_del2")
	if err != nil || len(other) != 1 || len(other[0].Parts) != 1 {
		t.Errorf("other session = %v, %v", other, err)
	}
	// A deleted message's ID can be used again.
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{m1}})
	eqStrings(t, "re-created", messageIDs(t, s, sid), []string{"msg_d2", "msg_d1"})
}

// testOrphanPartFailsBatch: a part whose message is neither stored in the
// batch's session nor in the batch's Messages, or that names another
// session, fails the whole batch with an *OrphanPartError (neither
// ErrNotFound nor ErrConflict), and nothing of the batch is written.
func testOrphanPartFailsBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid, other = "ses_p", "ses_q"
	commit(t, s, other, &store.Batch{Session: NewSession(other), Messages: []opencode.Message{UserMessage(other, "msg_q")},
		Parts: []opencode.Part{TextPart(other, "msg_q", "prt_q", "theirs")}})
	in := NewInput(sid, "msg_in")
	commit(t, s, sid, &store.Batch{Session: NewSession(sid), Messages: []opencode.Message{UserMessage(sid, "msg_1"), UserMessage(sid, "msg_gone")},
		Parts:  []opencode.Part{TextPart(sid, "msg_1", "prt_1", "kept")},
		Admit:  []*opencode.Input{in},
		Events: []*opencode.Event{NewEvent(sid, "e1", 1)}})
	commit(t, s, sid, &store.Batch{DeleteMessages: []string{"msg_gone"}})
	snapshot := func() string {
		t.Helper()
		var out []any
		for _, id := range []string{sid, other} {
			ms, err := s.ListMessages(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			pend, _ := s.PendingInputs(ctx, id)
			sess, _ := s.GetSession(ctx, id)
			out = append(out, ms, pend, sess, events(t, s, id, 0, 0))
		}
		got, err := s.GetInput(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		open, _ := s.OpenSessions(ctx)
		return jsonOf(t, append(out, got, got.Order, open, sessionIDs(t, s)))
	}
	before := snapshot()

	for _, tc := range []struct {
		name     string
		sid      string // the batch's session, sid if empty
		messages []opencode.Message
		orphan   opencode.Part
		first    bool // the orphan comes before the good parts
		psid     string
	}{
		{name: "unknown message", orphan: TextPart(sid, "msg_nope", "prt_o1", "x")},
		{name: "unknown message, listed first", orphan: TextPart(sid, "msg_nope", "prt_o2", "x"), first: true},
		{name: "deleted message", orphan: TextPart(sid, "msg_gone", "prt_o3", "x")},
		{name: "message of another session", orphan: TextPart(sid, "msg_q", "prt_o4", "x")},
		{name: "message of another session listed in the batch", orphan: TextPart(sid, "msg_q", "prt_o5", "x"),
			messages: []opencode.Message{UserMessage(sid, "msg_q")}},
		{name: "part naming another session", orphan: TextPart(other, "msg_1", "prt_o6", "x"), psid: other},
		{name: "part of the other session's message naming it", orphan: TextPart(other, "msg_q", "prt_o7", "x"), psid: other},
		{name: "part naming no session", orphan: TextPart("", "msg_1", "prt_o8", "x"), psid: "-"},
		{name: "replacing the other session's part", orphan: TextPart(sid, "msg_q", "prt_q", "mine now")},
		{name: "in a batch creating its session", sid: "ses_new", orphan: TextPart("ses_new", "msg_1", "prt_o9", "x")},
	} {
		bsid := cmp.Or(tc.sid, sid)
		upd := NewSession(bsid)
		upd.Title = "must not be written"
		yes := true
		fresh := NewInput(bsid, "msg_fresh")
		delivered := *in
		delivered.State = opencode.InputDelivered
		evs := []*opencode.Event{NewEvent(bsid, "x1", 1), NewEvent(bsid, "x2", 2)}
		good := []opencode.Part{TextPart(bsid, "msg_new", "prt_new", "x")}
		if tc.sid == "" {
			good = append(good, TextPart(sid, "msg_1", "prt_1", "changed"))
		}
		parts := append(slices.Clone(good), tc.orphan)
		if tc.first {
			parts = append([]opencode.Part{tc.orphan}, good...)
		}
		b := &store.Batch{Session: upd, Open: &yes,
			Messages: append([]opencode.Message{UserMessage(bsid, "msg_new")}, tc.messages...),
			Parts:    parts, DeleteParts: []string{"prt_1"}, DeleteMessages: []string{"msg_1"},
			Admit: []*opencode.Input{fresh}, Events: evs}
		if tc.sid == "" {
			b.Inputs = []*opencode.Input{&delivered}
		}
		err := s.Commit(ctx, bsid, b)
		var ope *store.OrphanPartError
		if !errors.As(err, &ope) {
			t.Fatalf("%s: Commit = %v, want an *OrphanPartError", tc.name, err)
		}
		want := store.OrphanPartError{PartID: tc.orphan.ID, MessageID: tc.orphan.MessageID, SessionID: bsid, PartSessionID: cmp.Or(tc.psid, bsid)}
		if tc.psid == "-" {
			want.PartSessionID = ""
		}
		if *ope != want {
			t.Errorf("%s: error %+v, want %+v", tc.name, *ope, want)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.orphan.ID) || !strings.Contains(msg, tc.orphan.MessageID) {
			t.Errorf("%s: error %q does not name the part and its message", tc.name, msg)
		}
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
			t.Errorf("%s: an orphan part is a caller's bug, not ErrNotFound or ErrConflict: %v", tc.name, err)
		}
		if got := snapshot(); got != before {
			t.Fatalf("%s: state changed:\n got  %s\n want %s", tc.name, got, before)
		}
		for _, e := range evs {
			if e.Seq != 0 || e.Durable {
				t.Fatalf("%s: failed Commit set seq %d durable %v", tc.name, e.Seq, e.Durable)
			}
		}
		if fresh.Order != 0 {
			t.Fatalf("%s: failed Commit set Order %d", tc.name, fresh.Order)
		}
		if ok, _ := s.MessageExists(ctx, "msg_new"); ok {
			t.Fatalf("%s: message written", tc.name)
		}
		_, err = s.GetInput(ctx, fresh.ID)
		wantErr(t, tc.name+": GetInput(fresh)", err, store.ErrNotFound)
		_, err = s.GetSession(ctx, "ses_new")
		wantErr(t, tc.name+": GetSession(ses_new)", err, store.ErrNotFound)
	}

	// The store goes on: the same events commit fine and continue the log.
	evs := []*opencode.Event{NewEvent(sid, "e2", 2)}
	commit(t, s, sid, &store.Batch{Parts: []opencode.Part{TextPart(sid, "msg_1", "prt_2", "next")}, Events: evs})
	if evs[0].Seq != 2 {
		t.Fatalf("seq after failures = %d, want 2", evs[0].Seq)
	}
	got, err := s.GetMessage(ctx, sid, "msg_1")
	if err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "parts of msg_1", partIDs(got), []string{"prt_1", "prt_2"})
}

// testPartOfMessageInBatch: a part's message may come in the same batch,
// also in a batch that creates the session; a part of a message that the
// batch's DeleteMessages removes is legal (Messages and Parts apply first)
// and goes with its message.
func testPartOfMessageInBatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_pm"
	m1 := UserMessage(sid, "msg_1")
	p1 := TextPart(sid, "msg_1", "prt_1", "with its message")
	commit(t, s, sid, &store.Batch{Session: NewSession(sid), Messages: []opencode.Message{m1}, Parts: []opencode.Part{p1}})
	m2 := AssistantMessage(sid, "msg_2", "msg_1")
	// The part is listed before its message's batch entry: order within
	// the batch does not matter.
	p2, p3 := ToolPart(sid, "msg_2", "prt_2"), TextPart(sid, "msg_1", "prt_3", "stored message")
	commit(t, s, sid, &store.Batch{Parts: []opencode.Part{p2, p3}, Messages: []opencode.Message{m2}})
	ms, err := s.ListMessages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "messages", ms, []opencode.MessageWithParts{{Info: m1, Parts: []opencode.Part{p1, p3}}, {Info: m2, Parts: []opencode.Part{p2}}})

	// Parts of a stored message and of a batch message, both deleted by
	// the same batch.
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{UserMessage(sid, "msg_3")},
		Parts:          []opencode.Part{TextPart(sid, "msg_2", "prt_4", "x"), TextPart(sid, "msg_3", "prt_5", "y")},
		DeleteMessages: []string{"msg_2", "msg_3"}, Events: []*opencode.Event{NewEvent(sid, "e1", 1)}})
	ms, err = s.ListMessages(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "after delete", ms, []opencode.MessageWithParts{{Info: m1, Parts: []opencode.Part{p1, p3}}})
	for _, id := range []string{"msg_2", "msg_3"} {
		if ok, _ := s.MessageExists(ctx, id); ok {
			t.Errorf("%s exists after its delete", id)
		}
	}
	checkGapless(t, s, sid, 1)
	// Their IDs are free: the message comes back without the old parts.
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{UserMessage(sid, "msg_3")}})
	got, err := s.GetMessage(ctx, sid, "msg_3")
	if err != nil || len(got.Parts) != 0 {
		t.Fatalf("re-created msg_3 = %s, %v", jsonOf(t, got), err)
	}
}

func testAdmitConflict(t *testing.T, s store.Store) {
	ctx := context.Background()
	commit(t, s, "ses_1", &store.Batch{Session: NewSession("ses_1"), Messages: []opencode.Message{UserMessage("ses_1", "msg_m")}})
	commit(t, s, "ses_2", &store.Batch{Session: NewSession("ses_2")})

	in := NewInput("ses_1", "msg_in")
	commit(t, s, "ses_1", &store.Batch{Admit: []*opencode.Input{in}})
	if in.Order <= 0 {
		t.Fatalf("Commit did not set the admitted input's Order: %d", in.Order)
	}
	got, err := s.GetInput(ctx, "msg_in")
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "GetInput", got, in)
	if got.Order != in.Order {
		t.Fatalf("GetInput Order = %d, want %d", got.Order, in.Order)
	}

	for _, c := range []struct{ name, sid, id string }{
		{"same input ID", "ses_1", "msg_in"},
		{"input ID of another session", "ses_2", "msg_in"},
		{"ID of a message", "ses_1", "msg_m"},
		{"ID of a message of another session", "ses_2", "msg_m"},
	} {
		dup := NewInput(c.sid, c.id)
		dup.Fingerprint = "other"
		wantErr(t, c.name, s.Commit(ctx, c.sid, &store.Batch{Admit: []*opencode.Input{dup}}), store.ErrConflict)
		if dup.Order != 0 {
			t.Fatalf("%s: failed Commit set Order %d", c.name, dup.Order)
		}
	}
	got, _ = s.GetInput(ctx, "msg_in")
	eqJSON(t, "GetInput after conflicts", got, in)
	eqStrings(t, "ses_2 pending", pendingIDs(t, s, "ses_2"), nil)

	// Delivering an input as the user message of the same ID is normal.
	commit(t, s, "ses_1", &store.Batch{Messages: []opencode.Message{UserMessage("ses_1", "msg_in")}})
	eqStrings(t, "messages", messageIDs(t, s, "ses_1"), []string{"msg_m", "msg_in"})
}

func testAllOrNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_a"
	populate(t, s, sid)
	before := func() string {
		ms, _ := s.ListMessages(ctx, sid)
		pend, _ := s.PendingInputs(ctx, sid)
		sess, _ := s.GetSession(ctx, sid)
		in1, _ := s.GetInput(ctx, sid+"_in1")
		return jsonOf(t, []any{ms, pend, sess, in1, sessionIDs(t, s)})
	}
	snap := before()

	upd := NewSession(sid)
	upd.Title = "must not be written"
	in2 := NewInput(sid, sid+"_in2")
	in2.State = opencode.InputRevoked
	evs := []*opencode.Event{NewEvent(sid, "x1", 1), NewEvent(sid, "x2", 2)}
	fresh := NewInput(sid, "msg_fresh")
	bad := []struct {
		name string
		b    *store.Batch
		want error
	}{
		{"conflicting admit", &store.Batch{
			Session:  upd,
			Messages: []opencode.Message{UserMessage(sid, "msg_new")},
			Parts:    []opencode.Part{TextPart(sid, "msg_new", "prt_new", "x"), TextPart(sid, sid+"_m2", sid+"_p3", "changed")},
			Admit:    []*opencode.Input{fresh, NewInput(sid, sid+"_in1")},
			Inputs:   []*opencode.Input{in2},
			Events:   evs,
		}, store.ErrConflict},
		{"admit conflicting with a message", &store.Batch{
			Messages: []opencode.Message{UserMessage(sid, "msg_new")},
			Admit:    []*opencode.Input{fresh, NewInput(sid, sid+"_m2")},
			Events:   evs,
		}, store.ErrConflict},
		{"unknown input", &store.Batch{
			Session:  upd,
			Messages: []opencode.Message{UserMessage(sid, "msg_new")},
			Admit:    []*opencode.Input{fresh},
			Inputs:   []*opencode.Input{in2, NewInput(sid, "msg_unknown")},
			Events:   evs,
		}, store.ErrNotFound},
	}
	for _, c := range bad {
		wantErr(t, c.name, s.Commit(ctx, sid, c.b), c.want)
		if got := before(); got != snap {
			t.Fatalf("%s: state changed:\n got  %s\n want %s", c.name, got, snap)
		}
		checkGapless(t, s, sid, 3)
		for _, e := range evs {
			if e.Seq != 0 || e.Durable {
				t.Fatalf("%s: failed Commit set seq %d durable %v", c.name, e.Seq, e.Durable)
			}
		}
		if fresh.Order != 0 {
			t.Fatalf("%s: failed Commit set Order", c.name)
		}
		if ok, _ := s.MessageExists(ctx, "msg_new"); ok {
			t.Fatalf("%s: message written", c.name)
		}
		_, err := s.GetInput(ctx, "msg_fresh")
		wantErr(t, c.name+": GetInput(fresh)", err, store.ErrNotFound)
	}

	// A session created by a failing batch does not exist.
	wantErr(t, "new session with conflict", s.Commit(ctx, "ses_new", &store.Batch{Session: NewSession("ses_new"),
		Admit: []*opencode.Input{NewInput("ses_new", sid+"_in1")}, Events: []*opencode.Event{NewEvent("ses_new", "n1", 1)}}), store.ErrConflict)
	_, err := s.GetSession(ctx, "ses_new")
	wantErr(t, "GetSession(ses_new)", err, store.ErrNotFound)
	eqStrings(t, "sessions", sessionIDs(t, s), []string{sid})

	// The same events commit fine afterwards and continue the log.
	commit(t, s, sid, &store.Batch{Events: evs})
	if evs[0].Seq != 4 || evs[1].Seq != 5 {
		t.Fatalf("seqs after failures = %d, %d; want 4, 5", evs[0].Seq, evs[1].Seq)
	}
	checkGapless(t, s, sid, 5)
}

func testCancelled(t *testing.T, s store.Store) {
	commit(t, s, "ses_c", &store.Batch{Session: NewSession("ses_c")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := NewEvent("ses_c", "e1", 1)
	err := s.Commit(ctx, "ses_c", &store.Batch{Messages: []opencode.Message{UserMessage("ses_c", "msg_1")}, Events: []*opencode.Event{e}})
	wantErr(t, "Commit(cancelled)", err, context.Canceled)
	if e.Seq != 0 {
		t.Fatalf("cancelled Commit set seq %d", e.Seq)
	}
	checkGapless(t, s, "ses_c", 0)
	eqStrings(t, "messages", messageIDs(t, s, "ses_c"), nil)
}

// testTombstonesBounded: tombstones are inputs that are never pending and
// stay readable, and a session keeps only its newest store.MaxTombstones;
// other sessions' tombstones and other inputs are untouched.
func testTombstonesBounded(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid, other = "ses_t", "ses_u"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	commit(t, s, other, &store.Batch{Session: NewSession(other)})
	tomb := func(sid string, n int) *opencode.Input {
		return &opencode.Input{ID: fmt.Sprintf("msg_%s_%04d", sid, n), SessionID: sid, Delivery: opencode.Queue,
			State: opencode.InputTombstone, TimeCreated: 1700000000000 + int64(n)}
	}
	commit(t, s, other, &store.Batch{Admit: []*opencode.Input{tomb(other, 0)}})
	revoked := NewInput(sid, "in_revoked")
	commit(t, s, sid, &store.Batch{Admit: []*opencode.Input{revoked}})
	r2 := *revoked
	r2.State = opencode.InputRevoked
	commit(t, s, sid, &store.Batch{Inputs: []*opencode.Input{&r2}})
	const extra = 3
	for i := range store.MaxTombstones + extra {
		commit(t, s, sid, &store.Batch{Admit: []*opencode.Input{tomb(sid, i)}})
	}
	for i := range store.MaxTombstones + extra {
		in, err := s.GetInput(ctx, tomb(sid, i).ID)
		switch {
		case i < extra:
			wantErr(t, fmt.Sprintf("tombstone %d (beyond the bound)", i), err, store.ErrNotFound)
		case err != nil || in.State != opencode.InputTombstone:
			t.Fatalf("tombstone %d: %v %+v", i, err, in)
		}
	}
	for _, id := range []string{tomb(other, 0).ID, "in_revoked"} {
		if _, err := s.GetInput(ctx, id); err != nil {
			t.Errorf("%s was dropped with the tombstones: %v", id, err)
		}
	}
	eqStrings(t, "pending", pendingIDs(t, s, sid), nil)
}

func testPendingInputs(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_i"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	eqStrings(t, "no inputs", pendingIDs(t, s, sid), nil)
	_, err := s.PendingInputs(ctx, "ses_missing")
	wantErr(t, "PendingInputs(missing session)", err, store.ErrNotFound)

	// Admission order, not ID order.
	c, a, b := NewInput(sid, "in_c"), NewInput(sid, "in_a"), NewInput(sid, "in_b")
	commit(t, s, sid, &store.Batch{Admit: []*opencode.Input{c, a}})
	commit(t, s, sid, &store.Batch{Admit: []*opencode.Input{b}})
	if !(c.Order < a.Order && a.Order < b.Order) {
		t.Fatalf("admission orders not increasing: %d %d %d", c.Order, a.Order, b.Order)
	}
	eqStrings(t, "pending", pendingIDs(t, s, sid), []string{"in_c", "in_a", "in_b"})

	// A steer/queue change keeps the position; delivered and revoked inputs
	// leave the pending list but stay readable.
	a2 := *a
	a2.Delivery = opencode.Steer
	a2.Order = 0 // the store keeps its own
	c2 := *c
	c2.State = opencode.InputDelivered
	c2.PromotedSeq = 7
	b2 := *b
	b2.State = opencode.InputRevoked
	commit(t, s, sid, &store.Batch{Inputs: []*opencode.Input{&a2, &c2}})
	pend, err := s.PendingInputs(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 2 || pend[0].ID != "in_a" || pend[1].ID != "in_b" {
		t.Fatalf("pending after update = %s", jsonOf(t, pend))
	}
	eqJSON(t, "updated input", pend[0], &a2)
	if pend[0].Order != a.Order {
		t.Fatalf("update changed Order: %d, want %d", pend[0].Order, a.Order)
	}
	commit(t, s, sid, &store.Batch{Inputs: []*opencode.Input{&b2}})
	eqStrings(t, "pending after revoke", pendingIDs(t, s, sid), []string{"in_a"})

	for _, want := range []*opencode.Input{&c2, &b2} {
		got, err := s.GetInput(ctx, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		eqJSON(t, "GetInput", got, want)
	}
	got, _ := s.GetInput(ctx, "in_c")
	if got.Order != c.Order {
		t.Fatalf("GetInput Order = %d, want %d", got.Order, c.Order)
	}
	d := NewInput(sid, "in_d")
	commit(t, s, sid, &store.Batch{Admit: []*opencode.Input{d}})
	eqStrings(t, "pending after new admit", pendingIDs(t, s, sid), []string{"in_a", "in_d"})
	_, err = s.GetInput(ctx, "in_missing")
	wantErr(t, "GetInput(missing)", err, store.ErrNotFound)

	// Returned inputs are copies.
	got.Parts[0].Text = "mutated"
	got.State = opencode.InputRevoked
	again, _ := s.GetInput(ctx, "in_c")
	eqJSON(t, "GetInput after mutating a result", again, &c2)
}

func testGetInputAcrossSessions(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, sid := range []string{"ses_1", "ses_2", "ses_3"} {
		commit(t, s, sid, &store.Batch{Session: NewSession(sid), Admit: []*opencode.Input{NewInput(sid, "in_"+sid)}})
	}
	for _, sid := range []string{"ses_1", "ses_2", "ses_3"} {
		got, err := s.GetInput(ctx, "in_"+sid)
		if err != nil {
			t.Fatal(err)
		}
		if got.SessionID != sid {
			t.Fatalf("GetInput(in_%s).SessionID = %s", sid, got.SessionID)
		}
		eqStrings(t, "pending "+sid, pendingIDs(t, s, sid), []string{"in_" + sid})
		st, err := s.InputStatus(ctx, "in_"+sid)
		if err != nil || st != (store.InputStatus{SessionID: sid, State: opencode.InputPending}) {
			t.Fatalf("InputStatus(in_%s) = %+v, %v", sid, st, err)
		}
	}
	// The status follows the input: delivered with an answer, noReply.
	in := NewInput("ses_1", "in_ses_1")
	in.State, in.Answer, in.NoReply = opencode.InputDelivered, "msg_answer", true
	commit(t, s, "ses_1", &store.Batch{Inputs: []*opencode.Input{in}})
	st, err := s.InputStatus(ctx, "in_ses_1")
	if err != nil || st != (store.InputStatus{SessionID: "ses_1", State: opencode.InputDelivered, Answer: "msg_answer", NoReply: true}) {
		t.Fatalf("InputStatus after delivery = %+v, %v", st, err)
	}
	_, err = s.InputStatus(ctx, "in_missing")
	wantErr(t, "InputStatus(missing)", err, store.ErrNotFound)
}

// testInputClientTools: an input's client tools (schema and all) come back
// as admitted, pending and delivered.
func testInputClientTools(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := NewInput("ses_ct", "in_ct")
	in.ClientTools = []opencode.ClientTool{
		{Name: "show_card", Description: "Shows a card", Parameters: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		{Name: "no_params"},
	}
	commit(t, s, "ses_ct", &store.Batch{Session: NewSession("ses_ct"), Admit: []*opencode.Input{in}})
	got, err := s.GetInput(ctx, "in_ct")
	if err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "admitted client tools", got.ClientTools, in.ClientTools)
	pending, err := s.PendingInputs(ctx, "ses_ct")
	if err != nil || len(pending) != 1 {
		t.Fatalf("PendingInputs = %d inputs, %v", len(pending), err)
	}
	eqJSON(t, "pending client tools", pending[0].ClientTools, in.ClientTools)
	in.State = opencode.InputDelivered
	commit(t, s, "ses_ct", &store.Batch{Inputs: []*opencode.Input{in}})
	if got, err = s.GetInput(ctx, "in_ct"); err != nil {
		t.Fatal(err)
	}
	eqJSON(t, "delivered client tools", got.ClientTools, in.ClientTools)
}

func testEvents(t *testing.T, s store.Store) {
	ctx := context.Background()
	const sid = "ses_e"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	checkGapless(t, s, sid, 0)
	if evs := events(t, s, sid, 0, 0); len(evs) != 0 {
		t.Fatalf("Events(empty log) = %d events", len(evs))
	}
	_, err := s.Events(ctx, "ses_missing", 0, 0)
	wantErr(t, "Events(missing session)", err, store.ErrNotFound)
	_, err = s.LastSeq(ctx, "ses_missing")
	wantErr(t, "LastSeq(missing session)", err, store.ErrNotFound)

	var all []*opencode.Event
	b1 := []*opencode.Event{NewEvent(sid, "e1", 1), NewEvent(sid, "e2", 2), NewEvent(sid, "e3", 3)}
	b1[1].Type = opencode.EvStepStarted
	b1[1].Version = 1
	b1[2].Data = json.RawMessage(`{"nested":{"a":[1,2,{"b":null}]},"s":"é\u2028"}`)
	commit(t, s, sid, &store.Batch{Events: b1})
	all = append(all, b1...)
	for i, e := range b1 {
		if e.Seq != int64(i)+1 || !e.Durable {
			t.Fatalf("Commit set seq %d durable %v on event %d", e.Seq, e.Durable, i)
		}
	}
	// Batches without events leave the log alone.
	commit(t, s, sid, &store.Batch{Messages: []opencode.Message{UserMessage(sid, "msg_1")}})
	commit(t, s, sid, &store.Batch{})
	b2 := []*opencode.Event{NewEvent(sid, "e4", 4), NewEvent(sid, "e5", 5)}
	commit(t, s, sid, &store.Batch{Session: NewSession(sid), Events: b2})
	all = append(all, b2...)
	if b2[0].Seq != 4 || b2[1].Seq != 5 {
		t.Fatalf("second batch seqs %d, %d", b2[0].Seq, b2[1].Seq)
	}

	got := checkGapless(t, s, sid, 5)
	for i := range got {
		eqEvent(t, fmt.Sprintf("event %d", i), got[i], all[i])
		if got[i] == all[i] {
			t.Fatalf("Events returned the committed *Event itself, not a fresh one")
		}
	}
	again := events(t, s, sid, 0, 0)
	if again[0] == got[0] {
		t.Fatalf("Events returned the same *Event twice")
	}
}

func testEventsAfterLimit(t *testing.T, s store.Store) {
	const sid = "ses_l"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	var batch []*opencode.Event
	for i := 1; i <= 10; i++ {
		batch = append(batch, NewEvent(sid, fmt.Sprintf("e%d", i), i))
	}
	commit(t, s, sid, &store.Batch{Events: batch})
	seqs := func(evs []*opencode.Event) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = fmt.Sprint(e.Seq)
			if e.ID != fmt.Sprintf("e%d", e.Seq) {
				t.Fatalf("event seq %d has ID %s", e.Seq, e.ID)
			}
		}
		return out
	}
	for _, c := range []struct {
		after int64
		limit int
		want  []string
	}{
		{0, 0, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{-5, 2, []string{"1", "2"}},
		{3, 0, []string{"4", "5", "6", "7", "8", "9", "10"}},
		{3, -1, []string{"4", "5", "6", "7", "8", "9", "10"}},
		{3, 2, []string{"4", "5"}},
		{8, 5, []string{"9", "10"}},
		{9, 1, []string{"10"}},
		{10, 0, nil},
		{11, 3, nil},
		{0, 1, []string{"1"}},
	} {
		eqStrings(t, fmt.Sprintf("Events(after=%d, limit=%d)", c.after, c.limit), seqs(events(t, s, sid, c.after, c.limit)), c.want)
	}
}

func testEventsIndependent(t *testing.T, s store.Store) {
	for _, sid := range []string{"ses_1", "ses_2"} {
		commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	}
	e1 := NewEvent("ses_1", "a", 1)
	commit(t, s, "ses_1", &store.Batch{Events: []*opencode.Event{e1, NewEvent("ses_1", "b", 2)}})
	e2 := NewEvent("ses_2", "c", 1)
	commit(t, s, "ses_2", &store.Batch{Events: []*opencode.Event{e2}})
	if e1.Seq != 1 || e2.Seq != 1 {
		t.Fatalf("first seqs: %d, %d; want 1, 1", e1.Seq, e2.Seq)
	}
	commit(t, s, "ses_1", &store.Batch{Events: []*opencode.Event{NewEvent("ses_1", "d", 3)}})
	checkGapless(t, s, "ses_1", 3)
	evs := checkGapless(t, s, "ses_2", 1)
	if evs[0].ID != "c" || evs[0].SessionID != "ses_2" {
		t.Fatalf("ses_2 log = %+v", evs[0])
	}
	if err := s.DeleteSession(context.Background(), "ses_1"); err != nil {
		t.Fatal(err)
	}
	checkGapless(t, s, "ses_2", 1)
}

const (
	concSessions = 8
	concCommits  = 25
)

// checkLogIDs checks that the log of sid holds exactly the events in ids, in
// the order each writer committed them.
func checkLogIDs(t *testing.T, s store.Store, sid string, n int64, writers int) {
	t.Helper()
	evs := checkGapless(t, s, sid, n)
	seen := map[string]bool{}
	next := make([]int, writers) // next expected batch counter per writer
	for _, e := range evs {
		if seen[e.ID] {
			t.Fatalf("%s: event %s twice", sid, e.ID)
		}
		seen[e.ID] = true
		var w, c, k int
		if _, err := fmt.Sscanf(e.ID, "w%d-c%d-k%d", &w, &c, &k); err != nil {
			t.Fatalf("%s: bad event ID %q", sid, e.ID)
		}
		if c < next[w] {
			t.Fatalf("%s: writer %d's commit %d logged after a later one", sid, w, c)
		}
		next[w] = c
	}
}

// reader polls the logs while writers run; every read must be a gapless prefix.
func reader(ctx context.Context, s store.Store, sids []string, errc chan<- error) {
	for ctx.Err() == nil {
		for _, sid := range sids {
			evs, err := s.Events(context.Background(), sid, 0, 0)
			if err != nil {
				errc <- fmt.Errorf("Events(%s): %w", sid, err)
				return
			}
			for i, e := range evs {
				if e.Seq != int64(i)+1 {
					errc <- fmt.Errorf("%s: read a log with a hole: index %d has seq %d", sid, i, e.Seq)
					return
				}
			}
		}
	}
	errc <- nil
}

func testConcurrentSessions(t *testing.T, s store.Store) {
	sids := make([]string, concSessions)
	for i := range sids {
		sids[i] = fmt.Sprintf("ses_%d", i)
		commit(t, s, sids[i], &store.Batch{Session: NewSession(sids[i])})
	}
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	errc := make(chan error, 1)
	go reader(rctx, s, sids, errc)

	var wg sync.WaitGroup
	totals := make([]int64, concSessions)
	fail := make(chan error, concSessions)
	for w, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range concCommits {
				n := 1 + c%3
				evs := make([]*opencode.Event, n)
				for k := range evs {
					evs[k] = NewEvent(sid, fmt.Sprintf("w%d-c%d-k%d", w, c, k), k)
				}
				b := &store.Batch{Events: evs,
					Messages: []opencode.Message{UserMessage(sid, fmt.Sprintf("msg_%d_%d", w, c))}}
				if err := s.Commit(context.Background(), sid, b); err != nil {
					fail <- err
					return
				}
				if evs[0].Seq != totals[w]+1 {
					fail <- fmt.Errorf("%s: commit %d got seq %d, want %d", sid, c, evs[0].Seq, totals[w]+1)
					return
				}
				totals[w] += int64(n)
			}
		}()
	}
	wg.Wait()
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	for w, sid := range sids {
		checkLogIDs(t, s, sid, totals[w], concSessions)
		if got := len(messageIDs(t, s, sid)); got != concCommits {
			t.Fatalf("%s: %d messages, want %d", sid, got, concCommits)
		}
	}
}

func testConcurrentSameSession(t *testing.T, s store.Store) {
	const sid = "ses_shared"
	commit(t, s, sid, &store.Batch{Session: NewSession(sid)})
	rctx, stop := context.WithCancel(context.Background())
	defer stop()
	errc := make(chan error, 1)
	go reader(rctx, s, []string{sid}, errc)

	// The lifecycle layer serialises a session's writers; other sessions'
	// writers run at the same time.
	var mu sync.Mutex
	var total int64
	var wg sync.WaitGroup
	fail := make(chan error, 2*concSessions)
	for w := range concSessions {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for c := range concCommits {
				mu.Lock()
				evs := []*opencode.Event{NewEvent(sid, fmt.Sprintf("w%d-c%d-k0", w, c), 0)}
				if c%2 == 1 {
					evs = append(evs, NewEvent(sid, fmt.Sprintf("w%d-c%d-k1", w, c), 1))
				}
				err := s.Commit(context.Background(), sid, &store.Batch{Events: evs})
				if err == nil && evs[0].Seq != total+1 {
					err = fmt.Errorf("got seq %d, want %d", evs[0].Seq, total+1)
				}
				total += int64(len(evs))
				mu.Unlock()
				if err != nil {
					fail <- err
					return
				}
			}
		}()
		go func() { // noise in a session of its own
			defer wg.Done()
			other := fmt.Sprintf("ses_noise_%d", w)
			if err := s.Commit(context.Background(), other, &store.Batch{Session: NewSession(other)}); err != nil {
				fail <- err
				return
			}
			for c := range concCommits / 2 {
				if err := s.Commit(context.Background(), other, &store.Batch{Events: []*opencode.Event{NewEvent(other, fmt.Sprint(c), c)}}); err != nil {
					fail <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	checkLogIDs(t, s, sid, total, concSessions)
	for w := range concSessions {
		checkGapless(t, s, fmt.Sprintf("ses_noise_%d", w), concCommits/2)
	}
}

// testCreateOnly: a CreateOnly session insert conflicts with an existing
// session and leaves it unchanged; of concurrent creates exactly one wins.
func testCreateOnly(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := NewSession("ses_create")
	if err := s.Commit(ctx, first.ID, &store.Batch{Session: first, CreateOnly: true}); err != nil {
		t.Fatalf("first create: %v", err)
	}
	second := NewSession("ses_create")
	second.Title = "second"
	if err := s.Commit(ctx, second.ID, &store.Batch{Session: second, CreateOnly: true}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v, want ErrConflict", err)
	}
	got, err := s.GetSession(ctx, first.ID)
	if err != nil || got.Title != first.Title {
		t.Fatalf("session after conflicting create: %+v, %v", got, err)
	}
	var wg sync.WaitGroup
	var wins atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewSession("ses_race")
			c.Title = fmt.Sprint("racer ", i)
			if err := s.Commit(ctx, c.ID, &store.Batch{Session: c, CreateOnly: true}); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, store.ErrConflict) {
				t.Errorf("racing create: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d concurrent creates won, want 1", wins.Load())
	}
}

// testAdmitAndUpdate: a batch may admit an input and update it (a turn that
// starts with its admission delivers it at once); the update wins.
func testAdmitAndUpdate(t *testing.T, s store.Store) {
	ctx := context.Background()
	sess := NewSession("ses_au")
	if err := s.Commit(ctx, sess.ID, &store.Batch{Session: sess}); err != nil {
		t.Fatal(err)
	}
	in := NewInput(sess.ID, "msg_au")
	delivered := *in
	delivered.State = opencode.InputDelivered
	delivered.PromotedSeq = 2
	if err := s.Commit(ctx, sess.ID, &store.Batch{Admit: []*opencode.Input{in}, Inputs: []*opencode.Input{&delivered}}); err != nil {
		t.Fatalf("admit+update: %v", err)
	}
	got, err := s.GetInput(ctx, in.ID)
	if err != nil || got.State != opencode.InputDelivered || got.PromotedSeq != 2 {
		t.Fatalf("input after admit+update = %+v, %v", got, err)
	}
	if p, _ := s.PendingInputs(ctx, sess.ID); len(p) != 0 {
		t.Errorf("pending after admit+update: %d", len(p))
	}
}
