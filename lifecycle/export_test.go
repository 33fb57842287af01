package lifecycle

// Resident reports whether a runner for the session is in memory (tests
// that need a cold session wait for its eviction).
func (m *Manager) Resident(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runners[id] != nil
}
