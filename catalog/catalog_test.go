package catalog_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/config"
)

// TestFromConfig: a model opencode.json describes gets OpenCode's defaults
// for what its entry leaves out (provider.ts, config models), and keeps
// what it says.
func TestFromConfig(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		want        catalog.Model
	}{
		{"empty entry: OpenCode's defaults", `{}`, catalog.Model{ID: "m", Name: "m", ToolCall: true,
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"name and limits", `{"name": "M", "limit": {"context": 128000, "output": 4096}}`, catalog.Model{ID: "m", Name: "M",
			Context: 128000, Output: 4096, ToolCall: true, InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"tool calls off", `{"tool_call": false}`, catalog.Model{ID: "m", Name: "m",
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"everything", `{"name": "Eye", "family": "eyes", "release_date": "2026-08-27", "tool_call": true, "reasoning": true,
			"attachment": true, "temperature": true, "interleaved": {"field": "reasoning_details"},
			"modalities": {"input": ["text", "image", "pdf"], "output": ["text", "image"]},
			"cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
			"limit": {"context": 200000, "input": 150000, "output": 8192}, "status": "beta"}`,
			catalog.Model{ID: "m", Name: "Eye", Family: "eyes", ReleaseDate: "2026-08-27", Context: 200000, Input: 150000, Output: 8192,
				ToolCall: true, Reasoning: true, Attachment: true, Temperature: true, Interleaved: true, InterleavedField: "reasoning_details",
				InputModalities: []string{"text", "image", "pdf"}, OutputModalities: []string{"text", "image"},
				Cost: catalog.Cost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, Set: true}, Status: "beta"}},
		{"cost without cache prices", `{"cost": {"input": 1, "output": 2}}`, catalog.Model{ID: "m", Name: "m", ToolCall: true,
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Cost: catalog.Cost{Input: 1, Output: 2, Set: true}, Status: "active"}},
		{"interleaved true", `{"interleaved": true}`, catalog.Model{ID: "m", Name: "m", ToolCall: true, Interleaved: true,
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"interleaved field name", `{"interleaved": "reasoning_content"}`, catalog.Model{ID: "m", Name: "m", ToolCall: true,
			Interleaved: true, InterleavedField: "reasoning_content",
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"only input modalities", `{"modalities": {"input": ["image"]}}`, catalog.Model{ID: "m", Name: "m", ToolCall: true,
			InputModalities: []string{"image"}, OutputModalities: []string{"text"}, Status: "active"}},
		{"unknown status", `{"status": "retired"}`, catalog.Model{ID: "m", Name: "m", ToolCall: true,
			InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mc config.ModelConfig
			if err := json.Unmarshal([]byte(tc.entry), &mc); err != nil {
				t.Fatal(err)
			}
			if got := catalog.FromConfig("m", mc); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromConfig(%s)\n got %+v\nwant %+v", tc.entry, got, tc.want)
			}
		})
	}
}

func TestAccepts(t *testing.T) {
	textOnly := catalog.FromConfig("t", config.ModelConfig{})
	vision := catalog.Model{InputModalities: []string{"text", "image", "pdf"}}
	none := catalog.Model{}
	for _, tc := range []struct {
		model    *catalog.Model
		mime     string
		modality string
		want     bool
	}{
		{&textOnly, "text/plain", "", true},
		{&textOnly, "application/json", "", true},
		{&textOnly, "image/png", "image", false},
		{&textOnly, "application/pdf", "pdf", false},
		{&vision, "image/jpeg", "image", true},
		{&vision, "application/pdf", "pdf", true},
		{&vision, "audio/wav", "audio", false},
		{&vision, "video/mp4", "video", false},
		{&none, "text/markdown", "", true}, // text always
		{&none, "image/webp", "image", false},
	} {
		if got := catalog.Modality(tc.mime); got != tc.modality {
			t.Errorf("Modality(%q) = %q, want %q", tc.mime, got, tc.modality)
		}
		if got := tc.model.Accepts(catalog.Modality(tc.mime)); got != tc.want {
			t.Errorf("%v Accepts(%q) = %v, want %v", tc.model.InputModalities, tc.mime, got, tc.want)
		}
	}
	if !vision.Accepts("text") || !textOnly.Accepts("text") {
		t.Error("text is always accepted")
	}
}

func TestLookupAndDefaults(t *testing.T) {
	c := &catalog.Catalog{Model: "b/y", Providers: []catalog.Provider{
		{ID: "a", Models: []catalog.Model{{ID: "x"}, {ID: "z"}}},
		{ID: "b", Models: []catalog.Model{{ID: "w"}, {ID: "y", Context: 7}}},
		{ID: "empty"},
	}}
	// Before Build, Lookup scans.
	if m, ok := c.Lookup("b", "y"); !ok || m.Context != 7 {
		t.Errorf("unbuilt Lookup(b, y) = %+v, %v", m, ok)
	}
	c.Build()
	if m, ok := c.Lookup("a", "z"); !ok || m.ProviderID != "a" || m.Ref() != "a/z" {
		t.Errorf("Lookup(a, z) = %+v, %v", m, ok)
	}
	if _, ok := c.Lookup("a", "y"); ok {
		t.Error("Lookup(a, y) found a model of another provider")
	}
	if m, ok := c.Default(); !ok || m.Ref() != "b/y" {
		t.Errorf("Default() = %+v, %v", m, ok)
	}
	if m, ok := c.LookupRef("a/x"); !ok || m.ID != "x" {
		t.Errorf("LookupRef(a/x) = %+v, %v", m, ok)
	}
	// A provider's default is OpenCode's sort: priority names, "latest",
	// then the higher ID.
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"x", "z"}, "z"},
		{[]string{"gpt-5", "claude-sonnet-4-5", "zz"}, "claude-sonnet-4-5"},
		{[]string{"gemini-3-pro", "gpt-5"}, "gemini-3-pro"},
		{[]string{"m-latest", "z"}, "m-latest"},
	} {
		var ms []catalog.Model
		for _, id := range tc.ids {
			ms = append(ms, catalog.Model{ID: id})
		}
		if got, ok := catalog.Sorted(ms); !ok || got.ID != tc.want {
			t.Errorf("Sorted(%v) = %q, want %q", tc.ids, got.ID, tc.want)
		}
	}
	if _, ok := catalog.Sorted(nil); ok {
		t.Error("Sorted of no models found one")
	}
	var nilc *catalog.Catalog
	if _, ok := nilc.Lookup("a", "x"); ok {
		t.Error("nil catalog found a model")
	}
	if _, ok := nilc.Default(); ok {
		t.Error("nil catalog has a default")
	}
	if !reflect.DeepEqual(c.Providers[0].Models[0].ProviderID, "a") {
		t.Error("Build did not set ProviderID")
	}
}
