package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
)

// TestExternalOwnACPSteer: our own server in ACP mode (`opencode-server
// acp`, a slow scripted model) is the external agent "inner" of an outer
// server, spoken to in ACP v1 (its `_session/steering`) or, configured
// with protocolVersion 2, in v2 (its session/inject). Over HTTP a v1 steer
// mid-turn (prompt_async with delivery steer) goes to the inner agent by
// that method and is delivered into its running turn: in the outer's
// message list the steer's user message (our ID) is followed by the inner
// model's answer to it, parented on it, and the outer session ran one
// turn, not two (a steer held as a queued input would have been the next
// turn's prompt).
func TestExternalOwnACPSteer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version int
		logs    []string // what the outer server's log says of the path taken
	}{
		{"v1 _session/steering", 0, nil},
		{"v2 session/inject", 2, []string{"external agent speaks ACP v2", "accepted a steer (session/inject)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ownACPSteer(t, tc.version, tc.logs)
		})
	}
}

func ownACPSteer(t *testing.T, version int, logs []string) {
	bin, _ := binaries(t)
	project, home := t.TempDir(), t.TempDir()
	// 40 chunks 100ms apart: a 4s turn to steer into, on a loaded machine.
	args := []string{"acp", "--hostname", "127.0.0.1", "--port", "0", "--store", "sqlite", "--data", t.TempDir(),
		"--directory", project, "--log-level", "warn", "--scripted-chunks", "40", "--scripted-delay", "100ms"}
	srv := externalAgentServer(t, "inner", "opencode-server over ACP", map[string]any{"command": bin, "args": args, "protocolVersion": version,
		"env": map[string]string{"HOME": home, "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
			"XDG_DATA_HOME": filepath.Join(home, ".local", "share")}}, project)
	events := watchEvents(t, srv)
	sess := newExternalSession(t, srv)
	status, body, err := srv.post("/session/"+sess.ID+"/prompt_async",
		`{"agent":"inner","parts":[{"type":"text","text":"first question"}]}`)
	if err != nil || status != 204 {
		t.Fatalf("prompt_async: %d %s %v", status, body, err)
	}
	checkFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		for _, e := range events() {
			if e.Type == "message.part.delta" && e.Properties.SessionID == sess.ID {
				return nil
			}
		}
		return fmt.Errorf("no words from the inner agent yet\nserver log:\n%s", srv.stderr.String())
	})
	steer := identifier.NewMessage()
	status, body, err = srv.post("/session/"+sess.ID+"/prompt_async",
		`{"messageID":"`+steer+`","delivery":"steer","parts":[{"type":"text","text":"steer this way"}]}`)
	if err != nil || status != 204 {
		t.Fatalf("steer: %d %s %v", status, body, err)
	}
	var ms []message
	checkFor(t, 2*time.Minute, 100*time.Millisecond, func() error {
		for _, e := range events() {
			if e.Type == "session.idle" && e.Properties.SessionID == sess.ID {
				// Published once the turn's end is stored.
				var err error
				ms, err = srv.messages(sess.ID)
				return err
			}
		}
		return fmt.Errorf("the outer session is not idle yet")
	})
	at, answered := -1, false
	for i, m := range ms {
		if m.Info.Error != nil {
			t.Errorf("message %s failed: %+v\nserver log:\n%s", m.Info.ID, m.Info.Error, srv.stderr.String())
		}
		if m.Info.ID == steer && m.Info.Role == "user" {
			at = i
		}
		if at >= 0 && i > at && m.Info.Role == "assistant" && m.Info.ParentID == steer &&
			strings.Contains(m.text(), "You said: steer this way") {
			answered = true
		}
	}
	if at < 0 || !answered {
		var got []string
		for _, m := range ms {
			got = append(got, m.Info.Role+" "+m.Info.ID+" parent "+m.Info.ParentID+": "+m.text())
		}
		t.Fatalf("want the steer %s followed by the inner model's answer to it, parented on it; messages:\n%s",
			steer, strings.Join(got, "\n"))
	}
	log := srv.stderr.String()
	for _, l := range logs {
		if !strings.Contains(log, l) {
			t.Errorf("the server log lacks %q (steer %s); server log:\n%s", l, steer, log)
		}
	}
	if v2 := strings.Contains(log, "speaks ACP v2"); v2 != (version == 2) {
		t.Errorf("inner agent on ACP v2: %v, want %v", v2, version == 2)
	}
	idles := 0
	for _, e := range events() {
		if e.Type == "session.idle" && e.Properties.SessionID == sess.ID {
			idles++
		}
	}
	if idles != 1 {
		t.Errorf("the outer session went idle %d times: the steer should join the running turn, not start another", idles)
	}
}
