package wire

// TestRecordNativeReference records what the real `opencode serve`
// 1.18.33 sends to a model it speaks natively (nativeAPIs: Anthropic's
// Messages API through @ai-sdk/anthropic, OpenAI's Responses API through
// @ai-sdk/openai, Gemini through @ai-sdk/google) for a few prompts:
//
//	go test ./wire -run TestRecordNativeReference -prompt.record -v -timeout 20m
//
// It is TestRecordPromptReference with the case's API set: the global
// config is the API's (nativeAPI.Config), the model is the API's stub
// (internal/anthropicstub, responsesstub, geministub) behind the same
// recording proxy, which keeps every model request with its headers, and
// the files go to the API's RefDir (testdata/reference/prompt-<api>)
// normalised as the prompt references are (paths, the date,
// prt_/msg_/ses_/call_/toolu_ IDs and ULIDs). -prompt.only picks cases
// (by name, or <api>/<name>).

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

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

// nativeCases are the recorded cases of one API; every one also sends
// the session's title request to the (same) small model.
func nativeCases(api *nativeAPI) []promptCase {
	const imgText = "[Image 1] what is in this image?"
	long := make([]string, 5)
	for i := range long {
		long[i] = body([]string{"first", "second", "third", "fourth", "fifth"}[i] + " prompt of five")
	}
	cases := []promptCase{
		{
			Name:      "text",
			Setup:     simpleProject,
			API:       api,
			Prompts:   []string{body("hello there")},
			NeedTitle: true,
		},
		{
			// A read call, then the answer after its result: two model
			// calls.
			Name:      "tool-two-steps",
			Setup:     simpleProject,
			API:       api,
			Script:    stubmodel.Directives,
			Prompts:   []string{body(`call:read {"filePath":"main.go"} then: done`)},
			NeedTitle: true,
		},
		{
			// The first reply is reasoning (a signed thinking block, an
			// encrypted reasoning item, a thought) and a read call; the
			// second call sends the reasoning back as the API needs it
			// before the call.
			Name:      "thinking-tool",
			Setup:     simpleProject,
			API:       api,
			Script:    stubmodel.Directives,
			Prompts:   []string{body("think: I should read main.go first\n" + `call:read {"filePath":"main.go"} then: done`)},
			NeedTitle: true,
		},
		{
			// A pasted PNG (a data: URL file part) as in the prompt case
			// "image".
			Name:      "image",
			Setup:     inputProject,
			API:       api,
			Prompts:   []string{body(imgText, pasted(imgText, "[Image 1]", "image/png", "clipboard", "clipboard", tinyPNG()))},
			NeedTitle: true,
		},
		{
			// The text case with the catalog references' models.dev
			// catalog (catalogAPIJSON), which knows the anthropic, openai
			// and google providers: OpenCode's custom loader for each runs.
			Name:      "text-catalog",
			Setup:     simpleProject,
			API:       api,
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
			API:       api,
			ModelsDev: catalogAPIJSON,
			Config:    withoutAPIKey,
			Env:       []string{api.EnvKey + "=stub-key"},
			Prompts:   []string{body("hello there")},
			NeedTitle: true,
		},
		{
			// A read call with the "high" thinking variant picked (the
			// prompt's variant, as the TUI's variant cycle sends it): the
			// variant's options over the model's defaults on both calls.
			Name:      "variant",
			Setup:     simpleProject,
			API:       api,
			Script:    stubmodel.Directives,
			Prompts:   []string{`{"variant":"high",` + body(`call:read {"filePath":"main.go"} then: done`)[1:]},
			NeedTitle: true,
		},
		{
			// Five prompts on one session: the cache marks move to the
			// last two messages on every call.
			Name:      "long",
			Setup:     simpleProject,
			API:       api,
			Prompts:   long,
			NeedTitle: true,
		},
	}
	if api.EnvKey == "" {
		// A provider models.dev does not list: no catalog or env key cases.
		cases = slices.DeleteFunc(cases, func(pc promptCase) bool { return strings.HasPrefix(pc.Name, "text-") })
	}
	return cases
}

// withoutAPIKey takes options.apiKey out of the (one) provider's config.
func withoutAPIKey(cfg []byte) []byte {
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		panic(err)
	}
	for _, p := range c["provider"].(map[string]any) {
		delete(p.(map[string]any)["options"].(map[string]any), "apiKey")
	}
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(out, '\n')
}

func TestRecordNativeReference(t *testing.T) {
	if !*promptRecord {
		t.Skip("records testdata/reference/prompt-<api> from the real server; run with -prompt.record")
	}
	bin := opencodeBinary(t)
	for _, api := range nativeAPIs {
		if err := os.MkdirAll(api.RefDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, pc := range nativeCases(api) {
			only := "," + *promptOnly + ","
			if *promptOnly != "" && !strings.Contains(only, ","+pc.Name+",") && !strings.Contains(only, ","+api.Name+"/"+pc.Name+",") {
				continue
			}
			t.Run(api.Name+"/"+pc.Name, func(t *testing.T) { recordPromptCase(t, bin, pc, api.RefDir) })
		}
	}
}

// checkAcceptedStreams fails the recording unless the real server took
// every stub reply as a whole model answer: each assistant message of the
// session (GET /session/{id}/message) has no error and a finish of
// "tool-calls" or "stop", the last one "stop", and every reasoning part
// kept what the API needs to take it back (api.Signature, e.g.
// metadata.anthropic.signature).
func checkAcceptedStreams(t *testing.T, api *nativeAPI, raw []byte) {
	t.Helper()
	var msgs []struct {
		Info struct {
			ID     string          `json:"id"`
			Role   string          `json:"role"`
			Finish string          `json:"finish"`
			Error  json.RawMessage `json:"error"`
		} `json:"info"`
		Parts []struct {
			Type     string                    `json:"type"`
			Metadata map[string]map[string]any `json:"metadata"`
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
			if p.Type == "reasoning" && api.Signature != nil {
				if s, _ := p.Metadata[api.Signature[0]][api.Signature[1]].(string); s == "" {
					t.Errorf("assistant message %s: a reasoning part without metadata.%s", m.Info.ID, strings.Join(api.Signature, "."))
				}
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
