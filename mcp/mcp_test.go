package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/mcpstub"
	"github.com/opencode-server/opencode-server/tool"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	mcpstub.MaybeServe()
	// A test that leaves a goroutine behind fails the package's run.
	goleak.VerifyTestMain(m)
}

// TestServers: a local server's tools come in as "<server>_<tool>" and
// answer calls; a server that cannot start, and a disabled one, are
// reported and contribute nothing.
func TestServers(t *testing.T) {
	off := false
	cfg := map[string]config.MCPConfig{
		"my stub": {Type: "local", Command: []string{os.Args[0], "-test.run=^$"}, Environment: map[string]string{mcpstub.Env: "1"}},
		"broken":  {Type: "local", Command: []string{"/nonexistent/mcp-server"}},
		"off":     {Type: "local", Command: []string{"x"}, Enabled: &off},
		"remote":  {Type: "remote", URL: "http://127.0.0.1:1/mcp", Timeout: 1000},
	}
	s := Start(context.Background(), cfg, t.TempDir(), slog.Default())
	defer s.Close()
	st := s.Status()
	if st["my stub"].Status != "connected" || st["broken"].Status != "failed" || st["broken"].Error == "" ||
		st["off"].Status != "disabled" || st["remote"].Status != "failed" {
		t.Fatalf("status %+v", st)
	}
	tools := s.Tools()
	if len(tools) != 1 || tools[0].Name() != "my_stub_shout" || tools[0].Description() != "Answers the text in capitals." {
		t.Fatalf("tools %v", tools)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(tools[0].Parameters(), &schema); err != nil || schema.Properties["text"] == nil {
		t.Errorf("schema %s", tools[0].Parameters())
	}
	perm, _, _ := tools[0].Permission(tool.Call{})
	if perm != "my_stub_shout" {
		t.Errorf("permission %q", perm)
	}
	res, err := tools[0].Run(context.Background(), tool.Call{Input: json.RawMessage(`{"text":"hello"}`)})
	if err != nil || res.Output != "HELLO" {
		t.Errorf("call: %+v %v", res, err)
	}
	if _, err := tools[0].Run(context.Background(), tool.Call{Input: json.RawMessage(`{"text":1}`)}); err == nil ||
		!strings.Contains(err.Error(), "text") {
		t.Errorf("a call with bad input: %v", err)
	}
}
