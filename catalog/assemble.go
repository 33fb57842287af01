package catalog

import (
	"cmp"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/config"
)

// Inputs are what the catalog is made from, as OpenCode's provider.ts
// makes it: the models.dev catalog, opencode.json, auth.json, the
// environment and the recent models of model.json.
type Inputs struct {
	Dev    Dev
	Config *config.File
	Auth   map[string]Auth
	Getenv func(string) string
	// Recent are model.json's recent models ("providerID/modelID"), newest
	// first.
	Recent []string
	// Experimental keeps alpha models (OPENCODE_ENABLE_EXPERIMENTAL_MODELS).
	Experimental bool
	// Served reports whether a client speaks a provider's npm package (a
	// provider none speaks is listed, never connected).
	Served func(npm, baseURL string) bool
	// Probed are the model IDs an OpenAI-compatible endpoint listed
	// (GET {baseURL}/models) for a configured provider that names none.
	Probed map[string][]string
}

// NeedsProbe reports whether a configured provider has no models but an
// OpenAI-compatible endpoint that can list them.
func NeedsProbe(d Dev, id string, pc config.ProviderConfig) bool {
	if len(pc.Models) > 0 || pc.Options.BaseURL == "" {
		return false
	}
	if p, ok := d.Provider(id); ok && len(p.Models) > 0 {
		return false
	}
	return pc.NPM == "" || pc.NPM == "@ai-sdk/openai-compatible"
}

// Assemble makes the catalog from in. Every provider of models.dev and of
// the config is listed (Providers, OpenCode's `all`); a provider is
// connected (loaded, in OpenCode's words) when the config names it, or a
// key is found for it: options.apiKey, then the first of its env
// variables that is set, then an api entry of auth.json (OpenCode's order:
// config, env, auth). A connected provider keeps its usable models only:
// deprecated ones dropped, alpha ones unless Experimental, the config's
// whitelist and blacklist applied. disabled_providers and
// enabled_providers filter both lists.
func Assemble(in Inputs) *Catalog {
	cfg := in.Config
	if cfg == nil {
		cfg = &config.File{}
	}
	getenv := in.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var out []Provider
	seen := map[string]bool{}
	add := func(id string) {
		if seen[id] || !allowed(cfg, id) {
			return
		}
		seen[id] = true
		dev, inDev := in.Dev.Provider(id)
		pc, inCfg := cfg.Provider[id]
		p := Provider{ID: id, Name: dev.Name, NPM: dev.NPM, BaseURL: dev.API, Env: slices.Clone(dev.Env), Source: "custom"}
		if p.Env == nil {
			p.Env = []string{}
		}
		if inCfg {
			if pc.Name != "" {
				p.Name = pc.Name
			}
			if pc.NPM != "" {
				p.NPM = pc.NPM
			}
			if pc.API != "" {
				p.BaseURL = pc.API
			}
			if pc.Options.BaseURL != "" {
				p.BaseURL = pc.Options.BaseURL
			}
			if pc.Env != nil {
				p.Env = slices.Clone(pc.Env)
			}
			p.Configured = true
		}

		if p.Name == "" {
			p.Name = id
		}
		if p.NPM == "" && !inDev {
			p.NPM = "@ai-sdk/openai-compatible"
		}
		// The key, in OpenCode's order.
		switch {
		case inCfg && pc.Options.APIKey != "":
			p.Key, p.Source = pc.Options.APIKey, "config"
		default:
			for _, v := range p.Env {
				if k := getenv(v); k != "" {
					p.Key, p.Source = k, "env"
					break
				}
			}
			if p.Key == "" {
				if a, ok := in.Auth[id]; ok && a.Type == "api" {
					p.Key, p.Source = a.Key, "api"
				}
			}
		}
		// A custom loader's options (its headers) join only a provider the
		// environment or auth.json connected before the config's providers
		// were merged (OpenCode's `if (r && (r.autoload || D[g]))`): not one
		// keyed by options.apiKey alone.
		loader := p.Source == "env" || p.Source == "api"
		p.Headers = loaderHeaders(id, loader, pc.Options.Headers)
		if inCfg {
			p.Source = "config"
		}
		p.Connected = inCfg || p.Key != ""
		_, p.Authed = in.Auth[id]
		if p.Connected && in.Served != nil && !in.Served(p.NPM, p.BaseURL) {
			// Listed with its key's source, but nothing here can talk to it.
			p.Connected, p.Unserved = false, true
		}
		// Models: models.dev's in its order, the config's over them.
		for _, mid := range in.Dev.ModelOrder[id] {
			dm, ok := dev.Models[mid]
			if !ok {
				continue
			}
			m := fromDev(dm)
			if mc, ok := pc.Models[mid]; inCfg && ok {
				m = mergeConfig(m, mc)
			}
			p.Models = append(p.Models, m)
		}
		if inCfg {
			for _, mid := range sortedKeys(pc.Models) {
				if _, ok := dev.Models[mid]; !ok {
					p.Models = append(p.Models, FromConfig(mid, pc.Models[mid]))
				}
			}
			if len(p.Models) == 0 {
				for _, mid := range in.Probed[id] {
					p.Models = append(p.Models, FromConfig(mid, config.ModelConfig{}))
				}
			}
		}
		if p.Connected || p.Unserved {
			p.Models = slices.DeleteFunc(p.Models, func(m Model) bool {
				switch {
				case m.Status == "deprecated", m.Status == "alpha" && !in.Experimental:
					return true
				case len(pc.Whitelist) > 0 && !slices.Contains(pc.Whitelist, m.ID):
					return true
				}
				return slices.Contains(pc.Blacklist, m.ID)
			})
			if len(p.Models) == 0 {
				p.Connected, p.Unserved = false, false
			}
		}
		if len(p.Models) == 0 && !inDev {
			return
		}
		if top, ok := Sorted(p.Models); ok {
			p.Default = top.ID
		}
		out = append(out, p)
	}
	for _, p := range in.Dev.Providers {
		add(p.ID)
	}
	for _, id := range sortedKeys(cfg.Provider) {
		add(id)
	}
	c := &Catalog{Providers: out, ConfiguredModel: cfg.Model, ConfiguredSmallModel: cfg.SmallModel,
		Integrations: integrations(in, getenv)}
	c.Build()
	c.Model = defaultModel(c, cfg, in.Recent)
	if cfg.SmallModel != "" {
		c.SmallModel = cfg.SmallModel
	}
	return c
}

// allowed applies disabled_providers and enabled_providers.
func allowed(cfg *config.File, id string) bool {
	if slices.Contains(cfg.DisabledProviders, id) {
		return false
	}
	return cfg.EnabledProviders == nil || slices.Contains(cfg.EnabledProviders, id)
}

// defaultModel is the model OpenCode's defaultModel picks: the config's
// model, else the newest recent one a connected provider has, else the
// first connected provider's (among the config's providers if it names
// any) best model by OpenCode's priority.
func defaultModel(c *Catalog, cfg *config.File, recent []string) string {
	if cfg.Model != "" {
		return cfg.Model
	}
	for _, ref := range recent {
		if m, ok := c.LookupRef(ref); ok {
			if p, _ := c.Provider(m.ProviderID); p.Connected {
				return ref
			}
		}
	}
	for _, p := range c.Providers {
		if !p.Connected || (len(cfg.Provider) > 0 && !hasKey(cfg.Provider, p.ID)) {
			continue
		}
		if p.Default != "" {
			return p.ID + "/" + p.Default
		}
	}
	return ""
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// priority is OpenCode's model preference (provider.ts `sort`): a model
// whose ID contains a later entry sorts first, then one that says
// "latest", then IDs in reverse order.
var priority = []string{"gpt-5", "claude-sonnet-4", "big-pickle", "gemini-3-pro"}

// Sorted is models' first by OpenCode's priority.
func Sorted(models []Model) (Model, bool) {
	if len(models) == 0 {
		return Model{}, false
	}
	rank := func(m Model) int {
		for i := len(priority) - 1; i >= 0; i-- {
			if strings.Contains(m.ID, priority[i]) {
				return i
			}
		}
		return -1
	}
	best := slices.MinFunc(models, func(a, b Model) int {
		if c := cmp.Compare(rank(b), rank(a)); c != 0 {
			return c
		}
		la, lb := strings.Contains(a.ID, "latest"), strings.Contains(b.ID, "latest")
		if la != lb {
			if la {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return best, true
}

// fromDev is a models.dev model in the catalog's terms.
func fromDev(dm DevModel) Model {
	m := Model{ID: dm.ID, Name: dm.Name, Family: dm.Family, ReleaseDate: dm.ReleaseDate,
		Context: dm.Limit.Context, Input: dm.Limit.Input, Output: dm.Limit.Output,
		ToolCall: dm.ToolCall, Reasoning: dm.Reasoning, Attachment: dm.Attachment, Temperature: dm.Temperature,
		InputModalities: []string{"text"}, OutputModalities: []string{"text"}, Status: "active"}
	if m.Name == "" {
		m.Name = dm.ID
	}
	if dm.Modalities != nil {
		if dm.Modalities.Input != nil {
			m.InputModalities = slices.Clone(dm.Modalities.Input)
		}
		if dm.Modalities.Output != nil {
			m.OutputModalities = slices.Clone(dm.Modalities.Output)
		}
	}
	if c := dm.Cost; c != nil {
		m.Cost = Cost{Input: c.Input, Output: c.Output, CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Set: true}
	}
	if dm.Status != "" {
		m.Status = dm.Status
	}
	var il config.Interleaved
	if len(dm.Interleaved) > 0 && il.UnmarshalJSON(dm.Interleaved) == nil {
		m.Interleaved, m.InterleavedField = il.On || il.Field != "", il.Field
	}
	if dm.Provider != nil {
		m.NPM, m.BaseURL = dm.Provider.NPM, dm.Provider.API
	}
	return m
}

// mergeConfig lays a config model entry over a catalog model: what the
// entry says wins.
func mergeConfig(m Model, mc config.ModelConfig) Model {
	c := FromConfig(m.ID, mc)
	if mc.Name != "" {
		m.Name = c.Name
	}
	if mc.Family != "" {
		m.Family = c.Family
	}
	if mc.Limit.Context > 0 {
		m.Context = c.Context
	}
	if mc.Limit.Input > 0 {
		m.Input = c.Input
	}
	if mc.Limit.Output > 0 {
		m.Output = c.Output
	}
	set := func(dst *bool, b *bool) {
		if b != nil {
			*dst = *b
		}
	}
	set(&m.ToolCall, mc.ToolCall)
	set(&m.Reasoning, mc.Reasoning)
	set(&m.Attachment, mc.Attachment)
	set(&m.Temperature, mc.Temperature)
	if mc.Modalities != nil {
		m.InputModalities, m.OutputModalities = c.InputModalities, c.OutputModalities
	}
	if mc.Cost != nil {
		m.Cost = c.Cost
	}
	if mc.Status != "" {
		m.Status = c.Status
	}
	if mc.Interleaved != nil {
		m.Interleaved, m.InterleavedField = c.Interleaved, c.InterleavedField
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// smallFamilies are the families OpenCode prefers for a small model
// (getSmallModel), in order.
var smallFamilies = []string{"gemini-flash", "gpt-nano", "claude-haiku"}

// SmallFor is the small model OpenCode picks for a provider's titles: its
// newest model of the first small family it has ("" none).
func (c *Catalog) SmallFor(providerID string) string {
	p, ok := c.Provider(providerID)
	if !ok || !p.Connected {
		return ""
	}
	families := smallFamilies
	if strings.HasPrefix(providerID, "github-copilot") {
		families = append([]string{"gpt-mini"}, smallFamilies...)
	}
	models := slices.Clone(p.Models)
	slices.SortStableFunc(models, func(a, b Model) int {
		if c := cmp.Compare(b.ReleaseDate, a.ReleaseDate); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	for _, f := range families {
		for _, m := range models {
			if m.Family == f {
				return p.ID + "/" + m.ID
			}
		}
	}
	return ""
}

// providerHeaders are the headers OpenCode's custom loaders add for some
// providers (provider.ts): attribution for the gateways, Anthropic's betas.
var providerHeaders = map[string]map[string]string{
	"anthropic":  {"anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"},
	"openrouter": {"HTTP-Referer": "https://opencode.ai/", "X-Title": "opencode"},
	"llmgateway": {"HTTP-Referer": "https://opencode.ai/", "X-Title": "opencode", "X-Source": "opencode"},
	"nvidia":     {"HTTP-Referer": "https://opencode.ai/", "X-Title": "opencode", "X-BILLING-INVOKE-ORIGIN": "OpenCode"},
	"zenmux":     {"HTTP-Referer": "https://opencode.ai/", "X-Title": "opencode"},
	"kilo":       {"HTTP-Referer": "https://opencode.ai/", "X-Title": "opencode"},
	"vercel":     {"http-referer": "https://opencode.ai/", "x-title": "opencode"},
	"cerebras":   {"X-Cerebras-3rd-Party-Integration": "opencode"},
}

// loaderHeaders is a provider's headers: its loader's (when loader), the
// config's over them (nil when neither has any).
func loaderHeaders(id string, loader bool, cfg map[string]string) map[string]string {
	var base map[string]string
	if loader {
		base = providerHeaders[id]
	}
	if len(base) == 0 && len(cfg) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(cfg))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range cfg {
		out[k] = v
	}
	return out
}
