// Package httpsse is what every model API provider shares: one streamed
// HTTP call retried with exponential backoff on rate limits, overloads,
// server errors and cut connections (honouring retry-after-ms and
// Retry-After), and the Server-Sent Events reader of its body. Providers
// keep only their wire format.
package httpsse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/provider"
)

// Defaults for Retry.
const (
	DefaultMaxRetries = 4
	DefaultRetryBase  = 500 * time.Millisecond
	// maxBackoff caps the computed backoff (not a server's Retry-After).
	maxBackoff = 30 * time.Second
	// MaxErrorBody bounds how much of an error response is read.
	MaxErrorBody = 1 << 20
	// maxWait bounds a server-requested wait (and keeps it from overflowing).
	maxWait = 24 * time.Hour
	// maxLine bounds one SSE line.
	maxLine = 32 << 20
)

// Clock is the time source for retry waits; tests substitute it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Retry is how a provider retries a failed call.
type Retry struct {
	// Max is how many times a retryable failure is retried: 0 means
	// DefaultMaxRetries, negative means never.
	Max int
	// Base is the first backoff, doubled on every retry (default
	// DefaultRetryBase).
	Base time.Duration
	// Clock defaults to the real clock.
	Clock Clock
}

// WithDefaults fills the zero fields.
func (r Retry) WithDefaults() Retry {
	if r.Max == 0 {
		r.Max = DefaultMaxRetries
	} else if r.Max < 0 {
		r.Max = 0
	}
	if r.Base <= 0 {
		r.Base = DefaultRetryBase
	}
	if r.Clock == nil {
		r.Clock = realClock{}
	}
	return r
}

// Retryable wraps a failure that may be tried again; After (< 0: none) is
// the wait the server asked for.
type Retryable struct {
	Err   *provider.APIError
	After time.Duration
}

func (r *Retryable) Error() string { return r.Err.Error() }

// Run calls attempt until it succeeds, fails for good, or has been retried
// r.Max times. A retry is announced with a Retry chunk (attempt, message,
// when). A call that already emitted chunks is not retried: its output is
// the user's now. attempt reports whether it emitted anything.
func (r Retry) Run(ctx context.Context, emit func(provider.Chunk), attempt func() (emitted bool, err error)) error {
	for retry := 0; ; retry++ {
		emitted, err := attempt()
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var rt *Retryable
		if !errors.As(err, &rt) {
			return err
		}
		if emitted || retry >= r.Max {
			return rt.Err
		}
		wait := rt.After
		if wait < 0 {
			wait = r.backoff(retry)
		}
		emit(provider.Chunk{Kind: provider.Retry, Attempt: retry + 1, Message: rt.Err.Message,
			Next: r.Clock.Now().Add(wait).UnixMilli()})
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.Clock.After(wait):
		}
	}
}

// backoff is Base * 2^retry, capped.
func (r Retry) backoff(retry int) time.Duration {
	d := float64(r.Base) * math.Pow(2, float64(retry))
	if d > float64(maxBackoff) {
		return max(maxBackoff, r.Base)
	}
	return time.Duration(d)
}

// ConnectionError is a failed connection (retryable), or ctx's error when
// the call was cancelled.
func ConnectionError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &Retryable{After: -1, Err: &provider.APIError{Message: "connection error: " + err.Error(), Retryable: true}}
}

// StatusError turns a non-2xx response into an APIError whose message
// (message reads it from the body) is the API's own; retryable statuses
// (429, 5xx, and what retry adds) are wrapped in Retryable with the
// server's requested wait.
func StatusError(resp *http.Response, message func(status int, body []byte) string, retry func(status int) bool) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	again := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || (retry != nil && retry(resp.StatusCode))
	e := &provider.APIError{StatusCode: resp.StatusCode, Message: message(resp.StatusCode, raw), Retryable: again,
		ResponseBody: string(raw)}
	if !again {
		return e
	}
	return &Retryable{Err: e, After: RetryAfter(resp.Header)}
}

// FallbackMessage is an error's message when the body has none of its
// API's shape: the body if short, else the status text.
func FallbackMessage(status int, raw []byte) string {
	if msg := strings.TrimSpace(string(raw)); msg != "" && len(msg) <= 1000 {
		return msg
	}
	if text := http.StatusText(status); text != "" {
		return text
	}
	return "HTTP " + strconv.Itoa(status)
}

// RetryAfter reads retry-after-ms or Retry-After (seconds or an HTTP date);
// -1 when absent or unusable.
func RetryAfter(h http.Header) time.Duration {
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

func clampWait(ns float64) time.Duration {
	if ns > float64(maxWait) {
		return maxWait
	}
	return time.Duration(ns)
}

// Event is one Server-Sent Event: its name ("" when it gave none) and its
// data lines joined by "\n". Data is only valid during the handler's call.
type Event struct {
	Name string
	Data []byte
}

// ErrLineTooLong is a stream with a line over the limit.
var ErrLineTooLong = errors.New("SSE line too long")

// Read reads SSE events from body and hands each to handle until handle
// says done, the body ends (an event without its blank line still
// counts), or reading fails: a cut connection is a Retryable "stream
// interrupted" error with status. ended reports that handle said done.
func Read(ctx context.Context, body io.Reader, status int, handle func(Event) (done bool, err error)) (ended bool, err error) {
	br := bufio.NewReaderSize(body, 32<<10)
	var (
		lineBuf []byte
		data    []byte
		name    string
		hasData bool
	)
	dispatch := func() (bool, error) {
		if !hasData {
			name = ""
			return false, nil
		}
		done, err := handle(Event{Name: name, Data: data})
		data, name, hasData = data[:0], "", false
		return done, err
	}
	for {
		line, rerr := br.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) {
			lineBuf = append(lineBuf[:0], line...)
			for errors.Is(rerr, bufio.ErrBufferFull) {
				if len(lineBuf) > maxLine {
					return false, ErrLineTooLong
				}
				line, rerr = br.ReadSlice('\n')
				lineBuf = append(lineBuf, line...)
			}
			line = lineBuf
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))

		switch {
		case len(line) == 0 && rerr == nil:
			// A blank line ends an event.
			if done, err := dispatch(); err != nil || done {
				return done, err
			}
		case len(line) == 0 || line[0] == ':':
			// Comment (keep-alive) or nothing.
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, value...)
				hasData = true
			case "event":
				name = string(value)
			}
		}

		if rerr == nil {
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			return false, cerr
		}
		if !errors.Is(rerr, io.EOF) {
			return false, &Retryable{After: -1, Err: &provider.APIError{
				StatusCode: status, Message: "stream interrupted: " + rerr.Error(), Retryable: true}}
		}
		return dispatch()
	}
}
