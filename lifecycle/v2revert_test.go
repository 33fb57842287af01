package lifecycle_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestV2RevertAndCompact: the v2 revert routes stage a revert (the files
// go back, the answer is the revert state), clear it (the files come
// back) and commit it (the reverted messages are gone); v2 compact admits
// a compaction with the session's model, which then runs.
func TestV2RevertAndCompact(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()
	c.must("POST", "/session/"+sid+"/message", v1Body(newID(), "hello", ""), 200)
	write := newID()
	c.must("POST", "/session/"+sid+"/message", v1Body(write, `call:write {"filePath":"`+filepath.Join(dir, "new.txt")+
		`","content":"hi\n"} then: written`, ""), 200)
	exists := func() bool { _, err := os.Stat(filepath.Join(dir, "new.txt")); return err == nil }
	if !exists() {
		t.Fatal("the turn did not write")
	}

	c.must("POST", "/api/session/"+sid+"/revert/stage", map[string]any{}, 400)
	var staged struct {
		Data struct{ MessageID, Snapshot string }
	}
	c.must("POST", "/api/session/"+sid+"/revert/stage", map[string]any{"messageID": write}, 200).json(t, &staged)
	if staged.Data.MessageID != write || exists() {
		t.Errorf("stage: %+v, file exists %v", staged, exists())
	}
	c.must("POST", "/api/session/"+sid+"/revert/clear", nil, 204)
	if !exists() {
		t.Error("clear did not bring the file back")
	}
	c.must("POST", "/api/session/"+sid+"/revert/stage", map[string]any{"messageID": write}, 200)
	c.must("POST", "/api/session/"+sid+"/revert/commit", nil, 204)
	for _, m := range c.messages(sid) {
		if m.Info.ID == write || m.Info.ParentID == write {
			t.Errorf("committed revert left message %s", m.Info.ID)
		}
	}

	c.must("POST", "/api/session/"+sid+"/compact", nil, 204)
	checkFor(t, 10*time.Second, "the compaction's summary", func() bool {
		var msgs []struct {
			Info struct {
				Summary any `json:"summary"`
			} `json:"info"`
		}
		c.must("GET", "/session/"+sid+"/message", nil, 200).json(t, &msgs)
		for _, m := range msgs {
			if m.Info.Summary == true {
				return true
			}
		}
		return false
	})
	c.must("POST", "/api/session/ses_0000000000000000000000000/compact", nil, 404)
}
