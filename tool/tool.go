// Package tool holds the tools a model can call (read, write, edit,
// apply_patch, glob, grep, bash, todowrite, webfetch, question, task,
// skill). Every file tool is confined to the session's directory: no path
// may escape it through ".." or symlinks. The file tools check a path with
// Resolve, then touch it only through an os.Root on the directory, so the
// confinement also holds at the moment of use; bash runs a process in the
// directory and is not confined by it.
package tool

import (
	"context"
	"encoding/json"

	"github.com/opencode-server/opencode-server/opencode"
)

// Call is one tool invocation.
type Call struct {
	// Dir is the session's directory; every path is resolved inside it.
	Dir   string
	Input json.RawMessage
	// Progress, if set, receives the running call's metadata as it changes
	// (bash: the output so far), for clients to show before the call ends.
	Progress func(metadata map[string]any)
	// Ask, if set, puts questions to the user and waits for the answers
	// (one list of chosen labels per question); ErrDismissed when the user
	// dismisses them.
	Ask func(ctx context.Context, questions []opencode.QuestionInfo) ([][]string, error)
	// Subtask, if set, runs a subagent in a child session (the task tool).
	Subtask func(ctx context.Context, t Subtask) (SubtaskResult, error)
}

// Result is a finished tool run, shaped for OpenCode's completed tool state.
type Result struct {
	Title    string
	Output   string
	Metadata map[string]any
	// Attachments are files the call returns besides its output (the
	// read tool's image or PDF), each a data: URL.
	Attachments []Attachment
}

// Attachment is a file a tool call returns.
type Attachment struct {
	Mime string
	URL  string
}

// Tool is one tool.
type Tool interface {
	Name() string
	Description() string
	// Parameters is the JSON schema of the input object.
	Parameters() json.RawMessage
	// Permission names the permission a call needs and the patterns it
	// touches (a path relative to Dir, a command line), so that lifecycle
	// can apply the allow/ask/deny rules before Run. An input that cannot be
	// decoded is an error.
	Permission(c Call) (permission string, patterns []string, err error)
	// Run executes the call. Cancelling ctx (abort) stops it at once; a
	// running process is killed.
	Run(ctx context.Context, c Call) (Result, error)
}

// AskDetailer is a tool whose permission ask says more than its patterns,
// as OpenCode's edit and write do: metadata the client shows with the ask
// (the file and the diff) and the patterns "always" approves. Its error,
// like Permission's, fails the call before anything is asked.
type AskDetailer interface {
	AskDetails(c Call) (metadata map[string]any, always []string, err error)
}
