package lifecycle

import (
	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/snapshot"
)

// An external agent's edits (through fs/write_text_file or its own
// writes) are recorded as our own tools' are: each of its assistant
// messages is a step whose start and end snapshots are taken off the
// loop, so its patch part, session.diff, GET /session/{id}/diff and a
// revert to that turn cover what the agent changed. The first message
// begins with the snapshot taken before the prompt goes out; each next
// one begins where the one before ended. While a message's end is
// measured, the agent's news waits (extMeasuring) and follows once the
// next message is open (extReplay), in the order it came.

// extBegin takes the turn's start snapshot (off the loop, before the
// prompt goes out) and begins its first message with it.
func (r *runner) extBegin(tu *turn, st *step, repo *snapshot.Repo) {
	h := r.track(tu.ctx, repo)
	r.post(streamMsg{then: func() {
		if r.turn == tu && tu.step == st && !st.began {
			r.beginStep(st, h)
		}
	}})
}

// extMeasuring holds the agent's news that comes while the current
// message's end snapshot is taken; it reports whether it held e.
func (r *runner) extMeasuring(e *extMsg) bool {
	tu := r.turn
	if tu == nil || tu != e.tu || tu.step == nil || !tu.step.measuring {
		return false
	}
	switch {
	case e.done:
		tu.ext.held = e
	case e.update != nil || e.perm != nil:
		tu.ext.buffered = append(tu.ext.buffered, e)
	default:
		return false // a steer's answer or the process: taken at once
	}
	return true
}

// extHold holds update u when mapping it just ended the current message
// (a new messageId, or the words after a steer): it goes to the next
// message, once that is open.
func (r *runner) extHold(u *acpclient.SessionUpdate) bool {
	tu := r.turn
	if tu == nil || tu.step == nil || !tu.step.measuring {
		return false
	}
	tu.ext.buffered = append(tu.ext.buffered, &extMsg{tu: tu, update: u})
	return true
}

// extReplay hands the news held back (while steers were in flight or a
// message was measured) to the current message, in the order it came,
// then the prompt's end; it stops while a steer is in flight or a
// message is measured again (their ends call it again). A replay already
// under way (a held update opened a message) goes on by itself.
func (r *runner) extReplay(tu *turn) {
	x := tu.ext
	if x.replaying {
		return
	}
	x.replaying = true
	defer func() { x.replaying = false }()
	ready := func() bool {
		return r.turn == tu && tu.step != nil && !tu.step.measuring && len(x.sending) == 0
	}
	for ready() && len(x.buffered) > 0 {
		b := x.buffered[0]
		x.buffered = x.buffered[1:]
		r.onExternal(b)
	}
	if h := x.held; h != nil && ready() && len(x.buffered) == 0 {
		if len(x.accepted) > 0 {
			// v2: injects accepted and not delivered yet are asked back
			// first (extRevokeAll); their answers replay from here.
			r.extRevokeAll(tu)
			return
		}
		x.held = nil
		r.onExternal(h)
	}
}
