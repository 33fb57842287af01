// Package google is a provider for the Gemini API (Google Generative AI)
// as OpenCode 1.18.33 speaks it through @ai-sdk/google 3.0.73: one Stream
// is one POST {BaseURL}/models/{model}:streamGenerateContent?alt=sse with
// the key in x-goog-api-key, retried (provider/httpsse) on 408, 409, 429,
// 5xx, an error object before any output, and cut connections.
//
// The request is the AI SDK's (convertToGoogleGenerativeAIMessages,
// prepareTools, convertJSONSchemaToOpenAPISchema) after OpenCode's own
// Gemini handling in provider/transform.ts: the tool schema rewrite for
// Gemini, the sampling defaults (temperature 1, topP 0.95, topK 64 for
// Gemini 2.5 and 3), thinkingConfig {includeThoughts: true, thinkingLevel:
// "high"} for reasoning models (no thinkingLevel for Gemini 1 and 2),
// and for a title request the model's first variant and the title agent's
// temperature 0.5. Each message's parts are encoded once (Message.Memo).
// testdata/opencode holds requests the real opencode serve sent, which the
// tests rebuild byte for byte (TestRecordReference records them again).
//
// The reply's thought parts are reasoning, with their thoughtSignature as
// the part's metadata {"google":{"thoughtSignature":…}} (texts likewise;
// a signature on an empty text part is lost, as the AI SDK loses it);
// function calls come whole and get IDs minted as the AI SDK mints them
// (the API has none), their signatures kept as the tool call's metadata.
// Both go back on later calls.
package google

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/opencode-server/opencode-server/jsonw"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// DefaultBaseURL is the API root when none is configured.
const DefaultBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// UserAgent is the User-Agent OpenCode 1.18.33 sends to Gemini (its own
// "opencode/<version>", which the AI SDK's provider-utils extends).
const UserAgent = "opencode/1.18.33 ai-sdk/provider-utils/4.0.27 runtime/bun/1.3.14"

// Clock is the time source for retry waits; tests substitute it.
type Clock = httpsse.Clock

// Config configures a Provider.
type Config struct {
	// ProviderID is the provider's ID in the catalog: "google" (or a
	// model ID containing "gemini") gets OpenCode's Gemini tool schema
	// rewrite.
	ProviderID string
	// BaseURL is the API root including the version (default
	// DefaultBaseURL); requests go to
	// BaseURL + "/models/{model}:streamGenerateContent?alt=sse".
	BaseURL string
	// APIKey is sent as x-goog-api-key (default
	// $GOOGLE_GENERATIVE_AI_API_KEY, as the AI SDK reads it; none is sent
	// when both are empty).
	APIKey string
	// Headers are added to every request after the defaults, so they may
	// override them.
	Headers map[string]string
	// HTTPClient defaults to a client with its own transport. Its
	// Timeout, if any, bounds whole streams.
	HTTPClient *http.Client
	// MaxRetries is how many times a retryable failure is retried: 0
	// means httpsse.DefaultMaxRetries, negative means never.
	MaxRetries int
	// RetryBase is the first backoff, doubled on every retry.
	RetryBase time.Duration
	// Clock defaults to the real clock.
	Clock Clock
	// GenerateID mints tool call IDs (default: the AI SDK's generateId,
	// 16 random alphanumerics).
	GenerateID func() string
}

// Provider streams Gemini replies.
type Provider struct {
	base       string
	providerID string
	apiKey     string
	headers    map[string]string
	client     *http.Client
	retry      httpsse.Retry
	genID      func() string

	sysMu  sync.Mutex
	sysSrc string
	sysEnc []byte

	// params caches tool schemas in their wire form: every call of a
	// session offers the same tools.
	paramsMu sync.Mutex
	params   map[paramKey]paramVal

	sizeHint atomic.Int64
}

type paramKey struct {
	raw      string
	sanitize bool
}

type paramVal struct {
	b  []byte
	ok bool
}

// maxParams bounds the schema cache (it starts over when full).
const maxParams = 512

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("GOOGLE_GENERATIVE_AI_API_KEY")
	}
	p := &Provider{
		base:       base,
		providerID: cfg.ProviderID,
		apiKey:     key,
		headers:    cfg.Headers,
		client:     cfg.HTTPClient,
		retry:      httpsse.Retry{Max: cfg.MaxRetries, Base: cfg.RetryBase, Clock: cfg.Clock}.WithDefaults(),
		genID:      cfg.GenerateID,
	}
	if p.genID == nil {
		p.genID = GenerateID
	}
	if p.client == nil {
		var tr http.RoundTripper = http.DefaultTransport
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			tr = t.Clone()
		}
		p.client = &http.Client{Transport: tr}
	}
	return p
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// GenerateID is the AI SDK's generateId: 16 characters from its
// alphanumeric alphabet.
func GenerateID() string {
	var b [16]byte
	for i := range b {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b[:])
}

// CloseIdleConnections closes the HTTP client's idle keep-alive connections.
func (p *Provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

// URL is the endpoint a model's streamed calls go to.
func (p *Provider) URL(modelID string) string {
	return p.base + "/" + modelPath(modelID) + ":streamGenerateContent?alt=sse"
}

// systemEnc is the system prompt's text part, kept for the last prompt
// seen: every call of a session sends the same one.
func (p *Provider) systemEnc(text string) []byte {
	p.sysMu.Lock()
	defer p.sysMu.Unlock()
	if p.sysEnc == nil || p.sysSrc != text {
		p.sysSrc = text
		p.sysEnc = append(jsonw.AppendString([]byte(`{"text":`), text), '}')
	}
	return p.sysEnc
}

// parameters is a tool schema's wire form, cached.
func (p *Provider) parameters(raw json.RawMessage, sanitize bool) ([]byte, bool) {
	p.paramsMu.Lock()
	defer p.paramsMu.Unlock()
	if v, ok := p.params[paramKey{string(raw), sanitize}]; ok {
		return v.b, v.ok
	}
	b, ok := toolParameters(raw, sanitize)
	if p.params == nil || len(p.params) >= maxParams {
		p.params = make(map[paramKey]paramVal)
	}
	p.params[paramKey{string(raw), sanitize}] = paramVal{b, ok}
	return b, ok
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	// A fresh buffer each call (the transport may still read a request
	// body after Do returns), sized from the last body.
	body, err := p.buildBody(make([]byte, 0, p.sizeHint.Load()+4096), &req)
	if err != nil {
		return err
	}
	p.sizeHint.Store(int64(len(body)))
	url := p.URL(req.ModelID)
	return p.retry.Run(ctx, emit, func() (bool, error) { return p.attempt(ctx, url, req.SessionID, body, emit) })
}

// attempt makes one HTTP call and streams its reply. emitted reports
// whether any chunk reached emit.
func (p *Provider) attempt(ctx context.Context, url, session string, body []byte, emit func(provider.Chunk)) (emitted bool, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("google: %w", err)
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	// What Bun's fetch sends when none is set.
	h.Set("Accept", "*/*")
	h.Set("User-Agent", UserAgent)
	if p.apiKey != "" {
		h.Set("X-Goog-Api-Key", p.apiKey)
	}
	if session != "" {
		// OpenCode's own headers for providers other than its gateway.
		h.Set("X-Session-Affinity", session)
		h.Set("X-Session-Id", session)
	}
	for k, v := range p.headers {
		h.Set(k, v)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return false, httpsse.ConnectionError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, httpsse.StatusError(resp, errorMessage, retryStatus)
	}
	s := &streamState{emit: emit, status: resp.StatusCode, genID: p.genID}
	err = s.read(ctx, resp.Body)
	return s.emitted, err
}

// retryStatus adds to httpsse's retryable statuses (429, 5xx) the rest of
// the AI SDK's APICallError isRetryable: 408 and 409.
func retryStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict
}

// errorBody is the Gemini API's error shape (a JSON object, or an array
// of them from some front ends).
type errorBody struct {
	Error *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// errorMessage is error.message of a Google error body (the AI SDK's
// errorToMessage), else the body, else the status text.
func errorMessage(status int, raw []byte) string {
	var body errorBody
	if json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Message != "" {
		return body.Error.Message
	}
	var list []errorBody
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 && list[0].Error != nil && list[0].Error.Message != "" {
		return list[0].Error.Message
	}
	return httpsse.FallbackMessage(status, raw)
}
