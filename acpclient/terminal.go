package acpclient

// The terminal/* methods a client serves when it advertises
// clientCapabilities.terminal: the agent runs commands through the client.
const (
	MethodTerminalCreate  = "terminal/create"
	MethodTerminalOutput  = "terminal/output"
	MethodTerminalWait    = "terminal/wait_for_exit"
	MethodTerminalKill    = "terminal/kill"
	MethodTerminalRelease = "terminal/release"
)

// CreateTerminalRequest is terminal/create's params.
type CreateTerminalRequest struct {
	SessionID       string        `json:"sessionId"`
	Command         string        `json:"command"`
	Args            []string      `json:"args,omitempty"`
	Env             []EnvVariable `json:"env,omitempty"`
	Cwd             *string       `json:"cwd,omitempty"`
	OutputByteLimit *int64        `json:"outputByteLimit,omitempty"`
}

// EnvVariable is a name and value (a terminal's, an MCP server's).
type EnvVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CreateTerminalResponse is terminal/create's result.
type CreateTerminalResponse struct {
	TerminalID string `json:"terminalId"`
}

// TerminalRequest is the params of terminal/output, wait_for_exit, kill
// and release.
type TerminalRequest struct {
	SessionID  string `json:"sessionId"`
	TerminalID string `json:"terminalId"`
}

// TerminalOutputResponse is terminal/output's result.
type TerminalOutputResponse struct {
	Output     string              `json:"output"`
	Truncated  bool                `json:"truncated"`
	ExitStatus *TerminalExitStatus `json:"exitStatus,omitempty"`
}

// TerminalExitStatus is how a terminal's command ended (also
// terminal/wait_for_exit's result): its exit code, or the signal that
// ended it.
type TerminalExitStatus struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}
