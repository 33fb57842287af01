package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// The model is the simplest possible rendering of the contract: slices in
// creation order. IDs are drawn from small per-session pools so that
// upserts, conflicts and unknown references are frequent; IDs never cross
// sessions, which the contract leaves open (see the package tests).

type modelMessage struct {
	info  opencode.Message
	parts []opencode.Part
}

type modelSession struct {
	s      opencode.Session
	msgs   []*modelMessage
	inputs []*opencode.Input // admission order; Order as the store assigned it
	events []*opencode.Event
}

type model struct {
	sessions  []*modelSession // creation order
	lastOrder int64
}

func (m *model) session(id string) *modelSession {
	for _, s := range m.sessions {
		if s.s.ID == id {
			return s
		}
	}
	return nil
}

func (m *model) input(id string) (*modelSession, int) {
	for _, s := range m.sessions {
		for i, in := range s.inputs {
			if in.ID == id {
				return s, i
			}
		}
	}
	return nil, -1
}

func (m *model) messageExists(id string) bool {
	for _, s := range m.sessions {
		for _, msg := range s.msgs {
			if msg.info.ID == id {
				return true
			}
		}
	}
	return false
}

// predict returns the error Commit must return.
func (m *model) predict(sid string, b *store.Batch) error {
	for _, in := range b.Admit {
		if s, _ := m.input(in.ID); s != nil || m.messageExists(in.ID) {
			return store.ErrConflict
		}
	}
	if m.session(sid) == nil && b.Session == nil {
		return store.ErrNotFound
	}
	for _, in := range b.Inputs {
		admitted := slices.ContainsFunc(b.Admit, func(a *opencode.Input) bool { return a.ID == in.ID })
		if s, _ := m.input(in.ID); s == nil && !admitted {
			return store.ErrNotFound
		}
	}
	s := m.session(sid)
	for _, p := range b.Parts {
		stored := s != nil && slices.ContainsFunc(s.msgs, func(x *modelMessage) bool { return x.info.ID == p.MessageID })
		inBatch := slices.ContainsFunc(b.Messages, func(x opencode.Message) bool { return x.ID == p.MessageID }) &&
			(stored || !m.messageExists(p.MessageID))
		if p.SessionID != sid || !stored && !inBatch {
			return &store.OrphanPartError{PartID: p.ID, MessageID: p.MessageID, SessionID: sid, PartSessionID: p.SessionID}
		}
	}
	return nil
}

// sameErr reports whether err is the error predict returned: the same
// sentinel, or an equal *OrphanPartError.
func sameErr(err, want error) bool {
	var wo *store.OrphanPartError
	if errors.As(want, &wo) {
		var got *store.OrphanPartError
		return errors.As(err, &got) && *got == *wo
	}
	return want == nil && err == nil || want != nil && errors.Is(err, want)
}

// apply applies a batch the store committed.
func (m *model) apply(t *rapid.T, sid string, b *store.Batch) {
	s := m.session(sid)
	if b.Session != nil {
		if s == nil {
			s = &modelSession{}
			m.sessions = append(m.sessions, s)
		}
		s.s = *b.Session
	}
	for _, msg := range b.Messages {
		i := slices.IndexFunc(s.msgs, func(x *modelMessage) bool { return x.info.ID == msg.ID })
		if i < 0 {
			s.msgs = append(s.msgs, &modelMessage{info: msg, parts: []opencode.Part{}})
		} else {
			s.msgs[i].info = msg
		}
	}
	for _, p := range b.Parts {
		i := slices.IndexFunc(s.msgs, func(x *modelMessage) bool { return x.info.ID == p.MessageID })
		if i < 0 {
			t.Fatalf("committed part %s of unknown message %s", p.ID, p.MessageID) // predict said orphan
		}
		msg := s.msgs[i]
		j := slices.IndexFunc(msg.parts, func(x opencode.Part) bool { return x.ID == p.ID })
		if j < 0 {
			msg.parts = append(msg.parts, p)
		} else {
			msg.parts[j] = p
		}
	}
	// Applied after Messages and Parts: a part of a deleted message goes
	// with it.
	for _, id := range b.DeleteMessages {
		s.msgs = slices.DeleteFunc(s.msgs, func(x *modelMessage) bool { return x.info.ID == id })
	}
	for _, id := range b.DeleteParts {
		for _, msg := range s.msgs {
			msg.parts = slices.DeleteFunc(msg.parts, func(x opencode.Part) bool { return x.ID == id })
		}
	}
	for _, in := range b.Admit {
		if in.Order <= m.lastOrder {
			t.Fatalf("admitted %s with Order %d, not after %d", in.ID, in.Order, m.lastOrder)
		}
		m.lastOrder = in.Order
		c := *in
		s.inputs = append(s.inputs, &c)
	}
	for _, in := range b.Inputs {
		owner, i := m.input(in.ID)
		c := *in
		c.Order = owner.inputs[i].Order
		owner.inputs[i] = &c
	}
	for i, e := range b.Events {
		want := int64(len(s.events)) + 1
		if e.Seq != want || !e.Durable {
			t.Fatalf("event %d of batch: seq %d durable %v, want seq %d", i, e.Seq, e.Durable, want)
		}
		s.events = append(s.events, &opencode.Event{ID: e.ID, Type: e.Type, SessionID: e.SessionID,
			Directory: e.Directory, Seq: e.Seq, Version: e.Version, Durable: true, Data: e.Data})
	}
}

func (m *model) delete(id string) error {
	i := slices.IndexFunc(m.sessions, func(s *modelSession) bool { return s.s.ID == id })
	if i < 0 {
		return store.ErrNotFound
	}
	m.sessions = slices.Delete(m.sessions, i, i+1)
	return nil
}

// ---- generators ----

var (
	sessionPool = []string{"ses_0", "ses_1", "ses_2"}
	idsPerPool  = 5 // message and input IDs per session (shared: inputs become messages)
	partsPerMsg = 3
)

func poolID(sid string, k int) string { return fmt.Sprintf("%s_k%d", sid, k) }

func genText() *rapid.Generator[string] { return rapid.StringMatching(`[a-z ]{0,6}`) }

func genSession(sid string) *rapid.Generator[*opencode.Session] {
	return rapid.Custom(func(t *rapid.T) *opencode.Session {
		s := &opencode.Session{ID: sid, Slug: genText().Draw(t, "slug"), Directory: "/w/" + sid,
			Title: rapid.String().Draw(t, "title"), Version: opencode.Version,
			Cost: float64(rapid.IntRange(0, 100).Draw(t, "cost")) / 4,
			Time: opencode.SessionTime{Created: rapid.Int64Range(0, 1e13).Draw(t, "created")}}
		if rapid.Bool().Draw(t, "hasMeta") {
			s.Metadata = json.RawMessage(fmt.Sprintf(`{"n":%d}`, rapid.IntRange(0, 9).Draw(t, "meta")))
		}
		if rapid.Bool().Draw(t, "hasModel") {
			s.Model = &opencode.ModelRef{ID: genText().Draw(t, "model"), ProviderID: "p"}
		}
		return s
	})
}

func genMessage(sid string) *rapid.Generator[opencode.Message] {
	return rapid.Custom(func(t *rapid.T) opencode.Message {
		id := poolID(sid, rapid.IntRange(0, idsPerPool-1).Draw(t, "msg"))
		m := opencode.Message{ID: id, SessionID: sid, Agent: genText().Draw(t, "agent"),
			Time: opencode.MessageTime{Created: rapid.Int64Range(0, 1e13).Draw(t, "created")}}
		if rapid.Bool().Draw(t, "assistant") {
			m.Role = opencode.Assistant
			m.ModelID, m.ProviderID, m.Mode = "m", "p", "build"
			m.Cost = float64(rapid.IntRange(0, 100).Draw(t, "cost")) / 8
			m.Tokens.Output = rapid.Int64Range(0, 1000).Draw(t, "out")
			m.Finish = rapid.SampledFrom([]string{"", "stop", "tool-calls"}).Draw(t, "finish")
			if rapid.Bool().Draw(t, "completed") {
				c := m.Time.Created + 1
				m.Time.Completed = &c
			}
		} else {
			m.Role = opencode.User
			if rapid.Bool().Draw(t, "hasModel") {
				m.Model = &opencode.MessageModel{ProviderID: "p", ModelID: genText().Draw(t, "model")}
			}
			m.System = genText().Draw(t, "system")
		}
		return m
	})
}

// genPart draws a part, mostly of one of mids (the session's messages and
// the batch's), else of any pool ID, so that an orphan part (which fails the
// batch) is neither rare nor the rule; a few name another session.
func genPart(sid string, mids []string) *rapid.Generator[opencode.Part] {
	return rapid.Custom(func(t *rapid.T) opencode.Part {
		mid := poolID(sid, rapid.IntRange(0, idsPerPool-1).Draw(t, "msg"))
		if len(mids) > 0 && rapid.IntRange(0, 7).Draw(t, "ofKnown") > 0 {
			mid = rapid.SampledFrom(mids).Draw(t, "known")
		}
		p := opencode.Part{ID: fmt.Sprintf("%s_p%d", mid, rapid.IntRange(0, partsPerMsg-1).Draw(t, "part")),
			SessionID: sid, MessageID: mid}
		if rapid.IntRange(0, 19).Draw(t, "otherSession") == 0 {
			p.SessionID = rapid.SampledFrom(sessionPool).Draw(t, "partSession")
		}
		switch rapid.IntRange(0, 2).Draw(t, "type") {
		case 0:
			p.Type = opencode.PartText
			p.Text = rapid.String().Draw(t, "text")
		case 1:
			p.Type = opencode.PartReasoning
			p.Text = genText().Draw(t, "text")
			p.Time = &opencode.PartTime{Start: rapid.Int64Range(0, 100).Draw(t, "start")}
		case 2:
			p.Type = opencode.PartTool
			p.CallID, p.Tool = "call", "bash"
			p.State = &opencode.ToolState{Status: rapid.SampledFrom([]string{"pending", "running", "completed"}).Draw(t, "status"),
				Input: json.RawMessage(`{"x":1}`)}
		}
		return p
	})
}

func genInput(sid, id string) *rapid.Generator[*opencode.Input] {
	return rapid.Custom(func(t *rapid.T) *opencode.Input {
		in := &opencode.Input{ID: id, SessionID: sid,
			Delivery:    rapid.SampledFrom([]opencode.Delivery{opencode.Steer, opencode.Queue}).Draw(t, "delivery"),
			State:       rapid.SampledFrom([]opencode.InputState{opencode.InputPending, opencode.InputPending, opencode.InputDelivered, opencode.InputRevoked}).Draw(t, "state"),
			Fingerprint: genText().Draw(t, "fp"), AdmittedSeq: rapid.Int64Range(0, 50).Draw(t, "admSeq"),
			NoReply: rapid.Bool().Draw(t, "noReply")}
		for i := range rapid.IntRange(0, 2).Draw(t, "nparts") {
			in.Parts = append(in.Parts, opencode.Part{ID: fmt.Sprintf("%s_ip%d", id, i), SessionID: sid, MessageID: id,
				Type: opencode.PartText, Text: genText().Draw(t, "text")})
		}
		return in
	})
}

// genBatch draws a batch for session sid, which holds the messages stored
// (nil if the session does not exist).
func genBatch(sid string, exists bool, stored []string) *rapid.Generator[*store.Batch] {
	return rapid.Custom(func(t *rapid.T) *store.Batch {
		b := &store.Batch{}
		pSession := 1
		if !exists {
			pSession = 3
		}
		if rapid.IntRange(0, 3).Draw(t, "withSession") < pSession {
			b.Session = genSession(sid).Draw(t, "session")
		}
		b.Messages = rapid.SliceOfN(genMessage(sid), 0, 3).Draw(t, "messages")
		mids := slices.Clone(stored)
		for _, msg := range b.Messages {
			mids = append(mids, msg.ID)
		}
		b.Parts = rapid.SliceOfN(genPart(sid, mids), 0, 4).Draw(t, "parts")
		// Deletes, now and then, of a pool message (with its parts: maybe
		// one this batch writes) and of a part.
		if rapid.IntRange(0, 5).Draw(t, "deleteMessage") == 0 {
			b.DeleteMessages = []string{poolID(sid, rapid.IntRange(0, idsPerPool-1).Draw(t, "deleted"))}
		}
		if rapid.IntRange(0, 5).Draw(t, "deletePart") == 0 && len(b.Parts) > 0 {
			b.DeleteParts = []string{rapid.SampledFrom(b.Parts).Draw(t, "deletedPart").ID}
		}
		// Distinct IDs within one Admit list: a duplicate inside one batch is
		// left open by the contract.
		for _, k := range rapid.SliceOfNDistinct(rapid.IntRange(0, idsPerPool-1), 0, 2, rapid.ID[int]).Draw(t, "admit") {
			b.Admit = append(b.Admit, genInput(sid, poolID(sid, k)).Draw(t, "input"))
		}
		for _, k := range rapid.SliceOfN(rapid.IntRange(0, idsPerPool-1), 0, 2).Draw(t, "update") {
			b.Inputs = append(b.Inputs, genInput(sid, poolID(sid, k)).Draw(t, "input"))
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "nevents") {
			b.Events = append(b.Events, &opencode.Event{ID: fmt.Sprintf("evt_%d", i), SessionID: sid,
				Type:      rapid.SampledFrom([]string{opencode.EvPrompted, opencode.EvTextEnded, opencode.EvInboxEnqueued}).Draw(t, "type"),
				Directory: "/w/" + sid, Version: rapid.IntRange(1, 2).Draw(t, "version"),
				Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, rapid.IntRange(0, 1000).Draw(t, "data")))})
		}
		return b
	})
}

// ---- the property ----

func testModel(t *testing.T, open Opener) {
	rapid.Check(t, func(rt *rapid.T) {
		s := open(t)
		defer s.Close()
		m := &model{}
		ctx := context.Background()
		for step := range rapid.IntRange(1, 20).Draw(rt, "steps") {
			sid := rapid.SampledFrom(sessionPool).Draw(rt, "sid")
			if rapid.IntRange(0, 9).Draw(rt, "op") == 0 {
				want := m.delete(sid)
				if err := s.DeleteSession(ctx, sid); !errors.Is(err, want) || (want == nil && err != nil) {
					rt.Fatalf("step %d: DeleteSession(%s) = %v, want %v", step, sid, err, want)
				}
			} else {
				var stored []string
				if ms := m.session(sid); ms != nil {
					for _, msg := range ms.msgs {
						stored = append(stored, msg.info.ID)
					}
				}
				b := genBatch(sid, m.session(sid) != nil, stored).Draw(rt, "batch")
				want := m.predict(sid, b)
				err := s.Commit(ctx, sid, b)
				if !sameErr(err, want) {
					rt.Fatalf("step %d: Commit(%s) = %v, want %v", step, sid, err, want)
				}
				if err == nil {
					m.apply(rt, sid, b)
				} else {
					for _, e := range b.Events {
						if e.Seq != 0 || e.Durable {
							rt.Fatalf("step %d: failed Commit set seq %d", step, e.Seq)
						}
					}
					for _, in := range b.Admit {
						if in.Order != 0 {
							rt.Fatalf("step %d: failed Commit set Order %d", step, in.Order)
						}
					}
				}
			}
			m.check(rt, s, step)
		}
	})
}

// check compares every read of the store with the model.
func (m *model) check(t *rapid.T, s store.Store, step int) {
	ctx := context.Background()
	all, err := s.ListSessions(ctx)
	if err != nil {
		t.Fatalf("ListSessions: %v", err)
	}
	if len(all) != len(m.sessions) {
		t.Fatalf("step %d: %d sessions, model has %d", step, len(all), len(m.sessions))
	}
	for i, ms := range m.sessions {
		eqJSON(t, fmt.Sprintf("step %d: session %d", step, i), all[i], ms.s)
	}
	for _, sid := range sessionPool {
		ms := m.session(sid)
		if ms == nil {
			_, err := s.GetSession(ctx, sid)
			wantErr(t, "GetSession", err, store.ErrNotFound)
			_, err = s.ListMessages(ctx, sid)
			wantErr(t, "ListMessages", err, store.ErrNotFound)
			_, err = s.PendingInputs(ctx, sid)
			wantErr(t, "PendingInputs", err, store.ErrNotFound)
			_, err = s.Events(ctx, sid, 0, 0)
			wantErr(t, "Events", err, store.ErrNotFound)
			_, err = s.LastSeq(ctx, sid)
			wantErr(t, "LastSeq", err, store.ErrNotFound)
			for k := range idsPerPool {
				_, err := s.GetInput(ctx, poolID(sid, k))
				wantErr(t, "GetInput", err, store.ErrNotFound)
			}
			continue
		}
		got, err := s.GetSession(ctx, sid)
		if err != nil {
			t.Fatalf("GetSession(%s): %v", sid, err)
		}
		eqJSON(t, "GetSession", got, ms.s)

		msgs, err := s.ListMessages(ctx, sid)
		if err != nil {
			t.Fatalf("ListMessages(%s): %v", sid, err)
		}
		if len(msgs) != len(ms.msgs) {
			t.Fatalf("step %d: %s has %d messages, model %d: %s", step, sid, len(msgs), len(ms.msgs), jsonOf(t, msgs))
		}
		for i, mm := range ms.msgs {
			want := opencode.MessageWithParts{Info: mm.info, Parts: mm.parts}
			eqJSON(t, fmt.Sprintf("step %d: %s message %d", step, sid, i), msgs[i], want)
			one, err := s.GetMessage(ctx, sid, mm.info.ID)
			if err != nil {
				t.Fatalf("GetMessage(%s): %v", mm.info.ID, err)
			}
			eqJSON(t, "GetMessage", one, want)
		}

		pend, err := s.PendingInputs(ctx, sid)
		if err != nil {
			t.Fatalf("PendingInputs(%s): %v", sid, err)
		}
		var wantPend []*opencode.Input
		for _, in := range ms.inputs {
			if in.State == opencode.InputPending {
				wantPend = append(wantPend, in)
			}
		}
		if len(pend) != len(wantPend) {
			t.Fatalf("step %d: %s has %d pending, model %d", step, sid, len(pend), len(wantPend))
		}
		for i := range pend {
			eqJSON(t, "pending", pend[i], wantPend[i])
			if pend[i].Order != wantPend[i].Order {
				t.Fatalf("step %d: pending %s Order %d, want %d", step, pend[i].ID, pend[i].Order, wantPend[i].Order)
			}
		}

		evs := checkGapless(t, s, sid, int64(len(ms.events)))
		for i := range evs {
			eqEvent(t, fmt.Sprintf("step %d: %s event %d", step, sid, i), evs[i], ms.events[i])
		}
		after := rapid.Int64Range(-1, int64(len(ms.events))+1).Draw(t, "after")
		limit := rapid.IntRange(-1, 4).Draw(t, "limit")
		page := events(t, s, sid, after, limit)
		lo := min(max(after, 0), int64(len(ms.events)))
		hi := int64(len(ms.events))
		if limit > 0 {
			hi = min(hi, lo+int64(limit))
		}
		if int64(len(page)) != hi-lo {
			t.Fatalf("step %d: Events(%s, %d, %d) returned %d, want %d", step, sid, after, limit, len(page), hi-lo)
		}
		for i, e := range page {
			eqEvent(t, "page", e, ms.events[lo+int64(i)])
		}

		for k := range idsPerPool {
			id := poolID(sid, k)
			got, err := s.GetInput(ctx, id)
			owner, i := m.input(id)
			if owner == nil {
				wantErr(t, "GetInput", err, store.ErrNotFound)
			} else {
				if err != nil {
					t.Fatalf("GetInput(%s): %v", id, err)
				}
				eqJSON(t, "GetInput", got, owner.inputs[i])
				if got.Order != owner.inputs[i].Order {
					t.Fatalf("GetInput(%s).Order = %d, want %d", id, got.Order, owner.inputs[i].Order)
				}
			}
			ok, err := s.MessageExists(ctx, id)
			if err != nil || ok != m.messageExists(id) {
				t.Fatalf("step %d: MessageExists(%s) = %v, %v", step, id, ok, err)
			}
		}
	}
}
