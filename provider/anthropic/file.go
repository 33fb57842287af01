package anthropic

import (
	"encoding/base64"
	"strings"

	"github.com/opencode-server/opencode-server/jsonw"
	"github.com/opencode-server/opencode-server/provider"
)

// File parts: which files the AI SDK sends Anthropic, and as which blocks.

// supportedFile reports whether the AI SDK sends a user file of this type
// (it throws on any other).
func supportedFile(mediaType string) bool {
	return strings.HasPrefix(mediaType, "image/") || mediaType == "application/pdf" || mediaType == "text/plain"
}

// fileBlock is a user file part as the AI SDK sends it: images as image
// blocks, PDFs and plain text as documents (URLs as url sources).
func fileBlock(p *provider.Part) (b []byte, pdf, ok bool) {
	mt := p.MediaType
	switch {
	case strings.HasPrefix(mt, "image/"):
		b = append(b, `{"type":"image","source":`...)
		if provider.IsHTTPURL(p.Data) {
			b = append(b, `{"type":"url","url":`...)
			b = jsonw.AppendString(b, p.Data)
		} else {
			if mt == "image/*" {
				mt = "image/jpeg"
			}
			b = append(b, `{"type":"base64","media_type":`...)
			b = jsonw.AppendString(b, mt)
			b = append(b, `,"data":`...)
			b = jsonw.AppendString(b, provider.Base64(p.Data))
		}
		return append(b, `}}`...), false, true
	case mt == "application/pdf", mt == "text/plain":
		b = append(b, `{"type":"document","source":`...)
		switch {
		case provider.IsHTTPURL(p.Data):
			b = append(b, `{"type":"url","url":`...)
			b = jsonw.AppendString(b, p.Data)
		case mt == "application/pdf":
			b = append(b, `{"type":"base64","media_type":"application/pdf","data":`...)
			b = jsonw.AppendString(b, provider.Base64(p.Data))
		default:
			text, _ := base64.StdEncoding.DecodeString(provider.Base64(p.Data))
			b = append(b, `{"type":"text","media_type":"text/plain","data":`...)
			b = jsonw.AppendString(b, string(text))
		}
		b = append(b, '}')
		if p.Filename != "" {
			b = append(b, `,"title":`...)
			b = jsonw.AppendString(b, p.Filename)
		}
		return append(b, '}'), mt == "application/pdf", true
	}
	return nil, false, false
}
