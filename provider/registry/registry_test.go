package registry

import (
	"testing"

	"github.com/opencode-server/opencode-server/provider/anthropic"
	"github.com/opencode-server/opencode-server/provider/google"
)

func TestSupported(t *testing.T) {
	cases := []struct {
		npm, base string
		want      bool
	}{
		{"@ai-sdk/openai-compatible", "http://x/v1", true},
		{"@ai-sdk/openai", "", true},
		{"@ai-sdk/anthropic", "", true},
		{"@ai-sdk/google", "", true},
		{"", "http://x/v1", true},
		{"", "", false},
		{"@ai-sdk/unknown", "http://x", false},
	}
	for _, c := range cases {
		if got := Supported(c.npm, c.base); got != c.want {
			t.Errorf("Supported(%q, %q) = %v", c.npm, c.base, got)
		}
		if _, ok := New(c.npm, Options{BaseURL: c.base}); ok != c.want {
			t.Errorf("New(%q, %q) ok = %v", c.npm, c.base, ok)
		}
	}
}

func TestAnthropic(t *testing.T) {
	p, ok := New("@ai-sdk/anthropic", Options{ProviderID: "anthropic"})
	if _, isAnthropic := p.(*anthropic.Provider); !ok || !isAnthropic {
		t.Fatalf("New(@ai-sdk/anthropic) = %T, %v", p, ok)
	}
}

func TestGoogle(t *testing.T) {
	p, ok := New("@ai-sdk/google", Options{ProviderID: "google"})
	g, isGoogle := p.(*google.Provider)
	if !ok || !isGoogle {
		t.Fatalf("New(@ai-sdk/google) = %T, %v", p, ok)
	}
	if got, want := g.URL("gemini-2.5-flash"), "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"; got != want {
		t.Errorf("URL %q, want %q", got, want)
	}
}
