package acp_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestPromptImage: an ACP image block reaches an OpenAI-compatible model
// that declares the image input modality as an image_url content part (a
// data: URL of the same bytes) after the prompt's text, and initialize
// advertises promptCapabilities.image; a text-only model gets OpenCode's
// error text in the image's place instead, and initialize says image: false.
func TestPromptImage(t *testing.T) {
	data := tinyPNG(t)
	for _, tc := range []struct {
		name       string
		modalities *config.ModelModalities
		image      bool
	}{
		{"vision", &config.ModelModalities{Input: []string{"text", "image"}, Output: []string{"text"}}, true},
		{"text-only", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithChunks(2))
			cfg := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
				"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: stub.URL(), APIKey: "k"},
					Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model", Modalities: tc.modalities}}},
			}}
			srv := testserver.Start(t, testserver.Options{Config: cfg})
			c := start(t, srv)

			var init struct {
				AgentCapabilities struct {
					PromptCapabilities struct {
						Image *bool `json:"image"`
					} `json:"promptCapabilities"`
				} `json:"agentCapabilities"`
			}
			c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &init)
			if got := init.AgentCapabilities.PromptCapabilities.Image; got == nil || *got != tc.image {
				t.Fatalf("initialize: promptCapabilities.image = %v, want %v", deref(got), tc.image)
			}
			sid := c.newSession(srv.Directory)
			_, ch := c.request("session/prompt", map[string]any{"sessionId": sid, "prompt": []map[string]any{
				{"type": "text", "text": "what is this?"},
				{"type": "image", "mimeType": "image/png", "data": data},
			}})
			if r := decodeReply(t, c.wait(ch, "image prompt")); r.StopReason != "end_turn" {
				t.Fatalf("prompt reply %+v", r)
			}

			reqs := stub.Requests()
			if len(reqs) != 1 {
				t.Fatalf("the stub model got %d turn requests, want 1", len(reqs))
			}
			content := lastUserContent(t, reqs[0])
			want := []contentPart{{Type: "text", Text: "what is this?"}}
			if tc.image {
				want = append(want, contentPart{Type: "image_url", ImageURL: &imageURL{URL: "data:image/png;base64," + data}})
			} else {
				want = append(want, contentPart{Type: "text",
					Text: `ERROR: Cannot read "image" (this model does not support image input). Inform the user.`})
			}
			if got, w := mustJSON(content), mustJSON(want); string(got) != string(w) {
				t.Errorf("last user message content\n got %s\nwant %s", got, w)
			}
		})
	}
}

// tinyPNG is the base64 of a valid 2x2 PNG.
func tinyPNG(t *testing.T) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.NRGBA{R: 255, A: 255})
	img.Set(1, 1, color.NRGBA{B: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func deref(b *bool) any {
	if b == nil {
		return "absent"
	}
	return *b
}

// contentPart is one element of a chat-completions content array (text or
// image_url; lastUserContent rejects any other member).
type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// lastUserContent is the content array of the last user message of a
// chat-completions request body.
func lastUserContent(t *testing.T, body json.RawMessage) []contentPart {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == "user" {
			var parts []contentPart
			dec := json.NewDecoder(bytes.NewReader(m.Content))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&parts); err != nil {
				t.Fatalf("last user message content is not an array of text and image_url parts (%v): %s", err, m.Content)
			}
			return parts
		}
	}
	t.Fatalf("no user message in the request: %s", body)
	return nil
}
