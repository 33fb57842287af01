package wire

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

var outDir = flag.String("wire.out", "", "TestWireMatchesReference: also write our normalised and raw captures to this directory")

// stubConfig is the opencode.json of ../shared/reference with the
// stub's base URL, as the real server got it when the goldens were recorded.
func stubConfig(baseURL string) *config.File {
	yes := true
	m := config.ModelConfig{Name: "Stub Model", ToolCall: &yes}
	m.Limit.Context, m.Limit.Output = 128000, 4096
	return &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: baseURL, APIKey: "stub-key"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: m}},
	}}
}

// TestWireMatchesReference runs every scenario against our server (SQLite
// store, the stub model in-process) and compares the normalised capture
// with the golden recorded from the real server, after the known
// differences (rules, known_test.go) are taken out of both.
func TestWireMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("wire comparison takes ~20 s")
	}
	stub := startStub(t)
	srv := testserver.Start(t, testserver.Options{SQLite: true, Config: stubConfig(stub.URL()), Directory: t.TempDir()})
	tg := target{Base: srv.URL, Quiet: 300 * time.Millisecond}
	hits := map[string]int{}
	ran := 0
	for _, sc := range scenarios {
		if !selected(sc.Name) {
			continue
		}
		ran++
		t.Run(sc.Name, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(goldenDir, sc.Name+".golden"))
			if err != nil {
				t.Fatalf("no golden (record with -wire.record): %v", err)
			}
			want, err := parseGolden(string(text))
			if err != nil {
				t.Fatalf("golden %s: %v", sc.Name, err)
			}
			c := runScenario(t, tg, sc)
			got := normalise(c, sc.Title)
			if *outDir != "" {
				_ = os.MkdirAll(*outDir, 0o755)
				writeFile(t, filepath.Join(*outDir, sc.Name+".golden"), []byte(got.String()))
				writeFile(t, filepath.Join(*outDir, sc.Name+".raw.jsonl"), rawCapture(c, map[string]string{srv.Directory: "/PROJECT"}))
			}
			applyRules(sc.Name, want, got, hits)
			if d := diffGoldens(want, got); d != "" {
				t.Errorf("scenario %s (%s) differs from the real server beyond the known differences:\n%s", sc.Name, sc.Title, d)
			}
		})
	}
	// Every difference left must be one README lists as intended.
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		_, section, _ := strings.Cut(r.README, ": ")
		if r.README == "" || !strings.Contains(string(readme), section) {
			t.Errorf("known difference %s is not listed in README.md (README %q)", r.ID, r.README)
		}
		t.Logf("known difference %-24s %3d edits  [%s] %s", r.ID, hits[r.ID], r.README, r.Why)
	}
	if ran == len(scenarios) && !t.Failed() {
		var stale []string
		for _, r := range rules {
			if hits[r.ID] == 0 {
				stale = append(stale, r.ID)
			}
		}
		if len(stale) > 0 {
			t.Errorf("known-difference rules that matched nothing (remove them): %s", strings.Join(stale, ", "))
		}
	}
}
