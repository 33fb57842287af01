package lifecycle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// trackedExternal is an external server whose directory is a git work
// tree (so steps are snapshotted); the stub's own record files are
// ignored, so the diffs hold only what a script changes.
func trackedExternal(t *testing.T, files map[string]string) (*testserver.Server, *client, string) {
	t.Helper()
	dir := t.TempDir()
	checkStubsGone(t, dir)
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	files[".gitignore"] = "acpstub.*\n"
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := testserver.Start(t, testserver.Options{Config: externalConfig(""), Directory: dir})
	return srv, newClient(t, srv), dir
}

// snapPart is a part's snapshot fields (step-start, step-finish, patch).
type snapPart struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Snapshot string   `json:"snapshot"`
	Hash     string   `json:"hash"`
	Files    []string `json:"files"`
}

// TestExternalAgentEdits: what an external agent writes through
// fs/write_text_file is recorded as our tools' edits are: each of its
// messages is a step with start and end snapshots and a patch part,
// GET /session/{id}/diff and session.diff list the file, and a revert to
// the turn puts the old content back (unrevert the new). A write outside
// the session's directory is refused.
func TestExternalAgentEdits(t *testing.T) {
	srv, c, dir := trackedExternal(t, map[string]string{acpstub.WrittenFile: "old\n"})
	events := eventLog(t, srv.URL)
	sid := c.newSession()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<missing>"
		}
		return string(b)
	}
	written := filepath.Join(dir, acpstub.WrittenFile)

	first := newID()
	body := v1Body(first, acpstub.Write, "")
	body["agent"] = "stub"
	var out v1Message
	c.must("POST", "/session/"+sid+"/message", body, 200).json(t, &out)
	if got := out.text(); got != "wrote outside=refused" {
		t.Errorf("answer = %q, want the outside write refused", got)
	}
	if got := read(written); got != acpstub.WrittenText {
		t.Fatalf("%s = %q after the turn", acpstub.WrittenFile, got)
	}
	if got := read(filepath.Join(filepath.Dir(dir), acpstub.OutsideFile)); got != "<missing>" {
		t.Errorf("the write outside the directory went through: %q", got)
	}

	// Its two messages (w1, w2): each begins from a snapshot, the second
	// where the first ended; the first, which wrote, has the patch.
	var msgs []struct {
		Info  struct{ ID, Role string }
		Parts []snapPart
	}
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(t, &msgs)
	type stepSnaps struct {
		start, end string
		patched    []string
	}
	var steps []stepSnaps
	for _, m := range msgs {
		if m.Info.Role != "assistant" {
			continue
		}
		var s stepSnaps
		for _, p := range m.Parts {
			switch p.Type {
			case "step-start":
				s.start = p.Snapshot
			case "step-finish":
				s.end = p.Snapshot
			case "patch":
				s.patched = p.Files
				if p.Hash != s.start {
					t.Errorf("patch hash %q, want the step's start %q", p.Hash, s.start)
				}
			}
		}
		steps = append(steps, s)
	}
	if len(steps) != 2 {
		t.Fatalf("assistant messages = %d, want 2 (w1, w2)", len(steps))
	}
	if steps[0].start == "" || steps[0].end == "" || steps[1].start != steps[0].end || steps[1].end == "" {
		t.Errorf("step snapshots = %+v, want each set, the second starting where the first ended", steps)
	}
	if !slices.Equal(steps[0].patched, []string{written}) || steps[1].patched != nil {
		t.Errorf("patched files = %v, %v; want [%s] on the message that wrote", steps[0].patched, steps[1].patched, written)
	}

	var diff []struct {
		File, Status, Patch string
	}
	for _, q := range []string{"", "?messageID=" + first} {
		c.must("GET", "/session/"+sid+"/diff"+q, nil, 200).json(t, &diff)
		if len(diff) != 1 || diff[0].File != acpstub.WrittenFile || diff[0].Status != "modified" ||
			!strings.Contains(diff[0].Patch, "+"+strings.TrimSpace(acpstub.WrittenText)) {
			t.Errorf("diff%s = %+v", q, diff)
		}
	}
	waitFor(t, events, func(f frame) bool {
		return f.Type == "session.diff" && strings.Contains(string(f.Properties), acpstub.WrittenFile)
	})
	// The tool part says what it edited, its metadata has the diff the
	// agent sent (as our edit tool's).
	var toolMsgs []struct {
		Parts []struct {
			Type  string
			State *struct {
				Status, Output string
				Metadata       struct {
					Filepath, Diff       string
					Additions, Deletions int
				}
			}
		}
	}
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(t, &toolMsgs)
	tools := 0
	for _, m := range toolMsgs {
		for _, p := range m.Parts {
			if p.Type != "tool" {
				continue
			}
			tools++
			st := p.State
			if st == nil || st.Status != "completed" || !strings.Contains(st.Output, written) || st.Metadata.Filepath != written ||
				!strings.Contains(st.Metadata.Diff, "-old\n+"+strings.TrimSpace(acpstub.WrittenText)) ||
				st.Metadata.Additions != 1 || st.Metadata.Deletions != 1 {
				t.Errorf("tool part state = %+v", st)
			}
		}
	}
	if tools != 1 {
		t.Errorf("tool parts = %d, want 1", tools)
	}

	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": first}, 200)
	if got := read(written); got != "old\n" {
		t.Errorf("after revert %s = %q, want the old content", acpstub.WrittenFile, got)
	}
	c.must("POST", "/session/"+sid+"/unrevert", nil, 200)
	if got := read(written); got != acpstub.WrittenText {
		t.Errorf("after unrevert %s = %q", acpstub.WrittenFile, got)
	}
}
