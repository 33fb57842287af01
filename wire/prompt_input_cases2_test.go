package wire

// More prompt cases: a subtask command (the command's agent runs in a
// child session, the parent goes on from the task tool's result), the read
// tool on an image with and without image input, and a bash call aborted
// while it runs.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

func init() {
	promptCases = append(promptCases, promptInputCases2()...)
}

// subtaskProject is inputProject with a project command look.md that runs
// as a subtask of the explore agent.
func subtaskProject(t *testing.T, dir, home string) string {
	writeTree(t, dir, map[string]string{
		".opencode/command/look.md": "---\ndescription: look around\nagent: explore\nsubtask: true\n---\n\nLook at $ARGUMENTS and report.\n",
	})
	return inputProject(t, dir, home)
}

// imageProject is inputProject with pic.png, a 2x2 PNG.
func imageProject(t *testing.T, dir, home string) string {
	writeTree(t, dir, map[string]string{"pic.png": string(tinyPNG())})
	return inputProject(t, dir, home)
}

// waitToolRunning waits until a tool part of the session is running and
// has some output in its metadata: a message.part.updated event on GET
// /event, or the part as GET /session/{id}/message shows it (polled, in
// case the event came before the subscription).
func waitToolRunning(t *testing.T, base, sessionDir, sessionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type toolPart struct {
		Type      string `json:"type"`
		SessionID string `json:"sessionID"`
		Tool      string `json:"tool"`
		State     struct {
			Status   string `json:"status"`
			Metadata struct {
				Output string `json:"output"`
			} `json:"metadata"`
		} `json:"state"`
	}
	running := func(p toolPart) bool {
		return p.Type == "tool" && p.State.Status == "running" && p.State.Metadata.Output != ""
	}
	found := make(chan string, 2)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/event", nil)
		req.Header.Set("x-opencode-directory", url.PathEscape(sessionDir))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type       string `json:"type"`
				Properties struct {
					Part toolPart `json:"part"`
				} `json:"properties"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "message.part.updated" &&
				ev.Properties.Part.SessionID == sessionID && running(ev.Properties.Part) {
				found <- "GET /event: " + ev.Properties.Part.Tool + " " + ev.Properties.Part.State.Metadata.Output
				return
			}
		}
	}()
	go func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/session/"+sessionID+"/message", nil)
			req.Header.Set("x-opencode-directory", url.PathEscape(sessionDir))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				var msgs []struct {
					Parts []toolPart `json:"parts"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&msgs)
				resp.Body.Close()
				for _, m := range msgs {
					for _, p := range m.Parts {
						if running(p) {
							found <- "GET /session/{id}/message: " + p.Tool + " " + p.State.Metadata.Output
							return
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	select {
	case how := <-found:
		t.Logf("tool running, seen on %q", how)
	case <-ctx.Done():
		t.Fatalf("no running tool with output in session %s", sessionID)
	}
}

func promptInputCases2() []promptCase {
	withImage := withModel(map[string]any{"attachment": true, "modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}}})
	const readPic = `call:read {"filePath":"pic.png"} then: seen`
	return []promptCase{
		{
			// A command with subtask: true and agent: explore.
			Name:      "subtask-command",
			Setup:     subtaskProject,
			Steps:     []promptStep{{Route: "command", Body: `{"command":"look","arguments":"main.go"}`}},
			NeedTitle: true,
		},
		{
			Name:      "read-image",
			Setup:     imageProject,
			Config:    withImage,
			Script:    stubmodel.Directives,
			Prompts:   []string{body(readPic)},
			NeedTitle: true,
		},
		{
			Name:      "read-image-text-only",
			Setup:     imageProject,
			Script:    stubmodel.Directives,
			Prompts:   []string{body(readPic)},
			NeedTitle: true,
		},
		{
			// prompt_async a bash call that prints, then sleeps; abort once
			// the tool runs with output; then a blocking prompt.
			Name:   "shell-abort",
			Setup:  inputProject,
			Script: stubmodel.Directives,
			Steps: []promptStep{
				{Route: "prompt_async", Body: body(`call:bash {"command":"echo started; sleep 30","description":"wait"}`)},
				{Route: "abort", Body: "{}", Wait: waitToolRunning},
				{Route: "message", Body: body("second prompt after the abort")},
			},
			NeedTitle: true,
		},
	}
}
