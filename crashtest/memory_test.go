package crashtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPromptMemory: a 10 MB prompt (the scripted model echoes it, so the
// turn carries 20 MB of text) through the real binary on SQLite. Peak RSS
// stays within a constant times the prompt (the whole path: body, parts,
// input row, log events, the user message, the echoed reply, the answer),
// and the memory goes back to the OS once the turn ends and once the
// session is deleted, not only at the next forced collection.
func TestPromptMemory(t *testing.T) {
	const n = 10 << 20
	dir := t.TempDir()
	srv := startServer(t, filepath.Join(dir, "data"), filepath.Join(dir, "run.log"), "--log-level", "warn")
	cl := newClient(srv.url)
	defer cl.close()
	pid := srv.cmd.Process.Pid
	sid := newID("ses")
	if st, b, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create session: %d %v %s", st, err, b)
	}
	// Warm up: one small turn, so the baseline has the runner and the
	// store's caches.
	if st, b, err := cl.doTimeout("POST", "/session/"+sid+"/message", mustJSON(map[string]any{
		"parts": []any{map[string]any{"type": "text", "text": "warm up"}}}), 20*time.Second); err != nil || st != 200 {
		t.Fatalf("warm-up prompt: %d %v %s", st, err, b)
	}
	base := procKB(t, pid, "VmRSS")
	body, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": strings.Repeat("x", n)}}})
	st, b, err := cl.doTimeout("POST", "/session/"+sid+"/message", body, 60*time.Second)
	if err != nil || st != 200 {
		t.Fatalf("10 MB prompt: %d %v %.200s", st, err, b)
	}
	// The limits, in N: the turn holds the prompt and its echo (the
	// conversation the runner keeps for the next model call), about 2×N
	// live, more before a collection.
	const peakLimit, turnLimit, deleteLimit = 40, 16, 6
	peak := procKB(t, pid, "VmHWM")
	// The memory goes back to the OS a moment after the turn's end (and
	// the delete): poll RSS until it is within the limit, for far less
	// than the two minutes to the runtime's next forced collection.
	settled := func(limit float64) int {
		var kb int
		poll(10*time.Second, 100*time.Millisecond, func() bool {
			kb = procKB(t, pid, "VmRSS")
			return float64(kb-base)*1024 <= limit*n
		})
		return kb
	}
	afterTurn := settled(turnLimit)
	if st, b, err := cl.do("DELETE", "/session/"+sid, nil); err != nil || st != 200 {
		t.Fatalf("delete: %d %v %s", st, err, b)
	}
	afterDelete := settled(deleteLimit)
	mb := func(kb int) string { return fmt.Sprintf("%.0f MB (%.1f×N)", float64(kb)/1024, float64(kb)*1024/n) }
	t.Logf("baseline %d MB; peak +%s; after the turn +%s; after the delete +%s", base/1024,
		mb(peak-base), mb(afterTurn-base), mb(afterDelete-base))
	for _, c := range []struct {
		what  string
		kb    int
		limit float64
	}{{"peak", peak - base, peakLimit}, {"after the turn", afterTurn - base, turnLimit}, {"after the delete", afterDelete - base, deleteLimit}} {
		if float64(c.kb)*1024 > c.limit*n {
			t.Errorf("%s: RSS +%s, want at most %.0f×N", c.what, mb(c.kb), c.limit)
		}
	}
}

// procKB reads a kB field of /proc/PID/status.
func procKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
