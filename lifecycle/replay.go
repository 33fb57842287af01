package lifecycle

// Replaying another server's sync history of a session (OpenCode's POST
// /sync/replay): a control plane warps a session into this server by
// posting the history the session's server answered on /sync/history.
//
// The history is one session's sequence: session.created.1 at seq 0, then
// OpenCode's v1 snapshots (session.updated.1, message.updated.1,
// message.part.updated.1, their removals) and the v2 log (session.next.*;
// ours adds session.inbox.*), every event with its ID and seq. The
// session's row is made from session.created.1; every later event goes
// into the session's durable log under its own ID, so the log's seqs are
// the history's and /sync/history answers the same events again. The v1
// snapshots are applied to the stored messages and parts; the v2 events
// are projected onto them too (this server keeps one message store, which
// the v2 routes read), except for a message a v1 snapshot of the same
// replay writes.
//
// As in OpenCode, an event the session already has (seq up to its last)
// must be the same one (ID, type, data) and is skipped, so posting a
// history twice, or an overlapping tail, changes nothing; the first new
// event must follow the last one. Unlike OpenCode, which commits event by
// event, a replay is one commit: a history that fails anywhere writes
// nothing. Nothing is published (OpenCode replays without publishing).

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// syncTypes are the sync event types a replay takes: OpenCode 1.18.33's
// (its document's SyncEvent* schemas), ours that OpenCode types otherwise
// (step.failed.1) and our inbox extension. Another type is refused.
var syncTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range strings.Fields(`session.created.1 session.updated.1 session.deleted.1 message.updated.1
		message.removed.1 message.part.updated.1 message.part.removed.1 session.next.agent.switched.1
		session.next.model.switched.1 session.next.moved.1 session.next.prompted.1 session.next.prompt.admitted.1
		session.next.context.updated.1 session.next.synthetic.1 session.next.shell.started.1 session.next.shell.ended.1
		session.next.step.started.1 session.next.step.ended.2 session.next.step.failed.2 session.next.step.failed.1
		session.next.text.started.1 session.next.text.ended.1 session.next.reasoning.started.1
		session.next.reasoning.ended.1 session.next.tool.input.started.1 session.next.tool.input.ended.1
		session.next.tool.called.1 session.next.tool.progress.1 session.next.tool.success.1 session.next.tool.failed.1
		session.next.retried.1 session.next.compaction.started.1 session.next.compaction.ended.1
		session.next.revert.staged.1 session.next.revert.cleared.1 session.next.revert.committed.1
		session.inbox.enqueued.1 session.inbox.delivered.1 session.inbox.cancelled.1
		session.inbox.delivery.changed.1 session.inbox.replaced.1`) {
		m[t] = true
	}
	return m
}()

// replayInvalid is a 400 about the replayed history, at path (under the
// request's "events").
func replayInvalid(msg string, path ...any) error {
	field := make([]string, len(path))
	for i, p := range path {
		field[i] = fmt.Sprint(p)
	}
	return &opencode.Error{Code: opencode.EInvalid, Kind: "Payload", Field: strings.Join(field, "."),
		Message: opencode.SchemaIssue(msg, path...)}
}

// Replay imports one session's sync history (see the file comment) and
// returns the session's ID.
func (m *Manager) Replay(ctx context.Context, events []opencode.SyncEvent) (string, error) {
	if len(events) == 0 {
		return "", replayInvalid("Missing key", "events", 0)
	}
	id := events[0].AggregateID
	// OpenCode's checks of the whole batch, in its words.
	for _, e := range events {
		if e.AggregateID != id {
			return "", replayInvalid("Replay events must belong to the same aggregate")
		}
	}
	for i, e := range events {
		if want := events[0].Seq + int64(i); e.Seq != want {
			return "", replayInvalid(fmt.Sprintf("Replay sequence mismatch at index %d: expected %d, got %d", i, want, e.Seq))
		}
	}
	if err := identifier.Check(identifier.Session, id); err != nil {
		return "", replayInvalid(`Expected a session ID starting with "ses_", got `+strconv.Quote(id), "events", 0, "aggregateID")
	}
	if err := m.planAndCommit(ctx, id, func() (*replayPlan, error) { return m.planReplay(ctx, id, events) }); err != nil {
		return "", err
	}
	return id, nil
}

// planAndCommit plans a write of history and commits it. A concurrent
// writer of the session (another replay, a prompt) moves its log between
// the plan and the commit: plan again.
func (m *Manager) planAndCommit(ctx context.Context, id string, plan func() (*replayPlan, error)) error {
	for range 3 {
		p, err := plan()
		if err == nil {
			err = m.commitReplay(ctx, p)
		}
		if !errors.Is(err, errReplayMoved) {
			return err
		}
	}
	return &opencode.Error{Code: opencode.EConflict, SessionID: id, Resource: "session",
		Message: "Session " + id + " kept changing while its history was written; retry it"}
}

var errReplayMoved = errors.New("the session changed since the replay was planned")

// replayPlan is what a replay writes, worked out from the store before
// the commit.
type replayPlan struct {
	m  *Manager
	id string
	// latest is the seq of the session's last event: -1 when there is no
	// session, 0 for one without a log.
	latest  int64
	sess    opencode.Session
	sessSet bool // the session row is written
	deleted bool // a session.deleted.1 ends the history
	events  []*opencode.Event
	msgs    map[string]*planMsg
	order   []*planMsg
	// delMsgs and delParts are removed (after the upserts, see store.Batch).
	delMsgs, delParts []string
	// v1 are the messages a message.updated.1 of this replay writes.
	v1 map[string]bool
	// lastUser is the latest user message: a step's parent.
	lastUser string
	// unset are projected user messages no step has given an agent and
	// model yet.
	unset []*planMsg
	ctx   context.Context
	// publish: the events go out on the bus after the commit (a front
	// door's history, which live clients show; a replay publishes
	// nothing).
	publish bool
	// unit is what an error's index counts: "event" (a replay's) or
	// "message" (a history's).
	unit string
}

type planMsg struct {
	mp      opencode.MessageWithParts
	write   bool            // the message row is written
	parts   map[string]bool // parts written
	removed bool
	// projected: the v2 projection writes the message.
	projected bool
}

func (m *Manager) planReplay(ctx context.Context, id string, events []opencode.SyncEvent) (*replayPlan, error) {
	rctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	p := &replayPlan{m: m, id: id, latest: -1, msgs: map[string]*planMsg{}, v1: map[string]bool{}, ctx: rctx}
	sess, err := m.store.GetSession(rctx, id)
	switch {
	case err == nil:
		p.sess = sess
		if p.latest, err = m.store.LastSeq(rctx, id); err != nil {
			return nil, mapStoreErr(err, id)
		}
	case errors.Is(err, store.ErrNotFound):
	default:
		return nil, mapStoreErr(err, id)
	}
	// The events the session already has, to compare (seq 0 is the
	// session itself, not in the log).
	var stored map[int64]*opencode.Event
	if first := max(events[0].Seq, 1); p.latest >= first {
		evs, err := m.store.Events(rctx, id, first-1, int(p.latest-first+1))
		if err != nil {
			return nil, mapStoreErr(err, id)
		}
		stored = make(map[int64]*opencode.Event, len(evs))
		for _, e := range evs {
			stored[e.Seq] = e
		}
	}
	for i, e := range events {
		d, err := decodeSyncData(i, e)
		if err != nil {
			return nil, err
		}
		if e.Seq <= p.latest {
			if !sameEvent(e, stored[e.Seq]) {
				return nil, &opencode.Error{Code: opencode.EConflict, SessionID: id, Resource: "session",
					Message: fmt.Sprintf("Replay diverged at aggregate %s sequence %d", id, e.Seq)}
			}
			continue
		}
		if i == 0 && e.Seq > p.latest+1 { // the later ones follow: the seqs are contiguous
			return nil, &opencode.Error{Code: opencode.EConflict, SessionID: id, Resource: "session",
				Message: fmt.Sprintf("Sequence mismatch for aggregate %s: expected %d, got %d", id, p.latest+1, e.Seq)}
		}
		if err := p.apply(i, e, d); err != nil {
			return nil, err
		}
	}
	p.finishUsers()
	return p, nil
}

// sameEvent reports whether a replayed event is the stored one; seq 0 (the
// session, which changes) only by its type.
func sameEvent(e opencode.SyncEvent, stored *opencode.Event) bool {
	if e.Seq == 0 {
		return e.Type == "session.created.1"
	}
	if stored == nil || stored.ID != e.ID || stored.Type+"."+strconv.Itoa(max(stored.Version, 1)) != e.Type {
		return false
	}
	var a, b any
	return json.Unmarshal(e.Data, &a) == nil && json.Unmarshal(stored.Data, &b) == nil && reflect.DeepEqual(a, b)
}

// apply adds one new event to the plan.
func (p *replayPlan) apply(i int, e opencode.SyncEvent, d syncData) error {
	if e.Seq == 0 {
		if e.Type != "session.created.1" {
			// OpenCode logs such an event for a session it does not have;
			// this server keeps no log without its session.
			return replayInvalid(`A new session's history starts with session.created.1, got `+strconv.Quote(e.Type), "events", i, "type")
		}
		p.sess, p.sessSet = d.session, true
		return nil
	}
	typ, ver := splitSyncType(e.Type)
	var data bytes.Buffer
	if err := json.Compact(&data, e.Data); err != nil {
		return replayInvalid("Expected object, got "+opencode.Shown(e.Data), "events", i, "data")
	}
	p.events = append(p.events, &opencode.Event{ID: e.ID, Type: typ, Version: ver, SessionID: p.id, Durable: true, Data: data.Bytes()})
	switch e.Type {
	case "session.created.1":
		return &opencode.Error{Code: opencode.EConflict, SessionID: p.id, Resource: "session",
			Message: "Session " + p.id + " exists already: session.created.1 at seq " + strconv.FormatInt(e.Seq, 10)}
	case "session.updated.1":
		s, err := patchSession(p.sess, d.raw["info"])
		if err != nil {
			return replayInvalid("Invalid session info: "+err.Error(), "events", i, "data", "info")
		}
		p.sess, p.sessSet = s, true
	case "session.deleted.1":
		p.deleted = true
	case "message.updated.1":
		pm, err := p.message(d.message.ID, i)
		if err != nil {
			return err
		}
		pm.mp.Info, pm.write, pm.removed = d.message, true, false
		p.v1[d.message.ID] = true
		p.undelete(&p.delMsgs, d.message.ID)
	case "message.removed.1":
		if pm := p.msgs[d.messageID]; pm != nil {
			pm.removed = true
		}
		p.delMsgs = append(p.delMsgs, d.messageID)
	case "message.part.updated.1":
		pm, err := p.message(d.part.MessageID, i)
		if err != nil {
			return err
		}
		if pm.mp.Info.ID == "" || pm.removed {
			return nil // a part of a message the session does not have: OpenCode ignores it too
		}
		pm.putPart(d.part)
		p.undelete(&p.delParts, d.part.ID)
	case "message.part.removed.1":
		if pm := p.msgs[d.messageID]; pm != nil {
			pm.dropPart(d.partID)
		}
		p.delParts = append(p.delParts, d.partID)
	default:
		return p.project(i, e, typ, d)
	}
	return nil
}

func (p *replayPlan) undelete(list *[]string, id string) {
	out := (*list)[:0]
	for _, x := range *list {
		if x != id {
			out = append(out, x)
		}
	}
	*list = out
}

// message is the plan's copy of a message, read from the store the first
// time (an empty Info: the session does not have it).
func (p *replayPlan) message(id string, i int) (*planMsg, error) {
	if pm := p.msgs[id]; pm != nil {
		return pm, nil
	}
	pm := &planMsg{parts: map[string]bool{}}
	if p.latest >= 0 {
		mp, err := p.m.store.GetMessage(p.ctx, p.id, id)
		switch {
		case err == nil:
			pm.mp = mp
		case !errors.Is(err, store.ErrNotFound):
			return nil, mapStoreErr(err, p.id)
		}
	}
	if pm.mp.Info.ID == "" {
		// A message another session holds would not be written (the
		// store keeps a message in its session).
		taken, err := p.m.store.MessageExists(p.ctx, id)
		if err != nil {
			return nil, mapStoreErr(err, p.id)
		}
		if taken {
			if p.latest < 0 {
				if _, err := p.m.store.GetMessage(p.ctx, p.id, id); err == nil {
					return nil, errReplayMoved // the session was made since the plan began
				}
			}
			return nil, &opencode.Error{Code: opencode.EConflict, SessionID: p.id, MessageID: id, Resource: "message",
				Message: fmt.Sprintf("Message %s of %s %d belongs to another session", id, cmp.Or(p.unit, "event"), i)}
		}
	}
	p.msgs[id] = pm
	p.order = append(p.order, pm)
	return pm, nil
}

func (pm *planMsg) putPart(part opencode.Part) {
	pm.parts[part.ID] = true
	for j := range pm.mp.Parts {
		if pm.mp.Parts[j].ID == part.ID {
			pm.mp.Parts[j] = part
			return
		}
	}
	pm.mp.Parts = append(pm.mp.Parts, part)
}

func (pm *planMsg) dropPart(id string) {
	delete(pm.parts, id)
	for j := range pm.mp.Parts {
		if pm.mp.Parts[j].ID == id {
			pm.mp.Parts = append(pm.mp.Parts[:j], pm.mp.Parts[j+1:]...)
			return
		}
	}
}

// batch is the plan's writes.
func (p *replayPlan) batch() *store.Batch {
	b := &store.Batch{Events: p.events}
	if p.sessSet {
		s := p.sess
		b.Session = &s
	}
	for _, pm := range p.order {
		if pm.removed || pm.mp.Info.ID == "" {
			continue
		}
		if pm.write || len(pm.parts) > 0 {
			b.Messages = append(b.Messages, pm.mp.Info)
		}
		for _, part := range pm.mp.Parts {
			if pm.parts[part.ID] {
				b.Parts = append(b.Parts, part)
			}
		}
	}
	b.DeleteMessages, b.DeleteParts = p.delMsgs, p.delParts
	return b
}

// commitReplay writes the plan: a new session in one commit of its own
// (it has no runner), an existing one on its runner, whose state follows.
func (m *Manager) commitReplay(ctx context.Context, p *replayPlan) error {
	b := p.batch()
	if p.latest < 0 {
		if p.deleted || !p.sessSet {
			return nil // the history ends deleted: nothing to keep
		}
		for _, e := range b.Events {
			e.Directory = p.sess.Directory
		}
		b.CreateOnly = true
		err := m.store.Commit(ctx, p.id, b)
		if errors.Is(err, store.ErrConflict) {
			if _, gerr := m.store.GetSession(ctx, p.id); gerr == nil {
				return errReplayMoved // created meanwhile: replay onto it
			}
		}
		return mapStoreErr(err, p.id)
	}
	if b.Empty() && !p.deleted {
		return nil // the session has all of it
	}
	var err error
	derr := m.do(ctx, p.id, func(r *runner) {
		if r.lastSeq != p.latest {
			err = errReplayMoved
			return
		}
		if r.busy() {
			err = busyError(r.id)
			return
		}
		if p.deleted {
			err = r.delete()
			return
		}
		t := r.outbox()
		s := r.sess
		if b.Session != nil {
			s = *b.Session
		}
		for _, e := range b.Events {
			e.Directory = s.Directory
		}
		// Into the batch, not the outbox's events: a replay publishes
		// nothing (a history does).
		t.batch.Session, t.batch.Events = b.Session, b.Events
		if p.publish {
			t.events = b.Events
		}
		t.batch.Messages, t.batch.Parts = b.Messages, b.Parts
		t.batch.DeleteMessages, t.batch.DeleteParts = b.DeleteMessages, b.DeleteParts
		if _, ferr := t.flush(); ferr != nil {
			err = mapStoreErr(ferr, r.id)
			return
		}
		r.sess = s
		if len(b.Messages)+len(b.Parts)+len(b.DeleteMessages)+len(b.DeleteParts) > 0 {
			r.forgetHistory()
		}
	})
	if derr != nil {
		return derr
	}
	return err
}

func splitSyncType(t string) (string, int) {
	i := strings.LastIndexByte(t, '.')
	v, _ := strconv.Atoi(t[i+1:])
	return t[:i], v
}

// patchSession applies a session.updated.1's info: the keys it has replace
// the session's (null clears one); time and summary key by key, as
// OpenCode's projector sets their columns.
func patchSession(s opencode.Session, info json.RawMessage) (opencode.Session, error) {
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(info, &patch); err != nil {
		return s, err
	}
	cur, _ := json.Marshal(s)
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(cur, &obj)
	for k, v := range patch {
		if k == "id" {
			continue
		}
		if (k == "time" || k == "summary" || k == "share") && !isNull(v) {
			var inner, old map[string]json.RawMessage
			if err := json.Unmarshal(v, &inner); err != nil {
				return s, fmt.Errorf("%s: %w", k, err)
			}
			_ = json.Unmarshal(obj[k], &old)
			if old == nil {
				old = map[string]json.RawMessage{}
			}
			for ik, iv := range inner {
				if isNull(iv) {
					delete(old, ik)
				} else {
					old[ik] = iv
				}
			}
			v, _ = json.Marshal(old)
		}
		if isNull(v) {
			delete(obj, k)
		} else {
			obj[k] = v
		}
	}
	merged, _ := json.Marshal(obj)
	var out opencode.Session
	if err := json.Unmarshal(merged, &out); err != nil {
		return s, err
	}
	out.ID = s.ID
	return out, nil
}

func isNull(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == "null" }

// partID is the ID of a part the v2 projection makes: a part ID of
// OpenCode's form, its time field that of the event that makes it (so the
// parts of a message sort in the order they were made) and its tail a
// hash of what it is (so a later replay finds it again).
func partID(e opencode.SyncEvent, n int, key ...string) string {
	var at uint64
	if body, ok := strings.CutPrefix(e.ID, string(identifier.Event)+"_"); ok && len(body) >= 12 {
		at, _ = strconv.ParseUint(body[:12], 16, 64)
	}
	if at == 0 {
		at = uint64(e.Seq) << 12
	}
	return fmt.Sprintf("%s_%012x%s", identifier.Part, (at+uint64(n))&(1<<48-1), partTail(key...))
}

// partTail is the 14 base62 characters of a derived part ID.
func partTail(key ...string) string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	n := new(big.Int).SetBytes(sum[:])
	b := make([]byte, 14)
	r := new(big.Int)
	for i := range b {
		n.DivMod(n, big.NewInt(62), r)
		b[i] = base62[r.Int64()]
	}
	return string(b)
}
