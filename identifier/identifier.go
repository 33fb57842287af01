// Package identifier mints and checks OpenCode-compatible IDs.
//
// The form is byte for byte what OpenCode 1.18.33 mints (the legacy 6-byte
// form): prefix + "_" + 12 lowercase hex digits of the low 48 bits of
// ms*0x1000+counter (bitwise NOT for descending IDs) + 14 crypto-random base62
// characters. Clients sort message and part IDs by plain string comparison, so
// IDs minted by one process must be strictly increasing; that is why the
// monotonic state is process-wide and hidden behind a mutex.
//
// The 48-bit field wraps (last on 2026-08-14), so the server's own orderings
// never rely on ID string order: they use creation sequences.
package identifier

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Prefix is the type tag of an ID.
type Prefix string

// The prefixes OpenCode uses.
const (
	Session    Prefix = "ses"
	Message    Prefix = "msg"
	Part       Prefix = "prt"
	Event      Prefix = "evt"
	Permission Prefix = "per"
	Question   Prefix = "que"
)

const (
	hexLen    = 12
	randLen   = 14
	bodyLen   = hexLen + randLen
	base62    = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	counterMx = 0xfff
	mask48    = 1<<48 - 1
)

// Clock returns the current time in Unix milliseconds.
type Clock func() int64

// Generator holds the monotonic state. Its zero value is not usable; use New.
type Generator struct {
	mu      sync.Mutex
	clock   Clock
	lastMS  int64
	counter int64
}

// New returns a generator reading time from clock.
func New(clock Clock) *Generator {
	return &Generator{clock: clock}
}

// std is the process-wide generator: one monotonic state shared by every prefix
// and direction, as in OpenCode.
var std = New(func() int64 { return time.Now().UnixMilli() })

// next returns the next strictly increasing ms*0x1000+counter value. If the
// wall clock steps backwards, the last timestamp is kept; if a millisecond's
// 4095 counter values run out, the timestamp borrows the next millisecond.
func (g *Generator) next() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	if now > g.lastMS {
		g.lastMS = now
		g.counter = 0
	}
	g.counter++
	if g.counter > counterMx {
		g.lastMS++
		g.counter = 1
	}
	return g.lastMS*0x1000 + g.counter
}

// Ascending mints an ID whose string order follows creation order.
func (g *Generator) Ascending(p Prefix) string { return format(p, uint64(g.next())) }

// Descending mints an ID whose string order is the reverse of creation order.
func (g *Generator) Descending(p Prefix) string { return format(p, ^uint64(g.next())) }

// NewSession mints a session ID (descending: newer sessions sort first).
func (g *Generator) NewSession() string { return g.Descending(Session) }

// NewMessage mints a message ID.
func (g *Generator) NewMessage() string { return g.Ascending(Message) }

// NewPart mints a part ID.
func (g *Generator) NewPart() string { return g.Ascending(Part) }

// NewEvent mints an event ID.
func (g *Generator) NewEvent() string { return g.Ascending(Event) }

// Default is the process-wide generator, the one the package functions
// use; a test that needs its own clock passes New(clock) instead.
func Default() *Generator { return std }

// Ascending mints an ascending ID from the process-wide generator.
func Ascending(p Prefix) string { return std.Ascending(p) }

// Descending mints a descending ID from the process-wide generator.
func Descending(p Prefix) string { return std.Descending(p) }

// NewSession mints a session ID (descending: newer sessions sort first).
func NewSession() string { return Descending(Session) }

// NewMessage mints a message ID.
func NewMessage() string { return Ascending(Message) }

// NewPart mints a part ID.
func NewPart() string { return Ascending(Part) }

// NewEvent mints an event ID.
func NewEvent() string { return Ascending(Event) }

func format(p Prefix, v uint64) string {
	v &= mask48
	var b strings.Builder
	b.Grow(len(p) + 1 + bodyLen)
	b.WriteString(string(p))
	b.WriteByte('_')
	const hexdigits = "0123456789abcdef"
	for i := hexLen - 1; i >= 0; i-- {
		b.WriteByte(hexdigits[(v>>(uint(i)*4))&0xf])
	}
	var rnd [randLen]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		panic(fmt.Sprintf("identifier: crypto/rand failed: %v", err)) // cannot happen on supported platforms
	}
	for _, c := range rnd {
		b.WriteByte(base62[int(c)%len(base62)])
	}
	return b.String()
}

// ErrInvalid is returned by Check for an ID that is not acceptable.
var ErrInvalid = errors.New("invalid id")

// MaxLen bounds accepted IDs; OpenCode itself checks only the prefix, but an
// unbounded client-chosen ID would be a cheap way to bloat the store.
const MaxLen = 128

// Check reports whether id is acceptable as an ID of type p. Like OpenCode it
// requires the prefix; unlike OpenCode it also requires the underscore, a
// non-empty body of ASCII letters, digits, '-' or '_', and a bounded length.
func Check(p Prefix, id string) error {
	if !strings.HasPrefix(id, string(p)+"_") {
		return fmt.Errorf("%w: %q must start with %q", ErrInvalid, clip(id), string(p)+"_")
	}
	body := id[len(p)+1:]
	if body == "" || len(id) > MaxLen {
		return fmt.Errorf("%w: %q has a bad length", ErrInvalid, clip(id))
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return fmt.Errorf("%w: %q has a character outside [0-9A-Za-z_-]", ErrInvalid, clip(id))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
