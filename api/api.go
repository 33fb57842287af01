// Package api embeds the OpenAPI document, the contract of every route the
// server serves; it is served at /doc and checked against responses in tests.
package api

import _ "embed"

// OpenAPI is api/openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
