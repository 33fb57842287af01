package storetest

import (
	"context"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// DurableOpener opens the store kept in dir; opening the same dir again must
// see everything committed before the last Close. RunDurable closes the
// stores it opens.
type DurableOpener func(t *testing.T, dir string) store.Store

// dump renders everything readable in the store, including the orders the
// JSON shapes leave out.
func dump(t tb, s store.Store, inputIDs []string) string {
	t.Helper()
	ctx := context.Background()
	type sessionDump struct {
		Session  opencode.Session
		Messages []opencode.MessageWithParts
		Pending  []*opencode.Input
		Orders   []int64
		Events   []*opencode.Event
		LastSeq  int64
	}
	all, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	var out []any
	for _, sess := range all {
		d := sessionDump{Session: sess}
		if d.Messages, err = s.ListMessages(ctx, sess.ID); err != nil {
			t.Fatalf("ListMessages: %v", err)
		}
		if d.Pending, err = s.PendingInputs(ctx, sess.ID); err != nil {
			t.Fatalf("PendingInputs: %v", err)
		}
		for _, in := range d.Pending {
			d.Orders = append(d.Orders, in.Order)
		}
		d.Events = events(t, s, sess.ID, 0, 0)
		d.LastSeq = lastSeq(t, s, sess.ID)
		out = append(out, d)
	}
	for _, id := range inputIDs {
		in, err := s.GetInput(ctx, id)
		if err != nil {
			out = append(out, id+": "+err.Error())
			continue
		}
		out = append(out, in, in.Order)
	}
	return jsonOf(t, out)
}

// RunDurable checks that a store reopened from dir holds everything committed
// before it was closed, and carries on from there: event seqs continue,
// creation and admission orders keep growing, conflicts are still detected.
func RunDurable(t *testing.T, open DurableOpener, dir string) {
	ctx := context.Background()
	inputIDs := []string{"ses_a_in1", "ses_a_in2", "ses_b_in1", "ses_b_in2", "in_late", "ses_c_in1", "in_after"}
	var cur store.Store // closed on failure
	t.Cleanup(func() {
		if cur != nil {
			cur.Close()
		}
	})
	reopen := func(s store.Store) store.Store {
		t.Helper()
		cur = nil
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		cur = open(t, dir)
		return cur
	}

	s := open(t, dir)
	cur = s
	populate(t, s, "ses_a")
	populate(t, s, "ses_b")
	populate(t, s, "ses_c")
	if err := s.DeleteSession(ctx, "ses_c"); err != nil {
		t.Fatal(err)
	}
	upd := NewSession("ses_a")
	upd.Title = "renamed"
	late := NewInput("ses_b", "in_late")
	late.Delivery = opencode.Steer
	commit(t, s, "ses_a", &store.Batch{Session: upd, Events: []*opencode.Event{NewEvent("ses_a", "a4", 4)}})
	commit(t, s, "ses_b", &store.Batch{Admit: []*opencode.Input{late}})
	before := dump(t, s, inputIDs)

	s = reopen(s)
	if got := dump(t, s, inputIDs); got != before {
		t.Fatalf("after reopen:\n got  %s\n want %s", got, before)
	}

	// The store carries on where it stopped.
	e := NewEvent("ses_a", "a5", 5)
	commit(t, s, "ses_a", &store.Batch{Events: []*opencode.Event{e},
		Messages: []opencode.Message{UserMessage("ses_a", "msg_after")},
		Parts:    []opencode.Part{TextPart("ses_a", "ses_a_m2", "prt_after", "appended")}})
	if e.Seq != 5 {
		t.Fatalf("first seq after reopen = %d, want 5", e.Seq)
	}
	commit(t, s, "ses_d", &store.Batch{Session: NewSession("ses_d")})
	eqStrings(t, "sessions after reopen", sessionIDs(t, s), []string{"ses_a", "ses_b", "ses_d"})
	eqStrings(t, "messages after reopen", messageIDs(t, s, "ses_a"), []string{"ses_a_in1", "ses_a_m2", "msg_after"})
	m2, err := s.GetMessage(ctx, "ses_a", "ses_a_m2")
	if err != nil {
		t.Fatal(err)
	}
	eqStrings(t, "parts after reopen", partIDs(m2), []string{"ses_a_p2", "ses_a_p3", "prt_after"})
	after := NewInput("ses_b", "in_after")
	commit(t, s, "ses_b", &store.Batch{Admit: []*opencode.Input{after}})
	if after.Order <= late.Order {
		t.Fatalf("admission order after reopen %d, not after %d", after.Order, late.Order)
	}
	eqStrings(t, "pending after reopen", pendingIDs(t, s, "ses_b"), []string{"ses_b_in2", "in_late", "in_after"})
	wantErr(t, "admit a known ID after reopen",
		s.Commit(ctx, "ses_b", &store.Batch{Admit: []*opencode.Input{NewInput("ses_b", "ses_a_in1")}}), store.ErrConflict)
	wantErr(t, "commit to a deleted session after reopen",
		s.Commit(ctx, "ses_c", &store.Batch{Events: []*opencode.Event{NewEvent("ses_c", "x", 1)}}), store.ErrNotFound)
	checkGapless(t, s, "ses_a", 5)
	checkGapless(t, s, "ses_b", 3)
	before = dump(t, s, inputIDs)

	s = reopen(s)
	if got := dump(t, s, inputIDs); got != before {
		t.Fatalf("after second reopen:\n got  %s\n want %s", got, before)
	}
}
