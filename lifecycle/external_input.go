package lifecycle

import (
	"encoding/base64"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/opencode-server/opencode-server/acpclient"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/tool"
)

// promptBlocks is a user message as an external agent's prompt: its texts
// (not the synthetic ones: what we add about the files for our own
// model), each @file or directory as a resource link, or embedded as a
// resource when the agent takes embedded context and the file is a text
// file in the session's directory, and images (or other attached bytes)
// where the agent's prompt capabilities take them. It reads files: off the
// runner loop.
func promptBlocks(parts []opencode.Part, caps acpclient.PromptCapabilities, dir string) []acpclient.ContentBlock {
	var out []acpclient.ContentBlock
	for _, p := range parts {
		switch {
		case p.Type == opencode.PartText && p.Text != "" && !p.Synthetic:
			out = append(out, acpclient.ContentBlock{Type: "text", Text: p.Text})
		case p.Type == opencode.PartFile && strings.HasPrefix(p.URL, "data:"):
			out = append(out, dataBlock(p, caps))
		case p.Type == opencode.PartFile && strings.HasPrefix(p.URL, "file:") && !p.Synthetic:
			out = append(out, fileBlock(p, caps, dir))
		}
	}
	return out
}

// fileBlock is an @file or directory: a resource link, or the text file
// embedded.
func fileBlock(p opencode.Part, caps acpclient.PromptCapabilities, dir string) acpclient.ContentBlock {
	link := acpclient.ContentBlock{Type: "resource_link", URI: p.URL, Name: p.Filename, MimeType: p.Mime}
	u, err := url.Parse(p.URL)
	if err != nil {
		return link
	}
	if link.Name == "" {
		link.Name = filepath.Base(u.Path)
	}
	if !caps.EmbeddedContext || p.Mime == "application/x-directory" || !strings.HasPrefix(p.Mime, "text/") {
		return link
	}
	// Confined as the agent's own reads are: a file outside the session's
	// directory stays a link.
	text, err := tool.ReadTextFile(dir, u.Path, 0, 0)
	if err != nil {
		return link
	}
	return acpclient.ContentBlock{Type: "resource", Resource: &acpclient.EmbeddedResource{URI: p.URL, MimeType: p.Mime, Text: text}}
}

// dataBlock is attached bytes (a pasted image, an @image read for the
// prompt): an image, or an embedded blob, when the agent takes it; else a
// text saying it was left out.
func dataBlock(p opencode.Part, caps acpclient.PromptCapabilities) acpclient.ContentBlock {
	head, data, _ := strings.Cut(strings.TrimPrefix(p.URL, "data:"), ",")
	mime, _, _ := strings.Cut(head, ";")
	if mime == "" {
		mime = p.Mime
	}
	if !strings.Contains(head, ";base64") {
		s, err := url.PathUnescape(data)
		if err != nil {
			s = data
		}
		data = base64.StdEncoding.EncodeToString([]byte(s))
	}
	switch {
	case strings.HasPrefix(mime, "image/") && caps.Image:
		return acpclient.ContentBlock{Type: "image", Data: data, MimeType: mime}
	case !strings.HasPrefix(mime, "image/") && caps.EmbeddedContext:
		name := p.Filename
		if name == "" {
			name = "attachment"
		}
		return acpclient.ContentBlock{Type: "resource", Resource: &acpclient.EmbeddedResource{URI: "attachment:" + name, MimeType: mime, Blob: data}}
	}
	return acpclient.ContentBlock{Type: "text", Text: "[" + p.Filename + " (" + mime + ") left out: the agent does not take it]"}
}
