package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's run when a test leaves a goroutine behind
// (testserver checks a serial test's own server; this, every test's).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
