// Package stubhttp is the HTTP part the model API stubs share
// (stubmodel, anthropicstub, responsesstub, geministub): a loopback listener, a
// clean close that waits for running handlers, and the record of every
// request (bodies, headers, paths; title requests apart) tests read.
package stubhttp

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Base is embedded by a stub's Server.
type Base struct {
	mu       sync.Mutex
	bodies   []json.RawMessage
	headers  []http.Header
	paths    []string
	titles   []json.RawMessage
	closed   bool
	url      string
	srv      *http.Server
	serveErr chan error
	closing  chan struct{}
	handlers sync.WaitGroup

	n        atomic.Int64
	canceled atomic.Int64
}

// Serve listens on addr (default "127.0.0.1:0") and serves h on each
// pattern in the background. It returns the base URL: the listener's
// address followed by basePath.
func (b *Base) Serve(addr, basePath string, patterns []string, h http.HandlerFunc) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil || b.closed {
		return "", errors.New("stub already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.HandleFunc(p, h)
	}
	b.closing = b.closingChan()
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	b.url = "http://" + ln.Addr().String() + basePath
	b.serveErr = make(chan error, 1)
	go func() { b.serveErr <- b.srv.Serve(ln) }()
	return b.url, nil
}

func (b *Base) closingChan() chan struct{} {
	if b.closing == nil {
		b.closing = make(chan struct{})
	}
	return b.closing
}

// URL is the base URL, empty before Serve.
func (b *Base) URL() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.url
}

// Close stops the server, drops open connections and waits for running
// handlers. It is safe to call more than once.
func (b *Base) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.closingChan())
	srv := b.srv
	b.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-b.serveErr
	b.handlers.Wait()
}

// Closing is closed once Close is called: streaming replies cut off.
func (b *Base) Closing() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closingChan()
}

// Enter counts a handler in (false once closing); Done counts it out.
func (b *Base) Enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.handlers.Add(1)
	return true
}

// Done ends a handler Enter let in.
func (b *Base) Done() { b.handlers.Done() }

// Record keeps a model request and returns its number (from 1).
func (b *Base) Record(r *http.Request, body []byte) int {
	n := int(b.n.Add(1))
	b.mu.Lock()
	b.bodies = append(b.bodies, json.RawMessage(body))
	b.headers = append(b.headers, r.Header.Clone())
	b.paths = append(b.paths, r.URL.RequestURI())
	b.mu.Unlock()
	return n
}

// Tally counts a request without keeping it (a stub that records
// nothing, for long runs) and returns its number (from 1).
func (b *Base) Tally() int { return int(b.n.Add(1)) }

// RecordTitle keeps a title request.
func (b *Base) RecordTitle(body []byte) {
	b.mu.Lock()
	b.titles = append(b.titles, json.RawMessage(body))
	b.mu.Unlock()
}

// AddCanceled counts a streamed reply the client abandoned.
func (b *Base) AddCanceled() { b.canceled.Add(1) }

// Requests returns the bodies of the requests received so far (title
// requests apart).
func (b *Base) Requests() []json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]json.RawMessage(nil), b.bodies...)
}

// Headers returns the HTTP headers of the requests, in Requests' order.
func (b *Base) Headers() []http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]http.Header(nil), b.headers...)
}

// Paths returns the request URIs (path and query), in Requests' order.
func (b *Base) Paths() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.paths...)
}

// Titles returns the title requests received.
func (b *Base) Titles() []json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]json.RawMessage(nil), b.titles...)
}

// Count is the number of requests received (title requests apart).
func (b *Base) Count() int { return int(b.n.Load()) }

// Canceled is the number of streamed replies the client abandoned.
func (b *Base) Canceled() int { return int(b.canceled.Load()) }

// Recorded returns the bodies, headers and request URIs together (one
// consistent view).
func (b *Base) Recorded() ([]json.RawMessage, []http.Header, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]json.RawMessage(nil), b.bodies...), append([]http.Header(nil), b.headers...), append([]string(nil), b.paths...)
}
