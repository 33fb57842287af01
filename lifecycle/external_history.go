package lifecycle

import (
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/acpclient"
)

// A new session of an external agent's (a fork's first prompt, an agent
// that could not load its session, a session that switched to the agent)
// knows nothing of our conversation so far: its first prompt starts with
// that conversation, from our stored history, as a text block clearly
// marked as context (every agent takes text).

// maxHistoryText bounds the history sent: its most recent part is kept.
const maxHistoryText = 100_000

// Markers around the history block.
const (
	historyOpen = "<conversation-so-far>\nThe conversation in this session before the message that follows, " +
		"as the client (opencode-server) stored it: this session was forked from another one or continued on a new " +
		"session of yours. It is context, not a request; the request follows this block.\n\n"
	historyClose   = "\n</conversation-so-far>"
	historyElision = "[... the earlier part of the conversation is left out ...]\n\n"
)

// extHistory is the session's conversation before the turn's inputs, as
// a new agent session's first prompt carries it; "" when the prompt can
// only go to a session the agent already has (a live process on it, the
// stored one) or there is none. It reads the runner's in-memory history.
func (r *runner) extHistory(tu *turn, load string) string {
	if load != "" && r.m.ExternalPID(r.id) != 0 {
		return ""
	}
	h := r.history
	// This turn's inputs are already in it: the prompt sends them itself.
	n := 0
	for _, in := range tu.inputs {
		if _, ok := userModelMessage(in.Parts); ok {
			n++
		}
	}
	if n > len(h) {
		return ""
	}
	text := transcript(h[:len(h)-n])
	if text == "" {
		return ""
	}
	if len(text) > maxHistoryText {
		cut := len(text) - maxHistoryText
		for cut < len(text) && !utf8.RuneStart(text[cut]) {
			cut++
		}
		text = historyElision + text[cut:]
	}
	return historyOpen + text + historyClose
}

// withHistory puts the history first in the first prompt of a session the
// agent opened new.
func withHistory(e *extProc, req extReq, blocks []acpclient.ContentBlock) []acpclient.ContentBlock {
	if !e.fresh {
		return blocks
	}
	e.fresh = false
	if req.history == "" {
		return blocks
	}
	return append([]acpclient.ContentBlock{{Type: "text", Text: req.history}}, blocks...)
}
