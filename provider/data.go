package provider

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// IsHTTPURL reports whether a file part's Data is an http(s) URL (the
// providers send it as a URL, not as content).
func IsHTTPURL(s string) bool {
	if len(s) < 8 {
		return false
	}
	l := strings.ToLower(s[:8])
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://")
}

// FileData is a file part's Data as the AI SDK takes it: a data: URL's
// own media type ("" when it names none) and its content as base64 (a
// URL-escaped payload encoded); anything else is base64 already.
func FileData(data string) (mediaType, b64 string) {
	if !strings.HasPrefix(data, "data:") {
		return "", data
	}
	header, payload, ok := strings.Cut(data, ",")
	if !ok {
		return "", ""
	}
	mediaType, _, _ = strings.Cut(strings.TrimPrefix(header, "data:"), ";")
	if strings.HasSuffix(header, ";base64") {
		return mediaType, payload
	}
	raw, err := url.PathUnescape(payload)
	if err != nil {
		raw = payload
	}
	return mediaType, base64.StdEncoding.EncodeToString([]byte(raw))
}

// Base64 is a file part's Data as base64 content (FileData's).
func Base64(data string) string {
	_, b64 := FileData(data)
	return b64
}
