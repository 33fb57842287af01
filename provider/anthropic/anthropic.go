// Package anthropic is a provider for the Anthropic Messages API as
// OpenCode 1.18.33 speaks it through @ai-sdk/anthropic 3.0.111: one Stream
// is one streamed POST {BaseURL}/messages, retried (provider/httpsse) on
// 408, 409, 429, 5xx (529 overloaded among them), an overloaded_error
// event before any output, and cut connections.
//
// The request is the AI SDK's, after OpenCode's own Anthropic handling in
// provider/transform.ts: empty texts and empty unsigned reasoning dropped,
// tool-call IDs sanitised for claude models, and prompt caching
// (applyCaching) on the system message and the last two messages. Each
// message's blocks are encoded once (Message.Memo); the cache marks,
// which move on every call, are spliced into the last block of the marked
// messages when the body is assembled.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
const DefaultBaseURL = "https://api.anthropic.com/v1"

// Version is the anthropic-version header the AI SDK sends.
const Version = "2023-06-01"

// DefaultBetas is the anthropic-beta header OpenCode 1.18.33's custom
// loader for the "anthropic" provider adds (provider/provider.ts):
//
//	anthropic: () => ({ autoload: false, options: { headers: {
//	  "anthropic-beta": "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14" } } })
//
// The loader's options are merged only when models.dev lists the provider
// and an env key or auth.json connected it before the config's providers
// were (autoload is false): a provider keyed by options.apiKey alone gets
// no betas from it (testdata/reference/prompt-anthropic, text and
// text-env-key). The catalog decides that and puts the header in
// Config.Headers (catalog/assemble.go); this is its value.
var DefaultBetas = []string{"interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14"}

// Clock is the time source for retry waits; tests substitute it.
type Clock = httpsse.Clock

// Config configures a Provider.
type Config struct {
	// ProviderID is the provider's ID in the catalog: "anthropic" gets
	// DefaultBetas, as OpenCode's loader for that ID adds them (OpenCode
	// adds them only to a provider models.dev lists that an env key or
	// auth.json connected; the catalog knows that, this package does not).
	ProviderID string
	// BaseURL is the API root including the version (default
	// $ANTHROPIC_BASE_URL, else DefaultBaseURL); requests go to
	// BaseURL + "/messages".
	BaseURL string
	// APIKey is sent as x-api-key (default $ANTHROPIC_API_KEY, as the AI
	// SDK reads it; none is sent when both are empty).
	APIKey string
	// Headers are added to every request after the defaults, so they may
	// override them. An anthropic-beta header here joins the betas the
	// request needs, as the AI SDK merges them.
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
}

// Provider streams Messages API replies.
type Provider struct {
	url     string
	apiKey  string
	headers map[string]string // without anthropic-beta
	betas   orderedSet        // configured betas (loader and headers)
	client  *http.Client
	retry   httpsse.Retry

	sysMu  sync.Mutex
	sysSrc string
	sysEnc []byte

	sizeHint atomic.Int64
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("ANTHROPIC_API_KEY")
	}
	p := &Provider{
		url:    strings.TrimRight(base, "/") + "/messages",
		apiKey: key,
		client: cfg.HTTPClient,
		retry:  httpsse.Retry{Max: cfg.MaxRetries, Base: cfg.RetryBase, Clock: cfg.Clock}.WithDefaults(),
	}
	for k, v := range cfg.Headers {
		if strings.EqualFold(k, "anthropic-beta") {
			// The AI SDK's getBetasFromHeaders: lower-cased, split on
			// commas, trimmed.
			for _, b := range strings.Split(strings.ToLower(v), ",") {
				if b = strings.TrimSpace(b); b != "" {
					p.betas.add(b)
				}
			}
			continue
		}
		if p.headers == nil {
			p.headers = make(map[string]string, len(cfg.Headers))
		}
		p.headers[k] = v
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

// CloseIdleConnections closes the HTTP client's idle keep-alive connections.
func (p *Provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

// systemEnc is the system prompt's memo-form encoding (flags byte, text
// block), kept for the last prompt seen: every call of a session sends
// the same one.
func (p *Provider) systemEnc(text string) []byte {
	p.sysMu.Lock()
	defer p.sysMu.Unlock()
	if p.sysEnc == nil || p.sysSrc != text {
		p.sysSrc = text
		p.sysEnc = encoder{}.encode(&provider.Message{Role: "system", Content: text})
	}
	return p.sysEnc
}

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	// A fresh buffer each call (the transport may still read a request
	// body after Do returns), sized from the last body.
	body, betas, err := p.buildBody(make([]byte, 0, p.sizeHint.Load()+4096), &req)
	if err != nil {
		return err
	}
	p.sizeHint.Store(int64(len(body)))
	for _, b := range p.betas {
		betas.add(b)
	}
	beta := strings.Join(betas, ",")
	return p.retry.Run(ctx, emit, func() (bool, error) { return p.attempt(ctx, body, beta, req.SessionID, emit) })
}

// attempt makes one HTTP call and streams its reply. emitted reports
// whether any chunk reached emit.
//
// The headers are OpenCode's (testdata/reference/prompt-anthropic): the
// AI SDK's content-type, anthropic-version and x-api-key, the provider's
// options.headers over them, then the call's own headers over those
// (session/llm.ts sends "x-session-affinity" and "X-Session-Id", the
// session's ID, with every call of a provider not OpenCode's own), and
// the betas last. Accept is what Bun's fetch sends when none is set.
func (p *Provider) attempt(ctx context.Context, body []byte, beta, sessionID string, emit func(provider.Chunk)) (emitted bool, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("anthropic: %w", err)
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "*/*")
	h.Set("Anthropic-Version", Version)
	if p.apiKey != "" {
		h.Set("X-Api-Key", p.apiKey)
	}
	for k, v := range p.headers {
		h.Set(k, v)
	}
	if sessionID != "" {
		h.Set("X-Session-Affinity", sessionID)
		h.Set("X-Session-Id", sessionID)
	}
	if beta != "" {
		h.Set("Anthropic-Beta", beta)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return false, httpsse.ConnectionError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, httpsse.StatusError(resp, errorMessage, retryStatus)
	}
	s := &streamState{emit: emit, status: resp.StatusCode}
	err = s.read(ctx, resp.Body)
	return s.emitted, err
}

// retryStatus adds to httpsse's retryable statuses (429, 5xx, which
// includes 529 overloaded) the rest of the AI SDK's APICallError
// isRetryable: 408 and 409.
func retryStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict || status == 529
}

// errorBody is the Messages API's error shape.
type errorBody struct {
	Type  string `json:"type"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// errorMessage is error.message of an Anthropic error body (the AI SDK's
// errorToMessage), else the body, else the status text.
func errorMessage(status int, raw []byte) string {
	var body errorBody
	if json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Message != "" {
		return body.Error.Message
	}
	return httpsse.FallbackMessage(status, raw)
}
