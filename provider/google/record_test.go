package google_test

// TestRecordReference records what the real `opencode serve` 1.18.33
// sends to Gemini (provider "google", @ai-sdk/google) for one session,
// into testdata/opencode/<model>.turn.json (the last model call) and
// <model>.title.json (the title request), which TestOpencodeReference
// rebuilds byte for byte:
//
//	go test ./provider/google -run TestRecordReference -google.record -v -timeout 5m
//
// The session: "read main.go please" with a 1x1 PNG, answered with a
// signed thought, a text and a signed read call, then "Done reading."
// after the result; a second prompt "and again" (an unsigned thought and
// a text); a third "read both", answered with two parallel calls (one
// fails), then "Both done.". The binary is
// $OPENCODE_BIN, else the e2e cache's; it runs with a fresh HOME and the
// bundled models.dev catalog, its temporary paths written as /work.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/geministub"
)

var record = flag.Bool("google.record", false, "record the opencode reference requests (needs the opencode 1.18.33 binary)")

func recordScript(req geministub.Request) geministub.Response {
	n := fmt.Sprint(req.N)
	switch {
	case req.LastIsToolResult() && strings.Contains(req.LastUserText(), "both"):
		return geministub.Response{Text: "Both done."}
	case req.LastIsToolResult():
		return geministub.Response{Text: "Done reading.", Signature: "sig-text-" + n}
	case strings.Contains(req.LastUserText(), "both"):
		return geministub.Response{Calls: []geministub.Call{{Name: "read", Args: `{"filePath":"missing.go"}`},
			{Name: "glob", Args: `{"pattern":"*.go"}`}}, Signature: "sig-calls-" + n}
	case strings.Contains(req.LastUserText(), "again"):
		return geministub.Response{Thinking: "second thought", Text: "Second answer."}
	}
	return geministub.Response{Thinking: "pondering the file", ThoughtSignature: "sig-thought-" + n, Text: "Let me read it.",
		Calls: []geministub.Call{{Name: "read", Args: `{"filePath":"main.go"}`}}, Signature: "sig-call-" + n}
}

func TestRecordReference(t *testing.T) {
	if !*record {
		t.Skip("run with -google.record")
	}
	bin := os.Getenv("OPENCODE_BIN")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache/opencode-server-e2e/node_modules/opencode-linux-x64/bin/opencode")
	}
	for _, model := range []string{"gemini-3-flash-preview", "gemini-2.5-flash"} {
		t.Run(model, func(t *testing.T) { recordModel(t, bin, model) })
	}
}

func recordModel(t *testing.T, bin, model string) {
	s := geministub.NewServer(t, recordScript)
	root := t.TempDir()
	home, dir := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{filepath.Join(home, ".config/opencode"), dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := exec.Command("git", "-C", dir, "init", "-q")
	git.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if err := git.Run(); err != nil {
		t.Fatal(err)
	}
	cfg := `{"autoupdate":false,"share":"disabled","model":"google/` + model + `","small_model":"google/` + model + `",` +
		`"provider":{"google":{"options":{"baseURL":"` + s.URL() + `","apiKey":"stub-key"}}}}`
	if err := os.WriteFile(filepath.Join(home, ".config/opencode/opencode.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logf, err := os.Create(filepath.Join(root, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--hostname", "127.0.0.1", "--port", fmt.Sprint(port))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config",
		"XDG_DATA_HOME=" + home + "/.local/share", "XDG_STATE_HOME=" + home + "/.local/state", "XDG_CACHE_HOME=" + home + "/.cache",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	up := false
	for i := 0; i < 150 && !up; i++ {
		// A request that arrives while the server starts may never be
		// answered: ask with a short timeout, again and again.
		if r, err := (&http.Client{Timeout: 2 * time.Second}).Get(base + "/global/health"); err == nil {
			r.Body.Close()
			up = r.StatusCode == 200
		}
		if !up {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !up {
		log, _ := os.ReadFile(filepath.Join(root, "serve.log"))
		t.Fatalf("opencode serve did not come up:\n%s", log)
	}
	call := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-opencode-directory", dir)
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return b
	}
	var ses struct{ ID string }
	if err := json.Unmarshal(call("POST", "/session", "{}"), &ses); err != nil || ses.ID == "" {
		t.Fatalf("POST /session: %v", err)
	}
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	call("POST", "/session/"+ses.ID+"/message", `{"parts":[{"type":"text","text":"read main.go please"},`+
		`{"type":"file","mime":"image/png","filename":"dot.png","url":"`+png+`"}]}`)
	call("POST", "/session/"+ses.ID+"/message", `{"parts":[{"type":"text","text":"and again"}]}`)
	call("POST", "/session/"+ses.ID+"/message", `{"parts":[{"type":"text","text":"read both"}]}`)
	for i := 0; i < 100 && len(s.Titles()) == 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	reqs, titles := s.Requests(), s.Titles()
	if len(reqs) != 5 || len(titles) != 1 {
		t.Fatalf("%d requests, %d titles", len(reqs), len(titles))
	}
	norm := func(b []byte) []byte { return append(bytes.ReplaceAll(b, []byte(root), []byte("/work")), '\n') }
	out := filepath.Join("testdata", "opencode")
	for name, b := range map[string][]byte{model + ".turn.json": reqs[4], model + ".title.json": titles[0]} {
		if err := os.WriteFile(filepath.Join(out, name), norm(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
