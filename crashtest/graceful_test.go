package crashtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdown: SIGTERM during a slow turn, longer than the grace
// period, with a queued input behind it. The process exits 0 within 15 s;
// the blocking prompt is answered with the interrupted assistant message
// (as an abort answers), not a 503; the /event stream is cut so clients
// reconnect. After a restart the cut-off turn is closed as aborted and
// continued first, then the queued input runs, and the session goes idle;
// the blocking prompt re-sent with the same messageID gets the continued
// turn's answer.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	srv := startServer(t, data, filepath.Join(dir, "run1.log"), "--scripted-delay", "200ms", "--scripted-chunks", "20",
		"--shutdown-grace", "300ms")
	cl := newClient(srv.url)
	defer cl.close()
	logs := func() string {
		return tail(filepath.Join(dir, "run1.log"), 40) + "\n" + tail(filepath.Join(dir, "run2.log"), 40)
	}

	sid := newID("ses")
	if st, b, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create session: %d %v %s", st, err, b)
	}

	// An /event stream, open before the shutdown.
	sseCtx, sseCancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer sseCancel()
	sseDone := make(chan error, 1)
	sseUp := make(chan struct{})
	go func() {
		req, _ := http.NewRequestWithContext(sseCtx, "GET", srv.url+"/event", nil)
		resp, err := cl.hc.Do(req)
		if err != nil {
			sseDone <- err
			return
		}
		defer resp.Body.Close()
		first := true
		sseDone <- readSSE(resp.Body, func(sseFrame) bool {
			if first {
				close(sseUp)
				first = false
			}
			return true
		})
	}()
	select {
	case <-sseUp:
	case err := <-sseDone:
		t.Fatalf("/event: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("/event sent nothing within 10s")
	}

	// A blocking prompt whose turn is slow (20 chunks of 200 ms).
	msgA := newID("msg")
	type answer struct {
		st  int
		b   []byte
		err error
	}
	blocked := make(chan answer, 1)
	bodyA := mustJSON(map[string]any{"messageID": msgA, "parts": []any{map[string]any{"type": "text", "text": "a slow turn"}}})
	go func() {
		st, b, err := cl.doTimeout("POST", "/session/"+sid+"/message", bodyA, 40*time.Second)
		blocked <- answer{st, b, err}
	}()
	// Wait until the turn streams text.
	h := &history{}
	if !poll(10*time.Second, 20*time.Millisecond, func() bool {
		if _, err := cl.fetchHistory(sid, h, 100); err != nil {
			return false
		}
		for _, e := range h.evs {
			if e.Type == "session.next.text.started" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the turn of %s did not start streaming within 10s\n%s", msgA, logs())
	}
	// A queued input behind it.
	msgB := newID("msg")
	if st, b, err := cl.do("POST", "/api/session/"+sid+"/prompt", mustJSON(map[string]any{"id": msgB,
		"prompt": map[string]any{"text": "queued behind"}, "delivery": "queue"})); err != nil || st != 200 {
		t.Fatalf("queue %s: %d %v %s", msgB, st, err, b)
	}
	var inbox struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := cl.getJSON("/api/session/"+sid+"/inbox", &inbox); err != nil || len(inbox.Data) != 1 || inbox.Data[0].ID != msgB {
		t.Fatalf("inbox before the shutdown: %+v %v (want just %s)", inbox.Data, err, msgB)
	}

	// SIGTERM.
	t0 := time.Now()
	if err := srv.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, exited := srv.waitExit(15 * time.Second)
	if !exited {
		srv.kill()
		t.Fatalf("SIGTERM: the process did not exit within 15s\n%s", logs())
	}
	t.Logf("SIGTERM: exited with %d after %v", code, time.Since(t0).Round(time.Millisecond))
	if code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0\n%s", code, logs())
	}
	select {
	case a := <-blocked:
		var m v1Message
		switch {
		case a.err != nil:
			t.Errorf("the blocking POST /session/%s/message in flight got no answer: %v", sid, a.err)
		case a.st != 200 || json.Unmarshal(a.b, &m) != nil || m.Info.Error == nil || m.Info.Error.Name != "MessageAbortedError":
			t.Errorf("the blocking POST in flight was answered %d %s, want 200 with the interrupted assistant message", a.st, clip(a.b))
		default:
			t.Logf("the blocking POST in flight was answered %d with %s (%v)", a.st, m.Info.ID, m.Info.Error.Data)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the blocking POST /session/%s/message still hangs 5s after the process exited", sid)
	}
	select {
	case err := <-sseDone:
		// The stream is cut, not ended: a clean end reads as "finished" to
		// the SDK, which then never reconnects.
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("/event stream ended with %v, want the connection cut (unexpected EOF) so clients reconnect", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("/event stream still open 5s after the process exited")
	}
	for _, l := range errorLines(filepath.Join(dir, "run1.log")) {
		t.Errorf("server log (run 1) has an error line: %s", l)
	}

	// Restart on the same data directory (fast turns now).
	srv2 := startServer(t, data, filepath.Join(dir, "run2.log"), "--scripted-delay", "10ms", "--scripted-chunks", "5")
	cl2 := newClient(srv2.url)
	defer cl2.close()
	h2 := &history{}
	var status map[string]any
	var pending, open []string
	if !poll(20*time.Second, 20*time.Millisecond, func() bool {
		status = map[string]any{}
		if err := cl2.getJSON("/session/status", &status); err != nil {
			return false
		}
		if probs, err := cl2.fetchHistory(sid, h2, 100); err != nil || len(probs) > 0 {
			t.Logf("history: %v %v", probs, err)
			return false
		}
		pending, open = pendingOf(h2)
		return len(status) == 0 && len(pending) == 0 && len(open) == 0
	}) {
		t.Errorf("after the restart the session did not settle by itself within 20s: status=%v pending=%v open steps=%v\n%s",
			status, pending, open, logs())
	}
	if st, b, err := cl2.doTimeout("POST", "/api/session/"+sid+"/wait", nil, 30*time.Second); err != nil || st != http.StatusNoContent {
		t.Errorf("wait after the restart: %d %v %s", st, err, b)
	}
	if err := cl2.getJSON("/api/session/"+sid+"/inbox", &inbox); err != nil || len(inbox.Data) != 0 {
		t.Errorf("inbox after the restart: %+v %v (want empty)", inbox.Data, err)
	}
	status = map[string]any{}
	if err := cl2.getJSON("/session/status", &status); err != nil || len(status) != 0 {
		t.Errorf("status after the restart: %v %v (want {})", status, err)
	}
	if _, err := cl2.fetchHistory(sid, h2, 100); err != nil {
		t.Fatal(err)
	}
	var msgs []v1Message
	if err := cl2.getJSON("/session/"+sid+"/message", &msgs); err != nil {
		t.Fatal(err)
	}
	stepFailed := map[string]bool{}
	for _, e := range h2.evs {
		if e.Type == "session.next.step.failed" {
			stepFailed[e.Data.AssistantMessageID] = true
		}
	}
	users := map[string]int{}
	var firstA, lastA, firstB *v1Message
	lastAAt, firstBAt := -1, -1
	for i, mp := range msgs {
		switch mp.Info.Role {
		case "user":
			users[mp.Info.ID]++
		case "assistant":
			if mp.Info.Time.Completed == nil {
				t.Errorf("assistant message %s has no time.completed", mp.Info.ID)
			}
			if mp.Info.ParentID == msgA {
				if firstA == nil {
					firstA = &msgs[i]
				}
				lastA, lastAAt = &msgs[i], i
			}
			if mp.Info.ParentID == msgB && firstB == nil {
				firstB, firstBAt = &msgs[i], i
			}
		}
	}
	// The cut-off turn is continued first, then the queued input runs.
	switch {
	case lastA == nil || lastA == firstA:
		t.Errorf("the cut-off turn of %s was not continued after the restart", msgA)
	case lastA.Info.Error != nil:
		t.Errorf("the continued turn ended with %+v", lastA.Info.Error)
	case firstBAt >= 0 && firstBAt < lastAAt:
		t.Errorf("the queued input %s ran (message %d) before the cut-off turn was continued (message %d)", msgB, firstBAt, lastAAt)
	default:
		// A blocking prompt re-sent with the same messageID gets the
		// continued turn's answer, not the user message or the partial.
		st, b, err := cl2.doTimeout("POST", "/session/"+sid+"/message", bodyA, 30*time.Second)
		var m v1Message
		if err != nil || st != 200 || json.Unmarshal(b, &m) != nil || m.Info.ID != lastA.Info.ID {
			t.Errorf("the blocking prompt re-sent after the restart: %d %v %s, want the continued turn's answer %s",
				st, err, clip(b), lastA.Info.ID)
		}
	}
	if users[msgA] != 1 || users[msgB] != 1 {
		t.Errorf("user messages: %s x%d, %s x%d (want each once)", msgA, users[msgA], msgB, users[msgB])
	}
	switch {
	case firstA == nil:
		t.Errorf("no assistant message answers %s", msgA)
	case firstA.Info.Error == nil || firstA.Info.Error.Name != "MessageAbortedError":
		t.Errorf("the turn cut off by SIGTERM: assistant message %s error %+v, want MessageAbortedError", firstA.Info.ID, firstA.Info.Error)
	default:
		t.Logf("cut-off turn: %s %s %v", firstA.Info.ID, firstA.Info.Error.Name, firstA.Info.Error.Data)
		if !stepFailed[firstA.Info.ID] {
			t.Errorf("no durable session.next.step.failed for the cut-off assistant message %s", firstA.Info.ID)
		}
	}
	if firstB == nil {
		t.Errorf("the queued input %s was not answered after the restart", msgB)
	} else if firstB.Info.Error != nil {
		t.Errorf("the queued input's turn ended with %+v", firstB.Info.Error)
	}
	if err := srv2.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, ok := srv2.waitExit(15 * time.Second); !ok || code != 0 {
		t.Errorf("second run: SIGTERM exit=%v code=%d (want 0 within 15s)", ok, code)
	}
	for _, l := range errorLines(filepath.Join(dir, "run2.log")) {
		t.Errorf("server log (run 2) has an error line: %s", l)
	}
}

// TestSecondSignal: a shutdown held up by a request that never finishes
// sending its body exits at once on a second signal.
func TestSecondSignal(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "run.log")
	srv := startServer(t, data, logPath)
	cl := newClient(srv.url)
	defer cl.close()
	sid := newID("ses")
	if st, b, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create session: %d %v %s", st, err, b)
	}
	u, _ := url.Parse(srv.url)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers and half of the body: the handler blocks reading the rest,
	// and http.Server.Shutdown waits for it. With Expect: 100-continue the
	// server says when the handler starts reading the body, so the half
	// is sent to a handler that is surely under way.
	msg := newID("msg")
	body := fmt.Sprintf(`{"messageID":%q,"parts":[{"type":"text","text":"never finished"}]}`, msg)
	fmt.Fprintf(conn, "POST /session/%s/prompt_async HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		sid, u.Host, len(body))
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	cont, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(cont, " 100 ") {
		t.Fatalf("no 100 Continue from the handler: %q %v", cont, err)
	}
	if _, err := io.WriteString(conn, body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}

	if err := srv.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, exited := srv.waitExit(time.Second); exited {
		t.Fatalf("the shutdown did not wait for a request in flight (exited %d within 1s)\n%s", code, tail(logPath, 30))
	}
	t0 := time.Now()
	if err := srv.signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code, exited := srv.waitExit(3 * time.Second)
	if !exited {
		srv.kill()
		t.Fatalf("a second signal during a slow shutdown did not exit within 3s\n%s", tail(logPath, 30))
	}
	t.Logf("second signal: exit code %d after %v", code, time.Since(t0).Round(time.Millisecond))
	if !strings.Contains(tail(logPath, 20), "second signal") {
		t.Errorf("the log does not mention the second signal\n%s", tail(logPath, 20))
	}

	// The store is consistent after the hard exit: the half-sent input does
	// not exist, the session is there and idle.
	srv2 := startServer(t, data, filepath.Join(dir, "run2.log"))
	cl2 := newClient(srv2.url)
	defer cl2.close()
	if st, b, err := cl2.doTimeout("POST", "/api/session/"+sid+"/wait", nil, 20*time.Second); err != nil || st != http.StatusNoContent {
		t.Errorf("wait after the restart: %d %v %s", st, err, b)
	}
	var msgs []v1Message
	if err := cl2.getJSON("/session/"+sid+"/message", &msgs); err != nil {
		t.Fatal(err)
	}
	for _, mp := range msgs {
		if mp.Info.ID == msg {
			t.Errorf("the input whose body never arrived exists: %+v", mp.Info)
		}
	}
	status := map[string]any{}
	if err := cl2.getJSON("/session/status", &status); err != nil || len(status) != 0 {
		t.Errorf("status after the restart: %v %v (want {})", status, err)
	}
}

// TestShutdownGrace: SIGTERM during a turn shorter than the grace period
// (default 10 s): the turn finishes, its blocking prompt gets the complete
// answer, and the process exits 0 once it has.
func TestShutdownGrace(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "run.log")
	srv := startServer(t, data, logPath, "--scripted-delay", "100ms", "--scripted-chunks", "10")
	cl := newClient(srv.url)
	defer cl.close()
	sid := newID("ses")
	if st, b, err := cl.do("POST", "/api/session", mustJSON(map[string]any{"id": sid})); err != nil || st != 200 {
		t.Fatalf("create session: %d %v %s", st, err, b)
	}
	type answer struct {
		st  int
		b   []byte
		err error
	}
	blocked := make(chan answer, 1)
	go func() {
		st, b, err := cl.doTimeout("POST", "/session/"+sid+"/message", mustJSON(map[string]any{
			"parts": []any{map[string]any{"type": "text", "text": "finish me"}}}), 30*time.Second)
		blocked <- answer{st, b, err}
	}()
	if !poll(10*time.Second, 10*time.Millisecond, func() bool {
		status := map[string]any{}
		return cl.getJSON("/session/status", &status) == nil && status[sid] != nil
	}) {
		t.Fatalf("the turn did not start\n%s", tail(logPath, 30))
	}
	t0 := time.Now()
	if err := srv.signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, exited := srv.waitExit(15 * time.Second)
	if !exited {
		srv.kill()
		t.Fatalf("SIGTERM: no exit within 15s\n%s", tail(logPath, 30))
	}
	if code != 0 {
		t.Errorf("exit code %d", code)
	}
	t.Logf("exited after %v", time.Since(t0).Round(time.Millisecond))
	a := <-blocked
	var m v1Message
	if a.err != nil || a.st != 200 || json.Unmarshal(a.b, &m) != nil || m.Info.Error != nil || m.Info.Time.Completed == nil {
		t.Errorf("the blocking prompt of a turn that fits in the grace period: %d %v %s, want its complete answer", a.st, a.err, clip(a.b))
	}
}
