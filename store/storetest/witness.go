package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Witness wraps a store and remembers every message and part version that
// was committed, so a test can check the promise "what a client sees is
// stored": every state event on the bus announces something a commit has
// already written. Delay, if set, is slept inside each commit before it is
// written, which widens the window in which an early event would show.
type Witness struct {
	store.Store
	Delay time.Duration
	// Before, if set, runs inside each commit before it is written.
	Before func(sessionID string, b *store.Batch)

	mu       sync.Mutex
	sessions map[string]bool
	versions map[string]map[string]bool // message or part ID -> committed JSON versions
}

// Commit implements store.Store.
func (w *Witness) Commit(ctx context.Context, sessionID string, b *store.Batch) error {
	if w.Delay > 0 {
		time.Sleep(w.Delay)
	}
	if w.Before != nil {
		w.Before(sessionID, b)
	}
	// Encode before the commit: the caller keeps ownership of b's values.
	var msgs, parts []string
	for _, m := range b.Messages {
		msgs = append(msgs, m.ID, canonical(m))
	}
	for _, p := range b.Parts {
		parts = append(parts, p.ID, canonical(p))
	}
	if err := w.Store.Commit(ctx, sessionID, b); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions, w.sessions = map[string]map[string]bool{}, map[string]bool{}
	}
	if b.Session != nil {
		w.sessions[b.Session.ID] = true
	}
	for _, kv := range [][]string{msgs, parts} {
		for i := 0; i < len(kv); i += 2 {
			if w.versions[kv[i]] == nil {
				w.versions[kv[i]] = map[string]bool{}
			}
			w.versions[kv[i]][kv[i+1]] = true
		}
	}
	return nil
}

// Check returns an error if e announces a session, message or part
// (version) that no commit has written yet. Events that carry no state
// (status, deltas of a stored part, removals) pass when what they name
// exists.
func (w *Witness) Check(e *opencode.Event) error {
	var p struct {
		Info   json.RawMessage `json:"info"`
		Part   json.RawMessage `json:"part"`
		PartID string          `json:"partID"`
	}
	switch e.Type {
	case opencode.EvMessageUpdated, opencode.EvPartUpdated, opencode.EvPartDelta, opencode.EvSessionUpdated, opencode.EvSessionCreated:
	default:
		return nil
	}
	if err := json.Unmarshal(e.Data, &p); err != nil {
		return fmt.Errorf("%s: %v", e.Type, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Type {
	case opencode.EvSessionUpdated, opencode.EvSessionCreated:
		var s struct{ ID string }
		_ = json.Unmarshal(p.Info, &s)
		if !w.sessions[s.ID] {
			return fmt.Errorf("%s announces session %s before it is stored", e.Type, s.ID)
		}
	case opencode.EvMessageUpdated:
		var m opencode.Message
		if err := json.Unmarshal(p.Info, &m); err != nil {
			return fmt.Errorf("%s: %v", e.Type, err)
		}
		if !w.versions[m.ID][canonical(m)] {
			return fmt.Errorf("%s announces %s message %s in a version not (yet) stored", e.Type, m.Role, m.ID)
		}
	case opencode.EvPartUpdated:
		var pt opencode.Part
		if err := json.Unmarshal(p.Part, &pt); err != nil {
			return fmt.Errorf("%s: %v", e.Type, err)
		}
		if !w.versions[pt.ID][canonical(pt)] {
			return fmt.Errorf("%s announces %s part %s in a version not (yet) stored", e.Type, pt.Type, pt.ID)
		}
	case opencode.EvPartDelta:
		if len(w.versions[p.PartID]) == 0 {
			return fmt.Errorf("%s for part %s before the part is stored", e.Type, p.PartID)
		}
	}
	return nil
}

// canonical is v's JSON after a decode/encode round trip through its own
// type, so an event's payload and a committed value compare equal.
func canonical[T any](v T) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "!" + err.Error()
	}
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		return "!" + err.Error()
	}
	b, _ = json.Marshal(back)
	return string(b)
}
