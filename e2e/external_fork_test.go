package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestExternalOwnACPFork: our own `opencode-server acp` (its scripted
// model answers "You said: " and the prompt's texts) is the external agent
// "inner". A fork of a session it answered keeps the agent and opens a
// new session of the agent's, whose first prompt carries the conversation
// the fork copied: the inner model is sent it with the new question (its
// answer quotes both, the history first); the fork's next prompt does not
// repeat it.
func TestExternalOwnACPFork(t *testing.T) {
	t.Parallel()
	bin, _ := binaries(t)
	project, home := t.TempDir(), t.TempDir()
	// A process per session: each its own memory store (one SQLite
	// --data directory takes one server).
	args := []string{"acp", "--hostname", "127.0.0.1", "--port", "0", "--store", "memory",
		"--directory", project, "--log-level", "warn"}
	srv := externalAgentServer(t, "inner", "opencode-server over ACP", map[string]any{"command": bin, "args": args,
		"env": map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
			"XDG_DATA_HOME": filepath.Join(home, ".local", "share")}}, project)
	ask := func(sid, text string) string {
		t.Helper()
		status, body, err := srv.post("/session/"+sid+"/message", `{"agent":"inner","parts":[{"type":"text","text":"`+text+`"}]}`)
		var m message
		if err != nil || status != 200 || json.Unmarshal(body, &m) != nil || m.Info.Error != nil {
			t.Fatalf("prompt %q: %d %s %v\nserver log:\n%s", text, status, body, err, srv.stderr.String())
		}
		return m.text()
	}
	sess := newExternalSession(t, srv)
	if got := ask(sess.ID, "the first question"); got != "You said: the first question" {
		t.Fatalf("first answer %q", got)
	}
	status, body, err := srv.post("/session/"+sess.ID+"/fork", "{}")
	var fork sessionInfo
	if err != nil || status != 200 || json.Unmarshal(body, &fork) != nil {
		t.Fatalf("fork: %d %s %v", status, body, err)
	}
	got := ask(fork.ID, "the question in the fork")
	at := 0
	for _, w := range []string{"You said: <conversation-so-far>", "[User]: the first question",
		"[Assistant]: You said: the first question", "</conversation-so-far>", "the question in the fork"} {
		i := strings.Index(got[at:], w)
		if i < 0 {
			t.Fatalf("the fork's first answer %q: want the inner model sent the forked conversation, then the new question (%q missing in order)", got, w)
		}
		at += i + len(w)
	}
	if got := ask(fork.ID, "again"); got != "You said: again" {
		t.Errorf("the fork's second answer %q: want the new prompt alone", got)
	}
}
