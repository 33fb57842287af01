package acp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestResumeAfterCut: a followed session's subscription cut off mid-turn
// (Bus.Reset, as when the cluster's event feed breaks; an overflow cuts
// it the same way) is resumed from the log, on v1 and v2 connections:
// every assistant message's text arrives whole and once (the deltas lost
// in the gap are made up at the text's end, none twice), the turn's end
// is said (v2: state_update idle), and the next prompt's updates arrive.
func TestResumeAfterCut(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v2=%v", v2), func(t *testing.T) {
			srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 40, Delay: 25 * time.Millisecond}})
			var c *client
			var sid string
			if v2 {
				c = startV2(t, srv)
				sid = c.newSessionV2(srv.Directory)
			} else {
				c = start(t, srv)
				c.handshake()
				sid = c.newSession(srv.Directory)
			}
			// turn sends a prompt and waits until its updates are all
			// written (v1: its reply; v2: the turn's idle).
			turn := func(n int, text string, cut bool) {
				t.Helper()
				_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt(text)})
				if cut {
					c.waitFor("the turn's first chunk", func() bool { return agentText(c.updates()) != "" })
					srv.Bus.Reset()
					if srv.Manager.Status()[sid] == "" {
						t.Fatal("the turn ended before the cut: nothing was cut mid-turn")
					}
				}
				if m := c.wait(ch, "prompt"); m.Error != nil {
					t.Fatalf("prompt: %+v", m.Error)
				}
				if v2 {
					c.settled(srv, sid, func() int { return n })
				}
			}
			turn(1, "cut off in the middle", true)
			turn(2, "and on after it", false)

			msgs, err := srv.Manager.Messages(context.Background(), sid)
			if err != nil {
				t.Fatal(err)
			}
			said := map[string]string{}
			for _, u := range c.updates() {
				if u.Update.Kind == "agent_message_chunk" {
					said[u.Update.MessageID] += u.text()
				}
			}
			replies := 0
			for _, m := range msgs {
				if m.Info.Role != "assistant" {
					continue
				}
				replies++
				var want string
				for _, p := range m.Parts {
					if p.Type == "text" {
						want += p.Text
					}
				}
				if got := said[m.Info.ID]; got != want {
					t.Errorf("assistant message %s: the client was sent\n%q\nstored:\n%q", m.Info.ID, got, want)
				}
			}
			if replies != 2 {
				t.Errorf("%d assistant messages stored, want 2", replies)
			}
		})
	}
}
