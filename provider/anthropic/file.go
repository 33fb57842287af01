package anthropic

import (
	"encoding/base64"
	"net/url"
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

func isHTTPURL(s string) bool {
	if len(s) < 8 {
		return false
	}
	l := strings.ToLower(s[:8])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// dataContent is a file's Data as base64 (a data: URL's payload; anything
// else is taken as base64 already, as the AI SDK takes a string).
func dataContent(data string) string {
	if !strings.HasPrefix(data, "data:") {
		return data
	}
	header, payload, ok := strings.Cut(data, ",")
	if !ok {
		return ""
	}
	if strings.HasSuffix(header, ";base64") {
		return payload
	}
	raw, err := url.PathUnescape(payload)
	if err != nil {
		raw = payload
	}
	return base64.StdEncoding.EncodeToString([]byte(raw))
}

// fileBlock is a user file part as the AI SDK sends it: images as image
// blocks, PDFs and plain text as documents (URLs as url sources).
func fileBlock(p *provider.Part) (b []byte, pdf, ok bool) {
	mt := p.MediaType
	switch {
	case strings.HasPrefix(mt, "image/"):
		b = append(b, `{"type":"image","source":`...)
		if isHTTPURL(p.Data) {
			b = append(b, `{"type":"url","url":`...)
			b = jsonw.AppendString(b, p.Data)
		} else {
			if mt == "image/*" {
				mt = "image/jpeg"
			}
			b = append(b, `{"type":"base64","media_type":`...)
			b = jsonw.AppendString(b, mt)
			b = append(b, `,"data":`...)
			b = jsonw.AppendString(b, dataContent(p.Data))
		}
		return append(b, `}}`...), false, true
	case mt == "application/pdf", mt == "text/plain":
		b = append(b, `{"type":"document","source":`...)
		switch {
		case isHTTPURL(p.Data):
			b = append(b, `{"type":"url","url":`...)
			b = jsonw.AppendString(b, p.Data)
		case mt == "application/pdf":
			b = append(b, `{"type":"base64","media_type":"application/pdf","data":`...)
			b = jsonw.AppendString(b, dataContent(p.Data))
		default:
			text, _ := base64.StdEncoding.DecodeString(dataContent(p.Data))
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
