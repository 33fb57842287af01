package routes_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// syncBuffer is a log sink tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// devCatalog is a models.dev api.json of one OpenAI-compatible provider
// whose endpoint is url.
func devCatalog(t *testing.T, url string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "api.json")
	b := `{"local":{"id":"local","name":"Local","env":["LOCAL_API_KEY"],"npm":"@ai-sdk/openai-compatible","api":"` + url + `",
	  "models":{"` + stubmodel.ModelID + `":{"id":"` + stubmodel.ModelID + `","name":"Local Stub","family":"stub","tool_call":true,
	  "temperature":true,"modalities":{"input":["text"],"output":["text"]},"cost":{"input":1,"output":2},"limit":{"context":64000,"output":4096}},
	  "old":{"id":"old","name":"Old","status":"deprecated","limit":{"context":1,"output":1}}}}}`
	if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAuthConnectsProvider: a provider of the models.dev catalog with no
// key is listed, not connected; PUT /auth/{id} (what the TUI's connect
// dialog sends) writes auth.json (mode 0600) and connects it at once, its
// model runs a turn with that key, a restarted server reads it back, and
// DELETE /auth/{id} disconnects it. The key never appears in an answer,
// an event or the log.
func TestAuthConnectsProvider(t *testing.T) {
	var logs syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	const key = "sk-secret-put-4f1c9d"
	const cfgKey = "sk-secret-config-77aa"
	stub := stubmodel.NewServer(t, stubmodel.Echo)
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	// A global config with a key of its own: /global/config must not show it.
	gdir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(gdir, 0o755); err != nil {
		t.Fatal(err)
	}
	global := `{"provider":{"other":{"options":{"baseURL":"http://127.0.0.1:9/v1","apiKey":"` + cfgKey + `"}}}}`
	if err := os.WriteFile(filepath.Join(gdir, "opencode.json"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(global), home)
	if err != nil {
		t.Fatal(err)
	}
	authPath := filepath.Join(t.TempDir(), "opencode", "auth.json")
	opts := testserver.Options{ModelsPath: devCatalog(t, stub.URL()), AuthPath: authPath, Config: cfg}
	e := start(t, opts)
	events := collectEvents(t, e.ts.URL+"/event")

	type providers struct {
		All []struct {
			ID     string
			Source string
			Models map[string]json.RawMessage
		} `json:"all"`
		Connected []string          `json:"connected"`
		Default   map[string]string `json:"default"`
	}
	connected := func() []string {
		var p providers
		e.mustJSON("GET", "/provider", "", &p)
		return p.Connected
	}
	if c := connected(); slices.Contains(c, "local") {
		t.Fatalf("connected before any key: %v", c)
	}

	// Bad bodies are 400 and store nothing.
	for _, body := range []string{`{}`, `{"type":"api"}`, `{"type":"magic","key":"x"}`, `not json`} {
		if code, b := e.do("PUT", "/auth/local", body); code != 400 {
			t.Errorf("PUT /auth/local %s: %d %s, want 400", body, code, b)
		}
	}
	if _, err := os.Stat(authPath); err == nil {
		t.Fatal("a bad PUT wrote auth.json")
	}

	if code, b := e.do("PUT", "/auth/local", `{"type":"api","key":"`+key+`"}`); code != 200 || string(b) != "true" {
		t.Fatalf("PUT /auth/local: %d %s", code, b)
	}
	fi, err := os.Stat(authPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("auth.json mode %v, want 0600", fi.Mode().Perm())
	}
	var stored map[string]struct{ Type, Key string }
	b, _ := os.ReadFile(authPath)
	if err := json.Unmarshal(b, &stored); err != nil || stored["local"].Type != "api" || stored["local"].Key != key {
		t.Fatalf("auth.json = %s", b)
	}
	if c := connected(); !slices.Contains(c, "local") {
		t.Fatalf("not connected after PUT /auth: %v", c)
	}
	var p providers
	e.mustJSON("GET", "/config/providers", "", &p)
	var cp struct {
		Providers []struct {
			ID     string
			Source string
			Models map[string]json.RawMessage
		}
	}
	e.mustJSON("GET", "/config/providers", "", &cp)
	found := false
	for _, pr := range cp.Providers {
		if pr.ID == "local" {
			found = true
			if pr.Source != "api" || len(pr.Models) != 1 {
				t.Errorf("local in /config/providers: source %q, models %d (the deprecated one dropped)", pr.Source, len(pr.Models))
			}
		}
	}
	if !found {
		t.Fatal("local not in /config/providers")
	}

	// Its model runs a turn, with the key.
	sid := e.newSession()
	body := `{"model":{"providerID":"local","modelID":"` + stubmodel.ModelID + `"},"parts":[{"type":"text","text":"hello local"}]}`
	if code, b := e.do("POST", "/session/"+sid+"/message", body); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	hs := stub.Headers()
	if len(hs) == 0 || hs[len(hs)-1].Get("Authorization") != "Bearer "+key {
		t.Errorf("the model call was not authorized with the key: %v", hs)
	}

	// Nothing shows the keys.
	for _, path := range []string{"/provider", "/config/providers", "/config", "/global/config", "/api/provider", "/api/model",
		"/api/provider/local", "/session/" + sid + "/message"} {
		_, b := e.do("GET", path, "")
		if strings.Contains(string(b), key) || strings.Contains(string(b), cfgKey) {
			t.Errorf("GET %s shows a key: %s", path, b)
		}
	}
	checkFor(t, 5*time.Second, "the turn's events", func() bool { return strings.Contains(events.String(), "session.idle") })
	if strings.Contains(events.String(), key) {
		t.Error("an event carries the key")
	}

	// A restarted server reads auth.json.
	e.ts.Stop()
	e = start(t, opts)
	if c := connected(); !slices.Contains(c, "local") {
		t.Fatalf("not connected after a restart: %v", c)
	}
	if code, b := e.do("DELETE", "/auth/local", ""); code != 200 || string(b) != "true" {
		t.Fatalf("DELETE /auth/local: %d %s", code, b)
	}
	if c := connected(); slices.Contains(c, "local") {
		t.Fatalf("still connected after DELETE /auth: %v", c)
	}
	if out := logs.String(); strings.Contains(out, key) || strings.Contains(out, cfgKey) {
		t.Errorf("the log shows a key:\n%s", out)
	}
}

// TestAuthNeedsPassword: a key given through the API needs the same auth
// as every route.
func TestAuthNeedsPassword(t *testing.T) {
	e := start(t, testserver.Options{Password: "pw", AuthPath: filepath.Join(t.TempDir(), "auth.json")})
	req, _ := http.NewRequest("PUT", e.ts.URL+"/auth/local", strings.NewReader(`{"type":"api","key":"k"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("PUT /auth without the password: %d, want 401", resp.StatusCode)
	}
}

// events is what an /event stream received.
type eventsSeen struct {
	mu sync.Mutex
	b  strings.Builder
}

func (e *eventsSeen) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.b.String()
}

func collectEvents(t *testing.T, url string) *eventsSeen {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	seen := &eventsSeen{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			seen.mu.Lock()
			seen.b.WriteString(sc.Text() + "\n")
			seen.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return seen
}

func (e *env) newSession() string {
	e.t.Helper()
	var s struct{ ID string }
	e.mustJSON("POST", "/session", "{}", &s)
	return s.ID
}

// checkFor polls cond until it holds or timeout passes.
func checkFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProbeModels: a configured OpenAI-compatible provider that names no
// models gets the ones its endpoint lists (GET {baseURL}/models).
func TestProbeModels(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Echo, stubmodel.WithModels("served-a", "served-b"))
	cfg := &config.File{Provider: map[string]config.ProviderConfig{
		"lan": {NPM: "@ai-sdk/openai-compatible", Name: "LAN", Options: config.ProviderOptions{BaseURL: stub.URL()}}}}
	e := start(t, testserver.Options{Config: cfg})
	checkFor(t, 5*time.Second, "the probed models", func() bool {
		var cp struct {
			Providers []struct {
				ID     string
				Models map[string]json.RawMessage
			}
		}
		e.mustJSON("GET", "/config/providers", "", &cp)
		for _, p := range cp.Providers {
			if p.ID == "lan" && len(p.Models) == 2 && p.Models["served-a"] != nil && p.Models["served-b"] != nil {
				return true
			}
		}
		return false
	})
}
