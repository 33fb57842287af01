// Package openai is a provider for OpenAI-compatible chat-completions APIs
// (what OpenCode's @ai-sdk/openai-compatible speaks): one Stream is one
// streamed POST {BaseURL}/chat/completions, retried with exponential backoff
// on 429, 5xx and connection failures.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/provider"
)

// Defaults for Config.
const (
	DefaultMaxRetries = 4
	DefaultRetryBase  = 500 * time.Millisecond
	// maxBackoff caps the computed backoff (not a server's Retry-After).
	maxBackoff = 30 * time.Second
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 1 << 20
)

// Clock is the time source for retry waits; tests substitute it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

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
	url        string
	apiKey     string
	headers    map[string]string
	client     *http.Client
	maxRetries int
	retryBase  time.Duration
	clock      Clock
}

var _ provider.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) *Provider {
	p := &Provider{
		url:        strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions",
		apiKey:     cfg.APIKey,
		client:     cfg.HTTPClient,
		maxRetries: cfg.MaxRetries,
		retryBase:  cfg.RetryBase,
		clock:      cfg.Clock,
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
	if p.maxRetries == 0 {
		p.maxRetries = DefaultMaxRetries
	} else if p.maxRetries < 0 {
		p.maxRetries = 0
	}
	if p.retryBase <= 0 {
		p.retryBase = DefaultRetryBase
	}
	if p.clock == nil {
		p.clock = realClock{}
	}
	return p
}

// CloseIdleConnections closes the HTTP client's idle keep-alive connections.
func (p *Provider) CloseIdleConnections() { p.client.CloseIdleConnections() }

// Stream implements provider.Provider.
func (p *Provider) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	body, err := json.Marshal(buildRequest(req))
	if err != nil {
		return fmt.Errorf("openai: encoding request: %w", err)
	}
	for retry := 0; ; retry++ {
		emitted, err := p.attempt(ctx, body, emit)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var r *retryable
		if !errors.As(err, &r) {
			return err
		}
		if emitted || retry >= p.maxRetries {
			return r.err
		}
		wait := r.after
		if wait < 0 {
			wait = p.backoff(retry)
		}
		emit(provider.Chunk{
			Kind:    provider.Retry,
			Attempt: retry + 1,
			Message: r.err.Message,
			Next:    p.clock.Now().Add(wait).UnixMilli(),
		})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.clock.After(wait):
		}
	}
}

// backoff is RetryBase * 2^retry, capped.
func (p *Provider) backoff(retry int) time.Duration {
	d := float64(p.retryBase) * math.Pow(2, float64(retry))
	if d > float64(maxBackoff) {
		return max(maxBackoff, p.retryBase)
	}
	return time.Duration(d)
}

// retryable wraps a failure that may be tried again; after (< 0: none) is
// the wait the server asked for.
type retryable struct {
	err   *provider.APIError
	after time.Duration
}

func (r *retryable) Error() string { return r.err.Error() }

// attempt makes one HTTP call and streams its reply. emitted reports
// whether any chunk reached emit.
func (p *Provider) attempt(ctx context.Context, body []byte, emit func(provider.Chunk)) (emitted bool, err error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if p.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	for k, v := range p.headers {
		hreq.Header.Set(k, v)
	}
	resp, err := p.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, &retryable{after: -1, err: &provider.APIError{
			Message: "connection error: " + err.Error(), Retryable: true,
		}}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, statusError(resp)
	}
	s := &streamState{emit: emit, status: resp.StatusCode}
	err = s.read(ctx, resp.Body)
	return s.emitted, err
}

// statusError turns a non-2xx response into an APIError, wrapped in
// retryable for 429 and 5xx.
func statusError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	retry := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	e := &provider.APIError{
		StatusCode:   resp.StatusCode,
		Message:      errorMessage(resp.StatusCode, raw),
		Retryable:    retry,
		ResponseBody: string(raw),
	}
	if !retry {
		return e
	}
	return &retryable{err: e, after: retryAfter(resp.Header)}
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
	if msg := strings.TrimSpace(string(raw)); msg != "" && len(msg) <= 1000 {
		return msg
	}
	if text := http.StatusText(status); text != "" {
		return text
	}
	return "HTTP " + strconv.Itoa(status)
}

// retryAfter reads retry-after-ms or Retry-After (seconds or an HTTP date);
// -1 when absent or unusable.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return clampWait(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return -1
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && !math.IsInf(secs, 0) {
		return clampWait(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return -1
}

// maxWait bounds a server-requested wait (and keeps it from overflowing).
const maxWait = 24 * time.Hour

func clampWait(ns float64) time.Duration {
	if ns > float64(maxWait) {
		return maxWait
	}
	return time.Duration(ns)
}
