package lifecycle

import (
	"context"
	"slices"

	"github.com/opencode-server/opencode-server/opencode"
)

// SteerInto admits in as a steer into the running turn of input into,
// only if into is that turn's current input (the last one delivered into
// it), checked and admitted in one step on the session's runner. So a
// steer is either refused (and nothing is admitted) or admitted while the
// turn runs; the turn's end drains the inbox on the same runner, so an
// admitted steer is delivered at the turn's next model call, or, if the
// turn ends without one (a failed model call), starts the next turn. It is
// never stranded; only an abort or a revoke takes it back (its Wait then
// answers ERevoked). A retry of an earlier admission (the same ID and
// content) answers that admission whatever the turn does now.
func (m *Manager) SteerInto(ctx context.Context, in *opencode.Input, into string) (out *opencode.Input, existed bool, refused opencode.SteerRefusal, err error) {
	in.Delivery = opencode.Steer
	out, existed, _, err = m.admit(ctx, in, func(r *runner) bool {
		refused = r.steerable(in, into)
		return refused == ""
	})
	if refused != "" {
		return nil, false, refused, nil
	}
	return out, existed, "", err
}

// steerable says why a steer aimed at into's turn cannot be admitted now
// ("": it can).
func (r *runner) steerable(in *opencode.Input, into string) opencode.SteerRefusal {
	if !in.Minted && r.pendingIndex(in.ID) < 0 {
		// A retry: the earlier admission answers, even once delivered.
		if _, existed, err := r.earlier(in); err == nil && existed {
			return ""
		}
	} else if !in.Minted {
		return "" // pending: admit answers it as the same admission
	}
	tu := r.turn
	if r.pendingIndex(into) >= 0 {
		return opencode.SteerNotStarted
	}
	if tu == nil || !slices.Contains(tu.delivered, into) {
		return opencode.SteerTurnOver
	}
	if tu.delivered[len(tu.delivered)-1] != into {
		return opencode.SteerSuperseded
	}
	if _, ext := r.external(tu); ext && tu.ext != nil && tu.ext.proc != nil && !tu.ext.proc.steering && !tu.ext.proc.inject {
		// Neither `_session/steering` (v1) nor session/inject (v2).
		return opencode.SteerUnsupported
	}
	if len(r.steers()) >= opencode.MaxPendingSteers {
		return opencode.SteerTooMany
	}
	return ""
}
