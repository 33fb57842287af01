package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// catalogRecording is one case of testdata/reference/catalog: the inputs
// the real server got and what it answered after each step.
type catalogRecording struct {
	Case   string `json:"case"`
	Inputs struct {
		Env      map[string]string          `json:"env"`
		Config   json.RawMessage            `json:"opencode.json"`
		Auth     map[string]json.RawMessage `json:"auth.json"`
		ModelSt  json.RawMessage            `json:"model.json"`
		APIJSONf string                     `json:"api.json"`
	} `json:"inputs"`
	Readings []struct {
		After string `json:"after"`
		// DefaultModel is the model a prompt that names none gets (the
		// user message of a noReply prompt).
		DefaultModel struct {
			Status int `json:"status"`
			Body   struct {
				Model struct{ ProviderID, ModelID string } `json:"model"`
			} `json:"body"`
		} `json:"defaultModel"`
		Answers []struct {
			Request string          `json:"request"`
			Status  int             `json:"status"`
			Body    json.RawMessage `json:"body"`
		} `json:"answers"`
	} `json:"readings"`
}

// keyRef is a recorded secret's placeholder; the test gives each a value.
var keyRef = regexp.MustCompile(`<KEY:[^>]+>`)

// providerView is what is compared of a provider: its source, its models
// and what each model says (the fields both servers derive from the
// catalog, its thinking variants included, in their order).
type providerView struct {
	Source string
	Env    []string
	Models map[string]modelView
}

type modelView struct {
	Name         string
	Family       string
	Status       string
	API          map[string]string
	Capabilities json.RawMessage
	Variants     json.RawMessage
	Cost         json.RawMessage
	Limit        json.RawMessage
	ReleaseDate  string `json:"release_date"`
}

func viewProviders(t *testing.T, raw json.RawMessage, key string) map[string]providerView {
	t.Helper()
	var list []struct {
		ID     string
		Source string
		Env    []string
		Models map[string]modelView
	}
	var wrap map[string]json.RawMessage
	if err := json.Unmarshal(raw, &wrap); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wrap[key], &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]providerView{}
	for _, p := range list {
		if p.ID == "scripted" {
			continue // ours, always there
		}
		out[p.ID] = providerView{Source: p.Source, Env: p.Env, Models: p.Models}
	}
	return out
}

// TestCatalogMatchesReference: for the same models.dev catalog, opencode.json,
// auth.json and environment, our server lists the same providers (with
// the same sources and models, and each model's capabilities, cost, limit
// and status), connects the same ones, and picks the same default model
// per provider as the real opencode serve 1.18.33 did
// (testdata/reference/catalog, recorded by TestRecordCatalogReference);
// after PUT /auth and DELETE /auth too. Known differences: OpenCode
// returns each provider's key in GET /provider (we never do: README,
// "Secrets"), and it applies a new key only after POST /instance/dispose
// (we apply it at once).
func TestCatalogMatchesReference(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(catalogRefDir, "*.json"))
	ran := 0
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if name == "api" || strings.Contains(name, ".run") {
			continue
		}
		var rec catalogRecording
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(rec.Readings) == 0 || rec.Readings[0].Answers[0].Status != 200 {
			continue // the real server failed this case (see NOTES.md)
		}
		ran++
		t.Run(name, func(t *testing.T) { compareCatalogCase(t, rec) })
	}
	if ran == 0 {
		t.Fatal("no recorded catalog cases")
	}
}

func compareCatalogCase(t *testing.T, rec catalogRecording) {
	secret := func(s string) string {
		return keyRef.ReplaceAllStringFunc(s, func(k string) string { return "sk-test-" + strings.Trim(k, "<>:KEY") })
	}
	root := t.TempDir()
	env := map[string]string{}
	for k, v := range rec.Inputs.Env {
		if strings.HasSuffix(k, "_API_KEY") {
			env[k] = secret(v)
		}
	}
	authPath := filepath.Join(root, "auth.json")
	if len(rec.Inputs.Auth) > 0 {
		b, _ := json.Marshal(rec.Inputs.Auth)
		if err := os.WriteFile(authPath, []byte(secret(string(b))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(root, "state")
	t.Setenv("XDG_STATE_HOME", state)
	if len(rec.Inputs.ModelSt) > 0 {
		_ = os.MkdirAll(filepath.Join(state, "opencode"), 0o755)
		if err := os.WriteFile(filepath.Join(state, "opencode", "model.json"), rec.Inputs.ModelSt, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.File{Provider: map[string]config.ProviderConfig{}}
	if len(rec.Inputs.Config) > 0 {
		var err error
		if cfg, err = config.Parse([]byte(secret(string(rec.Inputs.Config))), root); err != nil {
			t.Fatal(err)
		}
	}
	apiJSON, _ := filepath.Abs(filepath.Join(catalogRefDir, "api.json"))
	srv := testserver.Start(t, testserver.Options{Config: cfg, ModelsPath: apiJSON, Env: env, AuthPath: authPath})
	call := func(method, path, body string) (int, json.RawMessage) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, rd := range rec.Readings {
		if rd.After != "start" {
			parts := strings.SplitN(rd.After, " ", 2)
			var body string
			for _, a := range rd.Answers {
				if a.Request == rd.After {
					body = `{"type":"api","key":"sk-test-put"}`
				}
			}
			if parts[0] == "DELETE" || parts[0] == "POST" {
				body = ""
			}
			if code, b := call(parts[0], parts[1], body); code != 200 {
				t.Fatalf("%s: %d %s", rd.After, code, b)
			}
		}
		if dm := rd.DefaultModel; dm.Status == 200 && !strings.HasPrefix(rd.After, "PUT ") && !strings.HasPrefix(rd.After, "DELETE ") {
			// OpenCode answers 500 with no provider at all; ours has the
			// scripted model then.
			_, b := call("POST", "/session", "{}")
			var ses struct{ ID string }
			_ = json.Unmarshal(b, &ses)
			code, b := call("POST", "/session/"+ses.ID+"/message", `{"noReply":true,"parts":[{"type":"text","text":"which model?"}]}`)
			var msg struct {
				Info struct {
					Model struct{ ProviderID, ModelID string } `json:"model"`
				} `json:"info"`
			}
			_ = json.Unmarshal(b, &msg)
			if code != 200 || msg.Info.Model != dm.Body.Model {
				t.Errorf("default model after %s: %d %+v, reference %+v", rd.After, code, msg.Info.Model, dm.Body.Model)
			}
		}
		for _, a := range rd.Answers {
			switch a.Request {
			case "GET /provider", "GET /config/providers":
			default:
				continue
			}
			what := a.Request + " after " + rd.After
			_, ours := call("GET", strings.TrimPrefix(a.Request, "GET "), "")
			if strings.Contains(string(ours), "sk-test-") {
				t.Errorf("%s: a key is in our answer", what)
			}
			key := "all"
			if a.Request == "GET /config/providers" {
				key = "providers"
			}
			// After PUT /auth the real server lists the new provider
			// only after POST /instance/dispose; we list it at once.
			if strings.HasPrefix(rd.After, "PUT ") || strings.HasPrefix(rd.After, "DELETE ") {
				continue
			}
			ref, got := viewProviders(t, a.Body, key), viewProviders(t, ours, key)
			if ids, rids := sortedIDs(got), sortedIDs(ref); !slices.Equal(ids, rids) {
				t.Errorf("%s: providers %v, reference %v", what, ids, rids)
				continue
			}
			for id, rp := range ref {
				op := got[id]
				if op.Source != rp.Source {
					t.Errorf("%s: %s source %q, reference %q", what, id, op.Source, rp.Source)
				}
				if om, rm := sortedIDs(op.Models), sortedIDs(rp.Models); !slices.Equal(om, rm) {
					t.Errorf("%s: %s models %v, reference %v", what, id, om, rm)
					continue
				}
				for mid, rm := range rp.Models {
					ob, _ := json.Marshal(normModel(op.Models[mid]))
					rb, _ := json.Marshal(normModel(rm))
					if string(ob) != string(rb) {
						t.Errorf("%s: %s/%s\n ours %s\n  ref %s", what, id, mid, ob, rb)
					}
				}
			}
			var rw, ow struct {
				Default   map[string]string `json:"default"`
				Connected []string          `json:"connected"`
			}
			_ = json.Unmarshal(a.Body, &rw)
			_ = json.Unmarshal(ours, &ow)
			delete(ow.Default, "scripted")
			ow.Connected = slices.DeleteFunc(ow.Connected, func(s string) bool { return s == "scripted" })
			if !mapsEqual(ow.Default, rw.Default) {
				t.Errorf("%s: default %v, reference %v", what, ow.Default, rw.Default)
			}
			if a.Request == "GET /provider" && !slices.Equal(sorted(ow.Connected), sorted(rw.Connected)) {
				t.Errorf("%s: connected %v, reference %v", what, ow.Connected, rw.Connected)
			}
		}
	}
}

// normModel drops what is not compared: a JSON number's form (3 vs 3.0).
func normModel(m modelView) map[string]any {
	var caps, cost, limit, variants any
	_ = json.Unmarshal(m.Capabilities, &caps)
	_ = json.Unmarshal(m.Cost, &cost)
	_ = json.Unmarshal(m.Limit, &limit)
	_ = json.Unmarshal(m.Variants, &variants)
	return map[string]any{"name": m.Name, "family": m.Family, "status": m.Status, "api": m.API,
		"capabilities": caps, "cost": cost, "limit": limit, "release_date": m.ReleaseDate,
		"variants": variants, "variant order": objectKeys(m.Variants)}
}

// objectKeys are a JSON object's keys in their order.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		keys = append(keys, fmt.Sprint(t))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

func sortedIDs[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
