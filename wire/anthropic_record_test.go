package wire

// TestRecordAnthropicReference records what the real `opencode serve`
// 1.18.33 sends to an Anthropic model (@ai-sdk/anthropic, the Messages
// API) for a few prompts:
//
//	go test ./wire -run TestRecordAnthropicReference -prompt.record -v -timeout 10m
//
// It is TestRecordPromptReference with the case's Anthropic hook set: the
// global config is anthropicConfig (provider "anthropic", model and small
// model anthropic/claude-sonnet-4-5), the model is internal/anthropicstub
// behind the same recording proxy, which keeps every /v1/messages request
// with its headers, and the files go to testdata/reference/prompt-anthropic
// normalised as the prompt references are (paths, the date, prt_/msg_/
// ses_/call_/toolu_ IDs and ULIDs). -prompt.only picks cases here too.

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/anthropicstub"
)

const anthropicRefDir = "../testdata/reference/prompt-anthropic"

// anthropicConfig is the global opencode.json of the Anthropic cases;
// MODEL_BASE_URL becomes the stub's (or the recording proxy's) URL
// ending in /v1.
const anthropicConfig = `{
  "autoupdate": false,
  "share": "disabled",
  "model": "anthropic/claude-sonnet-4-5",
  "small_model": "anthropic/claude-sonnet-4-5",
  "provider": {
    "anthropic": {
      "npm": "@ai-sdk/anthropic",
      "options": { "baseURL": "MODEL_BASE_URL", "apiKey": "stub-key" },
      "models": {
        "claude-sonnet-4-5": {
          "name": "Claude Sonnet 4.5",
          "tool_call": true,
          "reasoning": true,
          "attachment": true,
          "modalities": { "input": ["text", "image", "pdf"], "output": ["text"] },
          "limit": { "context": 200000, "output": 64000 },
          "cost": { "input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75 }
        }
      }
    }
  }
}
`

// anthropicCases are the recorded Anthropic cases; every one also sends
// the session's title request to the (same) small model.
func anthropicCases() []promptCase {
	const imgText = "[Image 1] what is in this image?"
	long := make([]string, 5)
	for i := range long {
		long[i] = body([]string{"first", "second", "third", "fourth", "fifth"}[i] + " prompt of five")
	}
	return []promptCase{
		{
			Name:      "text",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Echo,
			Prompts:   []string{body("hello there")},
			NeedTitle: true,
		},
		{
			// A read call, then the answer after its result: two model
			// calls.
			Name:      "tool-two-steps",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Directives,
			Prompts:   []string{body(`call:read {"filePath":"main.go"} then: done`)},
			NeedTitle: true,
		},
		{
			// The first reply is a signed thinking block and a read call;
			// the second call sends the thinking block back with its
			// signature before the tool_use.
			Name:      "thinking-tool",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Directives,
			Prompts:   []string{body("think: I should read main.go first\n" + `call:read {"filePath":"main.go"} then: done`)},
			NeedTitle: true,
		},
		{
			// A pasted PNG (a data: URL file part) as in the prompt case
			// "image".
			Name:      "image",
			Setup:     inputProject,
			Anthropic: anthropicstub.Echo,
			Prompts:   []string{body(imgText, pasted(imgText, "[Image 1]", "image/png", "clipboard", "clipboard", tinyPNG()))},
			NeedTitle: true,
		},
		{
			// The text case with the catalog references' models.dev
			// catalog (catalogAPIJSON), which knows the anthropic
			// provider: OpenCode's custom loader for it runs.
			Name:      "text-catalog",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Echo,
			ModelsDev: catalogAPIJSON,
			Prompts:   []string{body("hello there")},
			NeedTitle: true,
		},
		{
			// text-catalog with the key in $ANTHROPIC_API_KEY instead of
			// options.apiKey: the provider is connected before the
			// config's providers are merged.
			Name:      "text-env-key",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Echo,
			ModelsDev: catalogAPIJSON,
			Config:    withoutAPIKey,
			Env:       []string{"ANTHROPIC_API_KEY=stub-key"},
			Prompts:   []string{body("hello there")},
			NeedTitle: true,
		},
		{
			// Five prompts on one session: the cache marks move to the
			// last two messages on every call.
			Name:      "long",
			Setup:     simpleProject,
			Anthropic: anthropicstub.Echo,
			Prompts:   long,
			NeedTitle: true,
		},
	}
}

// withoutAPIKey takes options.apiKey out of the anthropic provider's
// config.
func withoutAPIKey(cfg []byte) []byte {
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		panic(err)
	}
	delete(c["provider"].(map[string]any)["anthropic"].(map[string]any)["options"].(map[string]any), "apiKey")
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(out, '\n')
}

func TestRecordAnthropicReference(t *testing.T) {
	if !*promptRecord {
		t.Skip("records testdata/reference/prompt-anthropic from the real server; run with -prompt.record")
	}
	bin := opencodeBinary(t)
	if err := os.MkdirAll(anthropicRefDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pc := range anthropicCases() {
		if *promptOnly != "" && !strings.Contains(","+*promptOnly+",", ","+pc.Name+",") {
			continue
		}
		t.Run(pc.Name, func(t *testing.T) { recordPromptCase(t, bin, pc, anthropicRefDir) })
	}
}

// checkAcceptedStreams fails the recording unless the real server took
// every stub reply as a whole model answer: each assistant message of the
// session (GET /session/{id}/message) has no error and a finish of
// "tool-calls" or "stop", the last one "stop", and every reasoning part
// kept its signature (metadata.anthropic.signature), which it needs to
// send the thinking block back.
func checkAcceptedStreams(t *testing.T, raw []byte) {
	t.Helper()
	var msgs []struct {
		Info struct {
			ID     string          `json:"id"`
			Role   string          `json:"role"`
			Finish string          `json:"finish"`
			Error  json.RawMessage `json:"error"`
		} `json:"info"`
		Parts []struct {
			Type     string `json:"type"`
			Metadata struct {
				Anthropic struct {
					Signature string `json:"signature"`
				} `json:"anthropic"`
			} `json:"metadata"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatalf("GET /session/{id}/message: %v", err)
	}
	last, n := "", 0
	for _, m := range msgs {
		if m.Info.Role != "assistant" {
			continue
		}
		n++
		if len(m.Info.Error) > 0 && string(m.Info.Error) != "null" {
			t.Errorf("assistant message %s failed: %s", m.Info.ID, m.Info.Error)
		}
		if m.Info.Finish != "stop" && m.Info.Finish != "tool-calls" {
			t.Errorf("assistant message %s finish %q", m.Info.ID, m.Info.Finish)
		}
		for _, p := range m.Parts {
			if p.Type == "reasoning" && p.Metadata.Anthropic.Signature == "" {
				t.Errorf("assistant message %s: a reasoning part without its signature", m.Info.ID)
			}
		}
		last = m.Info.Finish
	}
	if last != "stop" {
		t.Errorf("the last assistant message finished %q, not stop", last)
	}
	t.Logf("%d assistant messages, the stub's streams taken whole", n)
}

// checkTitled fails the recording unless the session (GET /session/{id})
// took the title the stub answered.
func checkTitled(t *testing.T, raw []byte) {
	t.Helper()
	var ses struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal(raw, &ses); err != nil {
		t.Fatalf("GET /session/{id}: %v", err)
	}
	if ses.Title == "" || strings.HasPrefix(ses.Title, "New session - ") {
		t.Errorf("the session kept its default title %q: the title stream was not taken", ses.Title)
	} else {
		t.Logf("session title %q", ses.Title)
	}
}
