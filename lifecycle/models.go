package lifecycle

// The models a session's turns run on: which provider serves one, what
// it costs, the defaults and the small model, and what a call asks of it.

import (
	"strings"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// providerFor returns the provider serving a model.
func (m *Manager) providerFor(model opencode.MessageModel) provider.Provider {
	if m.cfg.Resolve != nil {
		if p, ok := m.cfg.Resolve(model.ProviderID, model.ModelID); ok {
			return p
		}
	}
	return m.cfg.Provider
}

// modelInfo is the catalog's entry for a model.
func (m *Manager) modelInfo(model opencode.MessageModel) (*catalog.Model, bool) {
	return m.cfg.Catalog.Get().Lookup(model.ProviderID, model.ModelID)
}

// cost is the dollar cost of one model call's usage. Input counts the
// cache reads too; with a cache_read price they cost that instead of the
// input price.
func (m *Manager) cost(model opencode.MessageModel, u provider.Usage) float64 {
	info, ok := m.modelInfo(model)
	if !ok {
		return 0
	}
	c := info.Cost
	return (float64(uncachedInput(u))*c.Input + float64(u.CacheRead)*c.CacheRead + float64(u.CacheWrite)*c.CacheWrite +
		float64(u.Output+u.Reasoning)*c.Output) / 1e6
}

// uncachedInput is the input tokens neither read from nor written to the
// prompt cache: OpenCode's tokens.input (a provider reports the total,
// cached parts included).
func uncachedInput(u provider.Usage) int64 {
	return max(u.Input-max(u.CacheRead, 0)-max(u.CacheWrite, 0), 0)
}

// defaultModel is the model a session without one uses: the catalog's
// default (which a key added later may change), else the configured one.
func (m *Manager) defaultModel() opencode.MessageModel {
	if c := m.cfg.Catalog.Get(); c != nil {
		if pid, mid, ok := strings.Cut(c.Model, "/"); ok && m.HasModel(pid, mid) {
			return opencode.MessageModel{ProviderID: pid, ModelID: mid}
		}
	}
	return opencode.MessageModel{ProviderID: m.cfg.ProviderID, ModelID: m.cfg.ModelID}
}

// smallModel is the model that titles a session whose turn runs on turn:
// small_model, else the small model OpenCode picks among the turn
// provider's models, else the turn's own.
func (m *Manager) smallModel(turn opencode.MessageModel) opencode.MessageModel {
	if m.cfg.SmallModelID != "" {
		return opencode.MessageModel{ProviderID: m.cfg.SmallProviderID, ModelID: m.cfg.SmallModelID}
	}
	c := m.cfg.Catalog.Get()
	if c == nil {
		return turn
	}
	ref := c.SmallModel
	if ref == "" {
		ref = c.SmallFor(turn.ProviderID)
	}
	if pid, mid, ok := strings.Cut(ref, "/"); ok && m.HasModel(pid, mid) {
		return opencode.MessageModel{ProviderID: pid, ModelID: mid}
	}
	return turn
}

// HasModel reports whether a prompt may name this model.
func (m *Manager) HasModel(providerID, modelID string) bool {
	if providerID == m.cfg.ProviderID && modelID == m.cfg.ModelID {
		return true
	}
	if m.cfg.Resolve == nil {
		return false
	}
	_, ok := m.cfg.Resolve(providerID, modelID)
	return ok
}

// agent finds one of the server's agents by name.
func (m *Manager) agent(name string) (agent.Agent, bool) {
	for _, a := range m.cfg.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return agent.Agent{}, false
}

// Agents are the server's agents, built-in and configured (GET /agent).
func (m *Manager) Agents() []agent.Agent { return m.cfg.Agents }

// maxTokens is what a call to model asks for: its output limit, capped;
// 0 (the provider's default) when the model has none configured.
func (m *Manager) maxTokens(model opencode.MessageModel) int {
	if info, ok := m.modelInfo(model); ok && info.Output > 0 {
		return int(min(info.Output, maxOutput))
	}
	return 0
}

// modelOptions fills in what the catalog knows of the model a request goes
// to: its answer cap (maxTokens), whether it reasons and its output
// limit, which decide the reasoning options and thinking variants.
func (m *Manager) modelOptions(req *provider.Request, model opencode.MessageModel) {
	req.MaxTokens = m.maxTokens(model)
	if info, ok := m.modelInfo(model); ok {
		r := info.Reasoning
		req.Reasoning, req.OutputLimit = &r, int(info.Output)
		if model.Variant != "" && req.Purpose != provider.PurposeTitle {
			if p, ok := m.cfg.Catalog.Get().Provider(model.ProviderID); ok {
				req.Variant = catalog.VariantOptions(p.NPMOf(info), info, model.Variant)
			}
		}
	}
}

// maxOutput is OpenCode's cap on the tokens a call asks for.
const maxOutput = 32000
