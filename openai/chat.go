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
// turn, admitting nothing. A conversation that ends with tool messages
// answers the client calls the session's turn waits on (function tools,
// as in responses): they are handed over, nothing is admitted, and the
// completion is the turn going on.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

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
	DeleteSession(ctx context.Context, id string) error
}

// dropSession deletes a session this request created when what it was
// for was refused: bad input leaves nothing behind.
func (h *Handler) dropSession(ctx context.Context, sid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := h.o.Core.DeleteSession(ctx, sid); err != nil {
		h.o.Logger.Warn("openai: a session created for a refused request could not be deleted", "session", sid, "err", err)
	}
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
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	N          *int              `json:"n"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// chatCall is a tool call of an assistant message, as sent and answered.
type chatCall struct {
	Index    *int   `json:"index,omitempty"` // streamed chunks only
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatTool is a tools entry of chat completions.
type chatTool struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
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
	req chatRequest
	// t holds the model and agent, resolved as a response's, and the
	// function tools.
	t       turn
	entries []entry
	system  string
	// calls are the tool calls and results the conversation before its
	// end holds: they must be the session's own (not stored as history).
	calls []callOutput
	// outputs are the tool messages that end the conversation: the
	// results of the calls the session's turn waits on.
	outputs []callOutput
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
	if err := c.decodeTools(); err != nil {
		return nil, err
	}
	msgs := req.Messages
	if len(msgs) == 0 {
		return nil, invalid("messages", "missing_required_parameter", "messages is required")
	}
	// The tool messages at the end answer the calls of the assistant
	// message before them.
	tail := len(msgs)
	for tail > 0 && msgs[tail-1].Role == "tool" {
		tail--
	}
	if tail < len(msgs) && (tail == 0 || len(msgs[tail-1].ToolCalls) == 0) {
		return nil, invalid(fmt.Sprintf("messages[%d].role", tail), "invalid_value", "tool messages must follow the assistant message whose tool_calls they answer")
	}
	var system []string
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, invalid(param+".role", "invalid_value", fmt.Sprintf("role %q is not one of system, developer, user, assistant, tool", clip(m.Role)))
		}
		if m.Role != "assistant" && len(m.ToolCalls) > 0 {
			return nil, invalid(param+".tool_calls", "invalid_value", "only assistant messages make tool calls")
		}
		raw := bytes.TrimSpace(m.Content)
		text := ""
		if len(raw) > 0 && string(raw) != "null" {
			texts, err := contentTexts(raw, param+".content")
			if err != nil {
				return nil, err
			}
			text = strings.Join(texts, "\n")
		} else if m.Role != "assistant" && m.Role != "tool" {
			return nil, invalid(param+".content", "missing_required_parameter", "a message needs content")
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
		case "assistant":
			if strings.TrimSpace(text) != "" { // an answer with no text holds nothing to compare
				c.entries = append(c.entries, entry{role: "assistant", text: text})
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" {
					return nil, invalid(fmt.Sprintf("%s.tool_calls[%d].id", param, j), "missing_required_parameter", "a tool call needs its id")
				}
				c.calls = append(c.calls, callOutput{callID: tc.ID, param: fmt.Sprintf("%s.tool_calls[%d].id", param, j)})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, invalid(param+".tool_call_id", "missing_required_parameter", "a tool message needs the tool_call_id of the call it answers")
			}
			o := callOutput{callID: m.ToolCallID, output: text, param: param + ".tool_call_id"}
			if i >= tail {
				c.outputs = append(c.outputs, o)
			} else {
				c.calls = append(c.calls, o)
			}
		default:
			c.entries = append(c.entries, entry{role: "user", text: text})
		}
	}
	if last := msgs[len(msgs)-1]; last.Role != "user" && last.Role != "tool" {
		return nil, invalid(fmt.Sprintf("messages[%d].role", len(msgs)-1), "invalid_value", "the last message must be the user's (the turn to run) or tool results (for the calls the turn waits on)")
	}
	c.system = strings.Join(system, "\n")
	c.t.req.Model = req.Model
	if err := h.resolveModel(&c.t); err != nil {
		return nil, err
	}
	return &c, nil
}

// decodeTools reads chat completions' tools and tool_choice as a
// response's.
func (c *chatTurn) decodeTools() error {
	for i, raw := range c.req.Tools {
		var ct chatTool
		if err := json.Unmarshal(raw, &ct); err != nil || ct.Type != "function" || ct.Function == nil {
			return invalid(fmt.Sprintf("tools[%d]", i), "invalid_value", `a tool must be {"type": "function", "function": {"name", "parameters"}}`)
		}
		b, err := json.Marshal(funcTool{Type: "function", Name: ct.Function.Name, Description: ct.Function.Description,
			Parameters: ct.Function.Parameters, Strict: ct.Function.Strict})
		if err != nil {
			return invalid(fmt.Sprintf("tools[%d]", i), "invalid_value", "the tool could not be read: "+err.Error())
		}
		c.t.req.Tools = append(c.t.req.Tools, b)
	}
	c.t.req.ToolChoice = c.req.ToolChoice
	return c.t.decodeTools()
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
	same := sameEntries
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
	body, err := readBody(w, r)
	if err != nil {
		h.WriteError(w, r, err)
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
	ho, err := h.admitChat(ctx, c, sid)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	in := ho.in
	w.Header().Set(SessionHeader, in.SessionID)
	// A browser client (a CORS origin the server allows) reads it too.
	w.Header().Set("Access-Control-Expose-Headers", SessionHeader)
	id, created := in.ID, in.TimeCreated/1000
	if ho.after != "" {
		id, created = ho.after, time.Now().Unix()
	}
	if ho.sub != nil {
		defer ho.sub.Close()
		e := &chatEmitter{w: w, rc: http.NewResponseController(w), id: id, created: created, model: c.req.Model,
			usage: c.req.StreamOptions != nil && c.req.StreamOptions.IncludeUsage, calls: map[string]int{}}
		h.streamAt(w, r, streamSpec{in: in, after: ho.after, skip: ho.skip, existed: ho.existed, emit: e.emit}, ho.sub)
		return
	}
	if err := h.settle(ctx, in, ho.after); err != nil && ctx.Err() != nil {
		return // the client left; its turn goes on in the core
	}
	cur, err := h.find(ctx, in.ID)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	resp, err := h.buildAt(ctx, cur, ho.after)
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
	model := c.req.Model
	if model == "" {
		model = resp.Model
	}
	writeJSON(w, http.StatusOK, chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: model,
		Choices: []chatChoice{answer(resp)}, Usage: chatUsageOf(resp.Usage)})
}

// admitChat finds the request's session (a new one without the header)
// and what the request runs there: a conversation ending with the user's
// message stores what it adds to the session's as history and admits that
// message (a retry admits nothing: the message it re-sends answers); one
// ending with tool messages hands them to the calls the turn waits on,
// and answers the turn's continuation. A stream's subscription is taken
// before anything is admitted or handed over.
func (h *Handler) admitChat(ctx context.Context, c *chatTurn, sid string) (*handed, error) {
	core := h.o.Core
	subscribe := func(sid string) *eventbus.Subscription {
		if !c.req.Stream {
			return nil
		}
		return core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == sid && wanted(e) })
	}
	prior, last := c.entries, entry{}
	if len(c.outputs) == 0 {
		prior, last = c.entries[:len(c.entries)-1], c.entries[len(c.entries)-1]
	}
	history := prior
	created := false
	var conv []opencode.MessageWithParts
	switch {
	case sid != "":
		// One request of a session at a time here: two would store the
		// same history twice.
		defer h.historyLock(sid)()
		if _, err := core.GetSession(ctx, sid); err != nil {
			var oe *opencode.Error
			if asNotFound(err, &oe) {
				return nil, notFound("", "session_not_found", fmt.Sprintf("Session %s not found: the %s header names a session an earlier answer gave", clip(sid), SessionHeader))
			}
			return nil, err
		}
		var err error
		if conv, err = core.Messages(ctx, sid); err != nil {
			return nil, err
		}
	case len(c.outputs) > 0:
		return nil, invalid("messages", "missing_required_parameter", fmt.Sprintf("tool messages answer the calls of a session's turn: send the %s header the answer with the calls gave", SessionHeader))
	}
	if err := ownCalls(conv, c.calls); err != nil {
		return nil, err
	}
	mismatch := &fieldError{&opencode.Error{Code: opencode.EConflict, Message: fmt.Sprintf(
		"the conversation is not session %s's: messages must repeat the session's conversation and add to it (send it without the %s header to start a new session)", sid, SessionHeader)},
		"messages", "conversation_mismatch"}
	held := transcript(conv)
	if len(c.outputs) > 0 {
		// The conversation is the session's up to the calls.
		if len(prior) > len(held) || !sameEntries(prior, held[:len(prior)]) {
			return nil, mismatch
		}
		return h.handOver(ctx, sid, c.outputs, "messages", c.req.Stream)
	}
	if sid != "" {
		var retry string
		var ok bool
		if history, retry, ok = match(held, prior, last); !ok {
			return nil, mismatch
		}
		if retry != "" {
			in, err := h.find(ctx, retry)
			if err != nil {
				return nil, err
			}
			return &handed{in: in, existed: true, sub: subscribe(sid)}, nil
		}
	} else {
		sid = h.o.IDs.NewSession()
		if _, _, err := core.CreateSession(ctx, opencode.SessionOptions{ID: sid, Minted: true, Directory: h.o.Directory}); err != nil {
			return nil, err
		}
		created = true
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
			if created {
				h.dropSession(ctx, sid)
			}
			return nil, err
		}
	}
	sub := subscribe(sid)
	in, existed, err := core.Admit(ctx, &opencode.Input{ID: h.o.IDs.NewMessage(), SessionID: sid, Delivery: opencode.Queue,
		Parts: []opencode.Part{{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: last.text}},
		Agent: c.t.agent, Model: c.t.model, System: c.system, ClientTools: c.t.tools, Minted: true})
	if err != nil {
		if sub != nil {
			sub.Close()
		}
		if created {
			h.dropSession(ctx, sid)
		}
		if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Field == "clientTools" {
			return nil, &fieldError{oe, "tools", "invalid_value"}
		}
		return nil, err
	}
	return &handed{in: in, existed: existed, sub: sub}, nil
}

// ownCalls checks that the tool calls and results a conversation holds
// before its end are the session's: others would have to be stored as
// history, which chat completions do not do yet.
func ownCalls(conv []opencode.MessageWithParts, calls []callOutput) error {
	held := map[string]bool{}
	for _, m := range conv {
		for _, p := range m.Parts {
			if p.Type == opencode.PartTool && p.CallID != "" {
				held[p.CallID] = true
			}
		}
	}
	for _, c := range calls {
		if !held[c.callID] {
			return invalid(c.param, "unsupported_value", fmt.Sprintf("tool call %s is not the session's: tool calls from elsewhere cannot be stored as history yet", clip(c.callID)))
		}
	}
	return nil
}

func sameEntries(a, b []entry) bool {
	for i := range a {
		if a[i].role != b[i].role || !sameText(a[i].text, b[i].text) {
			return false
		}
	}
	return true
}

// answer is a response as a completion's choice: its text, and its
// client calls as tool_calls.
func answer(r *Response) chatChoice {
	text := answerText(r)
	out := chatOut{Role: "assistant", Content: &text, Annotations: []struct{}{}}
	var thoughts []string
	for _, it := range r.Output {
		if it.reasoning != nil {
			for _, st := range it.reasoning.Summary {
				if st.Text != "" {
					thoughts = append(thoughts, st.Text)
				}
			}
		}
		if it.call != nil {
			var tc chatCall
			tc.ID, tc.Type = it.call.CallID, "function"
			tc.Function.Name, tc.Function.Arguments = it.call.Name, it.call.Arguments
			out.ToolCalls = append(out.ToolCalls, tc)
		}
	}
	if len(thoughts) > 0 {
		rc := strings.Join(thoughts, textSep)
		out.ReasoningContent = &rc
	}
	finish := "stop"
	if len(out.ToolCalls) > 0 {
		finish = "tool_calls"
		if text == "" {
			out.Content = nil
		}
	}
	return chatChoice{Message: out, FinishReason: finish}
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
