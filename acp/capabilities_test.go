package acp_test

import (
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestInitializeAdvertisesImages: promptCapabilities.image follows the
// server's default model: off for the text-only scripted model, on for a
// configured model with the image input modality.
func TestInitializeAdvertisesImages(t *testing.T) {
	vision := &config.File{Model: "v/eye", Provider: map[string]config.ProviderConfig{
		"v": {NPM: "@ai-sdk/openai-compatible", Options: config.ProviderOptions{BaseURL: "http://127.0.0.1:9/v1"},
			Models: map[string]config.ModelConfig{"eye": {Modalities: &config.ModelModalities{Input: []string{"text", "image"}}}}},
	}}
	for _, tc := range []struct {
		name string
		cfg  *config.File
		want bool
	}{{"scripted", nil, false}, {"vision", vision, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, testserver.Start(t, testserver.Options{Config: tc.cfg}))
			var init struct {
				AgentCapabilities struct {
					PromptCapabilities struct {
						Image           bool `json:"image"`
						EmbeddedContext bool `json:"embeddedContext"`
					} `json:"promptCapabilities"`
				} `json:"agentCapabilities"`
			}
			c.call("initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, &init)
			if p := init.AgentCapabilities.PromptCapabilities; p.Image != tc.want || !p.EmbeddedContext {
				t.Errorf("promptCapabilities %+v, want image %v", p, tc.want)
			}
		})
	}
}
