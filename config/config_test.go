package config

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseJSONCAndSubstitution(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.txt"), []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OCS_TEST_KEY", `env"key`)
	src := `{
  // a comment with "quotes"
  "model": "local/qwen", /* block */
  "provider": {
    "local": {
      "npm": "@ai-sdk/openai-compatible",
      "options": {"baseURL": "http://127.0.0.1:11434/v1", "apiKey": "{env:OCS_TEST_KEY}",},
      "models": {"qwen": {"name": "Qwen // not a comment", "limit": {"context": 32000, "output": 2048}}},
    },
    "other": {"options": {"apiKey": "{file:key.txt}"}},
  },
}`
	f, err := Parse([]byte(src), dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, got, want string }{
		{"model", f.Model, "local/qwen"},
		{"baseURL", f.Provider["local"].Options.BaseURL, "http://127.0.0.1:11434/v1"},
		{"env key", f.Provider["local"].Options.APIKey, `env"key`},
		{"file key", f.Provider["other"].Options.APIKey, "file-key"},
		{"model name", f.Provider["local"].Models["qwen"].Name, "Qwen // not a comment"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestParseJSONCEdges: the JSONC that a hand-written stripper got wrong (a
// trailing comma followed by a comment) parses; broken JSONC is an error.
func TestParseJSONCEdges(t *testing.T) {
	for _, tc := range []struct {
		name, src, model string
		bad              bool
	}{
		{"trailing comma then line comment", "{\"model\": \"a/b\", // the model\n}", "a/b", false},
		{"trailing comma then block comment", "{\"model\": \"a/b\", /* x */ }", "a/b", false},
		{"comment markers in a string", `{"model": "a//b/*c*/"}`, "a//b/*c*/", false},
		{"unterminated block comment", `{"model": "a/b" /* }`, "", true},
		{"not JSON at all", `{model: a}`, "", true},
	} {
		f, err := Parse([]byte(tc.src), t.TempDir())
		if (err != nil) != tc.bad {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.bad)
			continue
		}
		if err == nil && f.Model != tc.model {
			t.Errorf("%s: model %q, want %q", tc.name, f.Model, tc.model)
		}
	}
}

func TestLoadMergesInOrder(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.json")
	b := filepath.Join(dir, "b.json")
	os.WriteFile(a, []byte(`{"model":"p/one","provider":{"p":{"npm":"@ai-sdk/openai","options":{"baseURL":"http://a"},"models":{"one":{}}}}}`), 0o600)
	os.WriteFile(b, []byte(`{"model":"p/two","provider":{"p":{"options":{"baseURL":"http://b"},"models":{"two":{}}}}}`), 0o600)
	f, err := Load(a, filepath.Join(dir, "missing.json"), b)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Provider["p"]
	if f.Model != "p/two" || p.Options.BaseURL != "http://b" || p.NPM != "@ai-sdk/openai" || len(p.Models) != 2 {
		t.Fatalf("merged config wrong: %+v", f)
	}
}

func TestSplitModel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		p, m string
		ok   bool
	}{
		{"a/b", "a", "b", true},
		{"openrouter/meta/llama", "openrouter", "meta/llama", true},
		{"nomodel", "", "", false},
		{"/x", "", "", false},
	} {
		p, m, ok := SplitModel(tc.in)
		if p != tc.p || m != tc.m || ok != tc.ok {
			t.Errorf("SplitModel(%q) = %q %q %v", tc.in, p, m, ok)
		}
	}
}

// TestModelConfig: a model entry carries what OpenCode's config schema
// lets it say; interleaved takes a boolean, a field name or {field}.
func TestModelConfig(t *testing.T) {
	f, err := Parse([]byte(`{"provider": {"p": {"models": {"m": {
		"name": "M", "family": "f", "release_date": "2026-01-02", "tool_call": false, "reasoning": true,
		"attachment": true, "temperature": false, "interleaved": {"field": "reasoning_content"},
		"modalities": {"input": ["text", "image"], "output": ["text"]},
		"cost": {"input": 1, "output": 2, "cache_read": 0.5, "cache_write": 1.5},
		"limit": {"context": 100, "input": 80, "output": 20}, "status": "beta", "options": {"x": 1}}}}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	m := f.Provider["p"].Models["m"]
	if m.Name != "M" || m.Family != "f" || m.ReleaseDate != "2026-01-02" || *m.ToolCall || !*m.Reasoning || !*m.Attachment ||
		*m.Temperature || m.Interleaved == nil || m.Interleaved.Field != "reasoning_content" || m.Status != "beta" {
		t.Errorf("model %+v", m)
	}
	if m.Modalities == nil || len(m.Modalities.Input) != 2 || m.Modalities.Input[1] != "image" || len(m.Modalities.Output) != 1 {
		t.Errorf("modalities %+v", m.Modalities)
	}
	if *m.Cost != (ModelCost{Input: 1, Output: 2, CacheRead: 0.5, CacheWrite: 1.5}) || m.Limit != (ModelLimit{Context: 100, Input: 80, Output: 20}) {
		t.Errorf("cost %+v limit %+v", m.Cost, m.Limit)
	}
	for in, want := range map[string]Interleaved{`true`: {On: true}, `false`: {}, `"reasoning"`: {On: true, Field: "reasoning"},
		`{"field": "reasoning_text"}`: {On: true, Field: "reasoning_text"}} {
		var i Interleaved
		if err := i.UnmarshalJSON([]byte(in)); err != nil || i != want {
			t.Errorf("interleaved %s: %+v %v, want %+v", in, i, err, want)
		}
	}
	if _, err := Parse([]byte(`{"provider": {"p": {"models": {"m": {"interleaved": 3}}}}}`), ""); err == nil {
		t.Error("interleaved 3 parsed")
	}
}
