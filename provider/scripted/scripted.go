// Package scripted is the built-in offline model: it streams a deterministic
// reply in chunks, optionally slowly, so turns can be steered and aborted in
// tests and demos without any network.
package scripted

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/provider"
)

// ProviderID and ModelID name the scripted model in listings.
const (
	ProviderID = "scripted"
	ModelID    = "scripted-model"
)

// Config shapes the reply.
type Config struct {
	// Reply is the text to stream; empty means "You said: <last user text>".
	Reply string
	// Chunks is how many pieces the reply is split into (at least 1).
	Chunks int
	// Delay is slept before each chunk.
	Delay time.Duration
	// Record keeps every request for Calls (tests). Off, the model keeps
	// nothing per request: a long-running server does not grow with it.
	Record bool
}

// Model is the scripted provider. With Config.Record it records every
// request it receives so tests can check what the model was asked.
type Model struct {
	cfg   Config
	mu    sync.Mutex
	calls []provider.Request
}

// New returns a scripted model.
func New(cfg Config) *Model {
	if cfg.Chunks < 1 {
		cfg.Chunks = 1
	}
	return &Model{cfg: cfg}
}

// Calls returns a copy of the requests received so far.
func (m *Model) Calls() []provider.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]provider.Request(nil), m.calls...)
}

// ReplyFor is the reply the model gives to req.
func (m *Model) ReplyFor(req provider.Request) string {
	if m.cfg.Reply != "" {
		return m.cfg.Reply
	}
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			last = req.Messages[i].Texts()
			break
		}
	}
	return "You said: " + last
}

// Stream implements provider.Provider.
func (m *Model) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	if req.Purpose == provider.PurposeTitle {
		// The scripted model titles a session with its first prompt's
		// first line (not recorded: Calls are the turns' model calls).
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Texts()
		}
		last, _, _ = strings.Cut(strings.TrimSpace(last), "\n")
		n := 0
		for i := range last {
			if n == 50 {
				last = last[:i] + "…"
				break
			}
			n++
		}
		emit(provider.Chunk{Kind: provider.TextDelta, Text: last})
		emit(provider.Chunk{Kind: provider.Finish, Reason: "stop"})
		return nil
	}
	m.mu.Lock()
	if m.cfg.Record {
		m.calls = append(m.calls, req)
	}
	m.mu.Unlock()

	reply := m.ReplyFor(req)
	for _, piece := range split(reply, m.cfg.Chunks) {
		if m.cfg.Delay > 0 {
			t := time.NewTimer(m.cfg.Delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		emit(provider.Chunk{Kind: provider.TextDelta, Text: piece})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in := 0
	for i := range req.Messages {
		in += words(req.Messages[i].Texts())
	}
	emit(provider.Chunk{Kind: provider.Finish, Reason: "stop",
		Usage: provider.Usage{Input: int64(in), Output: int64(words(reply))}})
	return nil
}

// split cuts s into n pieces of about equal length on rune boundaries,
// dropping empty pieces.
func split(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if n > runes {
		n = runes
	}
	if n <= 1 {
		return []string{s}
	}
	out := make([]string, 0, n)
	size := (runes + n - 1) / n
	var b strings.Builder
	count := 0
	for _, r := range s {
		b.WriteRune(r)
		count++
		if count == size {
			out = append(out, b.String())
			b.Reset()
			count = 0
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// words counts what strings.Fields would return, without the slice (a
// prompt may be megabytes: its words would be many more).
func words(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}
