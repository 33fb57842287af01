package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	sess := newSessionOn(t, srv)
	status, body, err := srv.post("/session/"+sess.ID+"/prompt_async",
		`{"agent":"oc","parts":[{"type":"text","text":"say something"}]}`)
	if err != nil || status != 204 {
		t.Fatalf("prompt_async: %d %s %v", status, body, err)
	}
	var reply message
	checkFor(t, 3*time.Minute, 250*time.Millisecond, func() error {
		ms, err := srv.messages(sess.ID)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Info.Role == "assistant" && m.Info.Error != nil {
				return fmt.Errorf("the agent's turn failed: %+v\nserver log:\n%s", m.Info.Error, srv.stderr.String())
			}
			if m.Info.Role == "assistant" && m.Info.Time.Completed != 0 && strings.Contains(m.text(), answer) {
				reply = m
				return nil
			}
		}
		return fmt.Errorf("no completed assistant message with %q yet: %+v", answer, ms)
	})
	if !strings.HasPrefix(reply.Info.ID, "msg_") {
		t.Fatalf("assistant message ID %q is not ours", reply.Info.ID)
	}
	for _, p := range reply.Parts {
		if p.MessageID != reply.Info.ID || !strings.HasPrefix(p.ID, "prt_") {
			t.Errorf("part %s of %s: messageID %s", p.ID, reply.Info.ID, p.MessageID)
		}
	}
	// /event streamed it as deltas of our message.
	checkFor(t, 10*time.Second, 100*time.Millisecond, func() error {
		var streamed strings.Builder
		for _, e := range events() {
			if e.Type == "message.part.delta" && e.Properties.MessageID == reply.Info.ID {
				streamed.WriteString(e.Properties.Delta)
			}
			if strings.HasPrefix(e.Type, "message.") && e.Properties.SessionID == sess.ID &&
				e.Properties.MessageID != "" && !strings.HasPrefix(e.Properties.MessageID, "msg_") {
				return fmt.Errorf("event %s carries message ID %q", e.Type, e.Properties.MessageID)
			}
		}
		if !strings.Contains(streamed.String(), answer) {
			return fmt.Errorf("/event deltas of %s say %q, want %q", reply.Info.ID, streamed.String(), answer)
		}
		return nil
	})
	// The agent ran as a child of the server, and stops with it.
	m := regexp.MustCompile(`msg="external agent started".* pid=(\d+)`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("the server did not log the agent's start:\n%s", srv.stderr.String())
	}
	pid, _ := strconv.Atoi(m[1])
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("agent %d is not running before the server stops", pid)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("agent %d outlived the server", pid)
		}
		return nil
	})
}

// ocConfig is an opencode.json whose agent oc is the real `opencode acp`
// on the chat-completions stub at stubURL.
func ocConfig(t *testing.T, opencodeBin, stubURL string) map[string]any {
	return map[string]any{"agent": map[string]any{"oc": map[string]any{
		"description": "OpenCode over ACP", "acp": opencodeACP(t, opencodeBin, stubURL)}}}
}

// newSessionOn creates a session on srv (POST /session).
func newSessionOn(t *testing.T, srv *server) sessionInfo {
	t.Helper()
	status, body, err := srv.post("/session", "{}")
	if err != nil || status != 200 {
		t.Fatalf("POST /session: %d %s %v", status, body, err)
	}
	var sess sessionInfo
	if err := json.Unmarshal(body, &sess); err != nil {
		t.Fatal(err)
	}
	return sess
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
