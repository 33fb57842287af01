package routes_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// catalogConfig configures a provider with a vision model that says
// everything OpenCode's model config can say, and a model that says
// nothing (OpenCode's defaults).
const catalogConfig = `{
  "model": "vision/eye",
  "provider": {
    "vision": {
      "npm": "@ai-sdk/openai-compatible", "name": "Vision",
      "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "k"},
      "models": {
        "eye": {
          "name": "Eye", "family": "eyes", "release_date": "2026-08-27",
          "tool_call": false, "reasoning": true, "attachment": true, "temperature": true,
          "interleaved": "reasoning_content",
          "modalities": {"input": ["text", "image"], "output": ["text"]},
          "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
          "limit": {"context": 200000, "input": 150000, "output": 8192},
          "status": "beta"
        },
        "plain": {}
      }
    }
  }
}`

// TestProviderReportsModelCapabilities: /config/providers and /provider
// report what the configuration says of a model (an image modality, its
// cost, limits, family, status), and OpenCode's defaults for a model the
// configuration only names; /api/model lists the same.
func TestProviderReportsModelCapabilities(t *testing.T) {
	cfg, err := config.Parse([]byte(catalogConfig), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, testserver.Options{Config: cfg})

	type model struct {
		Name         string `json:"name"`
		Family       string `json:"family"`
		Capabilities struct {
			Temperature, Reasoning, Attachment, Toolcall bool
			Input, Output                                map[string]bool
			Interleaved                                  any
		} `json:"capabilities"`
		Cost struct {
			Input, Output float64
			Cache         struct{ Read, Write float64 }
		} `json:"cost"`
		Limit       map[string]int64 `json:"limit"`
		Status      string           `json:"status"`
		ReleaseDate string           `json:"release_date"`
	}
	type provider struct {
		ID     string           `json:"id"`
		Models map[string]model `json:"models"`
	}
	var cp struct {
		Providers []provider        `json:"providers"`
		Default   map[string]string `json:"default"`
	}
	e.mustJSON("GET", "/config/providers", "", &cp)
	var pr struct {
		All []provider `json:"all"`
	}
	e.mustJSON("GET", "/provider", "", &pr)
	if !reflect.DeepEqual(cp.Providers, pr.All) {
		t.Errorf("/config/providers and /provider differ:\n%+v\n%+v", cp.Providers, pr.All)
	}
	// OpenCode's sort: no priority name in either, so the higher ID.
	if cp.Default["vision"] != "plain" {
		t.Errorf("default of vision = %q, want plain", cp.Default["vision"])
	}
	var vision *provider
	for i := range cp.Providers {
		if cp.Providers[i].ID == "vision" {
			vision = &cp.Providers[i]
		}
	}
	if vision == nil {
		t.Fatalf("no vision provider in %+v", cp.Providers)
	}

	eye := vision.Models["eye"]
	c := eye.Capabilities
	if !c.Input["image"] || !c.Input["text"] || c.Input["pdf"] || c.Input["audio"] || !c.Output["text"] || c.Output["image"] {
		t.Errorf("eye modalities: input %v output %v, want text+image in, text out", c.Input, c.Output)
	}
	if c.Toolcall || !c.Reasoning || !c.Attachment || !c.Temperature {
		t.Errorf("eye capabilities %+v, want toolcall off, reasoning, attachment, temperature on", c)
	}
	if f, _ := c.Interleaved.(map[string]any); f["field"] != "reasoning_content" {
		t.Errorf("eye interleaved = %v, want {field: reasoning_content}", c.Interleaved)
	}
	if eye.Cost.Input != 3 || eye.Cost.Output != 15 || eye.Cost.Cache.Read != 0.3 || eye.Cost.Cache.Write != 3.75 {
		t.Errorf("eye cost %+v, want 3/15, cache 0.3/3.75", eye.Cost)
	}
	if want := map[string]int64{"context": 200000, "input": 150000, "output": 8192}; !reflect.DeepEqual(eye.Limit, want) {
		t.Errorf("eye limit %v, want %v", eye.Limit, want)
	}
	if eye.Name != "Eye" || eye.Family != "eyes" || eye.Status != "beta" || eye.ReleaseDate != "2026-08-27" {
		t.Errorf("eye name %q family %q status %q release %q", eye.Name, eye.Family, eye.Status, eye.ReleaseDate)
	}

	plain := vision.Models["plain"]
	c = plain.Capabilities
	if !c.Input["text"] || c.Input["image"] || !c.Output["text"] || !c.Toolcall || c.Reasoning || c.Attachment || c.Temperature || c.Interleaved != false {
		t.Errorf("plain capabilities %+v, want OpenCode's defaults (text, tool calls)", c)
	}
	if plain.Name != "plain" || plain.Family != "" || plain.Status != "active" || plain.Cost.Input != 0 ||
		!reflect.DeepEqual(plain.Limit, map[string]int64{"context": 0, "output": 0}) {
		t.Errorf("plain: %+v", plain)
	}

	var am struct {
		Data []struct {
			ID           string `json:"id"`
			ProviderID   string `json:"providerID"`
			Capabilities struct {
				Tools bool     `json:"tools"`
				Input []string `json:"input"`
			} `json:"capabilities"`
			Cost  []json.RawMessage `json:"cost"`
			Time  struct{ Released int64 }
			Limit map[string]int64 `json:"limit"`
		} `json:"data"`
	}
	e.mustJSON("GET", "/api/model", "", &am)
	seen := 0
	for _, m := range am.Data {
		switch m.ProviderID + "/" + m.ID {
		case "vision/eye":
			seen++
			if !reflect.DeepEqual(m.Capabilities.Input, []string{"text", "image"}) || m.Capabilities.Tools || len(m.Cost) != 1 ||
				m.Time.Released != 1787788800000 || m.Limit["input"] != 150000 {
				t.Errorf("/api/model eye: %+v", m)
			}
		case "vision/plain":
			seen++
			if len(m.Cost) != 0 || !m.Capabilities.Tools {
				t.Errorf("/api/model plain: %+v", m)
			}
		}
	}
	if seen != 2 {
		t.Errorf("/api/model lists %d of the vision models: %+v", seen, am.Data)
	}
}
