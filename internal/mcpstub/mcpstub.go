// Package mcpstub is a tiny MCP server on stdio for tests: a test binary
// calls MaybeServe first thing in TestMain, and a test starts that binary
// again with OPENCODE_SERVER_MCP_STUB=1 as a local MCP server. Its one tool,
// shout, answers its text in capitals.
package mcpstub

import (
	"context"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Env is the variable that makes a test binary an MCP server.
const Env = "OPENCODE_SERVER_MCP_STUB"

type shoutIn struct {
	Text string `json:"text" jsonschema:"the text to shout"`
}

// MaybeServe serves MCP on stdio and exits, if Env is set.
func MaybeServe() {
	if os.Getenv(Env) != "1" {
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stub", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "shout", Description: "Answers the text in capitals."},
		func(ctx context.Context, req *mcp.CallToolRequest, in shoutIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}
