package lifecycle

import "sync"

// External agents in a cluster: a session's agent process runs on the
// instance that owns the session (its runner starts it; requests through
// other instances are forwarded there). An instance that loses a session
// (its lease lost, or a commit fenced because another instance claimed
// it) stops that session's process at once: the new owner starts its own
// and continues the agent's session (session/load or session/resume with
// the ID stored with ours), so one process at most serves it. So does one
// that lets an idle session go (its runner evicted, the claim released):
// another instance may take it next, and a process kept here would go on
// with a stale view of the agent's session if this instance took it back.

// stopAll kills every process without refusing new ones (this instance's
// lease is lost: any of its sessions may be run elsewhere now).
func (x *externals) stopAll() {
	x.mu.Lock()
	procs := x.procs
	x.procs = map[string]*extProc{}
	x.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range procs {
		wg.Go(func() { x.kill(e) })
	}
	wg.Wait()
}

// fencedOut stops the session's process once its runner lost the session
// to another instance (off the runner: kill waits for the process).
func (r *runner) fencedOut() {
	r.m.wg.Go(func() { r.m.ext.stop(r.id) })
}

// releasedExternal stops the session's process once its idle runner
// released the session in a cluster.
func (r *runner) releasedExternal() {
	r.m.wg.Go(func() { r.m.ext.stop(r.id) })
}
