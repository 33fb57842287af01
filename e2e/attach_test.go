package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTUIFileMention: `@README` in the TUI's prompt, picked from the file
// autocomplete, attaches README.md as a file:// text/plain part; the model
// gets it as OpenCode 1.18.33 sends it (the user message as a content array:
// the prompt, the synthetic "Called the Read tool" text and the read tool's
// output), and the stored user message keeps the file part and the two
// synthetic texts.
func TestTUIFileMention(t *testing.T) {
	t.Parallel()
	srv, stub := stubServerModel(t, "")
	tag := strings.ToLower(randomTag())
	lines := []string{"# Mention " + tag, "second line of the readme", "the end"}
	readme := filepath.Join(srv.Dir, "README.md")
	if err := os.WriteFile(readme, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	x := startTUI(t, srv)

	// Typing "@READ" opens the file picker; Enter takes its entry and
	// puts "@README.md" in the input in place of "@READ".
	x.must("send-keys", "-t", x.target, "-l", "summarize @READ")
	x.waitScreen(15*time.Second, "README.md")
	x.must("send-keys", "-t", x.target, "Enter")
	lastPress := time.Now()
	checkFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		s := x.screen()
		if strings.Contains(s, "summarize @README.md") {
			return nil
		}
		if unpicked.MatchString(s) && time.Since(lastPress) > 1500*time.Millisecond {
			// The key was lost: the input still ends in "@READ".
			x.must("send-keys", "-t", x.target, "Enter")
			lastPress = time.Now()
		}
		return fmt.Errorf("README.md not picked from the autocomplete; screen:\n%s", s)
	})
	// Send the prompt.
	time.Sleep(300 * time.Millisecond) // let the TUI take the pick before Enter
	x.must("send-keys", "-t", x.target, "Enter")

	// The turn's request to the model (title requests are kept apart).
	var content []contentEntry
	checkFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		reqs := stub.Requests()
		if len(reqs) == 0 {
			return errors.New("the stub model got no request for the turn yet")
		}
		last, err := lastUserContent(reqs[len(reqs)-1])
		if err != nil {
			return err
		}
		content = last
		return nil
	})

	wantCall := `Called the Read tool with the following input: {"filePath":"` + readme + `"}`
	var numbered strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&numbered, "%d: %s\n", i+1, l)
	}
	wantOutput := "<path>" + readme + "</path>\n<type>file</type>\n<content>\n" + numbered.String() +
		fmt.Sprintf("\n(End of file - total %d lines)\n</content>", len(lines))
	if len(content) != 3 {
		t.Fatalf("last user message: %d content parts, want 3 (prompt, read call, read output): %+v", len(content), content)
	}
	for i, c := range content {
		if c.Type != "text" {
			t.Errorf("content[%d] is %q, want text: %+v", i, c.Type, c)
		}
	}
	if got := strings.TrimSpace(content[0].Text); got != "summarize @README.md" {
		t.Errorf("content[0] (the prompt) = %q, want %q", content[0].Text, "summarize @README.md")
	}
	if content[1].Text != wantCall {
		t.Errorf("content[1] = %q\nwant        %q", content[1].Text, wantCall)
	}
	if content[2].Text != wantOutput {
		t.Errorf("content[2] = %q\nwant        %q", content[2].Text, wantOutput)
	}
	if !strings.Contains(content[2].Text, "1: "+lines[0]+"\n") {
		t.Errorf("the read output lacks README's first line as %q: %q", "1: "+lines[0], content[2].Text)
	}

	// The stored user message: the prompt, the two synthetic texts, the
	// file part (OpenCode's createUserMessage order).
	sessionID := srv.onlySession(t, 10*time.Second)
	var user storedMessage
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var ms []storedMessage
		if err := srv.getJSON("/session/"+sessionID+"/message", &ms); err != nil {
			return err
		}
		for _, m := range ms {
			if m.Info.Role == "user" {
				user = m
				return nil
			}
		}
		return fmt.Errorf("no user message among %d", len(ms))
	})
	var kinds []string
	for _, p := range user.Parts {
		k := p.Type
		if p.Synthetic {
			k += "(synthetic)"
		}
		kinds = append(kinds, k)
	}
	if got := strings.Join(kinds, ","); got != "text,text(synthetic),text(synthetic),file" {
		t.Fatalf("stored user message parts %s, want text,text(synthetic),text(synthetic),file: %+v", got, user.Parts)
	}
	if p := user.Parts[0]; strings.TrimSpace(p.Text) != "summarize @README.md" {
		t.Errorf("stored prompt text %q", p.Text)
	}
	if p := user.Parts[1]; p.Text != wantCall {
		t.Errorf("stored synthetic read call %q, want %q", p.Text, wantCall)
	}
	if p := user.Parts[2]; p.Text != wantOutput {
		t.Errorf("stored synthetic read output %q, want %q", p.Text, wantOutput)
	}
	f := user.Parts[3]
	u, err := url.Parse(f.URL)
	if err != nil || u.Scheme != "file" || u.Path != readme {
		t.Errorf("file part url %q (%v), want file://%s", f.URL, err, readme)
	}
	if f.Mime != "text/plain" || f.Filename != "README.md" {
		t.Errorf("file part mime %q filename %q, want text/plain README.md", f.Mime, f.Filename)
	}
	for _, p := range user.Parts {
		if p.SessionID != sessionID || p.MessageID != user.Info.ID || !strings.HasPrefix(p.ID, "prt_") {
			t.Errorf("part %+v: ids do not name the message %s of session %s", p, user.Info.ID, sessionID)
		}
	}
}

// unpicked is the TUI's input line before the file picker's entry is taken.
var unpicked = regexp.MustCompile(`(?m)summarize @READ *$`)

// contentEntry is one element of a chat-completions content array.
type contentEntry struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// lastUserContent is the content array of the last user message of a
// chat-completions request body (an error if that content is a string).
func lastUserContent(body json.RawMessage) ([]contentEntry, error) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []contentEntry
		if err := json.Unmarshal(m.Content, &parts); err != nil {
			return nil, fmt.Errorf("last user message content is not an array: %s", m.Content)
		}
		return parts, nil
	}
	return nil, fmt.Errorf("no user message in the request: %s", body)
}

// storedMessage is a message of GET /session/{id}/message with the part
// fields an attachment has.
type storedMessage struct {
	Info  messageInfo `json:"info"`
	Parts []struct {
		part
		Synthetic bool   `json:"synthetic"`
		Mime      string `json:"mime"`
		URL       string `json:"url"`
		Filename  string `json:"filename"`
	} `json:"parts"`
}
