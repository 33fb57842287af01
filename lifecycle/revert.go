package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/snapshot"
)

// snapTimeout bounds one snapshot operation (git add of the work tree).
const snapTimeout = 30 * time.Second

// repo is the snapshot repository of the session's directory (nil when
// the directory is not in a git work tree).
func (r *runner) repo() *snapshot.Repo {
	return r.m.cfg.Snapshots.For(r.m.ctx, r.sess.Directory)
}

// track records the project's files ("" when untracked or on failure:
// a step never fails for want of a snapshot).
func (r *runner) track() string {
	repo := r.repo()
	if repo == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
	defer cancel()
	h, err := repo.Track(ctx)
	if err != nil {
		r.m.log.Warn("snapshot failed", "session", r.id, "err", err)
		return ""
	}
	return h
}

// stepChanges records the files at the end of a step and lists those the
// step changed (relative paths).
func (r *runner) stepChanges(st *step) (string, []string) {
	if st.snapshot == "" {
		return "", nil
	}
	end := r.track()
	if end == "" {
		return "", nil
	}
	changed := []string{}
	if end != st.snapshot {
		ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
		defer cancel()
		diffs, err := r.repo().Changed(ctx, st.snapshot, end)
		if err != nil {
			r.m.log.Warn("snapshot diff failed", "session", r.id, "err", err)
		}
		for _, d := range diffs {
			changed = append(changed, d.File)
		}
	}
	return end, changed
}

// busyError refuses a session edit while a turn runs.
func busyError(id string) error {
	return &opencode.Error{Code: opencode.EConflict, SessionID: id,
		Message: "Session " + id + " is busy: wait for the turn to end or abort it"}
}

// Revert puts the project's files back to how they were before message
// messageID (before part partID of it, when given) and marks the session
// reverted; the messages stay until the next prompt removes them, and
// Unrevert undoes it all.
func (m *Manager) Revert(ctx context.Context, sessionID, messageID, partID string) (out opencode.Session, err error) {
	derr := m.do(ctx, sessionID, func(r *runner) { out, err = r.revert(messageID, partID) })
	if derr != nil {
		return out, derr
	}
	return out, err
}

// Unrevert restores the files and messages a Revert hid.
func (m *Manager) Unrevert(ctx context.Context, sessionID string) (out opencode.Session, err error) {
	derr := m.do(ctx, sessionID, func(r *runner) { out, err = r.unrevert() })
	if derr != nil {
		return out, derr
	}
	return out, err
}

func (r *runner) revert(messageID, partID string) (opencode.Session, error) {
	if r.turn != nil {
		return r.sess, busyError(r.id)
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
	defer cancel()
	msgs, err := r.m.store.ListMessages(ctx, r.id)
	if err != nil {
		return r.sess, err
	}
	at := slices.IndexFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.ID == messageID })
	if at < 0 {
		return r.sess, opencode.MessageNotFound(r.id, messageID)
	}
	if partID != "" && !slices.ContainsFunc(msgs[at].Parts, func(p opencode.Part) bool { return p.ID == partID }) {
		return r.sess, &opencode.Error{Code: opencode.ENotFound, SessionID: r.id, MessageID: messageID,
			Message: "Part not found: " + partID}
	}
	// The files as they were when the first step at or after the revert
	// point started.
	target := ""
	for _, mp := range msgs[at:] {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartStepStart && p.Snapshot != "" {
				target = p.Snapshot
				break
			}
		}
		if target != "" {
			break
		}
	}
	rev := &opencode.SessionRevert{MessageID: messageID, PartID: partID}
	if repo := r.repo(); repo != nil && target != "" {
		// Unrevert goes back to the files as they are now (or as they were
		// before the first of several reverts).
		now := ""
		if r.sess.Revert != nil {
			now = r.sess.Revert.Snapshot
		}
		if now == "" {
			if now, err = repo.Track(ctx); err != nil {
				return r.sess, err
			}
		}
		rev.Snapshot = now
		rev.Diff, _ = repo.Diff(ctx, now, target)
		// The intent first: a crash while the files change is rolled
		// forward on restart (finishRestore).
		if err := r.writeIntent(restoreIntent{Kind: "revert", Target: target, Revert: rev}); err != nil {
			return r.sess, err
		}
		if err := repo.Restore(ctx, target); err != nil {
			return r.sess, err
		}
	}
	s := r.sess
	s.Revert = rev
	s.Time.Updated = r.m.now()
	return r.saveIntended(s)
}

// restoreIntent is a revert or unrevert whose file restore is under way:
// the snapshot the files go to and the session's revert once they are
// there (nil: unreverted).
type restoreIntent struct {
	Kind   string                  `json:"kind"`
	Target string                  `json:"target"`
	Revert *opencode.SessionRevert `json:"revert,omitempty"`
}

func (r *runner) writeIntent(in restoreIntent) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if err := r.m.cfg.Snapshots.WriteIntent(r.id, b); err != nil {
		return fmt.Errorf("revert: write the restore intent: %w", err)
	}
	return nil
}

// saveIntended stores the session as the restore left it (saveSession
// commits at once); the intent is removed once that is stored.
func (r *runner) saveIntended(s opencode.Session) (opencode.Session, error) {
	out, err := r.saveSession(r.outbox(), s)
	if err == nil {
		r.m.cfg.Snapshots.ClearIntent(r.id)
	}
	return out, err
}

// finishRestore rolls forward a revert or unrevert a crash cut off
// between its intent and the stored session: the files go to the
// intended snapshot (again: a restore is idempotent) and the session gets
// the intended revert.
func (r *runner) finishRestore(data []byte) {
	var in restoreIntent
	if err := json.Unmarshal(data, &in); err != nil {
		r.m.log.Error("restore intent unreadable: dropped", "session", r.id, "err", err)
		r.m.cfg.Snapshots.ClearIntent(r.id)
		return
	}
	if repo := r.repo(); repo != nil && in.Target != "" {
		ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
		err := repo.Restore(ctx, in.Target)
		cancel()
		if err != nil {
			// Left for the next start to finish.
			r.m.log.Error("finish an interrupted "+in.Kind, "session", r.id, "err", err)
			return
		}
	}
	r.m.log.Info("finished an interrupted "+in.Kind, "session", r.id)
	s := r.sess
	s.Revert = in.Revert
	s.Time.Updated = r.m.now()
	_, _ = r.saveIntended(s)
}

func (r *runner) unrevert() (opencode.Session, error) {
	if r.turn != nil {
		return r.sess, busyError(r.id)
	}
	if r.sess.Revert == nil {
		return r.sess, nil
	}
	if repo := r.repo(); repo != nil && r.sess.Revert.Snapshot != "" {
		ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
		defer cancel()
		if err := r.writeIntent(restoreIntent{Kind: "unrevert", Target: r.sess.Revert.Snapshot}); err != nil {
			return r.sess, err
		}
		if err := repo.Restore(ctx, r.sess.Revert.Snapshot); err != nil {
			return r.sess, err
		}
	}
	s := r.sess
	s.Revert = nil
	s.Time.Updated = r.m.now()
	return r.saveIntended(s)
}

// cleanupRevert makes a revert final when a new prompt arrives: the
// messages from the revert point on are removed (message.removed each),
// the model's history forgets them, and the session is no longer reverted.
func (r *runner) cleanupRevert() error {
	rev := r.sess.Revert
	if rev == nil || r.turn != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
	defer cancel()
	msgs, err := r.m.store.ListMessages(ctx, r.id)
	if err != nil {
		return err
	}
	at := slices.IndexFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.ID == rev.MessageID })
	t := r.outbox()
	keep := msgs
	if at >= 0 {
		keep = msgs[:at]
		for _, mp := range msgs[at:] {
			if rev.PartID != "" && mp.Info.ID == rev.MessageID {
				// Revert inside a message: it stays, up to the part.
				i := slices.IndexFunc(mp.Parts, func(p opencode.Part) bool { return p.ID == rev.PartID })
				for _, p := range mp.Parts[max(i, 0):] {
					t.batch.DeleteParts = append(t.batch.DeleteParts, p.ID)
					t.live(opencode.EvPartRemoved, map[string]any{"sessionID": r.id, "messageID": mp.Info.ID, "partID": p.ID})
				}
				mp.Parts = mp.Parts[:max(i, 0)]
				keep = append(keep, mp)
				continue
			}
			t.batch.DeleteMessages = append(t.batch.DeleteMessages, mp.Info.ID)
			t.live(opencode.EvMessageRemoved, map[string]any{"sessionID": r.id, "messageID": mp.Info.ID})
		}
	}
	s := r.sess
	s.Revert = nil
	if _, err := r.saveSession(t, s); err != nil {
		return err
	}
	r.history, r.lazy = nil, false
	r.firstSnap = firstSnapshot(keep)
	for _, mp := range keep {
		r.remember(mp)
	}
	return nil
}

// firstSnapshot is the snapshot the first step of msgs started from.
func firstSnapshot(msgs []opencode.MessageWithParts) string {
	for _, mp := range msgs {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartStepStart && p.Snapshot != "" {
				return p.Snapshot
			}
		}
	}
	return ""
}

// diffBetween is what changed from snapshot a to b ([] when either is
// unknown: an untracked project, or no step yet).
func (r *runner) diffBetween(a, b string) []snapshot.FileDiff {
	if a == "" || b == "" {
		return []snapshot.FileDiff{}
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
	defer cancel()
	diff, err := r.repo().Patches(ctx, a, b)
	if err != nil {
		r.m.log.Warn("session diff failed", "session", r.id, "err", err)
		return []snapshot.FileDiff{}
	}
	return diff
}

// summarize updates what a step changed, as OpenCode does after each step:
// session.diff (the session's changes so far), the session's summary
// counts, and the turn's changes on its user messages.
func (r *runner) summarize(t *outbox, tu *turn) {
	diff := r.diffBetween(r.firstSnap, tu.endSnap)
	t.live(opencode.EvSessionDiff, map[string]any{"sessionID": r.id, "diff": diff})
	sum := opencode.SessionSummary{Files: int64(len(diff))}
	for _, d := range diff {
		sum.Additions += int64(d.Additions)
		sum.Deletions += int64(d.Deletions)
	}
	s := r.sess
	s.Summary = &sum
	t.session(s)
	r.sess = s
	turnDiff := diff
	if tu.startSnap != r.firstSnap {
		turnDiff = r.diffBetween(tu.startSnap, tu.endSnap)
	}
	diffs := make([]json.RawMessage, len(turnDiff))
	for i, d := range turnDiff {
		diffs[i] = mustJSON(d)
	}
	for _, u := range tu.users {
		u.Summary = &opencode.UserSummary{Diffs: diffs}
		t.message(u)
	}
}

// SessionDiff is GET /session/{id}/diff: the files the session changed
// (with messageID, the files that message's turn changed), from its step
// snapshots. Untracked projects have none.
func (m *Manager) SessionDiff(ctx context.Context, sessionID, messageID string) ([]snapshot.FileDiff, error) {
	sess, err := m.GetSession(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	msgs, err := m.store.ListMessages(ctx, sessionID)
	if err != nil {
		return nil, mapStoreErr(err, sessionID)
	}
	if messageID != "" {
		at := slices.IndexFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.ID == messageID })
		if at < 0 {
			return nil, opencode.MessageNotFound(sessionID, messageID)
		}
		end := len(msgs)
		for i := at + 1; i < len(msgs); i++ {
			if msgs[i].Info.Role == opencode.User {
				end = i
				break
			}
		}
		msgs = msgs[at:end]
	}
	first, last := firstSnapshot(msgs), ""
	for _, mp := range msgs {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartStepFinish && p.Snapshot != "" {
				last = p.Snapshot
			}
		}
	}
	repo := m.cfg.Snapshots.For(ctx, sess.Directory)
	if repo == nil || first == "" || last == "" {
		return []snapshot.FileDiff{}, nil
	}
	return repo.Patches(ctx, first, last)
}
