// Package e2e holds end-to-end tests that drive the real OpenCode client
// (npm package opencode-ai, pinned to the version in opencodeVersion) against
// the opencode-server binary: `opencode run --attach` and the `opencode attach`
// TUI (inside tmux).
//
// The tests build ./cmd/opencode-server, and take the opencode binary from
// $OPENCODE_BIN or install opencode-ai with npm into $OPENCODE_E2E_CACHE
// (default: <user cache dir>/opencode-server-e2e). When npm or tmux is missing
// they fail, unless OPENCODE_E2E_SKIP=1 is set, in which case they skip.
package e2e
