package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
)

// The steps of TestExternalRealAgents that drive a real agent's turn
// from our inbox: a steer, a revoked input, a killed process.

// waitWords is how many times the wait prompt's answer says "waiting".
const waitWords = 60

// startWaiting sends the wait prompt and returns once its answer streams,
// with the index on /event from which the turn's events come.
func startWaiting(t *testing.T, srv *server, events func() []busEvent, session, agent string) (mark int) {
	t.Helper()
	mark = len(events())
	promptAgent(t, srv, session, agent, waitPrompt)
	checkFor(t, 2*time.Minute, 50*time.Millisecond, func() error {
		for _, e := range events()[mark:] {
			if e.Type == "message.part.delta" && e.Properties.SessionID == session && strings.Contains(e.Properties.Delta, "waiting") {
				return nil
			}
		}
		return fmt.Errorf("the wait answer has not started streaming\n%s", serverLog(srv))
	})
	return mark
}

// sendInput admits text as input id with delivery (prompt_async).
func sendInput(t *testing.T, srv *server, session, id, delivery, text string) {
	t.Helper()
	status, body, err := srv.post("/session/"+session+"/prompt_async", mustMarshal(map[string]any{"messageID": id,
		"delivery": delivery, "parts": []any{map[string]string{"type": "text", "text": text}}}))
	if err != nil || status != 204 {
		t.Fatalf("prompt_async %s (%s): %d %s %v", id, delivery, status, body, err)
	}
}

// checkInboxEmpty checks the session has no pending input.
func checkInboxEmpty(t *testing.T, srv *server, session string) {
	t.Helper()
	var inbox struct {
		Data []map[string]any `json:"data"`
	}
	if err := srv.getJSON("/session/"+session+"/inbox", &inbox); err != nil {
		t.Fatal(err)
	}
	if len(inbox.Data) != 0 {
		t.Errorf("inputs left pending: %v", inbox.Data)
	}
}

// checkSteered: a steer sent while the agent's turn streams is delivered,
// its user message followed by the answer to it. Claude Code (steering)
// takes it into the running turn: its next model call carries the steer
// and the answer streams before the turn's end. Codex (none) gets it as
// the next prompt, once the turn ended.
func checkSteered(t *testing.T, srv *server, events func() []busEvent, calls *modelCalls, session string, a realAgent) {
	t.Helper()
	mark := startWaiting(t, srv, events, session, a.name)
	_, before := calls.since(0)
	steer, tag := identifier.NewMessage(), randomTag()
	sendInput(t, srv, session, steer, "steer", echoPrompt+" "+tag)
	reply := waitReply(t, srv, session, "echoed "+tag, nil)
	ms, err := srv.messages(session)
	if err != nil {
		t.Fatal(err)
	}
	at := slices.IndexFunc(ms, func(m message) bool { return m.Info.ID == steer && m.Info.Role == "user" })
	answered := slices.IndexFunc(ms, func(m message) bool { return m.Info.ID == reply.Info.ID })
	if at < 0 || answered < at {
		t.Errorf("the steer %s (at %d) is not delivered before its answer %s (at %d)", steer, at, reply.Info.ID, answered)
	}
	checkInboxEmpty(t, srv, session)

	texts, _ := calls.since(before)
	if len(texts) == 0 || !strings.Contains(texts[0], tag) {
		t.Errorf("the model call after the steer does not carry it (%d calls since)", len(texts))
	}
	// When it was delivered: while the wait answer streamed (injected:
	// Claude Code cuts that answer short for it), or after all of it (queued).
	var said strings.Builder
	checkFor(t, time.Minute, 100*time.Millisecond, func() error {
		said.Reset()
		for _, e := range events()[mark:] {
			if e.Type == "session.inbox.delivered" && e.Properties.MessageID == steer {
				return nil
			}
			if e.Type == "message.part.delta" && e.Properties.SessionID == session {
				said.WriteString(e.Properties.Delta)
			}
		}
		return fmt.Errorf("no session.inbox.delivered for the steer %s on /event yet", steer)
	})
	if n := strings.Count(said.String(), "waiting"); (n < waitWords) != a.steers {
		var got []string
		for _, m := range ms {
			got = append(got, fmt.Sprintf("%s %s parent %s finish %q: %d words waiting, %q", m.Info.Role, m.Info.ID,
				m.Info.ParentID, m.Info.Finish, strings.Count(m.text(), "waiting"), tail(m.text(), 1)))
		}
		t.Errorf("%s (steering %v): the steer was delivered after %d of the %d words of the running answer; messages:\n%s",
			a.name, a.steers, n, waitWords, strings.Join(got, "\n"))
	}
}

// checkRevoked: an input queued while the agent's turn runs and revoked
// over the inbox route never reaches the agent's model; the next input does.
func checkRevoked(t *testing.T, srv *server, events func() []busEvent, calls *modelCalls, session string, a realAgent) {
	t.Helper()
	startWaiting(t, srv, events, session, a.name)
	_, before := calls.since(0)
	revoked, gone := identifier.NewMessage(), randomTag()
	sendInput(t, srv, session, revoked, "queue", echoPrompt+" "+gone)
	status, body, err := srv.send("DELETE", "/session/"+session+"/inbox/"+revoked, "")
	if err != nil || status != 200 || !strings.Contains(string(body), `"revoked":true`) {
		t.Fatalf("revoke %s: %d %s %v", revoked, status, body, err)
	}
	// Queued after it: it would have run first.
	next := randomTag()
	sendInput(t, srv, session, identifier.NewMessage(), "queue", echoPrompt+" "+next)
	waitReply(t, srv, session, "echoed "+next, nil)
	texts, _ := calls.since(before)
	for _, text := range texts {
		if strings.Contains(text, gone) {
			t.Errorf("the revoked input %s (%q) reached %s's model", revoked, gone, a.name)
			break
		}
	}
	ms, err := srv.messages(session)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Info.ID == revoked || strings.Contains(m.text(), gone) {
			t.Errorf("the revoked input is in the session: %s %s %q", m.Info.Role, m.Info.ID, m.text())
		}
	}
}

// checkKilled: the agent's process killed mid-turn fails the turn with an
// error naming the agent, and the next prompt starts a new process.
func checkKilled(t *testing.T, srv *server, events func() []busEvent, session string, a realAgent) {
	t.Helper()
	startWaiting(t, srv, events, session, a.name)
	pid := agentPID(t, srv)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", pid, err)
	}
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ms, err := srv.messages(session)
		if err != nil {
			return err
		}
		last := ms[len(ms)-1].Info
		if last.Role != "assistant" || last.Error == nil || last.Time.Completed == 0 {
			return fmt.Errorf("the killed turn has not failed: %+v\n%s", last, serverLog(srv))
		}
		if msg := fmt.Sprint(last.Error.Data["message"]); !strings.Contains(msg, "external agent "+a.name) {
			return fmt.Errorf("the killed turn's error does not name the agent: %s %q", last.Error.Name, msg)
		}
		return nil
	})
	tag := randomTag()
	promptAgent(t, srv, session, a.name, echoPrompt+" "+tag)
	waitReply(t, srv, session, "echoed "+tag, nil)
	if again := agentPID(t, srv); again == pid {
		t.Errorf("the next prompt ran on the killed process %d", pid)
	}
}
