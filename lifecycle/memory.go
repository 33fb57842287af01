package lifecycle

import (
	"runtime/debug"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// bigContent is the size of a turn's input (or a deleted session's
// conversation) from which its end hands the memory it used back to the
// OS at once.
const bigContent = 4 << 20

// releaseDelay lets the turn's last writes and answers go out first.
const releaseDelay = 200 * time.Millisecond

// releaseMemory returns freed heap memory to the OS soon: after a turn over
// a prompt of megabytes, the Go runtime would keep its peak until the next
// forced collection (minutes on an idle server) and then give it back only
// slowly. Calls within releaseDelay share one release.
func (m *Manager) releaseMemory() {
	m.relMu.Lock()
	defer m.relMu.Unlock()
	if m.relTimer != nil {
		return
	}
	m.relTimer = time.AfterFunc(releaseDelay, func() {
		debug.FreeOSMemory()
		m.relMu.Lock()
		m.relTimer = nil
		m.relMu.Unlock()
	})
}

// inputSize is the content size of inputs: their parts' text and URLs.
func inputSize(ins []*opencode.Input) int {
	n := 0
	for _, in := range ins {
		for _, p := range in.Parts {
			n += len(p.Text) + len(p.URL)
		}
	}
	return n
}

// historySize is the content size of a conversation as the model sees it.
func historySize(h []provider.Message) int {
	n := 0
	for i := range h {
		n += h[i].Size()
	}
	return n
}
