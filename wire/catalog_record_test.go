package wire

// TestRecordCatalogReference records what the real `opencode serve` 1.18.33
// answers about providers, models and credentials for a given models.dev
// catalog, auth.json, environment and config:
//
//	go test ./wire -run TestRecordCatalogReference -catalog.record -v -timeout 20m
//
// Every case runs on a fresh server in a fresh temp root (project dir, HOME
// and XDG_CONFIG/DATA/STATE/CACHE_HOME under it, cleanEnv()), with
// OPENCODE_MODELS_PATH pointing at catalogAPIJSON (a small models.dev
// api.json, also written to testdata/reference/catalog/api.json) and
// OPENCODE_DISABLE_MODELS_FETCH=1. After start (and after each of the case's
// steps) it reads GET /provider, /config/providers, /provider/auth,
// /api/provider, /api/provider/anthropic, /api/provider/nope, /api/model and
// /config, probes the server's default model (POST /session, then POST
// /session/{id}/message with noReply: the user message's model is
// Provider.defaultModel), and looks at auth.json (mode and content). It
// writes testdata/reference/catalog/<case>.json: status and body of every
// answer, key order kept, temp paths replaced by <ROOT>, <HOME>, <DIR>, and
// every secret replaced by <KEY:name>, with the JSON pointers where each
// secret appeared in "keyLocations". Each case runs -catalog.runs times (2)
// and the outputs must be identical. Without -catalog.record the test is
// skipped.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	catalogRecord = flag.Bool("catalog.record", false, "record testdata/reference/catalog from the real opencode serve (TestRecordCatalogReference)")
	catalogOnly   = flag.String("catalog.only", "", "comma list of catalog cases to record (default all)")
	catalogRuns   = flag.Int("catalog.runs", 2, "TestRecordCatalogReference: run each case this many times; the outputs must be identical")
	catalogKeep   = flag.Bool("catalog.keep", false, "TestRecordCatalogReference: keep every case's work dir (serve.log)")
)

const catalogRefDir = "../testdata/reference/catalog"

// catalogAPIJSON is the models.dev catalog every case loads through
// OPENCODE_MODELS_PATH, in the real api.json shape.
const catalogAPIJSON = `{
  "anthropic": {
    "id": "anthropic",
    "name": "Anthropic",
    "env": ["ANTHROPIC_API_KEY"],
    "npm": "@ai-sdk/anthropic",
    "doc": "https://docs.anthropic.com/en/docs/about-claude/models",
    "models": {
      "claude-sonnet-4-5": {
        "id": "claude-sonnet-4-5",
        "name": "Claude Sonnet 4.5",
        "family": "claude-sonnet",
        "attachment": true,
        "reasoning": true,
        "tool_call": true,
        "temperature": true,
        "release_date": "2025-09-29",
        "last_updated": "2025-09-29",
        "modalities": {"input": ["text", "image", "pdf"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
        "limit": {"context": 200000, "output": 64000}
      },
      "claude-3-opus-20240229": {
        "id": "claude-3-opus-20240229",
        "name": "Claude Opus 3",
        "family": "claude-opus",
        "attachment": true,
        "reasoning": false,
        "tool_call": true,
        "temperature": true,
        "release_date": "2024-02-29",
        "last_updated": "2024-02-29",
        "modalities": {"input": ["text", "image"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 15, "output": 75, "cache_read": 1.5, "cache_write": 18.75},
        "limit": {"context": 200000, "output": 4096},
        "status": "deprecated"
      },
      "claude-opus-5-preview": {
        "id": "claude-opus-5-preview",
        "name": "Claude Opus 5 Preview",
        "family": "claude-opus",
        "attachment": true,
        "reasoning": true,
        "tool_call": true,
        "temperature": true,
        "release_date": "2026-06-01",
        "last_updated": "2026-06-01",
        "modalities": {"input": ["text", "image", "pdf"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 15, "output": 75, "cache_read": 1.5, "cache_write": 18.75},
        "limit": {"context": 200000, "output": 32000},
        "status": "alpha"
      }
    }
  },
  "openai": {
    "id": "openai",
    "name": "OpenAI",
    "env": ["OPENAI_API_KEY"],
    "npm": "@ai-sdk/openai",
    "doc": "https://platform.openai.com/docs/models",
    "models": {
      "gpt-5": {
        "id": "gpt-5",
        "name": "GPT-5",
        "family": "gpt",
        "attachment": true,
        "reasoning": true,
        "tool_call": true,
        "temperature": false,
        "release_date": "2025-08-07",
        "last_updated": "2025-08-07",
        "modalities": {"input": ["text", "image"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 1.25, "output": 10, "cache_read": 0.125},
        "limit": {"context": 400000, "output": 128000}
      },
      "gpt-4.1-mini": {
        "id": "gpt-4.1-mini",
        "name": "GPT-4.1 mini",
        "family": "gpt-mini",
        "attachment": false,
        "reasoning": false,
        "tool_call": true,
        "temperature": true,
        "release_date": "2025-04-14",
        "last_updated": "2025-04-14",
        "modalities": {"input": ["text"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 0.4, "output": 1.6, "cache_read": 0.1},
        "limit": {"context": 1047576, "output": 32768}
      }
    }
  },
  "google": {
    "id": "google",
    "name": "Google",
    "env": ["GOOGLE_GENERATIVE_AI_API_KEY", "GEMINI_API_KEY"],
    "npm": "@ai-sdk/google",
    "doc": "https://ai.google.dev/gemini-api/docs/pricing",
    "models": {
      "gemini-2.5-pro": {
        "id": "gemini-2.5-pro",
        "name": "Gemini 2.5 Pro",
        "family": "gemini-pro",
        "attachment": true,
        "reasoning": true,
        "tool_call": true,
        "temperature": true,
        "release_date": "2025-03-20",
        "last_updated": "2025-06-05",
        "modalities": {"input": ["text", "image", "audio", "video", "pdf"], "output": ["text"]},
        "open_weights": false,
        "cost": {"input": 1.25, "output": 10, "cache_read": 0.31},
        "limit": {"context": 1048576, "output": 65536}
      }
    }
  },
  "localai": {
    "id": "localai",
    "name": "LocalAI",
    "env": ["LOCALAI_API_KEY"],
    "npm": "@ai-sdk/openai-compatible",
    "api": "http://127.0.0.1:9/v1",
    "doc": "https://localai.io/docs",
    "models": {
      "local-llama": {
        "id": "local-llama",
        "name": "Local Llama",
        "family": "llama",
        "attachment": false,
        "reasoning": false,
        "tool_call": true,
        "temperature": true,
        "release_date": "2025-01-01",
        "last_updated": "2025-01-01",
        "modalities": {"input": ["text"], "output": ["text"]},
        "open_weights": true,
        "cost": {"input": 0, "output": 0},
        "limit": {"context": 32768, "output": 8192}
      }
    }
  }
}
`

// catalogSecrets are the credential values the cases use, by the name
// that replaces them (<KEY:name>) in the recordings.
var catalogSecrets = map[string]string{
	"anthropic-env":           "sk-ant-test-env",
	"openai-authjson":         "sk-openai-test",
	"google-oauth-refresh":    "r",
	"google-oauth-access":     "a",
	"localai-wellknown-key":   "k",
	"localai-wellknown-token": "t",
	"localai-config-apikey":   "cfg-key",
	"anthropic-put":           "sk-put",
}

const (
	catalogAuthJSON = `{"openai":{"type":"api","key":"sk-openai-test"},"google":{"type":"oauth","refresh":"r","access":"a","expires":0},"localai":{"type":"wellknown","key":"k","token":"t"}}`
	// catalogAuthNoWellKnown is catalogAuthJSON without its wellknown
	// entry, which makes every config read fail (see NOTES.md).
	catalogAuthNoWellKnown = `{"openai":{"type":"api","key":"sk-openai-test"},"google":{"type":"oauth","refresh":"r","access":"a","expires":0}}`
	catalogConfig          = `{"$schema":"https://opencode.ai/config.json","provider":{"localai":{"options":{"apiKey":"cfg-key"},"models":{"extra-model":{"name":"Extra"}}},"anthropic":{"whitelist":["claude-sonnet-4-5"]}},"disabled_providers":["google"],"model":"localai/extra-model"}`
	catalogModelJSON       = `{"recent":[{"providerID":"openai","modelID":"gpt-4.1-mini"}],"favorite":[],"variant":{}}`
)

// catalogCase is one recorded case: a server's inputs, and steps after the
// first reading.
type catalogCase struct {
	Name      string
	Env       map[string]string // extra environment (keys)
	AuthJSON  string            // $XDG_DATA_HOME/opencode/auth.json, mode 0600
	Config    string            // $XDG_CONFIG_HOME/opencode/opencode.json
	ModelJSON string            // $XDG_STATE_HOME/opencode/model.json
	Steps     []catalogStep     // each followed by a reading
}

// catalogStep is a call made between readings.
type catalogStep struct {
	Method, Path, Body string
}

var catalogCases = []catalogCase{
	{Name: "none"},
	{Name: "env", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-env"}},
	{Name: "authjson", AuthJSON: catalogAuthJSON},
	{Name: "config", Config: catalogConfig, Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-env"}},
	{
		Name: "put-auth",
		Steps: []catalogStep{
			{"PUT", "/auth/anthropic", `{"type":"api","key":"sk-put"}`},
			{"POST", "/instance/dispose", ""},
			{"DELETE", "/auth/anthropic", ""},
			{"POST", "/instance/dispose", ""},
		},
	},
	// The brief's state-model (env + authjson keys + model.json): the
	// wellknown entry breaks the v1 side, as in authjson.
	{
		Name:      "state-model-wellknown",
		Env:       map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-env"},
		AuthJSON:  catalogAuthJSON,
		ModelJSON: catalogModelJSON,
	},
	// Without the wellknown entry: authjson alone, with the env key, and
	// with the env key and model.json.
	{Name: "authjson-nowellknown", AuthJSON: catalogAuthNoWellKnown},
	{Name: "env-authjson", Env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-env"}, AuthJSON: catalogAuthNoWellKnown},
	{
		Name:      "state-model",
		Env:       map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-env"},
		AuthJSON:  catalogAuthNoWellKnown,
		ModelJSON: catalogModelJSON,
	},
}

// catalogReads are the GETs of every reading.
var catalogReads = []string{
	"/provider",
	"/config/providers",
	"/provider/auth",
	"/api/provider",
	"/api/provider/anthropic",
	"/api/provider/nope",
	"/api/model",
	"/config",
}

func TestRecordCatalogReference(t *testing.T) {
	if !*catalogRecord {
		t.Skip("records testdata/reference/catalog from the real server; run with -catalog.record")
	}
	bin := opencodeBinary(t)
	if err := os.MkdirAll(catalogRefDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if !json.Valid([]byte(catalogAPIJSON)) {
		t.Fatal("catalogAPIJSON is not JSON")
	}
	writeFile(t, filepath.Join(catalogRefDir, "api.json"), []byte(catalogAPIJSON))
	for _, cc := range catalogCases {
		if *catalogOnly != "" && !strings.Contains(","+*catalogOnly+",", ","+cc.Name+",") {
			continue
		}
		t.Run(cc.Name, func(t *testing.T) {
			var first []byte
			for run := 1; run <= *catalogRuns; run++ {
				out := recordCatalogCase(t, bin, cc)
				if t.Failed() {
					return
				}
				if run == 1 {
					first = out
					continue
				}
				if !bytes.Equal(first, out) {
					writeFile(t, filepath.Join(catalogRefDir, cc.Name+".run"+strconv.Itoa(run)+".json"), out)
					t.Fatalf("run %d differs from run 1 at: %s", run, firstDiffLine(first, out))
				}
			}
			writeFile(t, filepath.Join(catalogRefDir, cc.Name+".json"), first)
		})
	}
}

func firstDiffLine(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d: %q vs %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d lines", len(al), len(bl))
}

// catalogAnswer is one recorded request and its answer.
type catalogAnswer struct {
	Request string `json:"request"`
	Status  int    `json:"status"`
	Body    any    `json:"body"`
}

type catalogFile struct {
	Mode    string `json:"mode"`
	Content any    `json:"content"`
}

type catalogReading struct {
	After        string          `json:"after"`
	Answers      []catalogAnswer `json:"answers"`
	DefaultModel catalogAnswer   `json:"defaultModel"`
	AuthJSON     *catalogFile    `json:"authJSON"`
}

func recordCatalogCase(t *testing.T, bin string, cc catalogCase) []byte {
	t.Helper()
	root, err := os.MkdirTemp("", "catalog-ref-")
	if err != nil {
		t.Fatal(err)
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *catalogKeep {
			t.Logf("work dir kept: %s (serve.log)", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	dir, home := filepath.Join(root, "project"), filepath.Join(root, "home")
	for _, d := range []string{dir, home + "/.config/opencode", home + "/.local/share/opencode", home + "/.local/state/opencode", home + "/.cache"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	modelsPath := filepath.Join(root, "api.json")
	writeFile(t, modelsPath, []byte(catalogAPIJSON))
	authPath := filepath.Join(home, ".local/share/opencode/auth.json")
	if cc.AuthJSON != "" {
		if err := os.WriteFile(authPath, []byte(cc.AuthJSON), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cc.Config != "" {
		writeFile(t, filepath.Join(home, ".config/opencode/opencode.json"), []byte(cc.Config))
	}
	if cc.ModelJSON != "" {
		writeFile(t, filepath.Join(home, ".local/state/opencode/model.json"), []byte(cc.ModelJSON))
	}

	port := freePort(t, 14800, 14899)
	logf, err := os.Create(filepath.Join(root, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	env := map[string]string{
		"HOME":                          home,
		"XDG_CONFIG_HOME":               home + "/.config",
		"XDG_DATA_HOME":                 home + "/.local/share",
		"XDG_STATE_HOME":                home + "/.local/state",
		"XDG_CACHE_HOME":                home + "/.cache",
		"OPENCODE_MODELS_PATH":          modelsPath,
		"OPENCODE_DISABLE_MODELS_FETCH": "1",
		"OPENCODE_DISABLE_AUTOUPDATE":   "1",
		"OPENCODE_DISABLE_SHARE":        "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
	}
	for k, v := range cc.Env {
		env[k] = v
	}
	cmd := exec.Command(bin, "serve", "--hostname", "127.0.0.1", "--port", strconv.Itoa(port), "--print-logs")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = cleanEnv()
	for _, k := range sortedKeys(env) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPid(cmd.Process.Pid); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealth(t, base, root)

	red := newCatalogRedactor(map[string]string{dir: "<DIR>", home: "<HOME>", root: "<ROOT>"})
	call := func(where, method, path, body string) catalogAnswer {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("x-opencode-directory", url.PathEscape(dir))
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := catalogAnswer{Request: method + " " + path, Status: resp.StatusCode}
		if len(bytes.TrimSpace(b)) == 0 {
			return a
		}
		v, err := ojDecode(b)
		if err != nil {
			v = string(b) // not JSON: keep the text
		}
		if where != "" { // "" notes no key location
			where += " " + a.Request
		}
		a.Body = red.value(v, where)
		return a
	}
	// settle waits until every read answers the same for 2 s: the v2
	// catalog behind /api/* fills in stages after an instance starts
	// (404, then every models.dev model, then the integrations' view).
	settle := func(after string) {
		t.Helper()
		var last []byte
		stableSince := time.Time{}
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			var snap []byte
			for _, p := range catalogReads {
				a := call("", "GET", p, "")
				b, _ := json.Marshal(a)
				snap = append(snap, b...)
			}
			if bytes.Equal(snap, last) {
				if time.Since(stableSince) >= 2*time.Second {
					return
				}
			} else {
				last, stableSince = snap, time.Now()
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("%s: the answers did not settle in 60 s", after)
	}
	reading := func(after string) catalogReading {
		settle(after)
		r := catalogReading{After: after}
		for _, p := range catalogReads {
			r.Answers = append(r.Answers, call(after, "GET", p, ""))
		}
		r.DefaultModel = probeDefaultModel(t, call, after)
		if fi, err := os.Stat(authPath); err == nil {
			b, _ := os.ReadFile(authPath)
			v, err := ojDecode(b)
			if err != nil {
				v = string(b)
			}
			r.AuthJSON = &catalogFile{Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), Content: red.value(v, after+" auth.json")}
		}
		return r
	}

	var readings []catalogReading
	readings = append(readings, reading("start"))
	for _, st := range cc.Steps {
		a := call("step", st.Method, st.Path, st.Body)
		if a.Status/100 != 2 {
			t.Errorf("%s %s: %d %v", st.Method, st.Path, a.Status, a.Body)
		}
		r := reading(st.Method + " " + st.Path)
		r.Answers = append([]catalogAnswer{a}, r.Answers...)
		readings = append(readings, r)
	}

	inputs := map[string]any{"api.json": "api.json (this directory), via OPENCODE_MODELS_PATH"}
	envOut := map[string]string{}
	for k, v := range env {
		envOut[k] = red.text(v)
	}
	inputs["env"] = envOut
	for name, text := range map[string]string{"auth.json": cc.AuthJSON, "opencode.json": cc.Config, "model.json": cc.ModelJSON} {
		if text == "" {
			continue
		}
		v, err := ojDecode([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = red.value(v, "") // "" records no location
	}
	var steps []string
	for _, st := range cc.Steps {
		steps = append(steps, strings.TrimSpace(st.Method+" "+st.Path+" "+red.text(st.Body)))
	}
	out := struct {
		Case         string              `json:"case"`
		Opencode     string              `json:"opencode"`
		Inputs       map[string]any      `json:"inputs"`
		Steps        []string            `json:"steps,omitempty"`
		Readings     []catalogReading    `json:"readings"`
		KeyLocations map[string][]string `json:"keyLocations"`
	}{cc.Name, "1.18.33", inputs, steps, readings, red.locations()}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{root, "catalog-ref-"} {
		if bytes.Contains(buf.Bytes(), []byte(leak)) {
			t.Errorf("%s left in the output", leak)
		}
	}
	for name, v := range catalogSecrets {
		if len(v) >= 4 && bytes.Contains(buf.Bytes(), []byte(v)) {
			t.Errorf("secret %s left in the output", name)
		}
	}
	return buf.Bytes()
}

// probeDefaultModel asks which model the server picks when a prompt names
// none: a new session, and a noReply message on it (no model call); the
// answer kept is the user message's model and agent.
func probeDefaultModel(t *testing.T, call func(where, method, path, body string) catalogAnswer, where string) catalogAnswer {
	t.Helper()
	ses := call(where, "POST", "/session", "{}")
	obj, _ := ses.Body.(*ojObject)
	id, _ := obj.get("id").(string)
	if ses.Status != 200 || id == "" {
		return ses
	}
	a := call(where, "POST", "/session/"+id+"/message", `{"parts":[{"type":"text","text":"which model?"}],"noReply":true}`)
	a.Request = "POST /session/{id}/message noReply"
	if o, ok := a.Body.(*ojObject); ok && a.Status == 200 {
		info, _ := o.get("info").(*ojObject)
		kept := &ojObject{}
		for _, k := range []string{"role", "agent", "model"} {
			if info != nil && info.has(k) {
				kept.set(k, info.get(k))
			}
		}
		a.Body = kept
	} else if o, ok := a.Body.(*ojObject); ok {
		a.Body = dropIDs(o)
	}
	return a
}

// dropIDs removes the volatile session/message IDs of an error body.
func dropIDs(v any) any {
	switch v := v.(type) {
	case *ojObject:
		o := &ojObject{}
		for i, k := range v.keys {
			switch k {
			case "sessionID", "messageID", "id":
				o.set(k, "<id>")
				continue
			}
			o.set(k, dropIDs(v.vals[i]))
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = dropIDs(e)
		}
		return out
	}
	return v
}

var errRefRE = regexp.MustCompile(`^err_[0-9a-f]{6,}$`)

// catalogRedactor replaces temp paths and secrets, and remembers where
// each secret was.
type catalogRedactor struct {
	paths []string
	repl  map[string]string
	secs  []string // secret values, longest first
	name  map[string]string
	seen  map[string][]string
}

func newCatalogRedactor(paths map[string]string) *catalogRedactor {
	r := &catalogRedactor{repl: paths, name: map[string]string{}, seen: map[string][]string{}}
	for p := range paths {
		r.paths = append(r.paths, p)
	}
	sort.Slice(r.paths, func(i, j int) bool { return len(r.paths[i]) > len(r.paths[j]) })
	for n, v := range catalogSecrets {
		r.secs = append(r.secs, v)
		r.name[v] = n
	}
	sort.Slice(r.secs, func(i, j int) bool { return len(r.secs[i]) > len(r.secs[j]) })
	return r
}

func (r *catalogRedactor) note(secret, where, ptr string) {
	if where == "" {
		return
	}
	where += " " + ptr
	n := "<KEY:" + r.name[secret] + ">"
	for _, w := range r.seen[n] {
		if w == where {
			return
		}
	}
	r.seen[n] = append(r.seen[n], where)
}

// text replaces paths and the long secrets within s (no location noted).
func (r *catalogRedactor) text(s string) string {
	for _, p := range r.paths {
		s = strings.ReplaceAll(s, p, r.repl[p])
	}
	for _, sec := range r.secs {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "<KEY:"+r.name[sec]+">")
		}
	}
	return s
}

// str redacts one string value at ptr: a value equal to a secret (any
// length), else the long secrets within it.
func (r *catalogRedactor) str(s, where, ptr string) string {
	for _, p := range r.paths {
		s = strings.ReplaceAll(s, p, r.repl[p])
	}
	if errRefRE.MatchString(s) {
		return "<err_ref>" // an error's random reference
	}
	if n, ok := r.name[s]; ok {
		r.note(s, where, ptr)
		return "<KEY:" + n + ">"
	}
	for _, sec := range r.secs {
		if len(sec) >= 4 && strings.Contains(s, sec) {
			r.note(sec, where, ptr)
			s = strings.ReplaceAll(s, sec, "<KEY:"+r.name[sec]+">")
		}
	}
	return s
}

// value redacts a decoded JSON value; where prefixes the JSON pointers
// noted ("" notes nothing).
func (r *catalogRedactor) value(v any, where string) any {
	return r.walk(v, where, "")
}

func (r *catalogRedactor) walk(v any, where, ptr string) any {
	switch v := v.(type) {
	case *ojObject:
		o := &ojObject{}
		for i, k := range v.keys {
			o.set(r.text(k), r.walk(v.vals[i], where, ptr+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k)))
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = r.walk(e, where, ptr+"/"+strconv.Itoa(i))
		}
		return out
	case string:
		if ptr == "" {
			ptr = "(body)"
		}
		return r.str(v, where, ptr)
	}
	return v
}

func (r *catalogRedactor) locations() map[string][]string {
	return r.seen
}

// ojObject is a JSON object that keeps its key order.
type ojObject struct {
	keys []string
	vals []any
}

func (o *ojObject) get(k string) any {
	if o == nil {
		return nil
	}
	for i, kk := range o.keys {
		if kk == k {
			return o.vals[i]
		}
	}
	return nil
}

func (o *ojObject) has(k string) bool {
	for _, kk := range o.keys {
		if kk == k {
			return true
		}
	}
	return false
}

func (o *ojObject) set(k string, v any) {
	for i, kk := range o.keys {
		if kk == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *ojObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
		buf.WriteByte(':')
		if err := enc.Encode(o.vals[i]); err != nil {
			return nil, err
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// ojDecode decodes JSON keeping object key order (*ojObject) and numbers
// as written (json.Number).
func ojDecode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := ojValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func ojValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := &ojObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := ojValue(dec)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals = append(o.vals, v)
		}
		_, err = dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := ojValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err = dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}
