// Package registry picks the client that speaks a provider's wire format
// from the provider's npm package, as OpenCode picks its AI SDK package:
// @ai-sdk/openai-compatible (and a provider with only a baseURL) speaks
// chat completions; @ai-sdk/openai speaks the Responses API;
// @ai-sdk/anthropic speaks the Messages API; @ai-sdk/google speaks the
// Gemini API; the other native formats join as they are built.
package registry

import (
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/anthropic"
	"github.com/opencode-server/opencode-server/provider/google"
	"github.com/opencode-server/opencode-server/provider/openai"
	"github.com/opencode-server/opencode-server/provider/openairesponses"
)

// Options are a provider's connection settings, from the catalog and the
// credentials.
type Options struct {
	// ProviderID is the provider's catalog ID (some APIs vary by it).
	ProviderID string
	// BaseURL is options.baseURL, else the catalog's api URL ("" : the
	// package's default).
	BaseURL string
	APIKey  string
	Headers map[string]string
}

// Supported reports whether a client speaks npm's wire format (with
// baseURL, for packages without a default endpoint).
func Supported(npm, baseURL string) bool {
	switch npm {
	case "@ai-sdk/openai-compatible", "@ai-sdk/openai", "@ai-sdk/anthropic", "@ai-sdk/google":
		return true
	case "":
		return baseURL != ""
	}
	return false
}

// DefaultBaseURL is the endpoint a package talks to when none is set.
func DefaultBaseURL(npm string) string {
	switch npm {
	case "@ai-sdk/openai":
		return "https://api.openai.com/v1"
	case "@ai-sdk/anthropic":
		return "https://api.anthropic.com/v1"
	case "@ai-sdk/google":
		return "https://generativelanguage.googleapis.com/v1beta"
	}
	return ""
}

// New returns the client for npm, or false when none speaks its format.
func New(npm string, o Options) (provider.Provider, bool) {
	if !Supported(npm, o.BaseURL) {
		return nil, false
	}
	base := o.BaseURL
	if base == "" {
		base = DefaultBaseURL(npm)
	}
	switch npm {
	case "@ai-sdk/anthropic":
		return anthropic.New(anthropic.Config{ProviderID: o.ProviderID, BaseURL: base, APIKey: o.APIKey, Headers: o.Headers}), true
	case "@ai-sdk/google":
		return google.New(google.Config{ProviderID: o.ProviderID, BaseURL: base, APIKey: o.APIKey, Headers: o.Headers}), true
	case "@ai-sdk/openai":
		// OpenCode's @ai-sdk/openai models all speak the Responses API.
		return openairesponses.New(openairesponses.Config{ProviderID: o.ProviderID, BaseURL: base, APIKey: o.APIKey, Headers: o.Headers}), true
	default:
		return openai.New(openai.Config{BaseURL: base, APIKey: o.APIKey, Headers: o.Headers}), true
	}
}
