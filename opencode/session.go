package opencode

// SessionOptions are the fields of a new session.
type SessionOptions struct {
	// ID is the session ID, minted by the caller (routes) or chosen by the client.
	ID string
	// Minted: the caller minted ID just now, so no session can have it
	// (the create skips that read; the commit still checks).
	Minted     bool
	ParentID   string
	Title      string
	Agent      string
	Model      *ModelRef
	Directory  string
	Permission []byte
	Metadata   []byte
	// WorkspaceID is the workspace the session is created in ("": none).
	WorkspaceID string
}

// SessionPatch is a PATCH /session/{id} body.
type SessionPatch struct {
	Title      *string
	Metadata   []byte
	Permission []byte
	Archived   *float64
	// WorkspaceID, when set, is the session's workspace from now on ("":
	// none, the local project).
	WorkspaceID *string
	// Move, when set, moves the session to another directory of its
	// project (session.next.moved).
	Move *SessionMove
}

// SessionMove is where a session moves: a directory of its project, and
// that directory relative to the project's work tree ("" at its root).
type SessionMove struct {
	Directory    string
	Subdirectory string
}

// PageQuery selects a page of a session's messages: see
// store.Store.MessagesPage.
type PageQuery struct {
	Anchor string
	Before bool
	Desc   bool
	Limit  int
}

// Result is what a blocking prompt answers: the last assistant message of
// the turn the input was delivered into.
type Result struct {
	Message MessageWithParts
	// Pos is the bus position of the turn's last event; pass it to Flushed
	// before answering so SSE clients have seen the whole turn.
	Pos int64
	// Seq is the session's last event sequence when the turn ended (its
	// answer then the session's last message), 0 if the next turn began
	// in the same commit.
	Seq int64
	// Directory is the session's, for Flushed to find its streams.
	Directory string
}

// FileDiff is one file changed between two snapshots (OpenCode's
// SnapshotFileDiff), as session.diff and /session/{id}/diff carry it.
type FileDiff struct {
	File      string `json:"file"`
	Patch     string `json:"patch,omitempty"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"` // added, deleted, modified
}

// Todo is one entry of a session's todo list (OpenCode's Todo: content,
// status, priority, in that order on the wire).
type Todo struct {
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority"`
}

// ForwardedHeader marks a request one instance of a cluster sends another
// for a session the receiver runs: the receiver serves it itself (no
// forwarding loops while ownership moves).
const ForwardedHeader = "X-Opencode-Server-Forwarded"
