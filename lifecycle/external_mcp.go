package lifecycle

import (
	"cmp"
	"log/slog"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/opencode-server/opencode-server/acpclient"
)

// MCPServer is an enabled MCP server of opencode.json's mcp block, which
// external agents get in session/new and session/load: a local one
// (Command, Env) or a remote one (URL, Headers).
type MCPServer struct {
	Name    string
	Command []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// extMCPServers are our MCP servers in ACP's mcpServers shape, for an
// agent with caps: a local server as stdio (its command looked up on
// PATH, as ACP wants an absolute path); a remote one as http when the
// agent takes http, else as sse when it takes sse (OpenCode's remote
// servers speak either), else left out (logged). Sorted by name.
func extMCPServers(servers []MCPServer, caps acpclient.MCPCapabilities, log *slog.Logger) []any {
	servers = slices.SortedFunc(slices.Values(servers), func(a, b MCPServer) int { return cmp.Compare(a.Name, b.Name) })
	out := []any{}
	for _, s := range servers {
		switch {
		case len(s.Command) > 0:
			cmd := s.Command[0]
			if !filepath.IsAbs(cmd) {
				if p, err := exec.LookPath(cmd); err == nil {
					if abs, err := filepath.Abs(p); err == nil {
						cmd = abs
					}
				}
			}
			env := []acpclient.EnvVariable{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, acpclient.EnvVariable{Name: k, Value: s.Env[k]})
			}
			out = append(out, acpclient.MCPServerStdio{Name: s.Name, Command: cmd, Args: append([]string{}, s.Command[1:]...), Env: env})
		case s.URL != "":
			typ := ""
			switch {
			case caps.HTTP:
				typ = "http"
			case caps.SSE:
				typ = "sse"
			default:
				log.Warn("remote MCP server not passed to the external agent: it takes neither http nor sse", "mcp", s.Name)
				continue
			}
			headers := []acpclient.HTTPHeader{}
			for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
				headers = append(headers, acpclient.HTTPHeader{Name: k, Value: s.Headers[k]})
			}
			out = append(out, acpclient.MCPServerRemote{Type: typ, Name: s.Name, URL: s.URL, Headers: headers})
		}
	}
	return out
}
