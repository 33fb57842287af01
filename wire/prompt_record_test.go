package wire

// TestRecordPromptReference records what the real `opencode serve` 1.18.33
// sends to an OpenAI-compatible model for a few prompts:
//
//	go test ./wire -run TestRecordPromptReference -prompt.record -v -timeout 10m
//
// For every case it builds a fresh project directory and a fresh HOME
// (XDG_CONFIG_HOME=$HOME/.config, XDG_DATA_HOME=$HOME/.local/share, ...; the
// stub provider of ../shared/reference/opencode.json (refConfig) goes into
// $HOME/.config/opencode/opencode.json), starts the real binary there on
// 127.0.0.1:147xx, sends the case's prompts through the v1 routes (POST
// /session, then the blocking POST /session/{id}/message, or for a case
// with Steps each step's POST /session/{id}/message, /command, /summarize,
// /prompt_async or /abort, see promptStep), with the session's directory in
// the x-opencode-directory header as the SDK sends it, and writes every
// chat request the model got to testdata/reference/prompt/<case>.json:
// "requests" are the turns' model calls in order, "titles" the session
// title requests (no tools, a system prompt about a title), each with the
// request's headers and its whole JSON body, key order kept, normalised
// (project dir -> <DIR>, HOME -> <HOME>, "Today's date: ..." -> <DATE>,
// prt_/msg_/ses_/call_ IDs -> <prt_1>..., bare ULIDs -> <ulid_1>...).
//
// The model is stubmodel.Echo (or the case's Script) behind a recording
// reverse proxy: the proxy
// sees every request in arrival order whatever the stub does with title
// requests. The binary is -prompt.opencode, else $OPENCODE_BIN, else the e2e
// tests' install under ~/.cache/opencode-server-e2e. Without -prompt.record
// the test is skipped. A case with an API talks to a model of that API
// instead (TestRecordNativeReference).

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

var (
	promptRecord   = flag.Bool("prompt.record", false, "record testdata/reference/prompt from the real opencode serve (TestRecordPromptReference)")
	promptOpencode = flag.String("prompt.opencode", "", "the opencode 1.18.33 binary (default $OPENCODE_BIN, else ~/.cache/opencode-server-e2e/node_modules/opencode-linux-x64/bin/opencode)")
	promptOnly     = flag.String("prompt.only", "", "comma list of prompt cases to record (default all)")
)

const promptRefDir = "../testdata/reference/prompt"

// promptCase is one recorded case: a project to build and prompts to send.
type promptCase struct {
	Name string
	// Setup writes the project (dir) and the global config (home) and
	// returns the session's directory.
	Setup   func(t *testing.T, dir, home string) string
	Prompts []string // v1 POST /session/{id}/message bodies, one session
	// Steps, when set, replace Prompts: calls on the session in order,
	// prompts and others (summarize); the file lists them as "steps".
	Steps []promptStep
	// NeedTitle waits for the session's title request before stopping.
	NeedTitle bool
	// Config, when set, rewrites the global opencode.json (the stub
	// provider's) before the server starts.
	Config func(cfg []byte) []byte
	// Script, when set, is the stub model's script instead of
	// stubmodel.Echo.
	Script stubmodel.Script
	// API, when set, makes the case's model one OpenCode speaks natively:
	// the global config is the API's, the model is the API's stub
	// answering with Script adapted (its Echo when Script is nil), and
	// the proxy keeps that API's requests (TestRecordNativeReference,
	// testdata/reference/prompt-<api>).
	API *nativeAPI
	// ModelsDev, when set, is a models.dev api.json the server reads its
	// catalog from (written to <ROOT>/api.json, OPENCODE_MODELS_PATH);
	// without it the real server has no catalog at all (models fetch
	// disabled, no cache).
	ModelsDev string
	// Env is added to the server's environment (NAME=value), after
	// cleanEnv took the machine's keys out.
	Env []string
}

var promptCases = []promptCase{
	{
		Name: "instructions",
		Setup: func(t *testing.T, dir, home string) string {
			writeTree(t, dir, map[string]string{
				"AGENTS.md":                       "Root rules: use tabs.\n",
				"CLAUDE.md":                       "Claude rules: must be ignored, AGENTS.md exists.\n",
				"pkg/AGENTS.md":                   "Pkg rules.\n",
				"pkg/main.go":                     "package pkg\n",
				"docs/rules.md":                   "Docs rules.\n",
				"opencode.json":                   `{"$schema":"https://opencode.ai/config.json","instructions":["docs/rules.md"]}` + "\n",
				".opencode/skill/review/SKILL.md": "---\nname: review\ndescription: Review code carefully.\n---\n\nRead the diff, then the tests. Say what is wrong and why.\n",
			})
			writeTree(t, home, map[string]string{".config/opencode/AGENTS.md": "Global rules.\n"})
			gitInit(t, dir)
			return filepath.Join(dir, "pkg")
		},
		Prompts:   []string{`{"parts":[{"type":"text","text":"hello there"}],"system":"Extra system text."}`},
		NeedTitle: true,
	},
	{
		Name:      "plan",
		Setup:     simpleProject,
		Prompts:   []string{`{"parts":[{"type":"text","text":"plan a refactor of main.go"}],"agent":"plan"}`},
		NeedTitle: true,
	},
	{
		Name:      "tools-off",
		Setup:     simpleProject,
		Prompts:   []string{`{"parts":[{"type":"text","text":"no shell please"}],"tools":{"bash":false}}`},
		NeedTitle: true,
	},
	{
		Name:      "title",
		Setup:     simpleProject,
		Prompts:   []string{`{"parts":[{"type":"text","text":"Fix the flaky test in main_test.go\nIt fails one run in ten."}]}`},
		NeedTitle: true,
	},
	{
		// A turn, a manual compaction (POST /session/{id}/summarize), and a
		// turn after it.
		Name:  "compaction",
		Setup: simpleProject,
		Steps: []promptStep{
			{Route: "message", Body: `{"parts":[{"type":"text","text":"first question about main.go"}]}`},
			{Route: "summarize", Body: `{"providerID":"stub","modelID":"stub-model"}`},
			{Route: "message", Body: `{"parts":[{"type":"text","text":"second question after the summary"}]}`},
		},
		NeedTitle: true,
	},
}

// promptStep is one call on the case's session: POST
// /session/{id}/<Route> with Body. "message", "command" and "summarize"
// block; "prompt_async" returns at once; "abort" first waits for some of
// the reply's text to stream (waitStreamedText), or runs the step's
// Wait. Body may say <DIR>, <ROOT> and <HOME> for the case's paths.
type promptStep struct {
	Route string // "message", "command", "summarize", "prompt_async" or "abort"
	Body  string
	// Wait, when set, runs before the step is sent, instead of an abort's
	// waitStreamedText: base is the server's URL.
	Wait func(t *testing.T, base, sessionDir, sessionID string)
}

// wait runs what the step waits for before it is sent.
func (st promptStep) wait(t *testing.T, base, sessionDir, sessionID string) {
	t.Helper()
	switch {
	case st.Wait != nil:
		st.Wait(t, base, sessionDir, sessionID)
	case st.Route == "abort":
		waitStreamedText(t, base, sessionDir, sessionID)
	}
}

// steps is the case's calls: Steps, else one message step per prompt.
func (pc promptCase) steps() []promptStep {
	if pc.Steps != nil {
		return pc.Steps
	}
	var s []promptStep
	for _, p := range pc.Prompts {
		s = append(s, promptStep{Route: "message", Body: p})
	}
	return s
}

// simpleProject is a git repository with a root AGENTS.md, the session at
// its root.
func simpleProject(t *testing.T, dir, _ string) string {
	writeTree(t, dir, map[string]string{
		"AGENTS.md": "Root rules: use tabs.\n",
		"main.go":   "package main\n\nfunc main() {}\n",
	})
	gitInit(t, dir)
	return dir
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, []byte(text))
	}
}

// gitInit makes dir a git repository with one commit of everything in it.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=Recorder", "-c", "user.email=recorder@example.invalid", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// modelRecorder is a reverse proxy in front of the stub model that keeps
// every model request (chat completions, or a native API's), in arrival
// order.
type modelRecorder struct {
	mu   sync.Mutex
	reqs []recordedRequest
}

type recordedRequest struct {
	Path   string
	Header http.Header
	Body   []byte
}

func (m *modelRecorder) handler(stubURL string) http.Handler {
	u, _ := url.Parse(stubURL)
	u.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1
	// No keep-alive connection to the stub is left behind a request: the
	// proxy outlives the test's server, whose leak check (testserver)
	// would count such a connection's goroutines.
	proxy.Transport = &http.Transport{DisableKeepAlives: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		model := strings.HasSuffix(r.URL.Path, "/chat/completions")
		for _, api := range nativeAPIs {
			model = model || api.IsModelPath(r.URL.Path)
		}
		if model {
			m.mu.Lock()
			m.reqs = append(m.reqs, recordedRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
			m.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	})
}

func (m *modelRecorder) all() []recordedRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]recordedRequest(nil), m.reqs...)
}

// isTitleRequest is stubmodel's title test: no tools, and a first system
// message that talks about a title; for a native API's body (apiOfBody)
// that API's stub's.
func isTitleRequest(body []byte) bool {
	if api := apiOfBody(body); api != nil {
		return api.IsTitle(body)
	}
	var req stubmodel.Request
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	if len(req.Tools) > 0 || len(req.Messages) == 0 || req.Messages[0].Role != "system" {
		return false
	}
	return strings.Contains(strings.ToLower(req.Messages[0].Content), "title")
}

func opencodeBinary(t *testing.T) string {
	t.Helper()
	bin := *promptOpencode
	if bin == "" {
		bin = os.Getenv("OPENCODE_BIN")
	}
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache/opencode-server-e2e/node_modules/opencode-linux-x64/bin/opencode")
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("opencode binary %s: %v (set -prompt.opencode or OPENCODE_BIN)", bin, err)
	}
	if v := strings.TrimSpace(string(out)); v != "1.18.33" {
		t.Logf("warning: %s is opencode %s, the references are for 1.18.33", bin, v)
	}
	return bin
}

func TestRecordPromptReference(t *testing.T) {
	if !*promptRecord {
		t.Skip("records testdata/reference/prompt from the real server; run with -prompt.record")
	}
	bin := opencodeBinary(t)
	if err := os.MkdirAll(promptRefDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pc := range promptCases {
		if *promptOnly != "" && !strings.Contains(","+*promptOnly+",", ","+pc.Name+",") {
			continue
		}
		t.Run(pc.Name, func(t *testing.T) { recordPromptCase(t, bin, pc, promptRefDir) })
	}
}

// recordPromptCase runs the case on the real server and writes what the
// model got to outDir/<case>.json.
func recordPromptCase(t *testing.T, bin string, pc promptCase, outDir string) {
	root, err := os.MkdirTemp("", "prompt-ref-")
	if err != nil {
		t.Fatal(err)
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("work dir kept: %s (serve.log)", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	dir, home := filepath.Join(root, "project"), filepath.Join(root, "home")
	for _, d := range []string{dir, home + "/.config/opencode", home + "/.local/share", home + "/.local/state", home + "/.cache"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var stubURL string
	if pc.API != nil {
		stubURL = pc.API.Start(t, pc.Script)
	} else {
		script := pc.Script
		if script == nil {
			script = stubmodel.Echo
		}
		stubURL = stubmodel.NewServer(t, script).URL()
	}
	rec := &modelRecorder{}
	proxy := httptest.NewServer(rec.handler(stubURL))
	t.Cleanup(proxy.Close)
	// The reference's opencode.json (refConfig, ../shared/reference/), or
	// the API's.
	cfg, basePath := []byte(refConfig), "/v1"
	if pc.API != nil {
		cfg, basePath = []byte(pc.API.Config), pc.API.BasePath
	}
	cfg = bytes.ReplaceAll(cfg, []byte("MODEL_BASE_URL"), []byte(proxy.URL+basePath))
	if pc.Config != nil {
		cfg = pc.Config(cfg)
	}
	writeFile(t, filepath.Join(home, ".config/opencode/opencode.json"), cfg)
	sessionDir := pc.Setup(t, dir, home)

	port := freePort(t, 14700, 14799)
	logf, err := os.Create(filepath.Join(root, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--hostname", "127.0.0.1", "--port", strconv.Itoa(port), "--print-logs")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary, even when a timeout panics it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(cleanEnv(),
		"HOME="+home,
		"XDG_CONFIG_HOME="+home+"/.config",
		"XDG_DATA_HOME="+home+"/.local/share",
		"XDG_STATE_HOME="+home+"/.local/state",
		"XDG_CACHE_HOME="+home+"/.cache",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	)
	cmd.Env = append(cmd.Env, pc.Env...)
	if pc.ModelsDev != "" {
		writeFile(t, filepath.Join(root, "api.json"), []byte(pc.ModelsDev))
		cmd.Env = append(cmd.Env, "OPENCODE_MODELS_PATH="+filepath.Join(root, "api.json"))
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPid(cmd.Process.Pid); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(t, base, root)

	call := func(method, path, body string) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-opencode-directory", url.PathEscape(sessionDir))
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
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
	var ses struct {
		ID        string `json:"id"`
		Directory string `json:"directory"`
	}
	if err := json.Unmarshal(call("POST", "/session", "{}"), &ses); err != nil || ses.ID == "" {
		t.Fatalf("POST /session: %v", err)
	}
	if ses.Directory != sessionDir {
		t.Errorf("session directory %q, want %q", ses.Directory, sessionDir)
	}
	// waitQuiet waits until the model has had no new request for 1.5 s.
	waitQuiet := func() {
		for last := len(rec.all()); ; {
			time.Sleep(1500 * time.Millisecond)
			if n := len(rec.all()); n == last {
				return
			} else {
				last = n
			}
		}
	}
	paths := strings.NewReplacer("<DIR>", dir, "<ROOT>", root, "<HOME>", home)
	for _, st := range pc.steps() {
		st.wait(t, base, sessionDir, ses.ID)
		call("POST", "/session/"+ses.ID+"/"+st.Route, paths.Replace(st.Body))
		switch st.Route {
		case "message", "command", "prompt_async":
			continue
		}
		// summarize blocks until the compaction is done, abort returns at
		// once; wait for the session to leave GET /session/status and the
		// model to be quiet before the next step.
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			var status map[string]json.RawMessage
			if err := json.Unmarshal(call("GET", "/session/status", ""), &status); err != nil {
				t.Fatalf("GET /session/status: %v", err)
			}
			if _, busy := status[ses.ID]; !busy {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		waitQuiet()
	}
	if pc.API != nil {
		checkAcceptedStreams(t, pc.API, call("GET", "/session/"+ses.ID+"/message", ""))
	}
	// The title request is sent beside the first turn; wait for it, then for
	// the model to stay quiet.
	deadline := time.Now().Add(30 * time.Second)
	for pc.NeedTitle && time.Now().Before(deadline) {
		n := 0
		for _, r := range rec.all() {
			if isTitleRequest(r.Body) {
				n++
			}
		}
		if n > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitQuiet()
	if pc.API != nil && pc.NeedTitle {
		checkTitled(t, call("GET", "/session/"+ses.ID, ""))
	}

	norm := newPromptNormaliser(map[string]string{dir: "<DIR>", home: "<HOME>", root: "<ROOT>"})
	out := struct {
		Case     string          `json:"case"`
		Opencode string          `json:"opencode"`
		Session  string          `json:"sessionDirectory"`
		Prompts  []any           `json:"prompts,omitempty"`
		Steps    []any           `json:"steps,omitempty"`
		Requests []promptRequest `json:"requests"`
		Titles   []promptRequest `json:"titles"`
	}{Case: pc.Name, Opencode: "1.18.33", Session: norm.text(sessionDir), Requests: []promptRequest{}, Titles: []promptRequest{}}
	if pc.Steps == nil {
		for _, p := range pc.Prompts {
			out.Prompts = append(out.Prompts, json.RawMessage(p))
		}
	}
	for _, st := range pc.Steps {
		out.Steps = append(out.Steps, struct {
			Route string          `json:"route"`
			Body  json.RawMessage `json:"body"`
		}{"POST /session/{id}/" + st.Route, json.RawMessage(st.Body)})
	}
	dateLogged := false
	var arrival []string
	for _, r := range rec.all() {
		if d := dateRE.Find(r.Body); d != nil && !dateLogged {
			t.Logf("normalised %q", d) // Date.toDateString(): "Today's date: Mon Nov 30 2026"
			dateLogged = true
		}
		pr := promptRequest{Path: r.Path, Header: map[string]string{}, Body: json.RawMessage(norm.text(string(r.Body)))}
		for k, v := range r.Header {
			switch strings.ToLower(k) {
			case "content-length", "accept-encoding", "connection":
				continue
			}
			pr.Header[strings.ToLower(k)] = norm.text(strings.Join(v, ", "))
		}
		if !json.Valid(pr.Body) {
			t.Fatalf("normalised request body is not JSON: %s", pr.Body)
		}
		if isTitleRequest(r.Body) {
			out.Titles = append(out.Titles, pr)
			arrival = append(arrival, fmt.Sprintf("titles[%d] %s", len(out.Titles)-1, pr.Header["x-session-id"]))
		} else {
			out.Requests = append(out.Requests, pr)
			arrival = append(arrival, fmt.Sprintf("requests[%d] %s", len(out.Requests)-1, pr.Header["x-session-id"]))
		}
	}
	t.Logf("arrival order: %s", strings.Join(arrival, ", "))
	if len(out.Requests) == 0 {
		t.Errorf("the model got no turn request")
	}
	if pc.NeedTitle && len(out.Titles) == 0 {
		t.Errorf("the model got no title request")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{root, "prompt-ref-"} {
		if bytes.Contains(buf.Bytes(), []byte(leak)) {
			t.Errorf("%s left in the output", leak)
		}
	}
	writeFile(t, filepath.Join(outDir, pc.Name+".json"), buf.Bytes())
	t.Logf("%s: %d turn requests, %d title requests", pc.Name, len(out.Requests), len(out.Titles))
}

type promptRequest struct {
	Path   string            `json:"path"`
	Header map[string]string `json:"headers"`
	Body   json.RawMessage   `json:"body"`
}

// cleanEnv is the test's environment without what would point the real
// server at the user's own home, config or credentials.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "OPENCODE") ||
			strings.HasSuffix(k, "_API_KEY") || strings.HasPrefix(k, "ANTHROPIC") || strings.HasPrefix(k, "OPENAI") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func waitHealth(t *testing.T, base, root string) {
	t.Helper()
	// A request that arrives while the server is still starting may never
	// be answered: ask with a short timeout, again and again.
	c := &http.Client{Timeout: 2 * time.Second}
	for i := 0; i < 150; i++ {
		resp, err := c.Get(base + "/global/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(root, "serve.log"))
	t.Fatalf("opencode serve did not come up:\n%s", log)
}

// promptNormaliser replaces paths (longest first), the date and random IDs.
type promptNormaliser struct {
	paths []string
	repl  map[string]string
	ids   map[string]string
	count map[string]int
}

var (
	dateRE = regexp.MustCompile(`Today's date: [^"\\]*`)
	idRE   = regexp.MustCompile(`\b(prt|msg|ses|call|toolu|tool)_[A-Za-z0-9]{8,}\b`)
	// ulidRE is a bare ULID (Crockford base32, 26 characters), as the
	// task tool call of a subtask command has for its ID.
	ulidRE = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
)

func newPromptNormaliser(paths map[string]string) *promptNormaliser {
	n := &promptNormaliser{repl: paths, ids: map[string]string{}, count: map[string]int{}}
	for p := range paths {
		n.paths = append(n.paths, p)
	}
	sort.Slice(n.paths, func(i, j int) bool { return len(n.paths[i]) > len(n.paths[j]) })
	return n
}

func (n *promptNormaliser) text(s string) string {
	for _, p := range n.paths {
		s = strings.ReplaceAll(s, p, n.repl[p])
	}
	s = dateRE.ReplaceAllString(s, "Today's date: <DATE>")
	s = idRE.ReplaceAllStringFunc(s, func(id string) string {
		kind, _, _ := strings.Cut(id, "_")
		return n.id(kind, id)
	})
	return ulidRE.ReplaceAllStringFunc(s, func(id string) string { return n.id("ulid", id) })
}

// id is the placeholder of id, <kind_N> in the order of first appearance.
func (n *promptNormaliser) id(kind, id string) string {
	if r, ok := n.ids[id]; ok {
		return r
	}
	n.count[kind]++
	r := fmt.Sprintf("<%s_%d>", kind, n.count[kind])
	n.ids[id] = r
	return r
}
