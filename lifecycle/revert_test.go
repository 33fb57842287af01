package lifecycle_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/snapshot"
)

// TestRevertUnrevert: /undo puts the files a turn wrote back as they were
// and marks the session reverted; /redo brings them back; a prompt after a
// revert removes the reverted messages for good.
func TestRevertUnrevert(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("old\n"), 0o644)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: dir})
	c := newClient(t, srv)
	events := eventLog(t, srv.URL)
	sid := c.newSession()

	first := newID()
	body := `call:write {"filePath":"` + filepath.Join(dir, "new.txt") + `","content":"hello\n"} call:edit {"filePath":"` +
		filepath.Join(dir, "keep.txt") + `","oldString":"old","newString":"NEW"} then: written`
	c.must("POST", "/session/"+sid+"/message", v1Body(first, body, ""), 200)
	second := newID()
	c.must("POST", "/session/"+sid+"/message", v1Body(second, "second", ""), 200)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "<missing>"
		}
		return string(b)
	}
	if read("new.txt") != "hello\n" || read("keep.txt") != "NEW\n" {
		t.Fatalf("the turn did not write: new=%q keep=%q", read("new.txt"), read("keep.txt"))
	}
	// The step that wrote records its snapshot and a patch part.
	var patched bool
	for _, m := range c.messages(sid) {
		for _, p := range m.Parts {
			patched = patched || p.Type == "patch"
		}
	}
	if !patched {
		t.Error("no patch part for the step that changed files")
	}
	// The session's diff, and the first turn's, name both files.
	var diff []struct {
		File, Status, Patch  string
		Additions, Deletions int
	}
	c.must("GET", "/session/"+sid+"/diff", nil, 200).json(t, &diff)
	if len(diff) != 2 || diff[0].File != "keep.txt" || diff[0].Status != "modified" || diff[1].File != "new.txt" ||
		diff[1].Status != "added" || diff[1].Additions != 1 || !strings.Contains(diff[1].Patch, "+hello") {
		t.Errorf("session diff = %+v", diff)
	}
	c.must("GET", "/session/"+sid+"/diff?messageID="+second, nil, 200).json(t, &diff)
	if len(diff) != 0 {
		t.Errorf("the second turn changed nothing, diff = %+v", diff)
	}
	waitFor(t, events, func(f frame) bool {
		return f.Type == "session.diff" && strings.Contains(string(f.Properties), "new.txt")
	})

	var sess struct {
		Revert *struct{ MessageID, Snapshot, Diff string } `json:"revert"`
	}
	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": first}, 200).json(t, &sess)
	if sess.Revert == nil || sess.Revert.MessageID != first || !strings.Contains(sess.Revert.Diff, "new.txt") {
		t.Fatalf("revert answered %+v", sess.Revert)
	}
	if read("new.txt") != "<missing>" || read("keep.txt") != "old\n" {
		t.Errorf("after revert: new=%q keep=%q", read("new.txt"), read("keep.txt"))
	}
	if n := len(c.messages(sid)); n != 5 {
		t.Errorf("messages after revert = %d, want all 5 kept until the next prompt", n)
	}

	sess.Revert = nil // decoding leaves a field the answer lacks as it was
	c.must("POST", "/session/"+sid+"/unrevert", nil, 200).json(t, &sess)
	if sess.Revert != nil || read("new.txt") != "hello\n" || read("keep.txt") != "NEW\n" {
		t.Errorf("after unrevert: revert=%+v new=%q keep=%q", sess.Revert, read("new.txt"), read("keep.txt"))
	}

	// Revert to the second prompt, then prompt again: the second turn's
	// messages go, the first turn's stay.
	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": second}, 200)
	third := newID()
	c.must("POST", "/session/"+sid+"/message", v1Body(third, "third", ""), 200)
	var ids []string
	for _, m := range c.messages(sid) {
		ids = append(ids, m.Info.ID)
		if m.Info.ID == second {
			t.Errorf("the reverted message %s is still there", second)
		}
	}
	if ids[0] != first || ids[len(ids)-2] != third {
		t.Errorf("messages after the prompt = %v", ids)
	}
	waitFor(t, events, func(f frame) bool {
		var p struct{ MessageID string }
		json.Unmarshal(f.Properties, &p)
		return f.Type == "message.removed" && p.MessageID == second
	})
	sess.Revert = nil
	c.must("GET", "/session/"+sid, nil, 200).json(t, &sess)
	if sess.Revert != nil {
		t.Errorf("still reverted after a prompt: %+v", sess.Revert)
	}
	// Bad input.
	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": newID()}, 404)
	c.must("POST", "/session/"+sid+"/revert", map[string]any{}, 400)
}

// TestSummarize: /compact runs a compaction turn (a user message with a
// compaction part, an assistant summary message of agent "compaction"), the
// summarizer gets the conversation as a transcript without tools, and the
// next turn's model sees only the summary and what follows.
func TestSummarize(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
	c := newClient(t, srv)
	events := eventLog(t, srv.URL)
	sid := c.newSession()
	c.must("POST", "/session/"+sid+"/message", v1Body("", "remember the word banana", ""), 200)
	var ok bool
	c.must("POST", "/session/"+sid+"/summarize", map[string]any{"providerID": "stub", "modelID": stubmodel.ModelID}, 200).json(t, &ok)
	if !ok {
		t.Fatal("summarize answered false")
	}
	waitFor(t, events, func(f frame) bool { return f.Type == "session.compacted" })
	reqs := stub.Requests()
	var sum struct {
		Messages []stubmodel.Message
		Tools    []any
	}
	json.Unmarshal(reqs[len(reqs)-1], &sum)
	last := sum.Messages[len(sum.Messages)-1].Content
	if len(sum.Tools) != 0 || !strings.Contains(last, "<conversation>\n[User]: remember the word banana") ||
		!strings.Contains(last, "[Assistant]: You said: remember the word banana") {
		t.Errorf("summarizer request: tools=%d last=%q", len(sum.Tools), last)
	}
	ms := c.messages(sid)
	if len(ms) != 4 {
		t.Fatalf("messages = %d, want 4", len(ms))
	}
	raw := c.must("GET", "/session/"+sid+"/message", nil, 200).Body
	if !strings.Contains(string(raw), `"type":"compaction","auto":false`) || !strings.Contains(string(raw), `"mode":"compaction"`) ||
		!strings.Contains(string(raw), `"summary":true`) {
		t.Errorf("compaction messages = %s", raw)
	}

	c.must("POST", "/session/"+sid+"/message", v1Body("", "next", ""), 200)
	reqs = stub.Requests()
	var next struct{ Messages []stubmodel.Message }
	json.Unmarshal(reqs[len(reqs)-1], &next)
	var roles []string
	for _, m := range next.Messages {
		roles = append(roles, m.Role+":"+strings.SplitN(m.Content, "\n", 2)[0])
		if strings.Contains(m.Content, "remember the word banana") && m.Role == "user" {
			t.Errorf("the model still sees the compacted prompt: %q", m.Content)
		}
	}
	if len(roles) < 3 || roles[len(roles)-1] != "user:next" {
		t.Errorf("next request messages = %q", roles)
	}
	c.must("POST", "/session/"+sid+"/summarize", map[string]any{"providerID": "nope", "modelID": "x"}, 400)
}

// TestRevertIntentRolledForward: a revert or unrevert a crash cut off
// between its intent and the stored session (the files half restored) is
// finished when the session's runner starts again: the files reach the
// intended snapshot and the session's revert agrees with them.
func TestRevertIntentRolledForward(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir, data := t.TempDir(), t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("old\n"), 0o644)
	opts := testserver.Options{SQLite: true, DataDir: data, Config: stubConfig(stub.URL(), ""), Directory: dir}
	srv := testserver.Start(t, opts)
	c := newClient(t, srv)
	sid := c.newSession()
	first := newID()
	body := `call:write {"filePath":"` + filepath.Join(dir, "new.txt") + `","content":"hello\n"} call:edit {"filePath":"` +
		filepath.Join(dir, "keep.txt") + `","oldString":"old","newString":"NEW"} then: written`
	c.must("POST", "/session/"+sid+"/message", v1Body(first, body, ""), 200)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "<missing>"
		}
		return string(b)
	}
	var sess struct {
		Revert *struct{ MessageID, Snapshot string } `json:"revert"`
	}
	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": first}, 200).json(t, &sess)
	if sess.Revert == nil || sess.Revert.Snapshot == "" {
		t.Fatalf("revert answered %+v", sess.Revert)
	}
	srv.Stop()
	// What a crash inside an unrevert leaves: its intent, one file back,
	// the other not, the session still reverted.
	intent, _ := json.Marshal(map[string]any{"kind": "unrevert", "target": sess.Revert.Snapshot})
	if err := snapshot.New(data).WriteIntent(sid, intent); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("NEW\n"), 0o644)
	srv = testserver.Start(t, opts)
	c = newClient(t, srv)
	sess.Revert = nil
	c.must("GET", "/session/"+sid, nil, 200).json(t, &sess) // starts the runner
	checkFor(t, 10*time.Second, "the unrevert finished", func() bool {
		var s struct {
			Revert *struct{ MessageID string } `json:"revert"`
		}
		c.must("GET", "/session/"+sid, nil, 200).json(t, &s)
		return s.Revert == nil
	})
	if read("new.txt") != "hello\n" || read("keep.txt") != "NEW\n" {
		t.Errorf("after the finished unrevert: new=%q keep=%q", read("new.txt"), read("keep.txt"))
	}
	checkFor(t, 5*time.Second, "the intent removed", func() bool {
		_, left := snapshot.New(data).Intent(sid)
		return !left
	})
}
