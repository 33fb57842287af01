package lifecycle_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// termPIDs are the PIDs the stub's terminals wrote in dir.
func termPIDs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, acpstub.TermPIDsFile))
	var out []int
	for _, l := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(l); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TestExternalAgentTerminal: the agent runs commands through
// terminal/create: output and exit status (wait_for_exit, output), a kill,
// outputByteLimit keeping the end, env, a cwd outside the directory
// refused, a command our rules deny as bash refused, release (a released
// terminal is gone), at most 16 open; the output of a terminal a tool
// call embeds is the tool part's output.
func TestExternalAgentTerminal(t *testing.T) {
	for _, tc := range []struct {
		perm, denied string
	}{
		{"", "allowed"},
		{`{"bash":{"*":"ask","rm *":"deny"}}`, "refused"},
	} {
		t.Run(tc.denied, func(t *testing.T) { testTerminal(t, tc.perm, tc.denied) })
	}
}

func testTerminal(t *testing.T, perm, denied string) {
	srv, c := externalServer(t, perm)
	checkTermsGone(t, srv)
	sid := c.newSession()
	got := c.externalPrompt(sid, acpstub.Terminal)
	want := fmt.Sprintf(acpstub.TerminalAnswer, "hi\n", "3", "SIGKILL", "def", true, "envok", "refused", denied, "gone", 16)
	if got.Info.Error != nil || got.text() != want {
		t.Fatalf("the agent says %q (error %+v),\nwant %q", got.text(), got.Info.Error, want)
	}
	var tool *rawPart
	for _, m := range c.rawMessages(sid) {
		for _, p := range m.Parts {
			if p.Type == "tool" {
				tool = &p
			}
		}
	}
	if tool == nil || tool.Tool != "execute" || tool.State == nil || tool.State.Status != "completed" || tool.State.Output != "hi\n" {
		t.Errorf("tool part = %+v, want the terminal's output", tool)
	}
	pids := termPIDs(srv.Directory)
	if len(pids) != 16 {
		t.Fatalf("terminals opened = %d, want 16", len(pids))
	}
	for _, pid := range pids {
		checkFor(t, 10*time.Second, fmt.Sprintf("released terminal %d killed", pid), func() bool { return !alive(pid) })
	}
}

// checkTermsGone checks, once srv stopped (it stops it first), that no
// terminal command the stub started in its directory is left (by PID).
func checkTermsGone(t *testing.T, srv *testserver.Server) {
	t.Cleanup(func() {
		srv.Stop()
		for _, pid := range termPIDs(srv.Directory) {
			if alive(pid) {
				t.Errorf("terminal command %d outlived the server", pid)
			}
		}
	})
}

// runningOutput is the output so far of the session's running tool
// call callID (its state's metadata), "" when there is none.
func (c *client) runningOutput(sid, callID string) string {
	var msgs []struct {
		Parts []struct {
			Type, CallID string
			State        *struct {
				Status   string
				Metadata struct{ Output string }
			}
		}
	}
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(c.t, &msgs)
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.CallID == callID && p.State != nil && p.State.Status == "running" {
				return p.State.Metadata.Output
			}
		}
	}
	return ""
}

// TestExternalAgentTerminalKilled: what a running terminal prints shows
// in the running tool call that embeds it, as it comes; the terminal is
// killed when its turn is aborted (the agent's process stays), when its
// session is deleted, and when the server stops.
func TestExternalAgentTerminalKilled(t *testing.T) {
	for _, how := range []string{"abort", "delete", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			srv, c := externalServer(t, "")
			checkTermsGone(t, srv)
			sid := c.newSession()
			c.must("POST", "/session/"+sid+"/prompt_async", map[string]any{"agent": "stub",
				"parts": []any{map[string]any{"type": "text", "text": acpstub.TermWait}}}, 204)
			var pid int
			checkFor(t, 10*time.Second, "the terminal's command", func() bool {
				pids := termPIDs(srv.Directory)
				if len(pids) > 0 {
					pid = pids[0]
				}
				return pid != 0
			})
			if !alive(pid) {
				t.Fatalf("terminal %d is not running", pid)
			}
			checkFor(t, 10*time.Second, "the terminal's output in its running tool call", func() bool {
				return c.runningOutput(sid, "call-tw") == acpstub.TermStarted+"\n"
			})
			agent := srv.Manager.ExternalPID(sid)
			switch how {
			case "abort":
				c.must("POST", "/session/"+sid+"/abort", nil, 200)
				c.waitIdle(sid)
			case "delete":
				c.must("DELETE", "/session/"+sid, nil, 200)
			case "shutdown":
				srv.Stop()
			}
			checkFor(t, 10*time.Second, "the terminal killed", func() bool { return !alive(pid) })
			if how == "abort" {
				if now := srv.Manager.ExternalPID(sid); now != agent || !alive(agent) {
					t.Errorf("the agent's process %d went with the abort (now %d)", agent, now)
				}
			} else {
				checkFor(t, 10*time.Second, "the agent stopped", func() bool { return !alive(agent) })
			}
		})
	}
}
