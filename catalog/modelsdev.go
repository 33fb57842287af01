package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/atomicfile"
	"github.com/opencode-server/opencode-server/config"
)

// DevProvider is a provider of the models.dev catalog (its api.json).
type DevProvider struct {
	ID     string              `json:"id"`
	Name   string              `json:"name"`
	Env    []string            `json:"env"`
	NPM    string              `json:"npm"`
	API    string              `json:"api"`
	Doc    string              `json:"doc"`
	Models map[string]DevModel `json:"models"`
}

// DevModel is a model of the models.dev catalog.
type DevModel struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Family      string          `json:"family"`
	Attachment  bool            `json:"attachment"`
	Reasoning   bool            `json:"reasoning"`
	ToolCall    bool            `json:"tool_call"`
	Temperature bool            `json:"temperature"`
	Interleaved json.RawMessage `json:"interleaved"`
	ReleaseDate string          `json:"release_date"`
	LastUpdated string          `json:"last_updated"`
	Knowledge   string          `json:"knowledge"`
	OpenWeights bool            `json:"open_weights"`
	Status      string          `json:"status"`
	Cost        *struct {
		Input          float64 `json:"input"`
		Output         float64 `json:"output"`
		CacheRead      float64 `json:"cache_read"`
		CacheWrite     float64 `json:"cache_write"`
		ContextOver200 *struct {
			Input      float64 `json:"input"`
			Output     float64 `json:"output"`
			CacheRead  float64 `json:"cache_read"`
			CacheWrite float64 `json:"cache_write"`
		} `json:"context_over_200k"`
	} `json:"cost"`
	Limit struct {
		Context int64 `json:"context"`
		Input   int64 `json:"input"`
		Output  int64 `json:"output"`
	} `json:"limit"`
	Modalities *struct {
		Input  []string `json:"input"`
		Output []string `json:"output"`
	} `json:"modalities"`
	// Provider overrides the provider's npm and api for this model.
	Provider *struct {
		NPM string `json:"npm"`
		API string `json:"api"`
	} `json:"provider"`
}

// Dev is a models.dev catalog: its providers in the file's order (which
// is the order OpenCode lists them in, and picks a default model by).
type Dev struct {
	Providers []DevProvider
	// ModelOrder is each provider's model IDs in the file's order.
	ModelOrder map[string][]string
}

// Provider finds a provider of the catalog.
func (d Dev) Provider(id string) (DevProvider, bool) {
	for _, p := range d.Providers {
		if p.ID == id {
			return p, true
		}
	}
	return DevProvider{}, false
}

// ParseDev reads an api.json. Providers and models without an ID get the
// key they are listed under, as models.dev's own files do.
func ParseDev(b []byte) (Dev, error) {
	ids, raws, err := config.ObjectEntries(b)
	if err != nil {
		return Dev{}, fmt.Errorf("models.dev catalog: %w", err)
	}
	d := Dev{ModelOrder: map[string][]string{}}
	for i, id := range ids {
		var p DevProvider
		if err := json.Unmarshal(raws[i], &p); err != nil {
			return Dev{}, fmt.Errorf("models.dev catalog, provider %s: %w", id, err)
		}
		if p.ID == "" {
			p.ID = id
		}
		var wrap struct {
			Models json.RawMessage `json:"models"`
		}
		_ = json.Unmarshal(raws[i], &wrap)
		if len(wrap.Models) > 0 {
			order, _, err := config.ObjectEntries(wrap.Models)
			if err != nil {
				return Dev{}, fmt.Errorf("models.dev catalog, provider %s: %w", id, err)
			}
			d.ModelOrder[p.ID] = order
		}
		for mid, m := range p.Models {
			if m.ID == "" {
				m.ID = mid
				p.Models[mid] = m
			}
		}
		d.Providers = append(d.Providers, p)
	}
	return d, nil
}

// Source says where the models.dev catalog is found and fetched, as
// OpenCode finds it (models-dev.ts): OPENCODE_MODELS_PATH, else the user's
// OpenCode cache (which OpenCode keeps fresh), else ours, else a fetch of
// ${OPENCODE_MODELS_URL:-https://models.dev}/api.json unless
// OPENCODE_DISABLE_MODELS_FETCH.
type Source struct {
	// Path is OPENCODE_MODELS_PATH ("" : none).
	Path string
	// OpenCodeCache is OpenCode's models.json; Cache is ours, which the
	// fetch writes.
	OpenCodeCache, Cache string
	// URL is the catalog's address; NoFetch turns fetching off.
	URL     string
	NoFetch bool
	Client  *http.Client
	Log     *slog.Logger
}

// DefaultSource is the source the environment describes.
func DefaultSource(log *slog.Logger) Source {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	base := os.Getenv("OPENCODE_MODELS_URL")
	if base == "" {
		base = "https://models.dev"
	}
	return Source{Path: os.Getenv("OPENCODE_MODELS_PATH"),
		OpenCodeCache: filepath.Join(cache, "opencode", "models.json"),
		Cache:         filepath.Join(cache, "opencode-server", "models.json"),
		URL:           strings.TrimRight(base, "/") + "/api.json",
		NoFetch:       os.Getenv("OPENCODE_DISABLE_MODELS_FETCH") != "",
		Client:        &http.Client{Timeout: FetchTimeout}, Log: log}
}

// FetchTimeout bounds one fetch of the catalog; RefreshAfter is the age
// after which a cached catalog is fetched again (in the background).
const (
	FetchTimeout = 10 * time.Second
	RefreshAfter = 5 * time.Minute
)

// Load reads the catalog from the first place that has one. stale reports
// that it came from a cache older than RefreshAfter (or from nowhere), so
// a fetch should follow; where names the file ("" none).
func (s Source) Load() (d Dev, where string, stale bool) {
	if s.Path != "" {
		if d, err := readDev(s.Path); err == nil {
			return d, s.Path, false
		} else {
			s.logger().Warn("OPENCODE_MODELS_PATH unreadable", "path", s.Path, "err", err)
		}
	}
	for _, p := range []string{s.OpenCodeCache, s.Cache} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		d, err := readDev(p)
		if err != nil {
			s.logger().Warn("models.dev cache unreadable", "path", p, "err", err)
			continue
		}
		return d, p, time.Since(fi.ModTime()) > RefreshAfter
	}
	return Dev{}, "", true
}

// Fetch gets the catalog from URL and writes it atomically to Cache.
func (s Source) Fetch(ctx context.Context) (Dev, error) {
	if s.NoFetch {
		return Dev{}, fmt.Errorf("fetching is off (OPENCODE_DISABLE_MODELS_FETCH)")
	}
	ctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return Dev{}, err
	}
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: FetchTimeout}
	}
	resp, err := c.Do(req)
	if err != nil {
		return Dev{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Dev{}, fmt.Errorf("%s: %s", s.URL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Dev{}, err
	}
	d, err := ParseDev(b)
	if err != nil {
		return Dev{}, err
	}
	if s.Cache != "" {
		if err := writeAtomic(s.Cache, b, 0o644); err != nil {
			s.logger().Warn("models.dev cache not written", "path", s.Cache, "err", err)
		}
	}
	return d, nil
}

func (s Source) logger() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func readDev(path string) (Dev, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dev{}, err
	}
	return ParseDev(b)
}

// writeAtomic writes b to path whole or not at all.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	return atomicfile.Write(path, b, mode)
}
