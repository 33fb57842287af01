package acp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// askingServer is a server on a tool-calling model whose edits ask
// permission, and a file in its directory to edit.
func askingServer(t *testing.T) (*testserver.Server, string) {
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(2))
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}, Permission: json.RawMessage(`{"edit":"ask"}`)}
	srv := testserver.Start(t, testserver.Options{Config: cfg})
	file := filepath.Join(srv.Directory, "a.txt")
	if err := os.WriteFile(file, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, file
}

// TestToolsAndPermission: a tool-calling model's turn over ACP: the
// permission ask goes to the client as session/request_permission, its
// answer lets the tool run, and the calls show as tool_call and
// tool_call_update (kind, locations, a diff for the edit).
func TestToolsAndPermission(t *testing.T) {
	srv, file := askingServer(t)
	c := start(t, srv)
	var asked []json.RawMessage
	c.onAsk = func(p json.RawMessage) any {
		c.mu.Lock()
		asked = append(asked, p)
		c.mu.Unlock()
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": "once"}}
	}
	c.handshake()
	sid := c.newSession(srv.Directory)
	prompt := `call:edit {"filePath":"` + file + `","oldString":"one","newString":"two"} then: edited`
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt(prompt)})
	if r := decodeReply(t, c.wait(ch, "tool prompt")); r.StopReason != "end_turn" {
		t.Fatalf("reply %+v", r)
	}
	if b, _ := os.ReadFile(file); string(b) != "two\n" {
		t.Errorf("file after the allowed edit: %q", b)
	}
	c.mu.Lock()
	n := len(asked)
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d permission requests, want 1", n)
	}
	var kinds []string
	c.mu.Lock()
	for _, m := range c.log {
		if m.Method != "session/update" {
			continue
		}
		s := string(m.Params)
		switch {
		case strings.Contains(s, `"sessionUpdate":"tool_call"`):
			if !strings.Contains(s, `"kind":"edit"`) || !strings.Contains(s, file) {
				t.Errorf("tool_call without kind edit and the file's location: %s", s)
			}
			kinds = append(kinds, "tool_call")
		case strings.Contains(s, `"sessionUpdate":"tool_call_update"`):
			if !strings.Contains(s, `"status":"completed"`) || !strings.Contains(s, `"type":"diff"`) {
				t.Errorf("tool_call_update without completed status and a diff: %s", s)
			}
			kinds = append(kinds, "tool_call_update")
		}
	}
	c.mu.Unlock()
	if strings.Join(kinds, ",") != "tool_call,tool_call_update" {
		t.Errorf("tool updates %v", kinds)
	}
	if !strings.Contains(agentText(c.updates()), "edited") {
		t.Errorf("no final text: %q", agentText(c.updates()))
	}
}
