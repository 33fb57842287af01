package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestExternalOpencodeACPRestart: our server restarted on the same data
// continues the real `opencode acp`'s session: the new process is given
// the stored session (session/load, logged loaded=true with the first
// process's session ID), and the agent's next model call carries the
// first turn (its conversation was continued, not started anew).
func TestExternalOpencodeACPRestart(t *testing.T) {
	t.Parallel()
	_, opencodeBin := binaries(t)
	first := "first answer " + randomTag()
	stub := answering(t, first)
	opts := serverOptions{config: writeConfig(t, ocConfig(t, opencodeBin, stub.URL())), data: t.TempDir(), dir: t.TempDir()}
	srv := startServer(t, opts)
	sess := newExternalSession(t, srv)
	prompt := func(srv *server, text string) {
		t.Helper()
		// The blocking prompt waits for the real `opencode acp` to start,
		// which on a loaded machine takes longer than the helpers' 30 s.
		c := &http.Client{Timeout: 3 * time.Minute}
		resp, err := c.Post(srv.URL+"/session/"+sess.ID+"/message", "application/json",
			strings.NewReader(`{"agent":"oc","parts":[{"type":"text","text":"`+text+`"}]}`))
		var status int
		var body []byte
		if err == nil {
			status = resp.StatusCode
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err != nil || status != 200 {
			t.Fatalf("prompt %q: %d %s %v\nserver log:\n%s", text, status, body, err, srv.stderr.String())
		}
		var m message
		if err := json.Unmarshal(body, &m); err != nil || m.Info.Error != nil || !strings.Contains(m.text(), first) {
			t.Fatalf("prompt %q answered %s (%v)\nserver log:\n%s", text, body, err, srv.stderr.String())
		}
	}
	started := regexp.MustCompile(`msg="external agent started".* agentSession=(\S+)`)
	prompt(srv, "remember the first prompt")
	m := started.FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("the server did not log the agent's session:\n%s", srv.stderr.String())
	}
	agentSession := m[1]
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}

	srv = startServer(t, opts)
	second := "the second prompt " + randomTag()
	prompt(srv, second)
	if !strings.Contains(srv.stderr.String(), "agentSession="+agentSession+" loaded=true") {
		t.Errorf("after the restart the agent did not load its session %s:\n%s", agentSession, srv.stderr.String())
	}
	// The agent's model call for the second prompt carries the first turn.
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		for _, r := range stub.Requests() {
			if s := string(r); strings.Contains(s, second) {
				if !strings.Contains(s, "remember the first prompt") || !strings.Contains(s, first) {
					return fmt.Errorf("the agent's call for the second prompt lacks the first turn: %s", s)
				}
				return nil
			}
		}
		return fmt.Errorf("no model call for the second prompt")
	})
}
