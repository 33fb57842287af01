package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/anthropicstub"
	"github.com/opencode-server/opencode-server/internal/geministub"
	"github.com/opencode-server/opencode-server/internal/responsesstub"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// nativeAPI is one of the model APIs OpenCode speaks natively (not chat
// completions), as the native cases record and compare it: the provider's
// config, the stub that answers in that API's streaming format, and where
// a request body keeps its system prompt and its tools.
type nativeAPI struct {
	Name   string // the cases' sub-test prefix and reference directory suffix
	RefDir string
	// Config is the global opencode.json; MODEL_BASE_URL becomes the
	// recording proxy's URL with BasePath.
	Config   string
	BasePath string
	// Provider and EnvKey are the provider's ID and the environment
	// variable a connected key comes from (the text-env-key case).
	Provider, EnvKey string
	// Start starts the stub answering with script (the chat-completions
	// script adapted) and returns its URL.
	Start func(t *testing.T, script stubmodel.Script) string
	// IsModelPath tells a model request's path.
	IsModelPath func(path string) bool
	// IsTitle is the stub's title test on a request body.
	IsTitle func(body []byte) bool
	// System returns the body's system prompt texts and a func that
	// replaces each of them.
	System func(body map[string]any) (texts []string, replace func(string))
	// Tools returns the body's tool definitions (maps that share the
	// body's) and the key of a tool's parameter schema.
	Tools     func(body map[string]any) []map[string]any
	SchemaKey string
	// Signature is where a reasoning part of OpenCode's message keeps what
	// the API needs to take it back (metadata.<a>.<b>), or nil.
	Signature []string
}

var anthropicAPI = &nativeAPI{
	Name:     "anthropic",
	RefDir:   "../testdata/reference/prompt-anthropic",
	Config:   anthropicConfig,
	BasePath: "/v1",
	Provider: "anthropic", EnvKey: "ANTHROPIC_API_KEY",
	Start: func(t *testing.T, script stubmodel.Script) string {
		s := anthropicstub.Script(anthropicstub.Echo)
		if script != nil {
			s = anthropicstub.FromStubmodel(script)
		}
		return anthropicstub.NewServer(t, s).URL()
	},
	IsModelPath: func(p string) bool { return strings.HasSuffix(p, "/messages") },
	IsTitle: func(body []byte) bool {
		var r anthropicstub.Request
		return json.Unmarshal(body, &r) == nil && r.IsTitle()
	},
	System: func(body map[string]any) ([]string, func(string)) {
		blocks, _ := body["system"].([]any)
		return textsOf(blocks, "text")
	},
	Tools:     func(body map[string]any) []map[string]any { return mapsOf(body["tools"]) },
	SchemaKey: "input_schema",
	Signature: []string{"anthropic", "signature"},
}

var responsesAPI = &nativeAPI{
	Name:     "responses",
	RefDir:   "../testdata/reference/prompt-responses",
	Config:   responsesConfig,
	BasePath: "/v1",
	Provider: "openai", EnvKey: "OPENAI_API_KEY",
	Start: func(t *testing.T, script stubmodel.Script) string {
		s := responsesstub.Script(responsesstub.Echo)
		if script != nil {
			s = responsesstub.FromStubmodel(script)
		}
		return responsesstub.NewServer(t, s).URL()
	},
	IsModelPath: func(p string) bool { return strings.HasSuffix(p, "/responses") },
	IsTitle: func(body []byte) bool {
		var r responsesstub.Request
		return json.Unmarshal(body, &r) == nil && r.IsTitle()
	},
	System: func(body map[string]any) ([]string, func(string)) {
		// The system and developer items of input, their content a string.
		var items []any
		for _, it := range mapsOf(body["input"]) {
			if it["role"] == "system" || it["role"] == "developer" {
				items = append(items, it)
			}
		}
		return textsOf(items, "content")
	},
	Tools:     func(body map[string]any) []map[string]any { return mapsOf(body["tools"]) },
	SchemaKey: "parameters",
	Signature: []string{"openai", "reasoningEncryptedContent"},
}

var geminiAPI = &nativeAPI{
	Name:     "gemini",
	RefDir:   "../testdata/reference/prompt-gemini",
	Config:   geminiConfig,
	BasePath: "/v1beta",
	Provider: "google", EnvKey: "GOOGLE_GENERATIVE_AI_API_KEY",
	Start: func(t *testing.T, script stubmodel.Script) string {
		s := geministub.Script(geministub.Echo)
		if script != nil {
			s = geministub.FromStubmodel(script)
		}
		return geministub.NewServer(t, s).URL()
	},
	IsModelPath: func(p string) bool {
		return strings.HasSuffix(p, ":streamGenerateContent") || strings.HasSuffix(p, ":generateContent")
	},
	IsTitle: func(body []byte) bool {
		var r geministub.Request
		return json.Unmarshal(body, &r) == nil && r.IsTitle()
	},
	System: func(body map[string]any) ([]string, func(string)) {
		si, _ := body["systemInstruction"].(map[string]any)
		parts, _ := si["parts"].([]any)
		return textsOf(parts, "text")
	},
	Tools: func(body map[string]any) []map[string]any {
		var out []map[string]any
		for _, tl := range mapsOf(body["tools"]) {
			out = append(out, mapsOf(tl["functionDeclarations"])...)
		}
		return out
	},
	SchemaKey: "parameters",
}

// chatClaudeAPI is not a native API but chat completions
// (@ai-sdk/openai-compatible, as a gateway serves Claude) with a Claude
// model: OpenCode marks its prompt for caching there too (applyCaching's
// openaiCompatible cache_control), so it is compared as the native ones.
var chatClaudeAPI = &nativeAPI{
	Name:     "chat-claude",
	RefDir:   "../testdata/reference/prompt-chat-claude",
	Config:   chatClaudeConfig,
	BasePath: "/v1",
	Provider: "gateway",
	Start: func(t *testing.T, script stubmodel.Script) string {
		if script == nil {
			script = stubmodel.Echo
		}
		return stubmodel.NewServer(t, script).URL()
	},
	IsModelPath: func(p string) bool { return strings.HasSuffix(p, "/chat/completions") },
	IsTitle: func(body []byte) bool {
		var r stubmodel.Request
		return json.Unmarshal(body, &r) == nil && r.IsTitle()
	},
	System: func(body map[string]any) ([]string, func(string)) {
		var sys []any
		for _, m := range mapsOf(body["messages"]) {
			if m["role"] == "system" {
				sys = append(sys, m)
			}
		}
		return textsOf(sys, "content")
	},
	Tools: func(body map[string]any) []map[string]any {
		var out []map[string]any
		for _, tl := range mapsOf(body["tools"]) {
			if f, ok := tl["function"].(map[string]any); ok {
				out = append(out, f)
			}
		}
		return out
	},
	SchemaKey: "parameters",
}

var nativeAPIs = []*nativeAPI{anthropicAPI, responsesAPI, geminiAPI, chatClaudeAPI}

// apiOfBody tells which native API a model request body is for by its
// shape, nil for chat completions.
func apiOfBody(body []byte) *nativeAPI {
	var probe struct {
		System   json.RawMessage `json:"system"`
		Input    json.RawMessage `json:"input"`
		Contents json.RawMessage `json:"contents"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return nil
	}
	switch {
	case len(probe.System) > 0:
		return anthropicAPI
	case len(probe.Input) > 0:
		return responsesAPI
	case len(probe.Contents) > 0:
		return geminiAPI
	}
	return nil
}

// mapsOf is v's object entries when v is an array.
func mapsOf(v any) []map[string]any {
	arr, _ := v.([]any)
	var out []map[string]any
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// textsOf returns the string values under key of the objects in arr and
// a func that sets them all to one string.
func textsOf(arr []any, key string) ([]string, func(string)) {
	var texts []string
	var ms []map[string]any
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		if s, ok := m[key].(string); ok {
			texts = append(texts, s)
			ms = append(ms, m)
		}
	}
	return texts, func(s string) {
		for _, m := range ms {
			m[key] = s
		}
	}
}

// responsesConfig is the global opencode.json of the Responses cases:
// OpenAI's provider through @ai-sdk/openai (which always speaks the
// Responses API), its model a reasoning GPT-5 (so it also gets
// apply_patch instead of edit and write).
const responsesConfig = `{
  "autoupdate": false,
  "share": "disabled",
  "model": "openai/gpt-5",
  "small_model": "openai/gpt-5",
  "provider": {
    "openai": {
      "npm": "@ai-sdk/openai",
      "options": { "baseURL": "MODEL_BASE_URL", "apiKey": "stub-key" },
      "models": {
        "gpt-5": {
          "name": "GPT-5",
          "tool_call": true,
          "reasoning": true,
          "attachment": true,
          "temperature": false,
          "modalities": { "input": ["text", "image"], "output": ["text"] },
          "limit": { "context": 400000, "output": 128000 },
          "cost": { "input": 1.25, "output": 10, "cache_read": 0.125 }
        }
      }
    }
  }
}
`

// chatClaudeConfig is the global opencode.json of the chat-claude cases:
// a gateway's OpenAI-compatible endpoint serving a Claude model.
const chatClaudeConfig = `{
  "autoupdate": false,
  "share": "disabled",
  "model": "gateway/claude-sonnet-4-5",
  "small_model": "gateway/claude-sonnet-4-5",
  "provider": {
    "gateway": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Gateway",
      "options": { "baseURL": "MODEL_BASE_URL", "apiKey": "stub-key" },
      "models": {
        "claude-sonnet-4-5": {
          "name": "Claude Sonnet 4.5 (gateway)",
          "tool_call": true,
          "reasoning": true,
          "attachment": true,
          "modalities": { "input": ["text", "image", "pdf"], "output": ["text"] },
          "limit": { "context": 200000, "output": 64000 }
        }
      }
    }
  }
}
`

// geminiConfig is the global opencode.json of the Gemini cases: Google's
// provider through @ai-sdk/google.
const geminiConfig = `{
  "autoupdate": false,
  "share": "disabled",
  "model": "google/gemini-2.5-pro",
  "small_model": "google/gemini-2.5-pro",
  "provider": {
    "google": {
      "npm": "@ai-sdk/google",
      "options": { "baseURL": "MODEL_BASE_URL", "apiKey": "stub-key" },
      "models": {
        "gemini-2.5-pro": {
          "name": "Gemini 2.5 Pro",
          "tool_call": true,
          "reasoning": true,
          "attachment": true,
          "temperature": true,
          "modalities": { "input": ["text", "image", "audio", "video", "pdf"], "output": ["text"] },
          "limit": { "context": 1048576, "output": 65536 },
          "cost": { "input": 1.25, "output": 10, "cache_read": 0.31 }
        }
      }
    }
  }
}
`
