//go:build !linux

package snapshot

import "os/exec"

// run runs cmd (elsewhere than Linux a child cannot be tied to the
// server's life: see proc_linux.go).
func run(_ *exec.Cmd, collect func() ([]byte, error)) ([]byte, error) { return collect() }
