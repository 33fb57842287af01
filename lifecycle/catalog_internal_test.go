package lifecycle

import (
	"math"
	"testing"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// TestCatalogLimitsAndCost: cost, maxTokens and overflow read the model's
// catalog entry; a model the catalog does not know is free, unlimited and
// never overflows.
func TestCatalogLimitsAndCost(t *testing.T) {
	c := (&catalog.Catalog{Providers: []catalog.Provider{{ID: "p", Models: []catalog.Model{
		{ID: "priced", Context: 10000, Output: 2000, Cost: catalog.Cost{Input: 3, Output: 15, Set: true}},
		{ID: "cached", Context: 200000, Output: 64000, Cost: catalog.Cost{Input: 3, Output: 15, CacheRead: 0.3, Set: true}},
		{ID: "free"},
	}}}}).Build()
	m := &Manager{cfg: Config{Catalog: catalog.NewLive(c)}}
	model := func(id string) opencode.MessageModel { return opencode.MessageModel{ProviderID: "p", ModelID: id} }
	u := provider.Usage{Input: 1000, Output: 100, Reasoning: 50, CacheRead: 400}
	for _, tc := range []struct {
		id       string
		cost     float64
		max      int
		overflow bool // at u plus 7000 more input tokens
	}{
		// As OpenCode bills: cached tokens at the cache price (none: free).
		{"priced", (600*3 + 150*15) / 1e6, 2000, true},
		{"cached", (600*3 + 400*0.3 + 150*15) / 1e6, maxOutput, false},
		{"free", 0, 0, false},
		{"unknown", 0, 0, false},
	} {
		if got := m.cost(model(tc.id), u); math.Abs(got-tc.cost) > 1e-12 {
			t.Errorf("%s: cost %v, want %v", tc.id, got, tc.cost)
		}
		if got := m.maxTokens(model(tc.id)); got != tc.max {
			t.Errorf("%s: maxTokens %d, want %d", tc.id, got, tc.max)
		}
		big := u
		big.Input += 7000
		if got := m.overflow(model(tc.id), big); got != tc.overflow {
			t.Errorf("%s: overflow %v, want %v", tc.id, got, tc.overflow)
		}
		if m.overflow(model(tc.id), u) {
			t.Errorf("%s: overflow at %+v", tc.id, u)
		}
	}
	if _, ok := (&Manager{}).modelInfo(model("priced")); ok {
		t.Error("no catalog: modelInfo found a model")
	}
}

// TestCacheWriteCost: tokens written to the prompt cache are billed at the
// model's cache-write price and are not input tokens (OpenCode's
// tokens.input is the uncached part).
func TestCacheWriteCost(t *testing.T) {
	c := (&catalog.Catalog{Providers: []catalog.Provider{{ID: "p", Models: []catalog.Model{
		{ID: "claude", Cost: catalog.Cost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75, Set: true}},
	}}}}).Build()
	m := &Manager{cfg: Config{Catalog: catalog.NewLive(c)}}
	u := provider.Usage{Input: 10000, Output: 200, CacheRead: 6000, CacheWrite: 3000}
	want := (1000*3 + 6000*0.3 + 3000*3.75 + 200*15) / 1e6
	if got := m.cost(opencode.MessageModel{ProviderID: "p", ModelID: "claude"}, u); math.Abs(got-want) > 1e-12 {
		t.Errorf("cost %v, want %v", got, want)
	}
	if got := uncachedInput(u); got != 1000 {
		t.Errorf("uncached input %d, want 1000", got)
	}
}
