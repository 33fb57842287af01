package acp

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// ownFrame marks a goroutine running this package's code, or started by it
// ("created by ...acp.X"); the external tests' frames are acp_test's.
const ownFrame = "/opencode-server/opencode-server/acp."

// Goroutines is the IDs of the goroutines running now, for NoneLeft.
func Goroutines() map[string]bool {
	ids := map[string]bool{}
	for id := range stacks() {
		ids[id] = true
	}
	return ids
}

// NoneLeft fails t unless, within a deadline (a goroutine ends a moment
// after what stopped it), no goroutine that is not in before runs code of
// this package: whatever an agent or a connection started ends with it.
// Call it once the agent's Serve (or the conn's serve) has returned.
// Other goroutines are not looked at: the server an agent runs on keeps
// its runners until it stops, and testserver's leak check counts those
// then. Only sound in a test that is not parallel (no acp test is).
func NoneLeft(t testing.TB, before map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for id, s := range stacks() {
			if !before[id] && strings.Contains(s, ownFrame) {
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d goroutines of package acp outlive the agent:\n\n%s", len(left), strings.Join(left, "\n\n"))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stacks is every goroutine's stack trace by goroutine ID.
func stacks() map[string]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if rest, ok := strings.CutPrefix(g, "goroutine "); ok {
			id, _, _ := strings.Cut(rest, " ")
			out[id] = g
		}
	}
	return out
}
