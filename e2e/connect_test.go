package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestTUIConnectProvider: the TUI's /connect dialog connects a provider of
// the models.dev catalog that has no key, as against opencode serve. The
// dialog lists GET /provider's providers; picking one with no auth methods
// (GET /provider/auth) asks for an API key, then sends PUT /auth/{id} and
// POST /instance/dispose, reloads (GET /config/providers) and opens the
// model picker of that provider. A prompt to its model reaches the model
// with the typed key; the key is in the server's auth.json (mode 0600),
// and a restarted server reads it back.
func TestTUIConnectProvider(t *testing.T) {
	t.Parallel()
	stub := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithChunks(3), stubmodel.WithDelay(30*time.Millisecond))

	// A models.dev catalog of one OpenAI-compatible provider on the stub.
	catalog := filepath.Join(t.TempDir(), "api.json")
	dev := map[string]any{"localstub": map[string]any{
		"id": "localstub", "name": "Local Stub", "env": []string{"LOCALSTUB_API_KEY"},
		"npm": "@ai-sdk/openai-compatible", "api": stub.URL(),
		"models": map[string]any{stubmodel.ModelID: map[string]any{
			"id": stubmodel.ModelID, "name": "Stub Model", "family": "stub", "tool_call": true, "temperature": true,
			"release_date": "2025-01-01", "modalities": map[string]any{"input": []string{"text"}, "output": []string{"text"}},
			"cost": map[string]any{"input": 1, "output": 2}, "limit": map[string]any{"context": 64000, "output": 4096},
		}},
	}}
	raw, err := json.Marshal(dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catalog, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	// The server's own HOME and XDG directories; no key anywhere.
	home := t.TempDir()
	xdgData := filepath.Join(home, ".local", "share")
	opts := serverOptions{home: home, data: t.TempDir(), dir: t.TempDir(), env: []string{
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + xdgData,
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"OPENCODE_MODELS_PATH=" + catalog,
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"LOCALSTUB_API_KEY", // unset
		"OPENCODE_CONFIG",
		"OPENCODE_CONFIG_CONTENT",
	}}
	authPath := filepath.Join(xdgData, "opencode", "auth.json")
	srv := startServer(t, opts)
	if c := connectedProviders(t, srv); slices.Contains(c, "localstub") {
		t.Fatalf("localstub connected before any key: %v", c)
	}

	x := startTUI(t, srv)

	// /connect: the provider list.
	x.typeLine("/connect")
	x.waitScreen(15*time.Second, "Connect a provider")
	// Filter the list by the provider's name and take it.
	x.must("send-keys", "-t", x.target, "-l", "Local Stub")
	waitScreenFn(t, x, 10*time.Second, func(s string) error {
		// Unfiltered, the list also has "✓ Scripted" (connected) and
		// "Other Custom provider".
		if strings.Contains(s, "✓ Scripted") || strings.Contains(s, "Custom provider") {
			return errors.New("the list is not filtered to Local Stub yet")
		}
		// The filter and the entry.
		if n := strings.Count(s, "Local Stub"); n < 2 {
			return errors.New("the connect dialog does not list Local Stub")
		}
		return nil
	})
	x.must("send-keys", "-t", x.target, "Enter")

	// The API key prompt (no auth methods: the TUI's default "API key").
	waitScreenFn(t, x, 10*time.Second, func(s string) error {
		if strings.Contains(s, "Connect a provider") || !strings.Contains(s, "API key") {
			return errors.New("no API key prompt")
		}
		return nil
	})
	key := "sk-e2e-" + strings.ToLower(randomTag())
	x.typeLine(key)

	// PUT /auth/localstub, POST /instance/dispose, the reload: the model
	// picker of the connected provider opens, titled with its name.
	waitScreenFn(t, x, 20*time.Second, func(s string) error {
		if strings.Contains(s, "API key") || !strings.Contains(s, "Local Stub") || !strings.Contains(s, "Stub Model") ||
			!strings.Contains(s, "Connect provider") {
			return errors.New("no model picker of Local Stub after the key")
		}
		return nil
	})
	// What the dialog sent (the server's request log): the key, then
	// the dispose that makes OpenCode reload its providers.
	if !connectRequestsRE.MatchString(srv.stderr.String()) {
		t.Errorf("the server log lacks PUT /auth/localstub followed by POST /instance/dispose (both 200):\n%s",
			tail(srv.stderr.String(), 40))
	}
	checkFor(t, 5*time.Second, 100*time.Millisecond, func() error {
		if c := connectedProviders(t, srv); !slices.Contains(c, "localstub") {
			return fmt.Errorf("localstub not connected after the dialog: %v", c)
		}
		return nil
	})
	// Take Stub Model: the picker closes and the prompt's footer names it.
	// (The footer may name it already: after the reload the TUI's default
	// is GET /config's model, now localstub/stub-model.)
	x.must("send-keys", "-t", x.target, "Enter")
	waitScreenFn(t, x, 10*time.Second, func(s string) error {
		if strings.Contains(s, "Connect provider") {
			return errors.New("the model picker is still open")
		}
		if !footerStubRE.MatchString(s) {
			return errors.New("the footer does not name Stub Model of Local Stub")
		}
		return nil
	})

	prompt := "connected prompt " + strings.ToLower(randomTag())
	x.typeLine(prompt)
	x.waitScreen(30*time.Second, "You said: "+prompt)

	// The model call carried the typed key.
	hs := stub.Headers()
	reqs := stub.Requests()
	if len(reqs) == 0 {
		t.Fatal("the stub model got no request")
	}
	sawPrompt := false
	for i, body := range reqs {
		var req stubmodel.Request
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := hs[i].Get("Authorization"); got != "Bearer "+key {
			t.Errorf("request %d to the model: Authorization %q, want %q", i, got, "Bearer "+key)
		}
		if strings.Contains(req.LastUserText(), prompt) {
			sawPrompt = true
		}
	}
	if !sawPrompt {
		t.Errorf("no model request had the prompt %q", prompt)
	}

	// auth.json under the server's XDG_DATA_HOME, mode 0600.
	fi, err := os.Stat(authPath)
	if err != nil {
		t.Fatalf("auth.json: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("auth.json mode %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(authPath)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]struct {
		Type string `json:"type"`
		Key  string `json:"key"`
	}
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatalf("auth.json: %v\n%s", err, b)
	}
	if got := stored["localstub"]; got.Type != "api" || got.Key != key {
		t.Errorf("auth.json localstub = %+v, want type api with the typed key", got)
	}

	// A restarted server on the same directories reads auth.json.
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	srv2 := startServer(t, opts)
	if c := connectedProviders(t, srv2); !slices.Contains(c, "localstub") {
		t.Fatalf("the restarted server did not read auth.json: connected %v", c)
	}
}

// connectRequestsRE matches the server's debug log of the connect dialog's
// two requests.
var connectRequestsRE = regexp.MustCompile(`(?s)method=PUT url=/auth/localstub status=200.*method=POST url=/instance/dispose status=200`)

// footerStubRE is the prompt's footer with the connected provider's model.
var footerStubRE = regexp.MustCompile(`Build · Stub Model +Local Stub`)

// connectedProviders is GET /provider's connected list.
func connectedProviders(t *testing.T, srv *server) []string {
	t.Helper()
	var p struct {
		Connected []string `json:"connected"`
	}
	if err := srv.getJSON("/provider", &p); err != nil {
		t.Fatal(err)
	}
	return p.Connected
}

// waitScreenFn polls the screen until ok accepts it.
func waitScreenFn(t *testing.T, x *tmux, timeout time.Duration, ok func(string) error) string {
	t.Helper()
	var s string
	checkFor(t, timeout, 200*time.Millisecond, func() error {
		s = x.screen()
		if err := ok(s); err != nil {
			return fmt.Errorf("%w; screen:\n%s", err, s)
		}
		return nil
	})
	return s
}
