// Package mcpstub is a tiny MCP server on stdio for tests: a test binary
// calls MaybeServe first thing in TestMain, and a test starts that binary
// again with OPENCODE_SERVER_MCP_STUB=1 as a local MCP server. Its one tool,
// shout, answers its text in capitals; its resources are a text
// (stub://notes) and a PNG (stub://dot.png).
package mcpstub

import (
	"context"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Env is the variable that makes a test binary an MCP server.
const Env = "OPENCODE_SERVER_MCP_STUB"

// The stub's resources.
const (
	NotesURI  = "stub://notes"
	NotesText = "Notes from the MCP stub."
	DotURI    = "stub://dot.png"
)

// DotPNG is a 1x1 PNG.
var DotPNG = []byte{0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1,
	8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
	0x1f, 0, 5, 0, 1, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82}

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
	s.AddResource(&mcp.Resource{Name: "notes", URI: NotesURI, MIMEType: "text/plain", Description: "Notes kept by the stub"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: NotesURI, MIMEType: "text/plain", Text: NotesText}}}, nil
		})
	s.AddResource(&mcp.Resource{Name: "dot", URI: DotURI, MIMEType: "image/png"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: DotURI, MIMEType: "image/png", Blob: DotPNG}}}, nil
		})
	_ = s.Run(context.Background(), &mcp.StdioTransport{})
	os.Exit(0)
}
