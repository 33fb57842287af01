// Package memory is the in-memory store: the same contract as store/sqlite,
// kept in maps behind one mutex. Used by tests and by --store=memory.
package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

type message struct {
	info  opencode.Message
	order int64
	parts map[string]*part
}

type part struct {
	p     opencode.Part
	order int64
}

type session struct {
	open     bool
	s        opencode.Session
	order    int64
	messages map[string]*message
	inputs   map[string]*opencode.Input
	events   []*opencode.Event
}

// Store is an in-memory store.Store.
type Store struct {
	mu       sync.RWMutex
	order    int64
	sessions map[string]*session
	inputs   map[string]*opencode.Input // by ID, all sessions
	messages map[string]string          // message ID -> session ID
	// inputParts are the part IDs of admitted inputs (-> session ID).
	inputParts map[string]string
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{sessions: map[string]*session{}, inputs: map[string]*opencode.Input{}, messages: map[string]string{},
		inputParts: map[string]string{}}
}

// deep copies v so that the copy shares nothing with it: a JSON round
// trip, as the SQLite store stores every row. What a caller passes in or
// gets back is its own to change.
func deep[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic("memory store: encode: " + err.Error()) // only our own types get here
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic("memory store: decode: " + err.Error())
	}
	return out
}

func cloneInput(in *opencode.Input) *opencode.Input {
	c := deep(*in)
	c.Order = in.Order // not part of the JSON
	return &c
}

// cloneEvent copies a log event without the frame caches of the original.
func cloneEvent(e *opencode.Event) *opencode.Event {
	return &opencode.Event{ID: e.ID, Type: e.Type, SessionID: e.SessionID, Directory: e.Directory,
		Seq: e.Seq, Version: e.Version, Durable: true, Data: append(json.RawMessage(nil), e.Data...)}
}

// Commit implements store.Store.
func (m *Store) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Validate everything first so the batch applies all or nothing.
	seen := map[string]bool{}
	for _, in := range b.Admit {
		if _, ok := m.inputs[in.ID]; ok || seen[in.ID] {
			return store.ErrConflict
		}
		seen[in.ID] = true
		if _, ok := m.messages[in.ID]; ok {
			return store.ErrConflict
		}
	}
	seenPart := map[string]bool{}
	for _, in := range b.Admit {
		for _, p := range in.Parts {
			if seenPart[p.ID] || m.partTaken(p.ID) {
				return &store.PartConflictError{ID: p.ID}
			}
			seenPart[p.ID] = true
		}
	}
	s := m.sessions[sessionID]
	if s == nil && b.Session == nil {
		return store.ErrNotFound
	}
	if s != nil && b.CreateOnly {
		return store.ErrConflict
	}
	for _, in := range b.Inputs {
		if _, ok := m.inputs[in.ID]; !ok && !seen[in.ID] {
			return store.ErrNotFound
		}
	}
	if err := m.checkParts(s, sessionID, b); err != nil {
		return err
	}
	if b.Session != nil {
		if s == nil {
			m.order++
			s = &session{order: m.order, messages: map[string]*message{}, inputs: map[string]*opencode.Input{}}
			m.sessions[sessionID] = s
		}
		s.s = deep(*b.Session)
	}
	if b.Open != nil {
		s.open = *b.Open
	}
	for _, msg := range b.Messages {
		cur := s.messages[msg.ID]
		if cur == nil {
			m.order++
			cur = &message{order: m.order, parts: map[string]*part{}}
			s.messages[msg.ID] = cur
			m.messages[msg.ID] = sessionID
		}
		cur.info = deep(msg)
	}
	for _, p := range b.Parts {
		msg := s.messages[p.MessageID] // checkParts made sure it is there
		cur := msg.parts[p.ID]
		if cur == nil {
			m.order++
			cur = &part{order: m.order}
			msg.parts[p.ID] = cur
		}
		cur.p = deep(p)
	}
	for _, id := range b.DeleteMessages {
		if s.messages[id] != nil {
			delete(s.messages, id)
			delete(m.messages, id)
		}
	}
	for _, id := range b.DeleteParts {
		for _, msg := range s.messages {
			delete(msg.parts, id)
		}
	}
	for _, in := range b.Admit {
		for _, p := range in.Parts {
			m.inputParts[p.ID] = sessionID
		}
		m.order++
		c := cloneInput(in)
		c.Order = m.order
		in.Order = m.order
		m.inputs[in.ID] = c
		s.inputs[in.ID] = c
	}
	m.trimTombstones(s, b)
	for _, in := range b.Inputs {
		for _, p := range in.Parts {
			m.inputParts[p.ID] = sessionID
		}
		c := cloneInput(in)
		c.Order = m.inputs[in.ID].Order
		m.inputs[in.ID] = c
		s.inputs[in.ID] = c
	}
	last := int64(len(s.events))
	for _, e := range b.Events {
		last++
		e.Seq = last // the caller learns the seq, as the store contract says
		e.Durable = true
		s.events = append(s.events, cloneEvent(e))
	}
	return nil
}

// trimTombstones keeps the session's newest store.MaxTombstones
// tombstones when b admits one (m.mu held).
func (m *Store) trimTombstones(s *session, b *store.Batch) {
	if !slices.ContainsFunc(b.Admit, func(in *opencode.Input) bool { return in.State == opencode.InputTombstone }) {
		return
	}
	var tomb []*opencode.Input
	for _, in := range s.inputs {
		if in.State == opencode.InputTombstone {
			tomb = append(tomb, in)
		}
	}
	if len(tomb) <= store.MaxTombstones {
		return
	}
	slices.SortFunc(tomb, func(a, b *opencode.Input) int { return cmp.Compare(a.Order, b.Order) })
	for _, in := range tomb[:len(tomb)-store.MaxTombstones] {
		delete(s.inputs, in.ID)
		delete(m.inputs, in.ID)
	}
}

// checkParts returns an *store.OrphanPartError for the first part of b that
// names another session or whose message is neither stored in session s
// (nil if the batch creates it) nor in b.Messages; a message of b.Messages
// whose ID another session holds does not count, as SQLite keeps it there
// (m.mu held).
func (m *Store) checkParts(s *session, sessionID string, b *store.Batch) error {
	var inBatch map[string]bool
	for _, p := range b.Parts {
		if p.SessionID != sessionID {
			return &store.OrphanPartError{PartID: p.ID, MessageID: p.MessageID, SessionID: sessionID, PartSessionID: p.SessionID}
		}
		if s != nil && s.messages[p.MessageID] != nil {
			continue
		}
		if inBatch == nil {
			inBatch = make(map[string]bool, len(b.Messages))
			for _, msg := range b.Messages {
				if owner, ok := m.messages[msg.ID]; !ok || owner == sessionID {
					inBatch[msg.ID] = true
				}
			}
		}
		if !inBatch[p.MessageID] {
			return &store.OrphanPartError{PartID: p.ID, MessageID: p.MessageID, SessionID: sessionID, PartSessionID: p.SessionID}
		}
	}
	return nil
}

// partTaken reports whether a stored part or an admitted input's part has
// this ID (m.mu held).
func (m *Store) partTaken(id string) bool {
	if _, ok := m.inputParts[id]; ok {
		return true
	}
	for _, s := range m.sessions {
		for _, msg := range s.messages {
			if _, ok := msg.parts[id]; ok {
				return true
			}
		}
	}
	return false
}

// OpenSessions implements store.Store.
func (m *Store) OpenSessions(context.Context) ([]string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var open []*session
	for _, s := range m.sessions {
		pending := false
		for _, in := range s.inputs {
			pending = pending || in.State == opencode.InputPending
		}
		if s.open || pending {
			open = append(open, s)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i].order < open[j].order })
	out := make([]string, len(open))
	for i, s := range open {
		out[i] = s.s.ID
	}
	return out, nil
}

// SessionOpen implements store.Store.
func (m *Store) SessionOpen(_ context.Context, id string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[id]
	if s == nil {
		return false, store.ErrNotFound
	}
	if s.open {
		return true, nil
	}
	for _, in := range s.inputs {
		if in.State == opencode.InputPending {
			return true, nil
		}
	}
	return false, nil
}

// GetSession implements store.Store.
func (m *Store) GetSession(_ context.Context, id string) (opencode.Session, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[id]
	if s == nil {
		return opencode.Session{}, store.ErrNotFound
	}
	return deep(s.s), nil
}

// ListSessions implements store.Store.
func (m *Store) ListSessions(context.Context) ([]opencode.Session, error) {
	type entry struct {
		s     opencode.Session
		order int64
	}
	m.mu.RLock()
	all := make([]entry, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, entry{deep(s.s), s.order})
	}
	m.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return all[i].order < all[j].order })
	out := make([]opencode.Session, len(all))
	for i, e := range all {
		out[i] = e.s
	}
	return out, nil
}

// DeleteSession implements store.Store.
func (m *Store) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil {
		return store.ErrNotFound
	}
	for mid := range s.messages {
		delete(m.messages, mid)
	}
	for iid := range s.inputs {
		delete(m.inputs, iid)
	}
	for pid, sid := range m.inputParts {
		if sid == id {
			delete(m.inputParts, pid)
		}
	}
	delete(m.sessions, id)
	return nil
}

func withParts(msg *message) opencode.MessageWithParts {
	ps := make([]*part, 0, len(msg.parts))
	for _, p := range msg.parts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].order < ps[j].order })
	out := opencode.MessageWithParts{Info: deep(msg.info), Parts: make([]opencode.Part, len(ps))}
	for i, p := range ps {
		out.Parts[i] = deep(p.p)
	}
	return out
}

// ListMessages implements store.Store.
func (m *Store) ListMessages(_ context.Context, sessionID string) ([]opencode.MessageWithParts, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[sessionID]
	if s == nil {
		return nil, store.ErrNotFound
	}
	msgs := make([]*message, 0, len(s.messages))
	for _, msg := range s.messages {
		msgs = append(msgs, msg)
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].order < msgs[j].order })
	out := make([]opencode.MessageWithParts, len(msgs))
	for i, msg := range msgs {
		out[i] = withParts(msg)
	}
	return out, nil
}

// MessagesPage implements store.Store.
func (m *Store) MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error) {
	all, err := m.ListMessages(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return store.Page(all, q, func(mp opencode.MessageWithParts) string { return mp.Info.ID })
}

// GetMessage implements store.Store.
func (m *Store) GetMessage(_ context.Context, sessionID, messageID string) (opencode.MessageWithParts, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[sessionID]
	if s == nil {
		return opencode.MessageWithParts{}, store.ErrNotFound
	}
	msg := s.messages[messageID]
	if msg == nil {
		return opencode.MessageWithParts{}, store.ErrNotFound
	}
	return withParts(msg), nil
}

// MessageExists implements store.Store.
func (m *Store) MessageExists(_ context.Context, messageID string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.messages[messageID]
	return ok, nil
}

// MessageSession implements store.Store.
func (m *Store) MessageSession(_ context.Context, messageID string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sid, ok := m.messages[messageID]
	if !ok {
		return "", store.ErrNotFound
	}
	return sid, nil
}

// GetInput implements store.Store.
func (m *Store) GetInput(_ context.Context, id string) (*opencode.Input, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	in := m.inputs[id]
	if in == nil {
		return nil, store.ErrNotFound
	}
	return cloneInput(in), nil
}

// InputStatus implements store.Store.
func (m *Store) InputStatus(_ context.Context, id string) (store.InputStatus, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	in := m.inputs[id]
	if in == nil {
		return store.InputStatus{}, store.ErrNotFound
	}
	return store.InputStatus{SessionID: in.SessionID, State: in.State, Answer: in.Answer, NoReply: in.NoReply}, nil
}

// PendingInputs implements store.Store.
func (m *Store) PendingInputs(_ context.Context, sessionID string) ([]*opencode.Input, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[sessionID]
	if s == nil {
		return nil, store.ErrNotFound
	}
	var out []*opencode.Input
	for _, in := range s.inputs {
		if in.State == opencode.InputPending {
			out = append(out, cloneInput(in))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Order < out[j].Order })
	return out, nil
}

// Events implements store.Store.
func (m *Store) Events(_ context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[sessionID]
	if s == nil {
		return nil, store.ErrNotFound
	}
	if after < 0 {
		after = 0
	}
	if after >= int64(len(s.events)) {
		return nil, nil
	}
	evs := s.events[after:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	out := make([]*opencode.Event, len(evs))
	for i, e := range evs {
		out[i] = cloneEvent(e)
	}
	return out, nil
}

// LastSeq implements store.Store.
func (m *Store) LastSeq(_ context.Context, sessionID string) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.sessions[sessionID]
	if s == nil {
		return 0, store.ErrNotFound
	}
	return int64(len(s.events)), nil
}

// Close implements store.Store.
func (m *Store) Close() error { return nil }
