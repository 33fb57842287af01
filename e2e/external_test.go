package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// TestExternalOpencodeACP: the real `opencode acp` (opencode-ai 1.18.33)
// as a session's external agent, on the chat-completions stub: a prompt
// to the session streams the stub's answer through our GET
// /session/{id}/message and /event, under our own msg_ IDs, and the
// agent's process is gone once the server stopped.
func TestExternalOpencodeACP(t *testing.T) {
	t.Parallel()
	_, opencodeBin := binaries(t)
	answer := "external answer " + randomTag()
	srv := startWithConfig(t, ocConfig(t, opencodeBin, answering(t, answer).URL()))

	var agents []struct{ Name, Mode string }
	if err := srv.getJSON("/agent", &agents); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(agents), "{oc primary}") {
		t.Fatalf("GET /agent does not list oc as primary: %+v", agents)
	}

	events := watchEvents(t, srv)
	sess := newExternalSession(t, srv)
	promptAgent(t, srv, sess.ID, "oc", "say something")
	reply := waitReply(t, srv, sess.ID, answer, nil)
	checkStreamed(t, events, sess.ID, reply.Info.ID, answer)
	// The agent ran as a child of the server, and stops with it.
	checkAgentStops(t, srv)
}

// ocConfig is an opencode.json whose agent oc is the real `opencode acp`
// on the chat-completions stub at stubURL.
func ocConfig(t *testing.T, opencodeBin, stubURL string) map[string]any {
	return map[string]any{"agent": map[string]any{"oc": map[string]any{
		"description": "OpenCode over ACP", "acp": opencodeACP(t, opencodeBin, stubURL)}}}
}

// answering is a chat-completions stub that streams answer, in three chunks.
func answering(t *testing.T, answer string) *stubmodel.Server {
	return stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Text: answer}), stubmodel.WithChunks(3),
		stubmodel.WithDelay(20*time.Millisecond))
}

// startWithConfig starts our server with cfg as its opencode.json.
func startWithConfig(t *testing.T, cfg map[string]any) *server {
	t.Helper()
	return startServer(t, serverOptions{config: writeConfig(t, cfg)})
}

// writeConfig writes cfg as an opencode.json and returns its path.
func writeConfig(t *testing.T, cfg map[string]any) string {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "opencode.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// opencodeACP is the acp block of an agent that is the real `opencode
// acp`, in a home of its own, with the chat-completions stub at stubURL as
// its model (its own OpenCode configuration).
func opencodeACP(t *testing.T, opencodeBin, stubURL string) map[string]any {
	agentCfg := `{"model":"stub/stub-model","small_model":"stub/stub-model","provider":{"stub":{"npm":"@ai-sdk/openai-compatible",` +
		`"name":"Stub","options":{"baseURL":"` + stubURL + `","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model",` +
		`"tool_call":true,"limit":{"context":128000,"output":4096}}}}}}`
	home := t.TempDir()
	return map[string]any{"command": opencodeBin, "args": []string{"acp"}, "env": map[string]string{
		"HOME":                          home,
		"XDG_CONFIG_HOME":               filepath.Join(home, ".config"),
		"XDG_DATA_HOME":                 filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME":                filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME":                filepath.Join(home, ".cache"),
		"OPENCODE_CONFIG_CONTENT":       agentCfg,
		"OPENCODE_DISABLE_MODELS_FETCH": "1",
		"OPENCODE_DISABLE_AUTOUPDATE":   "1",
		"OPENCODE_DISABLE_SHARE":        "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
	}}
}

type busEvent struct {
	Type       string `json:"type"`
	Properties struct {
		SessionID string `json:"sessionID"`
		MessageID string `json:"messageID"`
		Delta     string `json:"delta"`
	} `json:"properties"`
}

// externalAgentServer is a server (in dir, "" for a new one) whose
// opencode.json has the external agent name with this acp block.
func externalAgentServer(t *testing.T, name, description string, acp map[string]any, dir string) *server {
	t.Helper()
	cfg := map[string]any{"agent": map[string]any{name: map[string]any{"description": description, "acp": acp}}}
	return startServer(t, serverOptions{config: writeConfig(t, cfg), dir: dir})
}

// watchEvents reads the server's GET /event until the test ends.
func watchEvents(t *testing.T, srv *server) func() []busEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/event", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []busEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e busEvent
			if json.Unmarshal([]byte(data), &e) == nil {
				mu.Lock()
				evs = append(evs, e)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		tr.CloseIdleConnections()
	})
	return func() []busEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]busEvent(nil), evs...)
	}
}
