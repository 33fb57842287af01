package openai

// Chat completions: a client sends the whole conversation each time. The
// session it continues is named by the OpenCode-Session header (a ses_ ID
// an earlier answer gave in the same header); without it, each call
// starts a new session. The conversation before the last message is
// matched against the session's: what the session holds is skipped, what
// extends it is stored as history (Core.StoreHistory, never run as
// turns), and only the last message, the user's, is admitted and runs a
// turn. A conversation that is the session's up to a user message the
// session already holds is a retry of that message: answered from its
// turn, admitting nothing.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// SessionHeader names the session of a chat completion, in the request
// and in the answer.
const SessionHeader = "OpenCode-Session"

// chatCore is what chat completions need of the lifecycle.
type chatCore interface {
	StoreHistory(ctx context.Context, sessionID string, msgs []opencode.MessageWithParts) error
}

// chatRequest is the body of POST /v1/chat/completions: the fields this
// door acts on (sampling fields are left to the model's and agent's
// settings).
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []json.RawMessage `json:"tools"`
	N     *int              `json:"n"`
}

type chatMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
}

// entry is one message of a conversation as the two sides compare it: a
// user message's text, or an assistant's (a turn's steps together).
type entry struct {
	role, text string
	id         string // the session's message (a user message: its input)
}

// textSep joins the text parts of an assistant answer, in the answer and
// when a re-sent conversation is compared with the session's.
const textSep = "\n\n"

func sameText(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

// chatTurn is a validated chat completion request.
type chatTurn struct {
	req     chatRequest
	t       turn // the model and agent, resolved as a response's
	entries []entry
	system  string
}

// decodeChat validates a chat completion request.
func (h *Handler) decodeChat(body []byte) (*chatTurn, error) {
	var c chatTurn
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&c.req); err != nil {
		return nil, invalid("", "", "The body is not a valid request: "+err.Error())
	}
	req := &c.req
	if req.N != nil && *req.N != 1 {
		return nil, invalid("n", "unsupported_value", "n must be 1: a completion is one turn of a session")
	}
	if len(req.Tools) > 0 {
		return nil, invalid("tools", "unsupported_parameter", "tools are not supported yet in chat completions: use function tools with /v1/responses")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "missing_required_parameter", "messages is required")
	}
	var system []string
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool", "function":
			return nil, invalid(param+".role", "unsupported_value", "tool messages are not supported yet in chat completions: use function tools with /v1/responses")
		default:
			return nil, invalid(param+".role", "invalid_value", fmt.Sprintf("role %q is not one of system, developer, user, assistant", clip(m.Role)))
		}
		if len(m.ToolCalls) > 0 {
			return nil, invalid(param+".tool_calls", "unsupported_parameter", "tool calls are not supported yet in chat completions")
		}
		raw := bytes.TrimSpace(m.Content)
		text := ""
		if len(raw) > 0 && string(raw) != "null" {
			texts, err := contentTexts(raw, param+".content")
			if err != nil {
				return nil, err
			}
			text = strings.Join(texts, "\n")
		} else if m.Role != "assistant" {
			return nil, invalid(param+".content", "missing_required_parameter", "a message needs content")
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "assistant":
			if strings.TrimSpace(text) != "" { // an answer with no text holds nothing to compare
				c.entries = append(c.entries, entry{role: "assistant", text: text})
			}
		default:
			c.entries = append(c.entries, entry{role: "user", text: text})
		}
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role != "user" {
		return nil, invalid(fmt.Sprintf("messages[%d].role", len(req.Messages)-1), "invalid_value", "the last message must be the user's: it is the turn to run")
	}
	c.system = strings.Join(system, "\n")
	c.t.req.Model = req.Model
	if err := h.resolveModel(&c.t); err != nil {
		return nil, err
	}
	return &c, nil
}

// transcript is a session's conversation as entries: user messages'
// texts, and each run of assistant messages (a turn's steps) as one
// answer, its text parts joined as an answer joins them. Answers with no
// text are left out, as the request's are.
func transcript(conv []opencode.MessageWithParts) []entry {
	var out []entry
	var answer []string // the texts of the answer being read
	flush := func() {
		if len(answer) > 0 {
			out = append(out, entry{role: "assistant", text: strings.Join(answer, textSep)})
		}
		answer = nil
	}
	for _, m := range conv {
		var texts []string
		for _, p := range m.Parts {
			if p.Type == opencode.PartText && !p.Synthetic && !p.Ignored && p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		switch m.Info.Role {
		case opencode.User:
			flush()
			out = append(out, entry{role: "user", text: strings.Join(texts, "\n"), id: m.Info.ID})
		case opencode.Assistant:
			answer = append(answer, texts...)
		}
	}
	flush()
	return out
}

// match compares a request's conversation before its last message with
// the session's: the part that extends the session is history to store;
// retry is the session's user message the request re-sends (the session
// holds the conversation up to it), whose turn answers it.
func match(held, prior []entry, last entry) (history []entry, retry string, ok bool) {
	same := func(a, b []entry) bool {
		for i := range a {
			if a[i].role != b[i].role || !sameText(a[i].text, b[i].text) {
				return false
			}
		}
		return true
	}
	switch {
	case len(prior) >= len(held) && same(held, prior[:len(held)]):
		return prior[len(held):], "", true
	case len(prior) < len(held) && same(prior, held[:len(prior)]) &&
		held[len(prior)].role == "user" && sameText(held[len(prior)].text, last.text):
		return nil, held[len(prior)].id, true
	}
	return nil, "", false
}

// ChatCompletions serves POST /v1/chat/completions (see the file's
// comment).
func (h *Handler) ChatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			h.WriteError(w, r, &opencode.Error{Code: opencode.ETooLarge, Message: fmt.Sprintf("the request is larger than %d bytes", maxBody)})
			return
		}
		h.WriteError(w, r, invalid("", "", "the body could not be read: "+err.Error()))
		return
	}
	c, err := h.decodeChat(body)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	sid := r.Header.Get(SessionHeader)
	if sid != "" && identifier.Check(identifier.Session, sid) != nil {
		h.WriteError(w, r, invalid("", "invalid_session", fmt.Sprintf("the %s header %q is not a session ID (ses_…)", SessionHeader, clip(sid))))
		return
	}
	ctx := r.Context()
	in, existed, sub, err := h.admitChat(ctx, c, sid)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	w.Header().Set(SessionHeader, in.SessionID)
	model := c.req.Model
	if sub != nil {
		defer sub.Close()
		e := &chatEmitter{w: w, rc: http.NewResponseController(w), id: in.ID, created: in.TimeCreated / 1000, model: model,
			usage: c.req.StreamOptions != nil && c.req.StreamOptions.IncludeUsage}
		h.streamAt(w, r, streamSpec{in: in, existed: existed, emit: e.emit}, sub)
		return
	}
	if err := h.settle(ctx, in, ""); err != nil && ctx.Err() != nil {
		return // the client left; its turn goes on in the core
	}
	cur, err := h.find(ctx, in.ID)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	resp, err := h.buildAt(ctx, cur, "")
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if resp.Status == statusFailed {
		// The model call failed: OpenAI's chat completions answer no
		// completion then, but an error.
		h.WriteError(w, r, &opencode.Error{Code: opencode.EUnavailable, Message: "the turn failed: " + resp.Error.Message})
		return
	}
	if model == "" {
		model = resp.Model
	}
	text := answerText(resp)
	writeJSON(w, http.StatusOK, chatCompletion{ID: in.ID, Object: "chat.completion", Created: in.TimeCreated / 1000, Model: model,
		Choices: []chatChoice{{Message: chatOut{Role: "assistant", Content: &text, Annotations: []struct{}{}}, FinishReason: "stop"}},
		Usage:   chatUsageOf(resp.Usage)})
}

// admitChat finds the request's session (a new one without the header),
// stores what its conversation adds as history and admits its last
// message; a stream's subscription is taken first. A retry admits
// nothing and answers the message it re-sends (existed).
func (h *Handler) admitChat(ctx context.Context, c *chatTurn, sid string) (*opencode.Input, bool, *eventbus.Subscription, error) {
	core := h.o.Core
	prior, last := c.entries[:len(c.entries)-1], c.entries[len(c.entries)-1]
	history := prior
	if sid != "" {
		// One request of a session at a time here: two would store the
		// same history twice.
		defer h.keys.lock("chat\x00" + sid)()
		if _, err := core.GetSession(ctx, sid); err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				return nil, false, nil, notFound("", "session_not_found", fmt.Sprintf("Session %s not found: the %s header names a session an earlier answer gave", clip(sid), SessionHeader))
			}
			return nil, false, nil, err
		}
		conv, err := core.Messages(ctx, sid)
		if err != nil {
			return nil, false, nil, err
		}
		var retry string
		var ok bool
		if history, retry, ok = match(transcript(conv), prior, last); !ok {
			return nil, false, nil, &fieldError{&opencode.Error{Code: opencode.EConflict, Message: fmt.Sprintf(
				"the conversation is not session %s's: messages must repeat the session's conversation and add to it (send it without the %s header to start a new session)", sid, SessionHeader)},
				"messages", "conversation_mismatch"}
		}
		if retry != "" {
			in, err := h.find(ctx, retry)
			if err != nil {
				return nil, false, nil, err
			}
			var sub *eventbus.Subscription
			if c.req.Stream {
				sub = core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
			}
			return in, true, sub, nil
		}
	} else {
		sid = h.o.IDs.NewSession()
		if _, _, err := core.CreateSession(ctx, opencode.SessionOptions{ID: sid, Minted: true, Directory: h.o.Directory}); err != nil {
			return nil, false, nil, err
		}
	}
	if len(history) > 0 {
		msgs := make([]opencode.MessageWithParts, len(history))
		for i, e := range history {
			role := opencode.User
			if e.role == "assistant" {
				role = opencode.Assistant
			}
			msgs[i] = opencode.MessageWithParts{Info: opencode.Message{ID: h.o.IDs.NewMessage(), Role: role},
				Parts: []opencode.Part{{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: e.text}}}
		}
		if err := core.StoreHistory(ctx, sid, msgs); err != nil {
			return nil, false, nil, err
		}
	}
	var sub *eventbus.Subscription
	if c.req.Stream {
		sub = core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
	}
	in, existed, err := core.Admit(ctx, &opencode.Input{ID: h.o.IDs.NewMessage(), SessionID: sid, Delivery: opencode.Queue,
		Parts: []opencode.Part{{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: last.text}},
		Agent: c.t.agent, Model: c.t.model, System: c.system, Minted: true})
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		return nil, false, nil, err
	}
	return in, existed, sub, nil
}

// answerText is a response's text as one answer.
func answerText(r *Response) string {
	var texts []string
	for _, it := range r.Output {
		for _, c := range it.Content {
			if c.Text != "" {
				texts = append(texts, c.Text)
			}
		}
	}
	return strings.Join(texts, textSep)
}
