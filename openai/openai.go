// Package openai is the OpenAI door: OpenAI's Responses API (POST
// /v1/responses as JSON or SSE, GET /v1/responses/{id}) and GET
// /v1/models, on the same core as every other front door. A response is
// one turn of a session: its input is admitted through the same core
// admission as every prompt, and its ID is that input's user message ID
// (msg_…), so the one ID a message has is also its response's. Output
// items are the turn's assistant messages, under their own msg_ IDs; what
// is streamed comes from the session's event log and bus, as AG-UI's runs
// do.
package openai

import (
	"context"
	"log/slog"
	"sync"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/keylock"
	"github.com/opencode-server/opencode-server/opencode"
)

// Core is what the OpenAI door needs of the lifecycle (lifecycle.Manager).
type Core interface {
	CreateSession(ctx context.Context, opts opencode.SessionOptions) (opencode.Session, bool, error)
	GetSession(ctx context.Context, id string) (opencode.Session, error)
	Messages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error)
	MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error)
	Inbox(ctx context.Context, sessionID string) ([]*opencode.Input, error)
	FindInput(ctx context.Context, messageID string) (*opencode.Input, error)
	Admit(ctx context.Context, in *opencode.Input) (*opencode.Input, bool, error)
	SteerInto(ctx context.Context, in *opencode.Input, into string) (*opencode.Input, bool, opencode.SteerRefusal, error)
	Wait(ctx context.Context, sessionID, messageID string) (opencode.Result, error)
	Revoke(ctx context.Context, sessionID, messageID string) (bool, error)
	Abort(ctx context.Context, sessionID string) error
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error)
	Subscribe(buf int, filter func(*opencode.Event) bool) *eventbus.Subscription
	HasModel(providerID, modelID string) bool
	// Clustered and Owner: a WebSocket's requests for a session another
	// instance runs are relayed there (ws_relay.go).
	DeleteMessage(ctx context.Context, sessionID, messageID string) error
	LastSeq(ctx context.Context, sessionID string) (int64, error)
	Clustered() bool
	Owner(ctx context.Context, sessionID string) (string, error)
	Agents() []agent.Agent
	// Status is the sessions with a running turn (a conversation's
	// function_call_output items find the one waiting on their calls).
	Status() map[string]string
	// Fork copies a session's messages before messageID into a new one
	// (previous_response_id of a turn that is not the session's last).
	Fork(ctx context.Context, sessionID, messageID string) (opencode.Session, error)
	toolCore
	chatCore
}

// Options configure the handler.
type Options struct {
	Core Core
	// Directory is the directory of the sessions a response creates.
	Directory string
	// Catalog is the model catalog GET /v1/models lists (nil: none).
	Catalog *catalog.Live
	IDs     *identifier.Generator
	Logger  *slog.Logger
	// Done ends every stream when the server shuts down.
	Done <-chan struct{}
}

// Handler serves the OpenAI door's routes.
type Handler struct {
	o Options
	// keys are the Idempotency-Keys seen, for a retry of a request that
	// started a new session (one naming its session finds its key in the
	// session's messages).
	keys keyIndex
	// ends are the turns this process streamed to their end, by response
	// ID (a first response's: its user message's).
	ends bounded[turnEnd]
	// recs are the background responses' streams (background.go).
	recs recordings
}

// New returns the OpenAI door.
func New(o Options) *Handler {
	if o.IDs == nil {
		o.IDs = identifier.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Done == nil {
		o.Done = make(chan struct{})
	}
	return &Handler{o: o}
}

// maxKeys bounds the Idempotency-Keys remembered in memory, oldest
// forgotten first.
const maxKeys = 4096

// keyIndex serializes the requests of one Idempotency-Key in this process
// and remembers where each was admitted.
type keyIndex struct {
	locks keylock.Locks
	bounded[keyEntry]
}

// keyEntry is where a key's request was admitted.
type keyEntry struct{ session, message string }

func (k *keyIndex) lock(key string) func() { return k.locks.Lock(key) }

// bounded is a map of at most maxKeys entries, the oldest forgotten
// first.
type bounded[V any] struct {
	mu    sync.Mutex
	seen  map[string]V
	order []string
}

func (b *bounded[V]) get(key string) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.seen[key]
	return v, ok
}

func (b *bounded[V]) put(key string, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]V{}
	}
	if _, ok := b.seen[key]; !ok {
		b.order = append(b.order, key)
		if len(b.order) > maxKeys {
			delete(b.seen, b.order[0])
			b.order = b.order[1:]
		}
	}
	b.seen[key] = v
}

func (b *bounded[V]) del(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.seen, key) // its place in order goes with the oldest
}

// turnEnd is how a response's turn ended, as its stream saw it: its
// session, its answer, and the session's last event sequence then (the
// core's Result.Seq). A next response after it whose session's sequence
// is still that knows without a read that the turn is the session's
// last (no fork).
type turnEnd struct {
	session, answer string
	seq             int64
}
