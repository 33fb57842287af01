package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// nativeCall is one model request as both sides made it: its path, its headers
// (lower-case names) and its JSON body, normalised.
type nativeCall struct {
	Path   string
	Header map[string]string
	Body   map[string]any
}

// nativeRun is what a server sent for a case: the turns' model calls
// in order and the title requests.
type nativeRun struct {
	requests, titles []nativeCall
}

func loadNativeRef(t *testing.T, api *nativeAPI, name string) nativeRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(api.RefDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Requests []promptRequest `json:"requests"`
		Titles   []promptRequest `json:"titles"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	conv := func(in []promptRequest) []nativeCall {
		var out []nativeCall
		for _, r := range in {
			out = append(out, nativeCall{Path: r.Path, Header: r.Header, Body: decodeBody(t, r.Body)})
		}
		return out
	}
	return nativeRun{requests: conv(f.Requests), titles: conv(f.Titles)}
}

func decodeBody(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("request body: %v\n%s", err, raw)
	}
	return body
}

// runOursNative runs the case on our server (internal/testserver) with
// the API's config pointing at its stub behind the recording proxy, and
// returns every model request, normalised as the recorder normalises the
// reference's.
func runOursNative(t *testing.T, pc promptCase) nativeRun {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, home := filepath.Join(root, "project"), filepath.Join(root, "home")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	sessionDir := pc.Setup(t, dir, home)
	rec := &modelRecorder{}
	proxy := httptest.NewServer(rec.handler(pc.API.Start(t, pc.Script)))
	t.Cleanup(proxy.Close)
	raw := []byte(strings.ReplaceAll(pc.API.Config, "MODEL_BASE_URL", proxy.URL+pc.API.BasePath))
	if pc.Config != nil {
		raw = pc.Config(raw)
	}
	cfg, err := config.Parse(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := testserver.Options{Config: cfg, Directory: sessionDir}
	for _, kv := range pc.Env {
		k, v, _ := strings.Cut(kv, "=")
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		opts.Env[k] = v
	}
	if pc.ModelsDev != "" {
		opts.ModelsPath = filepath.Join(root, "api.json")
		writeFile(t, opts.ModelsPath, []byte(pc.ModelsDev))
	}
	srv := testserver.Start(t, opts)
	post := func(path, body string) []byte {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-opencode-directory", sessionDir)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	var s struct{ ID string }
	_ = json.Unmarshal(post("/session", "{}"), &s)
	paths := strings.NewReplacer("<DIR>", dir, "<ROOT>", root, "<HOME>", home)
	for _, st := range pc.steps() {
		st.wait(t, srv.URL, sessionDir, s.ID)
		post("/session/"+s.ID+"/"+st.Route, paths.Replace(st.Body))
	}
	titled := func() bool {
		for _, r := range rec.all() {
			if isTitleRequest(r.Body) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(5 * time.Second); pc.NeedTitle && !titled() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	norm := newPromptNormaliser(map[string]string{dir: "<DIR>", home: "<HOME>", root: "<ROOT>"})
	var run nativeRun
	for _, r := range rec.all() {
		c := nativeCall{Path: r.Path, Header: map[string]string{}, Body: decodeBody(t, []byte(norm.text(string(r.Body))))}
		for k, v := range r.Header {
			c.Header[strings.ToLower(k)] = norm.text(strings.Join(v, ", "))
		}
		if isTitleRequest(r.Body) {
			run.titles = append(run.titles, c)
		} else {
			run.requests = append(run.requests, c)
		}
	}
	return run
}

// nativeRule is one known difference, or one thing each server words
// its own way: it edits both sides of a model call alike (or ours toward
// the reference for a named reason) and reports whether it found what it
// is about. A rule that finds nothing in a whole run fails the test, so
// the table stays minimal.
type nativeRule struct {
	ID  string
	Why string
	// Apply edits the call of ours and the reference's; title tells a
	// title request.
	Apply func(t *testing.T, api *nativeAPI, title bool, ours, ref *nativeCall) bool
}

// Header names that are not compared: each client's own, or the
// connection's.
var nativeIgnoredHeaders = []string{"user-agent", "accept-encoding", "content-length", "connection"}

var nativeRules = []nativeRule{
	{
		ID:  "system-prose",
		Why: "the system prompt is ours to word (README, our own words): both sides must send the same number of system blocks (items, parts) with the same cache marks, and the same facts in them (the environment block, the instruction files, the skills, what follows the skills; `sections`, as TestPromptMatchesReference compares them); the prose is not compared",
		Apply: func(t *testing.T, api *nativeAPI, title bool, ours, ref *nativeCall) bool {
			oSys, oSet := api.System(ours.Body)
			rSys, rSet := api.System(ref.Body)
			if len(oSys) == 0 && len(rSys) == 0 {
				return false
			}
			if !title {
				oenv, oins, osk, olast := sections(strings.Join(oSys, "\n"))
				renv, rins, rsk, rlast := sections(strings.Join(rSys, "\n"))
				if oenv != renv {
					t.Errorf("environment block\n ours %q\n  ref %q", oenv, renv)
				}
				if !slices.Equal(oins, rins) {
					t.Errorf("instructions\n ours %q\n  ref %q", oins, rins)
				}
				if !slices.Equal(osk, rsk) {
					t.Errorf("skills ours %q, ref %q", osk, rsk)
				}
				if olast != rlast {
					t.Errorf("after the skills: ours %q, ref %q", olast, rlast)
				}
			}
			oSet("<system text>")
			rSet("<system text>")
			return true
		},
	},
	{
		ID:  "title-question",
		Why: "the title request's question before the first message is ours to word (ownWords)",
		Apply: func(t *testing.T, _ *nativeAPI, title bool, ours, ref *nativeCall) bool {
			if !title {
				return false
			}
			n := 0
			for _, c := range []*nativeCall{ours, ref} {
				c.Body = mapStrings(c.Body, func(s string) string {
					if w, ok := ownWords(s).(string); ok && w != s && w == "<title question>" {
						n++
						return w
					}
					return s
				}).(map[string]any)
			}
			return n > 0
		},
	},
	{
		ID: "tool-definitions",
		Why: "the tools' descriptions and parameter schemas are the tool package's (our own words, as TestPromptMatchesReference treats them): " +
			"compared are each tool's name, its parameter names and required ones, and the task tool's subagents; the provider sends the rest of each " +
			"tool (eager_input_streaming, cache_control, strict, type) and the schema as given, so those are compared whole apart from the schema and the description",
		Apply: func(t *testing.T, api *nativeAPI, _ bool, ours, ref *nativeCall) bool {
			hit := false
			for _, c := range []*nativeCall{ours, ref} {
				for _, m := range api.Tools(c.Body) {
					schema, _ := m[api.SchemaKey].(map[string]any)
					var names []string
					props, _ := schema["properties"].(map[string]any)
					for k := range props {
						names = append(names, k)
					}
					sort.Strings(names)
					var req []string
					rs, _ := schema["required"].([]any)
					for _, r := range rs {
						s, _ := r.(string)
						req = append(req, s)
					}
					sort.Strings(req)
					m[api.SchemaKey] = strings.Join(names, ",") + " required " + strings.Join(req, ",")
					if d, ok := m["description"].(string); ok {
						m["description"] = "<description>"
						if m["name"] == "task" {
							var agents []string
							for _, a := range regexp.MustCompile(`(?m)^- ([a-z][a-z0-9_-]*): `).FindAllStringSubmatch(d, -1) {
								agents = append(agents, a[1])
							}
							sort.Strings(agents)
							m["description"] = "<description> subagents " + strings.Join(agents, ",")
						}
					}
					hit = true
				}
			}
			return hit
		},
	},
	{
		ID:  "ignored-headers",
		Why: "user-agent names each client (ours is Go's), accept-encoding, content-length and connection are the HTTP stack's",
		Apply: func(t *testing.T, _ *nativeAPI, _ bool, ours, ref *nativeCall) bool {
			n := 0
			for _, c := range []*nativeCall{ours, ref} {
				for _, h := range nativeIgnoredHeaders {
					if _, ok := c.Header[h]; ok {
						delete(c.Header, h)
						n++
					}
				}
			}
			return n > 0
		},
	},
}

// mapStrings replaces every string value (not keys) in v by f's answer.
func mapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for i := range x {
			x[i] = mapStrings(x[i], f)
		}
	case map[string]any:
		for k := range x {
			x[k] = mapStrings(x[k], f)
		}
	}
	return v
}

// jsonDiff lists the paths where a and b differ, with both values.
func jsonDiff(path string, a, b any, out *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			av, aok := x[k]
			bv, bok := y[k]
			switch {
			case !aok:
				*out = append(*out, fmt.Sprintf("%s.%s: ours has none, the reference %s", path, k, clipJSON(bv)))
			case !bok:
				*out = append(*out, fmt.Sprintf("%s.%s: ours %s, the reference has none", path, k, clipJSON(av)))
			default:
				jsonDiff(path+"."+k, av, bv, out)
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: %d entries, the reference %d\n   ours %s\n    ref %s", path, len(x), len(y), clipJSON(x), clipJSON(y)))
			return
		}
		for i := range x {
			jsonDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
		}
		return
	}
	if ja, jb := clipJSON(a), clipJSON(b); ja != jb {
		*out = append(*out, fmt.Sprintf("%s: ours %s, the reference %s", path, ja, jb))
	}
}

func clipJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	s := strings.TrimSuffix(buf.String(), "\n")
	if len(s) > 400 {
		s = s[:300] + " … " + s[len(s)-80:]
	}
	return s
}

// TestNativeMatchesReference runs the cases of every native API
// (nativeCases) on our server, its model the API's stub behind the
// recording proxy, and compares every model request with the real
// OpenCode's (testdata/reference/prompt-<api>): the headers but those
// nativeIgnoredHeaders names, and the whole JSON body, after the
// nativeRules.
func TestNativeMatchesReference(t *testing.T) {
	used := map[string]int{}
	ran, want := 0, 0
	for _, api := range nativeAPIs {
		cases := nativeCases(api)
		want += len(cases)
		for _, pc := range cases {
			t.Run(api.Name+"/"+pc.Name, func(t *testing.T) {
				ran++
				ref, ours := loadNativeRef(t, api, pc.Name), runOursNative(t, pc)
				if len(ours.requests) != len(ref.requests) || len(ours.titles) != len(ref.titles) {
					t.Fatalf("%d requests and %d titles, the reference %d and %d", len(ours.requests), len(ours.titles), len(ref.requests), len(ref.titles))
				}
				compare := func(what string, title bool, o, r nativeCall) {
					for _, rule := range nativeRules {
						if rule.Apply(t, api, title, &o, &r) {
							used[rule.ID]++
						}
					}
					var diffs []string
					if o.Path != r.Path {
						diffs = append(diffs, fmt.Sprintf("path: ours %s, the reference %s", o.Path, r.Path))
					}
					hs := map[string]bool{}
					for k := range o.Header {
						hs[k] = true
					}
					for k := range r.Header {
						hs[k] = true
					}
					var names []string
					for k := range hs {
						names = append(names, k)
					}
					sort.Strings(names)
					for _, k := range names {
						ov, ook := o.Header[k]
						rv, rok := r.Header[k]
						switch {
						case !ook:
							diffs = append(diffs, fmt.Sprintf("header %s: ours none, the reference %q", k, rv))
						case !rok:
							diffs = append(diffs, fmt.Sprintf("header %s: ours %q, the reference none", k, ov))
						case ov != rv:
							diffs = append(diffs, fmt.Sprintf("header %s: ours %q, the reference %q", k, ov, rv))
						}
					}
					jsonDiff("body", o.Body, r.Body, &diffs)
					if len(diffs) > 0 {
						t.Errorf("%s:\n  %s", what, strings.Join(diffs, "\n  "))
					}
				}
				if api == anthropicAPI {
					checkAnthropicCase(t, pc.Name, ours)
				}
				for i := range ref.requests {
					compare(fmt.Sprintf("model call %d", i+1), false, ours.requests[i], ref.requests[i])
				}
				for i := range ref.titles {
					compare(fmt.Sprintf("title request %d", i+1), true, ours.titles[i], ref.titles[i])
				}
			})
		}
	}
	if t.Failed() || ran < want {
		return // a rule's use is judged on a whole, passing run
	}
	for _, rule := range nativeRules {
		if used[rule.ID] == 0 {
			t.Errorf("rule %s matched nothing: drop it", rule.ID)
		}
	}
}

// checkAnthropicCase checks, beyond the likeness with the reference, what
// a case is about in our requests (before any rule edits them).
func checkAnthropicCase(t *testing.T, name string, ours nativeRun) {
	t.Helper()
	blocks := func(c nativeCall, msg int) []map[string]any {
		msgs, _ := c.Body["messages"].([]any)
		if msg >= len(msgs) {
			return nil
		}
		content, _ := msgs[msg].(map[string]any)["content"].([]any)
		var out []map[string]any
		for _, b := range content {
			m, _ := b.(map[string]any)
			out = append(out, m)
		}
		return out
	}
	switch name {
	case "thinking-tool":
		// The second call sends the first reply back: the signed thinking
		// block (no cache mark), then the tool_use (marked).
		a := blocks(ours.requests[1], 1)
		if len(a) != 2 || a[0]["type"] != "thinking" || a[0]["signature"] != "stub-signature-1" || a[0]["cache_control"] != nil ||
			a[1]["type"] != "tool_use" || a[1]["cache_control"] == nil {
			t.Errorf("the assistant message sent back: %s", clipJSON(a))
		}
	case "long":
		// Every call marks the last block of its last two messages, and
		// no other message (the system block's mark is in the body
		// compared).
		for i, c := range ours.requests {
			msgs, _ := c.Body["messages"].([]any)
			var marked []int
			for k := range msgs {
				for _, b := range blocks(c, k) {
					if b["cache_control"] != nil {
						marked = append(marked, k)
					}
				}
			}
			want := []int{len(msgs) - 1}
			if len(msgs) > 1 {
				want = []int{len(msgs) - 2, len(msgs) - 1}
			}
			if !slices.Equal(marked, want) {
				t.Errorf("model call %d: cache marks on messages %v, want %v", i+1, marked, want)
			}
		}
	}
}
