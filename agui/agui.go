// Package agui is the AG-UI front door (ag-ui-protocol/ag-ui 1.0): web
// frontends POST a RunAgentInput and read the run as a stream of AG-UI
// events, SSE or AG-UI's length-prefixed protobuf. A thread is a session,
// each new user message an input admitted through the same core admission
// as every other front door, and every event comes from the session's
// event log (durable entries and the live deltas between them).
package agui

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/keylock"
	"github.com/opencode-server/opencode-server/opencode"
)

// Core is what the AG-UI front door needs of the lifecycle
// (lifecycle.Manager).
type Core interface {
	CreateSession(ctx context.Context, opts opencode.SessionOptions) (opencode.Session, bool, error)
	GetSession(ctx context.Context, id string) (opencode.Session, error)
	Messages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error)
	Inbox(ctx context.Context, sessionID string) ([]*opencode.Input, error)
	Input(ctx context.Context, sessionID, messageID string) (*opencode.Input, error)
	Admit(ctx context.Context, in *opencode.Input) (*opencode.Input, bool, error)
	Abort(ctx context.Context, sessionID string) error
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error)
	Subscribe(buf int, filter func(*opencode.Event) bool) *eventbus.Subscription
	Status() map[string]string
	Todos(ctx context.Context, sessionID string) ([]opencode.Todo, error)
	Permissions() []opencode.PermissionRequest
	ReplyPermission(ctx context.Context, requestID, reply string) error
	Questions() []opencode.QuestionRequest
	ReplyQuestion(ctx context.Context, requestID string, answers [][]string, reject bool) error
	ToolResult(ctx context.Context, sessionID, callID, output string, failed bool) error
	WaitingClientCalls(ctx context.Context, sessionID string) ([]string, error)
	StoreHistory(ctx context.Context, sessionID string, msgs []opencode.MessageWithParts) error
	// Agents are the agents forwardedProps.agent may name.
	Agents() []agent.Agent
}

// Options configure the handler.
type Options struct {
	Core Core
	// Directory is the directory of the sessions a run creates.
	Directory string
	IDs       *identifier.Generator
	Logger    *slog.Logger
	// Done ends every stream when the server shuts down.
	Done <-chan struct{}
}

// Handler serves POST /agui and POST /agui/{sessionID}.
type Handler struct {
	o Options
	// threads serialize the admission step of runs on one thread in this
	// process: the lookup of a client's message ID and the admission
	// under it are one step, so two copies of a run racing admit once.
	threads keylock.Locks
	mu      sync.Mutex
	// runs is the run that started each thread's running turn, for a
	// steer's parentRunId.
	runs map[string]string
}

// New returns the AG-UI handler.
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
	return &Handler{o: o, runs: map[string]string{}}
}

func (h *Handler) lock(thread string) func() { return h.threads.Lock(thread) }

func (h *Handler) setRun(thread, run string) {
	h.mu.Lock()
	h.runs[thread] = run
	h.mu.Unlock()
}

// doneRun forgets a thread's run once its turn is over, so the map holds
// only running turns.
func (h *Handler) doneRun(thread, run string) {
	h.mu.Lock()
	if h.runs[thread] == run {
		delete(h.runs, thread)
	}
	h.mu.Unlock()
}

func (h *Handler) runOf(thread string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs[thread]
}

var _ http.Handler = (*Handler)(nil)
