package lifecycle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/mcpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestExternalAgentMCP: the agent gets our enabled MCP servers from
// opencode.json in session/new, and again in the session/load of its next
// process: a local one as stdio (command, args, env as name/value pairs),
// a remote one as http or sse as the agent's mcpCapabilities allow (left
// out when it takes neither), a disabled one not at all.
func TestExternalAgentMCP(t *testing.T) {
	stdio := map[string]any{"name": "local", "command": "<the test binary>", "args": []any{"-test.run=^$"},
		"env": []any{map[string]any{"name": "B", "value": "2"}, map[string]any{"name": mcpstub.Env, "value": "1"}}}
	remote := func(typ string) map[string]any {
		return map[string]any{"type": typ, "name": "remote", "url": "http://127.0.0.1:1/mcp",
			"headers": []any{map[string]any{"name": "Authorization", "value": "Bearer k"}, map[string]any{"name": "X-A", "value": "b"}}}
	}
	for _, tc := range []struct {
		name, caps string
		want       []any
	}{
		{"stdio only", `{"loadSession":true}`, []any{stdio}},
		{"http", `{"loadSession":true,"mcpCapabilities":{"http":true,"sse":true}}`, []any{stdio, remote("http")}},
		{"sse", `{"loadSession":true,"mcpCapabilities":{"sse":true}}`, []any{stdio, remote("sse")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			checkStubsGone(t, dir)
			cfg := externalConfig(tc.caps)
			off := false
			cfg.MCP = map[string]config.MCPConfig{
				"local": {Type: "local", Command: []string{os.Args[0], "-test.run=^$"},
					Environment: map[string]string{mcpstub.Env: "1", "B": "2"}},
				"remote": {Type: "remote", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"X-A": "b", "Authorization": "Bearer k"}},
				"off":    {Type: "local", Command: []string{"opencode-server-no-such-mcp"}, Enabled: &off},
			}
			srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: dir})
			c := newClient(t, srv)
			sid := c.newSession()
			if got := c.externalPrompt(sid, "hi"); got.text() != "echo: hi" {
				t.Fatalf("answer %q", got.text())
			}
			// The next process loads the session, with the same servers.
			pid := srv.Manager.ExternalPID(sid)
			syscall.Kill(pid, syscall.SIGKILL)
			checkFor(t, 10*time.Second, "the killed agent gone", func() bool { return srv.Manager.ExternalPID(sid) == 0 })
			if got := c.externalPrompt(sid, "again"); got.text() != "echo: again" {
				t.Fatalf("answer %q", got.text())
			}
			recs := stubRecords[acpstub.MCPRecord](t, filepath.Join(dir, acpstub.MCPFile))
			if len(recs) != 2 || recs[0].Method != "session/new" || recs[1].Method != "session/load" {
				t.Fatalf("the stub's session/new and session/load: %+v", recs)
			}
			for _, r := range recs {
				var got []any
				b, _ := json.Marshal(r.MCPServers)
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
				// The command: the binary's absolute path.
				if len(got) > 0 {
					if s, ok := got[0].(map[string]any); ok {
						cmd, _ := s["command"].(string)
						if a, b := stat(t, cmd), stat(t, os.Args[0]); !filepath.IsAbs(cmd) || a == nil || b == nil || !os.SameFile(a, b) {
							t.Errorf("stdio command %q, want the test binary's absolute path", cmd)
						}
						s["command"] = "<the test binary>"
					}
				}
				if !reflect.DeepEqual(got, tc.want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(tc.want)
					t.Errorf("%s mcpServers =\n%s\nwant\n%s", r.Method, g, w)
				}
			}
		})
	}
}

func stat(t *testing.T, p string) os.FileInfo {
	fi, err := os.Stat(p)
	if err != nil {
		t.Log(err)
		return nil
	}
	return fi
}
