// Package openai is a provider for OpenAI-compatible chat-completions APIs
// (what OpenCode's @ai-sdk/openai-compatible speaks): one Stream is one
// streamed POST {BaseURL}/chat/completions, retried with exponential backoff
// on 429, 5xx and connection failures.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// Defaults for Config.
const (
	DefaultMaxRetries = httpsse.DefaultMaxRetries
	DefaultRetryBase  = httpsse.DefaultRetryBase
)

// Clock is the time source for retry waits; tests substitute it.
type Clock = httpsse.Clock

// Config configures a Provider.
type Config struct {
	// BaseURL is the API root including the version, e.g.
	// "https://api.openai.com/v1"; requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <APIKey>".
	APIKey string
	// Headers are added to every request (after the defaults, so they may
	// override them).
	Headers map[string]string
	// HTTPClient defaults to a client with its own transport (see
	// CloseIdleConnections). Its Timeout, if any, bounds whole streams.
	HTTPClient *http.Client
	// MaxRetries is how many times a retryable failure is retried: 0 means
	// DefaultMaxRetries, negative means never.
	MaxRetries int
	// RetryBase is the first backoff, doubled on every retry (default
	// DefaultRetryBase).
	RetryBase time.Duration
	// Clock defaults to the real clock.
	Clock Clock
}

// Provider streams chat completions from an OpenAI-compatible API.
type Provider struct {
	url     string
	apiKey  string
	headers map[string]string
	client  *http.Client
	retry   httpsse.Retry
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{
		url:    strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		apiKey: cfg.APIKey,
		client: cfg.HTTPClient,
		retry:  httpsse.Retry{Max: cfg.MaxRetries, Base: cfg.RetryBase, Clock: cfg.Clock}.WithDefaults(),
	}
	if len(cfg.Headers) > 0 {
		p.headers = make(map[string]string, len(cfg.Headers))
		for k, v := range cfg.Headers {
			p.headers[k] = v
		}
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

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	body, err := buildRequest(req).encode()
	if err != nil {
		return fmt.Errorf("openai: encoding request: %w", err)
	}
	return p.retry.Run(ctx, emit, func() (bool, error) { return p.attempt(ctx, req.SessionID, body, emit) })
}

// attempt makes one HTTP call and streams its reply. emitted reports
// whether any chunk reached emit.
func (p *Provider) attempt(ctx context.Context, sessionID string, body []byte, emit func(provider.Chunk)) (emitted bool, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "*/*") // as the AI SDK's fetch sends it
	if p.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	for k, v := range p.headers {
		hreq.Header.Set(k, v)
	}
	if sessionID != "" {
		// OpenCode's per-call headers: the session, so a gateway can keep
		// its calls on one backend (and its prompt cache warm).
		hreq.Header.Set("x-session-affinity", sessionID)
		hreq.Header.Set("x-session-id", sessionID)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		return false, httpsse.ConnectionError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, httpsse.StatusError(resp, errorMessage, nil)
	}
	s := &streamState{emit: emit, status: resp.StatusCode}
	err = s.read(ctx, resp.Body)
	return s.emitted, err
}

// errorMessage is error.message of an OpenAI error body, else the body,
// else the status text.
func errorMessage(status int, raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var obj struct {
			Message string `json:"message"`
		}
		var str string
		switch {
		case json.Unmarshal(body.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(body.Error, &str) == nil && str != "":
			return str
		case body.Message != "":
			return body.Message
		}
	}
	return httpsse.FallbackMessage(status, raw)
}
