// Package wire holds the wire-comparison test: it replays the scenarios of
// the recorded traces of the real OpenCode server (../shared/traces, a–h)
// against a server, reduces what it sees on /event, /api/session/{id}/event
// and in the HTTP answers to event types, order and JSON shapes (IDs, times,
// paths and numbers replaced by placeholders), and compares that with goldens
// recorded from the real `opencode serve` 1.18.33 in
// testdata/reference/wire/<scenario>.golden.
//
// Everything lives in the package's test files:
//
//   - scenarios_test.go: the scenario runner (a, b, c1, c2, c3, d, e1, e2, f, h)
//     against a base URL, and the stub model script they use;
//   - normalise_test.go: capture -> golden text (and what is dropped as
//     environment noise, and why);
//   - record_test.go: TestRecordReference, which starts the real server with
//     ../shared/reference/start-opencode-serve.sh and rewrites the goldens
//     (running every scenario twice: the normalised results must agree);
//   - wire_test.go: TestWireMatchesReference, which runs the same scenarios
//     against our server (testserver, SQLite, in-process stub) and compares;
//   - known_test.go: the table of known differences, each with its reason
//     and the README section that lists it (or none: reported, to fix or to
//     document);
//   - diff_test.go: the readable diff of two goldens.
//
// Flags: -wire.only a,c1 runs some scenarios; -wire.out DIR (compare test)
// writes our normalised and raw captures; -wire.runs N (record test).
//
// Re-record the goldens (needs the opencode 1.18.33 binary, see record_test.go):
//
//	go test ./wire -run TestRecordReference -wire.record -v -timeout 10m
//
// Compare our server with them (part of `make test`):
//
//	go test ./wire -run TestWireMatchesReference -v
package wire
