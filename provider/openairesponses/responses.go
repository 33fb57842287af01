// Package openairesponses is a provider for the OpenAI Responses API as
// OpenCode 1.18.33 speaks it through @ai-sdk/openai 3.0.88 (the copy its
// "@ai-sdk/openai" loader imports: `mY="3.0.88"`; every model of that
// package goes through the Responses API, sdk.responses(id) for the
// "openai" provider and sdk.languageModel(id), the same model, for
// others): one Stream is one streamed POST {BaseURL}/responses, retried
// (provider/httpsse) on 408, 409, 429, 5xx, an error event or a failed
// response before any output, and cut connections.
//
// The request is the AI SDK's with OpenCode's provider options
// (transform.ts options(), smallOptions() for a title): store false, so
// reasoning goes back as its encrypted content and no item carries an ID
// (OpenCode deletes itemId from the parts' options unless store is true);
// for gpt-5 models reasoning effort "medium", summary "auto", include
// ["reasoning.encrypted_content"], and text verbosity "low" for gpt-5.x
// but codex; prompt_cache_key is the session's ID; tools are strict:
// false. For the "openai" provider OpenCode's OpenAI plugin drops
// max_output_tokens and adds the originator and session-id headers. The
// bodies of testdata/opencode were recorded from opencode 1.18.33 and are
// reproduced byte for byte. Each message's input items are encoded once
// (Message.Memo).
package openairesponses

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
const DefaultBaseURL = "https://api.openai.com/v1"

// Clock is the time source for retry waits; tests substitute it.
type Clock = httpsse.Clock

// Config configures a Provider.
type Config struct {
	// ProviderID is the provider's ID in the catalog: "openai" gets what
	// OpenCode's OpenAI plugin changes (no max_output_tokens, originator
	// and session-id headers); OpenCode's own "opencode…" providers get a
	// reasoning summary for every gpt-5 and no session-affinity headers.
	ProviderID string
	// BaseURL is the API root including the version (default
	// $OPENAI_BASE_URL, else DefaultBaseURL); requests go to
	// BaseURL + "/responses".
	BaseURL string
	// APIKey is sent as Authorization: Bearer (default $OPENAI_API_KEY, as
	// the AI SDK reads it; none is sent when both are empty).
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
}

// Provider streams Responses API replies.
type Provider struct {
	providerID string
	url        string
	apiKey     string
	headers    map[string]string
	client     *http.Client
	retry      httpsse.Retry

	sysMu    sync.Mutex
	sysSrc   string
	sysDev   bool
	sysEnc   []byte
	sizeHint atomic.Int64
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	base := cfg.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	p := &Provider{
		providerID: cfg.ProviderID,
		url:        strings.TrimRight(base, "/") + "/responses",
		apiKey:     key,
		headers:    cfg.Headers,
		client:     cfg.HTTPClient,
		retry:      httpsse.Retry{Max: cfg.MaxRetries, Base: cfg.RetryBase, Clock: cfg.Clock}.WithDefaults(),
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

// systemEnc is the system prompt's input item, kept for the last prompt
// seen: every call of a session sends the same one.
func (p *Provider) systemEnc(text string, developer bool) []byte {
	p.sysMu.Lock()
	defer p.sysMu.Unlock()
	if p.sysEnc == nil || p.sysSrc != text || p.sysDev != developer {
		p.sysSrc, p.sysDev = text, developer
		p.sysEnc = appendSystem(nil, text, developer)
	}
	return p.sysEnc
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
	return p.retry.Run(ctx, emit, func() (bool, error) { return p.attempt(ctx, body, req.SessionID, emit) })
}

// attempt makes one HTTP call and streams its reply. emitted reports
// whether any chunk reached emit.
//
// The headers are OpenCode's (testdata/opencode/headers.json, recorded
// from opencode 1.18.33): the AI SDK's content-type and Authorization,
// the provider's options.headers over them, then the call's own
// (session/llm.ts sends "x-session-affinity" and "X-Session-Id", the
// session's ID, with every call of a provider not OpenCode's own; its
// OpenAI plugin adds "originator: opencode" and "session-id" for the
// "openai" provider). Accept is what Bun's fetch sends when none is set.
func (p *Provider) attempt(ctx context.Context, body []byte, sessionID string, emit func(provider.Chunk)) (emitted bool, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("openai: %w", err)
	}
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "*/*")
	if p.apiKey != "" {
		h.Set("Authorization", "Bearer "+p.apiKey)
	}
	for k, v := range p.headers {
		h.Set(k, v)
	}
	if sessionID != "" && !strings.HasPrefix(p.providerID, "opencode") {
		h.Set("X-Session-Affinity", sessionID)
		h.Set("X-Session-Id", sessionID)
	}
	if p.providerID == "openai" {
		// OpenCode's built-in OpenAI plugin (chat.headers) for the
		// "openai" provider.
		h.Set("Originator", "opencode")
		if sessionID != "" {
			h.Set("Session-Id", sessionID)
		}
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

// retryStatus adds to httpsse's retryable statuses (429, 5xx) the rest of
// the AI SDK's APICallError isRetryable: 408 and 409.
func retryStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict
}

// errorBody is the OpenAI error shape (openaiErrorDataSchema).
type errorBody struct {
	Error *struct {
		Message string          `json:"message"`
		Type    *string         `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// errorMessage is error.message of an OpenAI error body (the AI SDK's
// errorToMessage), else the body, else the status text.
func errorMessage(status int, raw []byte) string {
	var body errorBody
	if json.Unmarshal(raw, &body) == nil && body.Error != nil && body.Error.Message != "" {
		return body.Error.Message
	}
	return httpsse.FallbackMessage(status, raw)
}
