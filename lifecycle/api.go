package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/store"
)

// Admit admits one input on its session: durably, before it returns, and
// idempotently by the input's ID (routes minted it or took it from the
// client). existed is true when the same ID and content were admitted
// before; the earlier admission is returned and nothing happens twice.
func (m *Manager) Admit(ctx context.Context, in *opencode.Input) (out *opencode.Input, existed bool, err error) {
	out, existed, _, err = m.admit(ctx, in, nil)
	return out, existed, err
}

// AdmitIfRunning admits a steer only if the session has a running turn,
// checked and admitted in one step on the session's runner, so no turn can
// end in between: the steer joins that turn (at its next model call, or in
// the turn the core starts for it if the model call was the last). running
// is false, and nothing is admitted, when the session is idle (ACP's
// `_session/steering` with idleBehavior promptRequired).
func (m *Manager) AdmitIfRunning(ctx context.Context, in *opencode.Input) (out *opencode.Input, existed, running bool, err error) {
	in.Delivery = opencode.Steer
	return m.admit(ctx, in, func(r *runner) bool { return r.turn != nil })
}

// admit admits in on its session's runner; gate, if set, runs there first
// and admits nothing when it says no (the check and the admission are one
// step: no turn can end in between).
func (m *Manager) admit(ctx context.Context, in *opencode.Input, gate func(r *runner) bool) (out *opencode.Input, existed, running bool, err error) {
	if !in.Delivery.Valid() {
		return nil, false, false, opencode.Errorf(opencode.EInvalid, "delivery must be steer or queue")
	}
	if err := m.validateClientTools(in); err != nil {
		return nil, false, false, err
	}
	in.Fingerprint = fingerprint(in)
	if needsResolving(in.Parts) {
		// Over the parts as the client sent them: a retry is the same
		// admission even if the file changed since.
		if err := m.resolveInput(ctx, in); err != nil {
			return nil, false, false, err
		}
	}
	derr := m.do(ctx, in.SessionID, func(r *runner) {
		running = r.turn != nil
		if gate != nil && !gate(r) {
			return
		}
		// A prompt after a revert makes it final (OpenCode's cleanup);
		// during a revert or unrevert, once it is done.
		if r.restoring {
			r.finalize = true
		} else if err = r.cleanupRevert(); err != nil {
			return
		}
		snap := r.undoPoint()
		out, existed, err = r.admit(in)
		if err != nil || existed {
			return
		}
		// On an idle session the turn starts in the same commit as the
		// admission: one fsync before the 2xx, and the model call is
		// already under way while it runs. Nothing of it is published
		// until the commit succeeded; if it fails, it is undone.
		r.maybeStart()
		t := r.outbox()
		if _, ferr := t.flush(); ferr != nil {
			// Undone in memory as it is in the store: the runner goes on.
			// Unless the store could not be reached: the write may have
			// been made though its answer was lost, so the runner stops
			// and is rebuilt from the store, which delivers what it holds.
			r.restore(snap)
			if !store.Unavailable(ferr) {
				r.failure = nil
			}
			out, err = nil, admitError(ferr, in.ID)
		}
	})
	if err != nil {
		return nil, false, false, err // f ran: its own answer
	}
	if derr != nil {
		return nil, false, false, derr
	}
	return out, existed, running, err
}

// resolveInput resolves in's parts (resolveParts) with its session's
// directory and its agent's rules, read from the session's runner.
func (m *Manager) resolveInput(ctx context.Context, in *opencode.Input) error {
	var dir string
	var rulesets [][]Rule
	err := m.do(ctx, in.SessionID, func(r *runner) {
		dir = r.sess.Directory
		name := in.Agent
		if name == "" {
			name, _ = r.turnDefaults()
		}
		var agentRules []Rule
		if a, ok := r.m.agent(name); ok {
			agentRules = a.Rules
		}
		sessionRules, _ := ParseRules(r.sess.Permission)
		rulesets = [][]Rule{DefaultRules, agentRules, r.m.cfg.Rules, sessionRules, r.approved}
	})
	if err != nil {
		return err
	}
	in.Parts = m.resolveParts(ctx, in.Parts, dir, func(agent string) bool { return evaluate(rulesets, "task", agent) == "deny" })
	return nil
}

// Wait blocks until the turn that input messageID was delivered into ends.
// A revoked input answers at once with an ERevoked error.
func (m *Manager) Wait(ctx context.Context, sessionID, messageID string) (opencode.Result, error) {
	var ch chan waitResult
	var dir string
	if err := m.do(ctx, sessionID, func(r *runner) { ch, dir = r.wait(messageID), r.sess.Directory }); err != nil {
		return opencode.Result{}, err
	}
	select {
	case res := <-ch:
		return opencode.Result{Message: res.msg, Pos: res.pos, Seq: res.seq, Directory: dir}, res.err
	case <-ctx.Done():
		return opencode.Result{}, ctx.Err()
	}
}

// LastSeq is the sequence of the session's last event, as its runner
// holds it (no read): compared with a turn's Result.Seq, it says whether
// anything was written to the session since that turn ended.
func (m *Manager) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	err := m.do(ctx, sessionID, func(r *runner) { seq = r.lastSeq })
	return seq, err
}

// Abort cancels the session's running turn and revokes its pending steers.
// Queued inputs stay and run next. Aborting an idle session does nothing.
func (m *Manager) Abort(ctx context.Context, sessionID string) error {
	return m.do(ctx, sessionID, func(r *runner) {
		if r.turn != nil {
			r.interrupt("Aborted", true)
		}
	})
}

// Revoke cancels one pending input. It reports true if the input is not
// (or no longer) pending because of this or an earlier revoke, or was never
// known; an input already delivered to the model gives an EConflict error.
func (m *Manager) Revoke(ctx context.Context, sessionID, messageID string) (revoked bool, err error) {
	derr := m.do(ctx, sessionID, func(r *runner) { revoked, err = r.revoke(messageID) })
	if derr != nil {
		return false, derr
	}
	return revoked, err
}

// Replace changes the delivery and/or the parts of a pending input. nil
// leaves a field as it is.
func (m *Manager) Replace(ctx context.Context, sessionID, messageID string, delivery *opencode.Delivery,
	parts []opencode.Part) (out *opencode.Input, err error) {
	if delivery != nil && !delivery.Valid() {
		return nil, opencode.Errorf(opencode.EInvalid, "delivery must be steer or queue")
	}
	if needsResolving(parts) {
		in := &opencode.Input{SessionID: sessionID, Parts: parts}
		if err := m.resolveInput(ctx, in); err != nil {
			return nil, err
		}
		parts = in.Parts
	}
	derr := m.do(ctx, sessionID, func(r *runner) {
		out, err = r.replace(messageID, delivery, parts)
		if err == nil {
			// queue -> steer on an idle session cannot happen (it would be
			// running), but a replaced input must never be left stranded.
			r.maybeStart()
		}
	})
	if derr != nil {
		return nil, derr
	}
	return out, err
}

// Inbox lists a session's pending inputs in admission order.
func (m *Manager) Inbox(ctx context.Context, sessionID string) ([]*opencode.Input, error) {
	var out []*opencode.Input
	err := m.do(ctx, sessionID, func(r *runner) {
		out = make([]*opencode.Input, len(r.pending))
		for i, in := range r.pending {
			c := *in
			out[i] = &c
		}
	})
	return out, err
}

// Input returns one admitted input of a session.
func (m *Manager) Input(ctx context.Context, sessionID, messageID string) (*opencode.Input, error) {
	in, err := m.store.GetInput(ctx, messageID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && in.SessionID != sessionID) {
		return nil, opencode.MessageNotFound(sessionID, messageID)
	}
	if err != nil {
		return nil, err // an outage is not a 404
	}
	return in, nil
}

// FindInput returns an admitted input by its ID alone, whichever session
// holds it (the OpenAI door's response IDs are user message IDs, sent
// without their session).
func (m *Manager) FindInput(ctx context.Context, messageID string) (*opencode.Input, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.StoreTimeout)
	defer cancel()
	in, err := m.store.GetInput(ctx, messageID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && in.State == opencode.InputTombstone) {
		return nil, &opencode.Error{Code: opencode.ENotFound, Message: "Message not found: " + messageID}
	}
	return in, err
}

// WaitIdle blocks until the session has no running turn and no pending input.
func (m *Manager) WaitIdle(ctx context.Context, sessionID string) error {
	var ch chan struct{}
	err := m.do(ctx, sessionID, func(r *runner) {
		ch = make(chan struct{})
		if r.turn == nil && len(r.pending) == 0 {
			close(ch)
			return
		}
		r.idle = append(r.idle, ch)
	})
	if err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fingerprint is the canonical content of an input for idempotent
// admission: its parts without IDs, and the options that shape the turn.
func fingerprint(in *opencode.Input) string {
	return fingerprintPrefix + hex.EncodeToString(canonicalHash(in))
}

// fingerprintPrefix marks a hashed fingerprint; inputs admitted by older
// versions carry the canonical JSON itself.
const fingerprintPrefix = "sha256:"

// canonicalHash hashes the content that makes two admissions the same:
// the parts without their IDs, and the options. A part's text and URL (the
// fields a prompt's megabytes are in) go into the hash as they are, length
// first; the rest as JSON. So a prompt of N bytes costs no second copy.
func canonicalHash(in *opencode.Input) []byte {
	h := sha256.New()
	var buf [32 << 10]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(buf[:8], uint64(len(s)))
		h.Write(buf[:8])
		for len(s) > 0 { // in pieces: the hash takes []byte, s may be megabytes
			k := copy(buf[:], s)
			h.Write(buf[:k])
			s = s[k:]
		}
	}
	c := canonicalContent(in)
	for i := range c.Parts {
		p := &c.Parts[i]
		field(p.Text)
		field(p.URL)
		p.Text, p.URL = "", ""
	}
	b, _ := json.Marshal(c)
	field(string(b))
	return h.Sum(nil)
}

// content is what canonicalContent returns.
type content struct {
	Parts   []opencode.Part
	Agent   string
	Model   *opencode.MessageModel
	System  string
	Tools   map[string]bool
	NoReply bool
	Shell   string `json:",omitempty"`
	Variant string `json:",omitempty"`
	// ClientTools: a retry offering other tools is another admission.
	ClientTools []opencode.ClientTool `json:",omitempty"`
}

func canonicalContent(in *opencode.Input) content {
	parts := make([]opencode.Part, len(in.Parts))
	for i, p := range in.Parts {
		p.ID, p.SessionID, p.MessageID = "", "", ""
		parts[i] = p
	}
	return content{parts, in.Agent, in.Model, in.System, in.Tools, in.NoReply, in.Shell, in.Variant, in.ClientTools}
}

// sameContent compares an input's stored fingerprint with a new one's
// content, whichever form the stored one has.
func sameContent(stored string, in *opencode.Input) bool {
	if strings.HasPrefix(stored, fingerprintPrefix) {
		return stored == in.Fingerprint
	}
	b, _ := json.Marshal(canonicalContent(in))
	return stored == string(b)
}
