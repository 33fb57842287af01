package acpclient

// The MCP servers a client passes in session/new and session/load
// (mcpServers): stdio, which every agent takes, and http or sse when the
// agent's mcpCapabilities say so.

// MCPCapabilities are the MCP transports beyond stdio an agent takes.
type MCPCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// MCPServerStdio is a server the agent starts: a command speaking MCP on
// its stdio.
type MCPServerStdio struct {
	Name    string        `json:"name"`
	Command string        `json:"command"`
	Args    []string      `json:"args"`
	Env     []EnvVariable `json:"env"`
}

// MCPServerRemote is a server the agent connects to: Type "http"
// (streamable HTTP) or "sse".
type MCPServerRemote struct {
	Type    string       `json:"type"`
	Name    string       `json:"name"`
	URL     string       `json:"url"`
	Headers []HTTPHeader `json:"headers"`
}

// HTTPHeader is a header of a remote MCP server's requests.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
