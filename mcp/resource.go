package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource is one resource of a connected server, OpenCode's McpResource.
type Resource struct {
	Name        string `json:"name"`
	URI         string `json:"uri"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Client      string `json:"client"`
}

// Content is one piece of a resource read: Text, or Blob (base64).
type Content struct {
	URI      string
	MimeType string
	Text     string
	Blob     string
}

// Resources lists every connected server's resources, keyed as OpenCode
// keys them ("<server>:<resource>", both sanitized). A server that fails to
// list contributes nothing.
func (s *Servers) Resources(ctx context.Context) map[string]Resource {
	out := map[string]Resource{}
	for _, name := range s.connected() {
		sess := s.session(name)
		if sess == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, defaultTimeout)
		for r, err := range sess.Resources(cctx, nil) {
			if err != nil {
				break
			}
			out[sanitize(name)+":"+sanitize(r.Name)] = Resource{Name: r.Name, URI: r.URI, Description: r.Description,
				MimeType: r.MIMEType, Client: name}
		}
		cancel()
	}
	return out
}

// ReadResource reads one resource of server client.
func (s *Servers) ReadResource(ctx context.Context, client, uri string) ([]Content, error) {
	sess := s.session(client)
	if sess == nil {
		return nil, fmt.Errorf("MCP server %s is not connected", client)
	}
	cctx, cancel := context.WithTimeout(ctx, defaultTimeout)
	defer cancel()
	res, err := sess.ReadResource(cctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, err
	}
	out := make([]Content, 0, len(res.Contents))
	for _, c := range res.Contents {
		if c == nil {
			continue
		}
		item := Content{URI: c.URI, MimeType: c.MIMEType, Text: c.Text}
		if len(c.Blob) > 0 {
			item.Blob = base64.StdEncoding.EncodeToString(c.Blob)
		}
		out = append(out, item)
	}
	return out, nil
}

func (s *Servers) session(name string) *sdk.ClientSession {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[name]
}

func (s *Servers) connected() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.sessions))
	for n := range s.sessions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
