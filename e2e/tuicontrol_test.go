package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// post sends POST path with a JSON body ("" for none) and returns the
// status and body.
func (s *server) post(path, body string) (int, []byte, error) {
	return s.send(http.MethodPost, path, body)
}

// send sends method path with a JSON body ("" for none) and returns the
// status and body.
func (s *server) send(method, path, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.password != "" {
		req.SetBasicAuth("opencode", s.password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// tuiControl sends a /tui route as an IDE extension does; it must answer
// 200 true.
func tuiControl(t *testing.T, srv *server, path, body string) {
	t.Helper()
	status, b, err := srv.post(path, body)
	if err != nil || status != http.StatusOK || string(b) != "true" {
		t.Fatalf("POST %s %s = %d %s (%v), want 200 true", path, body, status, b, err)
	}
}

// TestTUIControl: an IDE drives the real TUI attached to our server
// through the /tui routes: append-prompt puts text in its prompt,
// clear-prompt empties it, show-toast shows a toast, submit-prompt sends
// the prompt (a user message in a new session, the model's reply on
// screen), open-themes opens the theme dialog and select-session opens
// another session.
func TestTUIControl(t *testing.T) {
	t.Parallel()
	srv := stubServer(t)
	x := startTUI(t, srv)

	// The TUI subscribes to /global/event after it draws its prompt; an
	// event published before that is not seen. Append until the first one
	// shows, then clear the prompt.
	probe := "probe-" + strings.ToLower(randomTag())
	checkFor(t, 30*time.Second, 500*time.Millisecond, func() error {
		if strings.Contains(x.screen(), probe) {
			return nil
		}
		tuiControl(t, srv, "/tui/append-prompt", `{"text":"`+probe+`"}`)
		return fmt.Errorf("the appended %q is not in the prompt yet", probe)
	})
	tuiControl(t, srv, "/tui/clear-prompt", "")
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if s := x.screen(); strings.Contains(s, probe) {
			return fmt.Errorf("clear-prompt left %q in the prompt:\n%s", probe, s)
		}
		return nil
	})

	tuiControl(t, srv, "/tui/append-prompt", `{"text":"hello from the IDE"}`)
	x.waitScreen(10*time.Second, "hello from the IDE")

	toast := "toast-" + strings.ToLower(randomTag())
	tuiControl(t, srv, "/tui/show-toast", `{"title":"From the IDE","message":"`+toast+`","variant":"success","duration":30000}`)
	s := x.waitScreen(10*time.Second, toast)
	if !strings.Contains(s, "From the IDE") {
		t.Errorf("the toast lacks its title:\n%s", s)
	}

	tuiControl(t, srv, "/tui/submit-prompt", "")
	x.waitScreen(30*time.Second, "You said: hello from the IDE")
	sessionID := srv.onlySession(t, 5*time.Second)
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		ms, err := srv.messages(sessionID)
		if err != nil {
			return err
		}
		if len(ms) != 2 || ms[0].Info.Role != "user" || ms[0].text() != "hello from the IDE" ||
			ms[1].Info.Role != "assistant" || ms[1].Info.Time.Completed == 0 {
			return fmt.Errorf("want the submitted user message and a completed answer, have %+v", ms)
		}
		return nil
	})

	tuiControl(t, srv, "/tui/open-themes", "")
	x.waitScreen(10*time.Second, "Themes")
	x.must("send-keys", "-t", x.target, "Escape")
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if s := x.screen(); strings.Contains(s, "Themes") {
			return fmt.Errorf("the theme dialog is still open:\n%s", s)
		}
		return nil
	})

	// A second session, made elsewhere (the IDE), opened in the TUI.
	title := "Picked by the IDE " + strings.ToLower(randomTag())
	status, b, err := srv.post("/session", `{"title":"`+title+`"}`)
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST /session = %d %s (%v)", status, b, err)
	}
	var other sessionInfo
	if err := json.Unmarshal(b, &other); err != nil {
		t.Fatal(err)
	}
	tuiControl(t, srv, "/tui/select-session", `{"sessionID":"`+other.ID+`"}`)
	x.waitScreen(10*time.Second, title)
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		if s := x.screen(); strings.Contains(s, "You said: hello from the IDE") {
			return fmt.Errorf("still showing the first session:\n%s", s)
		}
		return nil
	})
}
