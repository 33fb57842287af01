package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/registry"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// models makes the catalog and the clients of its connected providers
// from what OpenCode reads (models.dev, opencode.json, auth.json, the
// environment, model.json) and makes them again when one changes. The
// catalog and the clients are replaced together, clients first.
type models struct {
	cfg      *config.File
	source   catalog.Source
	auth     *catalog.AuthStore
	scripted provider.Provider
	getenv   func(string) string
	log      *slog.Logger
	live     *catalog.Live
	clients  atomic.Pointer[map[modelKey]provider.Provider]

	mu     sync.Mutex
	dev    catalog.Dev
	probed map[string][]string
}

func newModels(o Options, scriptedModel provider.Provider) *models {
	log := o.Logger
	m := &models{cfg: o.Config, scripted: scriptedModel, log: log, live: &catalog.Live{}, getenv: o.Getenv}
	if o.Models != nil {
		m.source = *o.Models
	} else {
		m.source = catalog.DefaultSource(log)
	}
	if o.Auth != nil {
		m.auth = o.Auth
	} else {
		m.auth = catalog.DefaultAuthStore(log)
	}
	if m.getenv == nil {
		m.getenv = os.Getenv
	}
	dev, where, stale := m.source.Load()
	m.dev = dev
	switch {
	case o.Models != nil:
		// A catalog the caller chose (tests): nothing to say.
	case where != "":
		log.Info("models.dev catalog", "path", where, "providers", len(dev.Providers))
	case m.source.NoFetch:
		log.Info("no models.dev catalog (OPENCODE_DISABLE_MODELS_FETCH, no cache): the providers of opencode.json only")
	default:
		log.Info("no models.dev catalog yet: the providers of opencode.json until it is fetched", "url", m.source.URL)
	}
	m.rebuild()
	if stale && !m.source.NoFetch && m.source.Path == "" {
		go m.refresh() // never on the path of a request
	}
	for _, id := range sortedProviderIDs(m.cfg) {
		if pc := m.cfg.Provider[id]; catalog.NeedsProbe(dev, id, pc) {
			go m.probe(id, pc)
		}
	}
	return m
}

// probe lists the models of a configured OpenAI-compatible provider that
// names none (GET {baseURL}/models), then makes the catalog again.
func (m *models) probe(id string, pc config.ProviderConfig) {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(pc.Options.BaseURL, "/")+"/models", nil)
	if err != nil {
		return
	}
	if pc.Options.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+pc.Options.APIKey)
	}
	// One request per provider, once: no keep-alive connection is left
	// idle in http.DefaultClient behind it.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		m.log.Warn("provider's models not listed", "provider", id, "err", err)
		return
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list) != nil {
		m.log.Warn("provider's models not listed", "provider", id, "status", resp.StatusCode)
		return
	}
	var ids []string
	for _, d := range list.Data {
		if d.ID != "" {
			ids = append(ids, d.ID)
		}
	}
	m.mu.Lock()
	if m.probed == nil {
		m.probed = map[string][]string{}
	}
	m.probed[id] = ids
	m.mu.Unlock()
	m.log.Info("provider's models listed", "provider", id, "models", len(ids))
	m.rebuild()
}

// probeTimeout bounds listing a provider's models.
const probeTimeout = 5 * time.Second

func sortedProviderIDs(cfg *config.File) []string {
	if cfg == nil {
		return nil
	}
	return cfg.ProviderIDs()
}

// refresh fetches models.dev and rebuilds the catalog with it.
func (m *models) refresh() {
	dev, err := m.source.Fetch(context.Background())
	if err != nil {
		m.log.Warn("models.dev catalog not fetched", "url", m.source.URL, "err", err)
		return
	}
	m.mu.Lock()
	m.dev = dev
	m.mu.Unlock()
	m.log.Info("models.dev catalog fetched", "providers", len(dev.Providers))
	m.rebuild()
}

// rebuild makes the catalog again from the current inputs.
func (m *models) rebuild() {
	m.mu.Lock()
	dev, probed := m.dev, m.probed
	m.mu.Unlock()
	cat := catalog.Assemble(catalog.Inputs{Dev: dev, Config: m.cfg, Probed: probed, Auth: m.auth.All(), Getenv: m.getenv,
		Recent: recentModels(), Experimental: os.Getenv("OPENCODE_ENABLE_EXPERIMENTAL_MODELS") != "",
		Served: registry.Supported})
	clients := map[modelKey]provider.Provider{{scripted.ProviderID, scripted.ModelID}: m.scripted}
	for i := range cat.Providers {
		p := &cat.Providers[i]
		if !p.Connected {
			continue
		}
		def, _ := registry.New(p.NPM, registry.Options{ProviderID: p.ID, BaseURL: p.BaseURL, APIKey: p.Key, Headers: p.Headers})
		for _, md := range p.Models {
			c := def
			if md.NPM != "" || md.BaseURL != "" {
				// A model of its own package or endpoint (models.dev's
				// model.provider).
				npm, base := p.NPM, p.BaseURL
				if md.NPM != "" {
					npm = md.NPM
				}
				if md.BaseURL != "" {
					base = md.BaseURL
				}
				if own, ok := registry.New(npm, registry.Options{ProviderID: p.ID, BaseURL: base, APIKey: p.Key, Headers: p.Headers}); ok {
					c = own
				}
			}
			if c != nil {
				clients[modelKey{p.ID, md.ID}] = c
			}
		}
	}
	// The scripted model is always there, first.
	cat.Providers = append([]catalog.Provider{{ID: scripted.ProviderID, Name: "Scripted", Source: "custom", Connected: true,
		Env: []string{}, Models: []catalog.Model{scriptedModel()}, Default: scripted.ModelID}}, cat.Providers...)
	if cat.Model != "" {
		if pid, mid, ok := config.SplitModel(cat.Model); !ok || clients[modelKey{pid, mid}] == nil {
			m.log.Warn("configured model is not served; using the scripted model", "model", cat.Model)
			cat.Model = ""
		}
	}
	if cat.Model == "" {
		cat.Model = scripted.ProviderID + "/" + scripted.ModelID
	}
	if cat.SmallModel != "" {
		if pid, mid, ok := config.SplitModel(cat.SmallModel); !ok || clients[modelKey{pid, mid}] == nil {
			cat.SmallModel = ""
		}
	}
	old := m.clients.Swap(&clients)
	m.live.Set(cat.Build())
	if old != nil {
		closeIdle(*old) // a turn still streaming keeps its connection
	}
}

// closeIdle closes the idle keep-alive connections of the clients that
// have them (each HTTP provider has its own transport), so that none
// outlives the clients or the server.
func closeIdle(clients map[modelKey]provider.Provider) {
	for _, c := range clients {
		if ic, ok := c.(interface{ CloseIdleConnections() }); ok {
			ic.CloseIdleConnections()
		}
	}
}

// resolve is the client of a model the catalog serves.
func (m *models) resolve(pid, mid string) (provider.Provider, bool) {
	c := *m.clients.Load()
	p, ok := c[modelKey{pid, mid}]
	return p, ok
}

// recentModels are model.json's recent models ($XDG_STATE_HOME/opencode),
// which the TUI writes as the user picks models.
func recentModels() []string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		state = filepath.Join(home, ".local", "state")
	}
	b, err := os.ReadFile(filepath.Join(state, "opencode", "model.json"))
	if err != nil {
		return nil
	}
	var f struct {
		Recent []struct {
			ProviderID string `json:"providerID"`
			ModelID    string `json:"modelID"`
		} `json:"recent"`
	}
	if json.Unmarshal(b, &f) != nil {
		return nil
	}
	var out []string
	for _, r := range f.Recent {
		if r.ProviderID != "" && r.ModelID != "" {
			out = append(out, r.ProviderID+"/"+r.ModelID)
		}
	}
	return out
}
