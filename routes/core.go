package routes

import (
	"context"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/command"
	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

// Core is what the routes ask of the lifecycle core: *lifecycle.Manager
// in the server, a small fake in a route test that needs no whole stack
// (as wtf's http.Server holds service interfaces).
type Core interface {
	// Sessions.
	CreateSession(ctx context.Context, opts opencode.SessionOptions) (opencode.Session, bool, error)
	GetSession(ctx context.Context, id string) (opencode.Session, error)
	ListSessions(ctx context.Context) ([]opencode.Session, error)
	UpdateSession(ctx context.Context, id string, p opencode.SessionPatch) (opencode.Session, error)
	DeleteSession(ctx context.Context, id string) error
	Fork(ctx context.Context, sessionID, messageID string) (opencode.Session, error)
	// Replay imports one session's sync history (POST /sync/replay).
	Replay(ctx context.Context, events []opencode.SyncEvent) (string, error)
	// SessionStatus is the status of every session with a running turn
	// (in a cluster, on any instance).
	SessionStatus(ctx context.Context) (map[string]string, error)
	// StoreRetry tells a session stopped after failed writes ("retry" in
	// SessionStatus): the attempt, why, and when it is tried next.
	StoreRetry(id string) (attempt int, message string, next int64, ok bool)

	// Input: admission, the inbox, turns.
	Admit(ctx context.Context, in *opencode.Input) (*opencode.Input, bool, error)
	Wait(ctx context.Context, sessionID, messageID string) (opencode.Result, error)
	WaitIdle(ctx context.Context, sessionID string) error
	Abort(ctx context.Context, sessionID string) error
	Inbox(ctx context.Context, sessionID string) ([]*opencode.Input, error)
	Revoke(ctx context.Context, sessionID, messageID string) (bool, error)
	Replace(ctx context.Context, sessionID, messageID string, delivery *opencode.Delivery, parts []opencode.Part) (*opencode.Input, error)
	CommandExecuted(ctx context.Context, sessionID, name, arguments, messageID string) error
	SwitchAgent(ctx context.Context, sessionID, messageID, agent string) error
	SwitchModel(ctx context.Context, sessionID, messageID string, model opencode.ModelRef) error
	HasModel(providerID, modelID string) bool
	Agents() []agent.Agent

	// Messages and the log.
	Messages(ctx context.Context, sessionID string) ([]opencode.MessageWithParts, error)
	MessagesPage(ctx context.Context, sessionID string, q opencode.PageQuery) ([]opencode.MessageWithParts, error)
	Message(ctx context.Context, sessionID, messageID string) (opencode.MessageWithParts, error)
	Events(ctx context.Context, sessionID string, after int64, limit int) ([]*opencode.Event, error)
	Subscribe(buf int, filter func(*opencode.Event) bool) *eventbus.Subscription
	// Owner is the address of another live instance that runs the session
	// (scale-out), "" when this instance serves it.
	Owner(ctx context.Context, sessionID string) (string, error)
	// Clustered: other instances may run sessions (Owner can be non-empty).
	// FindInput and MessageSession find the session of an OpenAI
	// response ID (an input, or a continuation's assistant message), to
	// forward a request about it to the session's owner.
	FindInput(ctx context.Context, messageID string) (*opencode.Input, error)
	MessageSession(ctx context.Context, messageID string) (string, error)
	Clustered() bool
	// AskSession is the session of a permission or question request
	// another instance asked ("" if none).
	AskSession(requestID string) string
	Flushed(ctx context.Context, res opencode.Result, sessionID string)

	// Permissions, revert and diffs.
	Permissions() []opencode.PermissionRequest
	ReplyPermission(ctx context.Context, requestID, reply string) error
	// ReplyPermissionWith is a reply with the user's message (a reject's
	// feedback to the model).
	ReplyPermissionWith(ctx context.Context, requestID, reply, message string) error
	Questions() []opencode.QuestionRequest
	ReplyQuestion(ctx context.Context, requestID string, answers [][]string, reject bool) error
	// Tools and skills (listings).
	ToolIDs() []string
	Tools(modelID string) []provider.ToolSpec
	Skills(dir string) []agent.Skill

	CommitRevert(ctx context.Context, sessionID string) error
	AskPermission(ctx context.Context, in opencode.PermissionV2Request, agent string) (id, effect string, err error)
	DeleteMessage(ctx context.Context, sessionID, messageID string) error
	DeletePart(ctx context.Context, sessionID, messageID, partID string) error
	UpdatePart(ctx context.Context, p opencode.Part) (opencode.Part, error)
	Revert(ctx context.Context, sessionID, messageID, partID string) (opencode.Session, error)
	Unrevert(ctx context.Context, sessionID string) (opencode.Session, error)
	SessionDiff(ctx context.Context, sessionID, messageID string) ([]opencode.FileDiff, error)
	Todos(ctx context.Context, sessionID string) ([]opencode.Todo, error)
	// ExternalCommands are the commands external agents said they have
	// in a directory.
	ExternalCommands(dir string) []command.Command
}
