package wire

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (the servers
// of internal/testserver check each non-parallel test on their own).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
