package lifecycle

// Session edits that go through the runner: title and other updates, delete.

import (
	"context"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

func (r *runner) update(p opencode.SessionPatch) (opencode.Session, error) {
	s := r.sess
	if p.Title != nil {
		s.Title = *p.Title
	}
	if p.Metadata != nil {
		s.Metadata = p.Metadata
	}
	if p.Permission != nil {
		s.Permission = p.Permission
	}
	if p.Archived != nil {
		s.Time.Archived = p.Archived
	}
	if p.WorkspaceID != nil {
		s.WorkspaceID = *p.WorkspaceID
	}
	s.Time.Updated = r.m.now()
	t := r.outbox()
	if mv := p.Move; mv != nil && mv.Directory != s.Directory {
		s.Directory, s.Path = mv.Directory, strings.TrimPrefix(mv.Directory, "/")
		t.durable(opencode.SessionMoved{Timestamp: s.Time.Updated, SessionID: r.id,
			Location: opencode.MovedTarget{Directory: mv.Directory}, Subdirectory: mv.Subdirectory})
	}
	return r.saveSession(t, s)
}

// saveSession commits s with whatever t holds, and takes it as the
// session's state once stored.
func (r *runner) saveSession(t *outbox, s opencode.Session) (opencode.Session, error) {
	t.session(s)
	if _, err := t.flush(); err != nil {
		return r.sess, err
	}
	r.sess = s
	return s, nil
}

func (r *runner) delete() error {
	if r.turn != nil {
		r.interrupt("Session deleted", false)
	}
	r.flushPending()
	if err := r.m.store.DeleteSession(context.Background(), r.id); err != nil {
		return mapStoreErr(err, r.id)
	}
	r.m.publish(r.m.liveEvent(r.id, r.sess.Directory, opencode.SessionDeleted{SessionID: r.id, Info: r.sess}))
	if historySize(r.history) >= bigContent {
		r.m.releaseMemory()
	}
	// Its external agent goes with it (off the loop: killing waits).
	r.m.wg.Go(func() { r.m.ext.stop(r.id) })
	// The loop stops once this command has answered.
	r.deleted = true
	return nil
}
