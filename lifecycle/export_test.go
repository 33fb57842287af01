package lifecycle

import "time"

// Resident reports whether a runner for the session is in memory (tests
// that need a cold session wait for its eviction).
func (m *Manager) Resident(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runners[id] != nil
}

// SetFailPace sets the pauses between a failed session's background
// retries (first, doubled up to max) and how often a request may try its
// store itself.
func (m *Manager) SetFailPace(first, max, tryEvery time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pace = failPace{first, max, tryEvery}
}
