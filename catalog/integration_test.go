package catalog

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/config"
)

// TestIntegrations: every models.dev provider with an env list is an
// integration (key and env methods), a config provider that sets env one
// with only that env method, a config name renames one; connections are
// the auth.json entry (labelled "default" unless it says) then the env
// variables that are set; sorted by name as localeCompare sorts.
func TestIntegrations(t *testing.T) {
	dev, err := ParseDev([]byte(`{
		"zed": {"name": "zed", "env": ["ZED_KEY"], "models": {}},
		"beta": {"name": "Beta", "env": ["BETA_KEY", "BETA_TOKEN"], "models": {}},
		"noenv": {"name": "No Env", "env": [], "models": {}},
		"ai-router": {"name": "AI-ROUTER", "env": ["AIR"], "models": {}},
		"aiand": {"name": "ai&", "env": ["AIAND"], "models": {}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	label := "Work"
	cfg := &config.File{Provider: map[string]config.ProviderConfig{
		"beta":  {Name: "Beta Renamed"},
		"own":   {Name: "Own", Env: []string{"OWN_KEY"}},
		"plain": {Name: "Plain"},
	}}
	env := map[string]string{"BETA_TOKEN": "t", "OWN_KEY": "o", "ZED_KEY": ""}
	c := Assemble(Inputs{Dev: dev, Config: cfg, Getenv: func(k string) string { return env[k] },
		Auth: map[string]Auth{"beta": {Type: "api", Key: "k", Label: &label}, "zed": {Type: "api", Key: "z"}, "plain": {Type: "api", Key: "p"}}})
	want := []Integration{
		{ID: "ai-router", Name: "AI-ROUTER", Key: true, Env: []string{"AIR"}},
		{ID: "aiand", Name: "ai&", Key: true, Env: []string{"AIAND"}},
		{ID: "beta", Name: "Beta Renamed", Key: true, Env: []string{"BETA_KEY", "BETA_TOKEN"},
			Connections: []Connection{{Credential: "cred_beta", Label: "Work"}, {Env: "BETA_TOKEN"}}},
		{ID: "own", Name: "Own", Env: []string{"OWN_KEY"}, Connections: []Connection{{Env: "OWN_KEY"}}},
		{ID: "zed", Name: "zed", Key: true, Env: []string{"ZED_KEY"}, Connections: []Connection{{Credential: "cred_zed", Label: "default"}}},
	}
	if !reflect.DeepEqual(c.Integrations, want) {
		t.Errorf("integrations\n got %+v\nwant %+v", c.Integrations, want)
	}
	if p, ok := CredentialProvider(CredentialID("beta")); !ok || p != "beta" {
		t.Errorf("CredentialProvider(CredentialID(beta)) = %q, %v", p, ok)
	}
	for _, id := range []string{"cred_", "beta", ""} {
		if _, ok := CredentialProvider(id); ok {
			t.Errorf("CredentialProvider(%q) names a provider", id)
		}
	}
}

// TestSetLabel: a label joins the entry as written (its other fields kept),
// replaces an earlier one, and an entry that is not there is not written.
func TestSetLabel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(path, []byte(`{"openai":{"type":"api","key":"sk","metadata":{"x":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &AuthStore{Path: path}
	for _, l := range []string{"First", "Second"} {
		if found, err := s.SetLabel("openai", l); err != nil || !found {
			t.Fatalf("SetLabel %s: %v %v", l, found, err)
		}
	}
	if found, err := s.SetLabel("nope", "x"); err != nil || found {
		t.Fatalf("SetLabel of no entry: %v %v", found, err)
	}
	b, _ := os.ReadFile(path)
	if want := "{\n  \"openai\": {\"type\":\"api\",\"key\":\"sk\",\"metadata\":{\"x\":1},\"label\":\"Second\"}\n}\n"; string(b) != want {
		t.Errorf("auth.json\n%s\nwant\n%s", b, want)
	}
	a := s.All()["openai"]
	if a.Label == nil || *a.Label != "Second" || a.Key != "sk" {
		t.Errorf("read back %+v", a)
	}
}
