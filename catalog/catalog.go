// Package catalog is the one list of the models the server offers, with
// what OpenCode knows of each: limits, cost, modalities and capabilities.
// Routes (/config/providers, /provider), ACP and lifecycle all read it; it
// sits below them and imports none of them (only config, for FromConfig).
package catalog

import (
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/config"
)

// Catalog is the providers the server serves and the default models.
type Catalog struct {
	Providers []Provider
	// Model and SmallModel are "providerID/modelID" ("" SmallModel: none).
	Model      string
	SmallModel string
	// Configured is the model and small model opencode.json names ("" :
	// none): GET /config shows only these, so a client falls back to its
	// own recent models as with OpenCode.
	ConfiguredModel, ConfiguredSmallModel string
	// Integrations are the v2 integration routes' view of the providers:
	// how a key is given to each and where it has one.
	Integrations []Integration

	index map[key]*Model
}

type key struct{ provider, model string }

// Provider is one provider and its models, in listing order.
type Provider struct {
	ID      string
	Name    string
	NPM     string
	BaseURL string
	// Source is OpenCode's provider source: "config", "custom", "env", "api".
	Source string
	Env    []string
	Models []Model
	// Connected: the config names the provider or a key was found for it,
	// so its models can be used. Configured: the config names it.
	// Unserved: connected by OpenCode's rules, but no client here speaks
	// its npm package.
	Connected, Configured, Unserved bool
	// Authed: auth.json has an entry for the provider, of any type
	// (OpenCode lists such a provider as connected, even with only an
	// OAuth login it cannot use as it is).
	Authed bool
	// Key is the provider's API key: a secret, never listed or logged.
	Key string
	// Headers are sent with every request (options.headers).
	Headers map[string]string
	// Default is the model used when the provider is picked alone.
	Default string
}

// NPMOf is the package that serves m: its own, else the provider's.
func (p *Provider) NPMOf(m *Model) string {
	if m.NPM != "" {
		return m.NPM
	}
	return p.NPM
}

// Model is one model as OpenCode's catalog describes it.
type Model struct {
	ID         string
	ProviderID string
	Name       string
	Family     string
	// Limits in tokens (0: unknown).
	Context, Input, Output int64
	ToolCall               bool
	Reasoning              bool
	Attachment             bool
	Temperature            bool
	// Modalities are "text", "image", "audio", "video", "pdf".
	InputModalities  []string
	OutputModalities []string
	// Interleaved: the model interleaves its reasoning with the answer;
	// InterleavedField, if set, names the response field carrying it.
	Interleaved      bool
	InterleavedField string
	// Cost in dollars per million tokens.
	Cost        Cost
	Status      string // "active", "alpha", "beta", "deprecated"
	ReleaseDate string // "2006-01-02", "" unknown
	// NPM and BaseURL, when set, are the model's own package and endpoint
	// (models.dev's model.provider), over the provider's.
	NPM, BaseURL string
}

// FromConfig is the model OpenCode makes of a model that only
// opencode.json describes (provider.<p>.models.<id>), with OpenCode's
// defaults for what the entry leaves out: the id as its name, tool calls
// on, temperature, reasoning and attachments off, text in and text out,
// no limits (0), free, status "active".
func FromConfig(id string, mc config.ModelConfig) Model {
	m := Model{ID: id, Name: mc.Name, Family: mc.Family, ReleaseDate: mc.ReleaseDate,
		Context: mc.Limit.Context, Input: mc.Limit.Input, Output: mc.Limit.Output,
		ToolCall: orDefault(mc.ToolCall, true), Reasoning: orDefault(mc.Reasoning, false),
		Attachment: orDefault(mc.Attachment, false), Temperature: orDefault(mc.Temperature, false),
		InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}
	if m.Name == "" {
		m.Name = id
	}
	if mo := mc.Modalities; mo != nil {
		if mo.Input != nil {
			m.InputModalities = slices.Clone(mo.Input)
		}
		if mo.Output != nil {
			m.OutputModalities = slices.Clone(mo.Output)
		}
	}
	if i := mc.Interleaved; i != nil {
		m.Interleaved, m.InterleavedField = i.On || i.Field != "", i.Field
	}
	if c := mc.Cost; c != nil {
		m.Cost = Cost{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Set: true}
	}
	switch mc.Status {
	case "alpha", "beta", "deprecated", "active":
		m.Status = mc.Status
	}
	return m
}

func orDefault(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// Cost is a model's prices, dollars per million tokens; Set is false when
// the configuration gave none.
type Cost struct {
	Input, Output, CacheRead, CacheWrite float64
	Set                                  bool
}

// Listed reports whether GET /provider names the provider connected:
// OpenCode's loaded providers (connected here, or would be with a client
// for their package) and those auth.json holds any credential for.
func (p *Provider) Listed() bool { return p.Connected || p.Unserved || p.Authed }

// Build indexes c's models; call it once the providers are filled in.
func (c *Catalog) Build() *Catalog {
	c.index = map[key]*Model{}
	for i := range c.Providers {
		p := &c.Providers[i]
		for j := range p.Models {
			m := &p.Models[j]
			m.ProviderID = p.ID
			c.index[key{p.ID, m.ID}] = m
		}
	}
	return c
}

// Lookup finds a model (in a catalog Build has not indexed: by a scan;
// such a model's ProviderID may be unset).
func (c *Catalog) Lookup(providerID, modelID string) (*Model, bool) {
	if c == nil {
		return nil, false
	}
	if c.index == nil {
		if p, ok := c.Provider(providerID); ok {
			for j := range p.Models {
				if p.Models[j].ID == modelID {
					return &p.Models[j], true
				}
			}
		}
		return nil, false
	}
	m, ok := c.index[key{providerID, modelID}]
	return m, ok
}

// LookupRef finds a model by "providerID/modelID".
func (c *Catalog) LookupRef(ref string) (*Model, bool) {
	p, m, ok := strings.Cut(ref, "/")
	if !ok {
		return nil, false
	}
	return c.Lookup(p, m)
}

// Default is the server's default model (Model).
func (c *Catalog) Default() (*Model, bool) {
	if c == nil {
		return nil, false
	}
	return c.LookupRef(c.Model)
}

// Ref is the model's "providerID/modelID".
func (m *Model) Ref() string { return m.ProviderID + "/" + m.ID }

// Provider finds a provider.
func (c *Catalog) Provider(id string) (*Provider, bool) {
	if c == nil {
		return nil, false
	}
	for i := range c.Providers {
		if c.Providers[i].ID == id {
			return &c.Providers[i], true
		}
	}
	return nil, false
}

// Modality is the input modality a file of media type mime needs: "image"
// for image/*, "pdf" for application/pdf, "audio", "video"; "" for
// anything else (text, which every model reads).
func Modality(mime string) string {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return "image"
	case mime == "application/pdf":
		return "pdf"
	case strings.HasPrefix(mime, "audio/"):
		return "audio"
	case strings.HasPrefix(mime, "video/"):
		return "video"
	}
	return ""
}

// Accepts reports whether the model takes input of modality ("text" always).
func (m *Model) Accepts(modality string) bool {
	if modality == "" || modality == "text" {
		return true
	}
	return slices.Contains(m.InputModalities, modality)
}
