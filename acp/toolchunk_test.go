package acp_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// bashServer is a server on the tool-calling stub model with bash allowed.
func bashServer(t *testing.T) *testserver.Server {
	stub := stubmodel.NewServer(t, stubmodel.Directives, stubmodel.WithChunks(2))
	cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}, Permission: json.RawMessage(`{"bash":"allow"}`)}
	return testserver.Start(t, testserver.Options{Config: cfg})
}

const slowBash = `call:bash {"command":"for i in 1 2 3 4; do echo line$i; sleep 0.3; done","description":"count"} then: counted`

// toolFrames is the updates of a session's tool calls: their kinds, and
// the text of each tool_call_content_chunk.
func (c *client) toolFrames(sid string) (kinds []string, chunks []string, final string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.log {
		if m.Method != "session/update" {
			continue
		}
		var u struct {
			SessionID string `json:"sessionId"`
			Update    struct {
				Kind    string          `json:"sessionUpdate"`
				Status  string          `json:"status"`
				Content json.RawMessage `json:"content"`
			} `json:"update"`
		}
		_ = json.Unmarshal(m.Params, &u)
		if u.SessionID != sid || !strings.HasPrefix(u.Update.Kind, "tool_call") {
			continue
		}
		kinds = append(kinds, u.Update.Kind)
		switch {
		case u.Update.Kind == "tool_call_content_chunk":
			var one struct {
				Type    string `json:"type"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			_ = json.Unmarshal(u.Update.Content, &one)
			chunks = append(chunks, one.Content.Text)
		case u.Update.Status == "completed":
			var many []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			_ = json.Unmarshal(u.Update.Content, &many)
			for _, b := range many {
				final += b.Content.Text
			}
		}
	}
	return
}

// TestV2ToolContentChunk: a running bash call's output goes to a v2
// client as it is printed, as tool_call_content_chunk updates (each
// frame valid against the v2 schema) between the call's creating
// tool_call_update and its completion, whose content is the whole output.
func TestV2ToolContentChunk(t *testing.T) {
	srv := bashServer(t)
	c := startV2(t, srv)
	sid := c.newSessionV2(srv.Directory)
	c.promptV2(sid, slowBash)
	c.settled(srv, sid, func() int { return 1 })
	kinds, chunks, final := c.toolFrames(sid)
	if len(chunks) < 2 {
		t.Fatalf("%d content chunks, want the output in several (updates %v)", len(chunks), kinds)
	}
	if kinds[0] != "tool_call_update" || kinds[len(kinds)-1] != "tool_call_update" {
		t.Errorf("tool updates %v: want the creating update first and the completion last", kinds)
	}
	got := strings.Join(chunks, "")
	if !strings.HasPrefix("line1\nline2\nline3\nline4\n", got) || !strings.HasPrefix(got, "line1\n") {
		t.Errorf("streamed output %q", got)
	}
	if !strings.Contains(final, "line4") {
		t.Errorf("completed content %q, want the whole output", final)
	}
}

// TestV1NoToolContentChunk: v1 has no streamed tool content: the same
// call is a tool_call and its completion, as before.
func TestV1NoToolContentChunk(t *testing.T) {
	srv := bashServer(t)
	c := start(t, srv)
	c.handshake()
	sid := c.newSession(srv.Directory)
	_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": textPrompt(slowBash)})
	if r := decodeReply(t, c.wait(ch, "bash prompt")); r.StopReason != "end_turn" {
		t.Fatalf("reply %+v", r)
	}
	kinds, chunks, final := c.toolFrames(sid)
	if len(chunks) != 0 || len(kinds) != 2 || kinds[0] != "tool_call" {
		t.Errorf("v1 tool updates %v", kinds)
	}
	if !strings.Contains(final, "line1\nline2\nline3\nline4") {
		t.Errorf("completed content %q", final)
	}
}
