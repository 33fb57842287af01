package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
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

// Git over a large work tree takes seconds, and the runner's loop must stay
// live meanwhile (an abort or a steer must not wait behind it): in a
// tracked project the snapshots of a step's start and end, and the diffs
// summarize publishes, are taken off the loop and posted back (offLoop).
// An untracked project needs no git and stays on the loop.

// track records the project's files ("" when untracked or on failure:
// a step never fails for want of a snapshot). It runs off the loop.
func (r *runner) track(ctx context.Context, repo *snapshot.Repo) string {
	ctx, cancel := context.WithTimeout(ctx, snapTimeout)
	defer cancel()
	h, err := repo.Track(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) { // an abort or shutdown is no failure
			r.m.log.Warn("snapshot failed", "session", r.id, "err", err)
		}
		return ""
	}
	return h
}

// offLoop runs work on its own goroutine, then runs then on the loop
// (unless the runner stopped meanwhile: then is dropped). then checks
// that what it belongs to is still current.
func (r *runner) offLoop(work, then func()) {
	r.away++
	r.m.wg.Add(1)
	go func() {
		defer r.m.wg.Done()
		work()
		r.post(streamMsg{then: func() {
			r.away--
			then()
		}})
	}()
}

// snapDiffs is what a step's end measures: the files now, those the step
// changed, and the session's and the turn's diffs (what summarize
// publishes).
type snapDiffs struct {
	end            string
	changed        []string
	diff, turnDiff []opencode.FileDiff
}

// measure takes the end snapshot and the diffs against the step's start
// (from, "" for none), the session's first and the turn's first snapshot;
// fallback is the end to diff against when the snapshot fails. It runs off
// the loop.
func (r *runner) measure(repo *snapshot.Repo, from, first, start, fallback string) snapDiffs {
	var d snapDiffs
	d.end = r.track(r.m.ctx, repo)
	end := d.end
	if end == "" {
		end = fallback
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
	defer cancel()
	if d.end != "" && from != "" {
		d.changed = []string{}
		if d.end != from {
			diffs, err := repo.Changed(ctx, from, d.end)
			if err != nil {
				r.m.log.Warn("snapshot diff failed", "session", r.id, "err", err)
			}
			for _, c := range diffs {
				d.changed = append(d.changed, c.File)
			}
		}
	}
	d.diff = r.diffBetween(ctx, repo, first, end)
	d.turnDiff = d.diff
	if start != first {
		d.turnDiff = r.diffBetween(ctx, repo, start, end)
	}
	return d
}

// measureEnd measures a finished step's end off the loop, then ends it
// (unless an abort ended it meanwhile).
func (r *runner) measureEnd(st *step) {
	tu := r.turn
	st.measuring = true
	repo, from, first, start, fallback := r.repo(), st.snapshot, r.firstSnap, tu.startSnap, tu.endSnap
	var d snapDiffs
	r.offLoop(func() { d = r.measure(repo, from, first, start, fallback) }, func() {
		if r.turn == tu && tu.step == st {
			st.measured = &d
			r.maybeEndStep()
		}
	})
}

// busyError refuses a session edit while a turn runs (or a revert
// restores files).
func busyError(id string) error {
	return &opencode.Error{Code: opencode.EBusy, SessionID: id,
		Message: "Session is busy: " + id} // OpenCode's words
}

// busy: a turn runs, or a revert or unrevert restores the files.
func (r *runner) busy() bool { return r.turn != nil || r.restoring }

// A revert's or unrevert's git work (a snapshot of the work tree, its
// diff, the restore) takes seconds over a large tree, so it runs off the
// loop, as step snapshots do: the runner answers meanwhile. It is marked
// restoring, so no turn starts in the middle: an input admitted then is
// answered at once and runs after it (the revert made final first, as a
// prompt after a revert makes it).

// restoreResult is a revert's or unrevert's answer.
type restoreResult struct {
	sess opencode.Session
	err  error
}

// Revert puts the project's files back to how they were before message
// messageID (before part partID of it, when given) and marks the session
// reverted; the messages stay until the next prompt removes them, and
// Unrevert undoes it all.
func (m *Manager) Revert(ctx context.Context, sessionID, messageID, partID string) (opencode.Session, error) {
	return m.restoreFiles(ctx, sessionID, func(r *runner) <-chan restoreResult { return r.revert(messageID, partID) })
}

// Unrevert restores the files and messages a Revert hid.
func (m *Manager) Unrevert(ctx context.Context, sessionID string) (opencode.Session, error) {
	return m.restoreFiles(ctx, sessionID, (*runner).unrevert)
}

// restoreFiles starts a revert or unrevert on the session's runner and
// waits for its answer (the runner is not held meanwhile).
func (m *Manager) restoreFiles(ctx context.Context, sessionID string, start func(r *runner) <-chan restoreResult) (opencode.Session, error) {
	var ch <-chan restoreResult
	var r *runner
	if err := m.do(ctx, sessionID, func(rr *runner) { r, ch = rr, start(rr) }); err != nil {
		return opencode.Session{}, err
	}
	select {
	case res := <-ch:
		return res.sess, res.err
	case <-r.done:
		select {
		case res := <-ch:
			return res.sess, res.err
		default:
		}
		return opencode.Session{}, r.exitErr() // stopped; a restore under way is rolled forward at the next start
	case <-ctx.Done():
		return opencode.Session{}, ctx.Err()
	}
}

// restoreOffLoop runs a revert's or unrevert's git work off the loop,
// then finish on it, then what waited for the restore.
func (r *runner) restoreOffLoop(work func(), finish func()) {
	r.restoring = true
	r.offLoop(work, func() {
		r.restoring = false
		finish()
		if r.finalize {
			// An input admitted during the restore makes the revert final.
			r.finalize = false
			if err := r.cleanupRevert(); err != nil {
				r.m.log.Error("make a revert final", "session", r.id, "err", err)
			}
		}
		r.maybeStart()
	})
}

func (r *runner) revert(messageID, partID string) <-chan restoreResult {
	ch := make(chan restoreResult, 1)
	answer := func(s opencode.Session, err error) { ch <- restoreResult{s, err} }
	if r.busy() {
		answer(r.sess, busyError(r.id))
		return ch
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, r.m.cfg.StoreTimeout)
	msgs, err := r.m.store.ListMessages(ctx, r.id)
	cancel()
	if err != nil {
		answer(r.sess, err)
		return ch
	}
	if !slices.ContainsFunc(msgs, func(mp opencode.MessageWithParts) bool { return mp.Info.ID == messageID }) {
		answer(r.sess, opencode.MessageNotFound(r.id, messageID))
		return ch
	}
	rev, at, pi := revertPoint(msgs, messageID, partID)
	if rev == nil {
		answer(r.sess, &opencode.Error{Code: opencode.ENotFound, SessionID: r.id, MessageID: messageID,
			Message: "Part not found: " + partID})
		return ch
	}
	// The files as they were when the step the revert point is in (or the
	// first one after it) started.
	target := ""
	for i := pi; i >= 0 && rev.PartID != ""; i-- {
		if p := msgs[at].Parts[i]; p.Type == opencode.PartStepStart && p.Snapshot != "" {
			target = p.Snapshot
			break
		}
	}
	for _, mp := range msgs[at:] {
		if target != "" {
			break
		}
		for _, p := range mp.Parts {
			if p.Type == opencode.PartStepStart && p.Snapshot != "" {
				target = p.Snapshot
				break
			}
		}
	}
	// Unrevert goes back to the files as they are now (or as they were
	// before the first of several reverts).
	now := ""
	if r.sess.Revert != nil {
		now = r.sess.Revert.Snapshot
	}
	// As OpenCode: session.diff and the summary are what the reverted
	// messages changed (their first step's start to their last step's end).
	from, to := revertedRange(msgs[at:])
	dir := r.sess.Directory
	diff := noDiff
	r.restoreOffLoop(func() {
		ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
		defer cancel()
		repo := r.m.cfg.Snapshots.For(ctx, dir)
		if repo == nil {
			return
		}
		if target != "" {
			if now == "" {
				if now, err = repo.Track(ctx); err != nil {
					return
				}
			}
			rev.Snapshot = now
			rev.Diff, _ = repo.Diff(ctx, now, target)
			// The intent first: a crash while the files change is rolled
			// forward on restart (finishRestore).
			if err = r.writeIntent(restoreIntent{Kind: "revert", Target: target, Revert: rev}); err != nil {
				return
			}
			if err = repo.Restore(ctx, target); err != nil {
				return
			}
		}
		diff = r.diffBetween(ctx, repo, from, to)
	}, func() {
		if err != nil {
			answer(r.sess, err)
			return
		}
		r.outbox().live(opencode.SessionDiff{SessionID: r.id, Diff: diff})
		s := r.sess
		s.Revert = rev
		s.Time.Updated = r.m.now()
		sum := opencode.SessionSummary{Files: int64(len(diff))}
		for _, d := range diff {
			sum.Additions += int64(d.Additions)
			sum.Deletions += int64(d.Deletions)
		}
		s.Summary = &sum
		answer(r.saveIntended(s))
	})
	return ch
}

// revertPoint is where a revert to messageID (partID, when given) starts,
// as OpenCode picks it: at the part when text or a tool call comes before
// it in its message, else at the user message the target belongs to (the
// last one at or before it). at is that message's index in msgs, pi the
// part's in it (-1 for none); rev is nil when the part is not there.
func revertPoint(msgs []opencode.MessageWithParts, messageID, partID string) (rev *opencode.SessionRevert, at, pi int) {
	user := -1
	for i, mp := range msgs {
		if mp.Info.Role == opencode.User {
			user = i
		}
		for j := 0; j <= len(mp.Parts); j++ {
			hit := partID == "" && mp.Info.ID == messageID && j == 0
			if j < len(mp.Parts) && partID != "" {
				hit = mp.Parts[j].ID == partID
			}
			if !hit {
				continue
			}
			if slices.ContainsFunc(mp.Parts[:j], func(p opencode.Part) bool {
				return p.Type == opencode.PartText || p.Type == opencode.PartTool
			}) {
				return &opencode.SessionRevert{MessageID: mp.Info.ID, PartID: partID}, i, j
			}
			if user < 0 {
				user = i
			}
			return &opencode.SessionRevert{MessageID: msgs[user].Info.ID}, user, -1
		}
	}
	return nil, -1, -1
}

// revertedRange is the snapshot the first step of msgs started from and
// the one its last step ended at ("" when there is none).
func revertedRange(msgs []opencode.MessageWithParts) (from, to string) {
	from = firstSnapshot(msgs)
	for _, mp := range msgs {
		for _, p := range mp.Parts {
			if p.Type == opencode.PartStepFinish && p.Snapshot != "" {
				to = p.Snapshot
			}
		}
	}
	return from, to
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
func (r *runner) finishRestore(data []byte) { r.finishRestoreTry(data, 0) }

// restoreRetry bounds the pause between tries of an interrupted restore
// that failed (git busy or broken for a moment).
const restoreRetry = 30 * time.Second

func (r *runner) finishRestoreTry(data []byte, try int) {
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
			// Tried again in the background, backing off, while the
			// runner lives (it is not evicted meanwhile); else at the
			// next start.
			pause := min(time.Second<<min(try, 5), restoreRetry)
			if try == 0 {
				r.m.log.Error("finish an interrupted "+in.Kind+": retrying", "session", r.id, "err", err)
			}
			r.offLoop(func() {
				t := time.NewTimer(pause)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.m.ctx.Done():
				}
			}, func() {
				if _, pending := r.m.cfg.Snapshots.Intent(r.id); pending && r.m.ctx.Err() == nil {
					r.finishRestoreTry(data, try+1)
				}
			})
			return
		}
	}
	r.m.log.Info("finished an interrupted "+in.Kind, "session", r.id)
	s := r.sess
	s.Revert = in.Revert
	s.Time.Updated = r.m.now()
	_, _ = r.saveIntended(s)
}

func (r *runner) unrevert() <-chan restoreResult {
	ch := make(chan restoreResult, 1)
	answer := func(s opencode.Session, err error) { ch <- restoreResult{s, err} }
	if r.busy() {
		answer(r.sess, busyError(r.id))
		return ch
	}
	if r.sess.Revert == nil {
		answer(r.sess, nil)
		return ch
	}
	dir, target := r.sess.Directory, r.sess.Revert.Snapshot
	var err error
	r.restoreOffLoop(func() {
		ctx, cancel := context.WithTimeout(r.m.ctx, snapTimeout)
		defer cancel()
		if repo := r.m.cfg.Snapshots.For(ctx, dir); repo != nil && target != "" {
			if err = r.writeIntent(restoreIntent{Kind: "unrevert", Target: target}); err != nil {
				return
			}
			err = repo.Restore(ctx, target)
		}
	}, func() {
		if err != nil {
			answer(r.sess, err)
			return
		}
		s := r.sess
		s.Revert = nil
		s.Time.Updated = r.m.now()
		answer(r.saveIntended(s))
	})
	return ch
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
					t.live(opencode.PartRemoved{SessionID: r.id, MessageID: mp.Info.ID, PartID: p.ID})
				}
				mp.Parts = mp.Parts[:max(i, 0)]
				keep = append(keep, mp)
				continue
			}
			t.batch.DeleteMessages = append(t.batch.DeleteMessages, mp.Info.ID)
			t.live(opencode.MessageRemoved{SessionID: r.id, MessageID: mp.Info.ID})
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
func (r *runner) diffBetween(ctx context.Context, repo *snapshot.Repo, a, b string) []opencode.FileDiff {
	if a == "" || b == "" {
		return []opencode.FileDiff{}
	}
	diff, err := repo.Patches(ctx, a, b)
	if err != nil {
		r.m.log.Warn("session diff failed", "session", r.id, "err", err)
		return []opencode.FileDiff{}
	}
	return diff
}

// summarize updates what a step changed, as OpenCode does after each step:
// session.diff (the session's changes so far), the session's summary
// counts, and the turn's changes on its user messages. seq is the
// summary's place (nextSummary): one measured off the loop that comes back
// after a newer one is dropped.
func (r *runner) summarize(t *outbox, seq int, users []opencode.Message, diff, turnDiff []opencode.FileDiff) {
	if seq <= r.sumApplied {
		return
	}
	r.sumApplied = seq
	t.live(opencode.SessionDiff{SessionID: r.id, Diff: diff})
	sum := opencode.SessionSummary{Files: int64(len(diff))}
	for _, d := range diff {
		sum.Additions += int64(d.Additions)
		sum.Deletions += int64(d.Deletions)
	}
	s := r.sess
	s.Summary = &sum
	t.session(s)
	r.sess = s
	diffs := make([]json.RawMessage, len(turnDiff))
	for i, d := range turnDiff {
		diffs[i] = mustJSON(d)
	}
	for _, u := range users {
		u.Summary = &opencode.UserSummary{Diffs: diffs}
		t.message(u)
	}
}

// nextSummary is the place of a summary measured now.
func (r *runner) nextSummary() int {
	r.sumSeq++
	return r.sumSeq
}

// noDiff is the diff of an untracked project.
var noDiff = []opencode.FileDiff{}

// SessionDiff is GET /session/{id}/diff: the files the session changed
// (with messageID, the files that message's turn changed), from its step
// snapshots. Untracked projects have none.
func (m *Manager) SessionDiff(ctx context.Context, sessionID, messageID string) ([]opencode.FileDiff, error) {
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
		return []opencode.FileDiff{}, nil
	}
	return repo.Patches(ctx, first, last)
}
