package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/anthropicstub"
	"github.com/opencode-server/opencode-server/internal/geministub"
	"github.com/opencode-server/opencode-server/internal/responsesstub"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestTUINativeProviders: an OpenCode user's opencode.json names an
// Anthropic, an OpenAI or a Google model (the provider's npm package picks
// the wire format, as in OpenCode); the real TUI attached to our server
// runs a turn that thinks, calls a tool and answers after its result on
// each, against a stub that speaks that API's streaming format, and shows
// the tool line, the answer and the footer. The stub's second request
// carries the first reply's reasoning back as the API needs it (a signed
// thinking block, an encrypted reasoning item, a signed function call).
func TestTUINativeProviders(t *testing.T) {
	t.Parallel()
	type native struct {
		provider, npm, model, name string
		start                      func(t *testing.T) (url string, bodies func() []json.RawMessage)
		sentBack                   string // in the second request: the first reply's reasoning
	}
	script := stubmodel.Directives
	cases := []native{
		{provider: "anthropic", npm: "@ai-sdk/anthropic", model: "claude-sonnet-4-5", name: "Claude Sonnet 4.5",
			start: func(t *testing.T) (string, func() []json.RawMessage) {
				s := anthropicstub.NewServer(t, anthropicstub.FromStubmodel(script), anthropicstub.WithChunks(3), anthropicstub.WithDelay(20*time.Millisecond))
				return s.URL(), s.Requests
			},
			sentBack: `"signature":"stub-signature-1"`},
		{provider: "openai", npm: "@ai-sdk/openai", model: "gpt-5", name: "GPT-5",
			start: func(t *testing.T) (string, func() []json.RawMessage) {
				s := responsesstub.NewServer(t, responsesstub.FromStubmodel(script), responsesstub.WithChunks(3), responsesstub.WithDelay(20*time.Millisecond))
				return s.URL(), s.Requests
			},
			sentBack: `"encrypted_content":"stub-encrypted-1"`},
		{provider: "google", npm: "@ai-sdk/google", model: "gemini-2.5-pro", name: "Gemini 2.5 Pro",
			start: func(t *testing.T) (string, func() []json.RawMessage) {
				s := geministub.NewServer(t, geministub.FromStubmodel(script), geministub.WithChunks(3), geministub.WithDelay(20*time.Millisecond))
				return s.URL(), s.Requests
			},
			sentBack: `"thoughtSignature":"stub-signature-1"`},
	}
	for _, c := range cases {
		t.Run(c.provider, func(t *testing.T) {
			t.Parallel()
			url, requests := c.start(t)
			cfg := fmt.Sprintf(`{"model":"%[1]s/%[2]s","small_model":"%[1]s/%[2]s","provider":{"%[1]s":{"npm":"%[3]s",`+
				`"options":{"baseURL":"%[4]s","apiKey":"stub-key"},"models":{"%[2]s":{"name":"%[5]s","tool_call":true,"reasoning":true,`+
				`"attachment":true,"modalities":{"input":["text","image"],"output":["text"]},"limit":{"context":200000,"output":64000}}}}}}`,
				c.provider, c.model, c.npm, url, c.name)
			path := filepath.Join(t.TempDir(), "opencode.json")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			srv := startServer(t, serverOptions{config: path})
			if err := os.WriteFile(filepath.Join(srv.Dir, "README.md"), []byte("# Demo\nhello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			x := startTUI(t, srv)
			// think: runs to the end of the line, so it comes last.
			x.typeLine(`call:glob {"pattern":"*.md"} think: looking for docs`)
			x.waitScreen(60*time.Second, `Glob "*.md"`)
			x.waitScreen(30*time.Second, "Done.")
			footer := regexp.MustCompile(`Build · ` + regexp.QuoteMeta(c.name) + ` · [0-9.]+m?s`)
			checkFor(t, 10*time.Second, 200*time.Millisecond, func() error {
				if s := x.screen(); !footer.MatchString(s) {
					return fmt.Errorf("no footer %q; screen:\n%s", footer, s)
				}
				return nil
			})
			reqs := requests()
			if len(reqs) < 2 {
				t.Fatalf("the model got %d turn requests, want the call and the answer after its result", len(reqs))
			}
			if !strings.Contains(string(reqs[1]), c.sentBack) {
				t.Errorf("the second request lacks %s (the first reply's reasoning):\n%s", c.sentBack, reqs[1])
			}
		})
	}
}
