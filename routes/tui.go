package routes

// The TUI control routes (/tui/*): what an IDE extension or a script calls
// to drive a TUI attached to this server. Each publishes one live event
// (nothing is stored) in the request's directory; the TUI reads
// /global/event and acts on it: text put in its prompt, a command run, a
// toast shown, a session opened. OpenCode 1.18.33's routes, as recorded in
// testdata/reference/tui.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// The TUI's events (OpenCode's TuiEvent).
const (
	evTUIPromptAppend   = "tui.prompt.append"
	evTUICommandExecute = "tui.command.execute"
	evTUIToastShow      = "tui.toast.show"
	evTUISessionSelect  = "tui.session.select"
)

// toastDuration is a toast's time on screen (ms) when the request gives
// none, as OpenCode defaults it.
const toastDuration = 5000

// tuiLegacyCommands maps /tui/execute-command's legacy names to the TUI's
// command names, as OpenCode maps them.
var tuiLegacyCommands = map[string]string{
	"session_new":             "session.new",
	"session_share":           "session.share",
	"session_interrupt":       "session.interrupt",
	"session_compact":         "session.compact",
	"messages_page_up":        "session.page.up",
	"messages_page_down":      "session.page.down",
	"messages_line_up":        "session.line.up",
	"messages_line_down":      "session.line.down",
	"messages_half_page_up":   "session.half.page.up",
	"messages_half_page_down": "session.half.page.down",
	"messages_first":          "session.first",
	"messages_last":           "session.last",
	"agent_cycle":             "agent.cycle",
}

func (s *Server) mountTUI(r chi.Router) {
	r.Post("/tui/append-prompt", tuiPost[tuiPromptIn](s, evTUIPromptAppend))
	// The routes without a body publish a fixed command; a body is not read.
	for path, command := range map[string]string{
		"/tui/submit-prompt": "prompt.submit",
		"/tui/clear-prompt":  "prompt.clear",
		"/tui/open-help":     "help.show",
		"/tui/open-sessions": "session.list",
		"/tui/open-themes":   "theme.switch", // OpenCode publishes session.list here (a bug)
		"/tui/open-models":   "model.list",
	} {
		r.Post(path, s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
			return s.tuiPublish(w, r, evTUICommandExecute, tuiCommand{Command: command})
		}))
	}
	r.Post("/tui/execute-command", s.h(v1, s.tuiExecuteCommand))
	r.Post("/tui/show-toast", tuiPost[tuiToastIn](s, evTUIToastShow))
	r.Post("/tui/publish", s.h(v1, s.tuiPublishEvent))
	r.Post("/tui/select-session", s.h(v1, s.tuiSelectSession))
	r.Get("/tui/control/next", s.h(v1, s.tuiControlNext))
	r.Post("/tui/control/response", s.h(v1, s.tuiControlResponse))
}

// The events' properties, in OpenCode's key order.
type (
	tuiPrompt struct {
		Text string `json:"text"`
	}
	tuiCommand struct {
		Command string `json:"command"`
	}
	tuiToast struct {
		Title    *string `json:"title,omitempty"`
		Message  string  `json:"message"`
		Variant  string  `json:"variant"`
		Duration int64   `json:"duration"`
	}
	tuiSession struct {
		SessionID string `json:"sessionID"`
	}
)

// The request bodies: every key a pointer, so a missing one is told from
// an empty one.
type (
	tuiPromptIn struct {
		Text *string `json:"text"`
	}
	tuiCommandIn struct {
		Command *string `json:"command"`
	}
	tuiToastIn struct {
		Title    *string `json:"title"`
		Message  *string `json:"message"`
		Variant  *string `json:"variant"`
		Duration *int64  `json:"duration"`
	}
	tuiSessionIn struct {
		SessionID *string `json:"sessionID"`
	}
)

func tuiMissingKey(field string) error {
	return badRequest("Payload", field, fmt.Sprintf("Missing key at [%q]", field))
}

func (in tuiPromptIn) check(where string) (tuiPrompt, error) {
	if in.Text == nil {
		return tuiPrompt{}, tuiMissingKey(where + "text")
	}
	return tuiPrompt{Text: *in.Text}, nil
}

func (in tuiCommandIn) check(where string) (tuiCommand, error) {
	if in.Command == nil {
		return tuiCommand{}, tuiMissingKey(where + "command")
	}
	return tuiCommand{Command: *in.Command}, nil
}

func (in tuiToastIn) check(where string) (tuiToast, error) {
	if in.Message == nil {
		return tuiToast{}, tuiMissingKey(where + "message")
	}
	if in.Variant == nil {
		return tuiToast{}, tuiMissingKey(where + "variant")
	}
	switch *in.Variant {
	case "info", "success", "warning", "error":
	default:
		return tuiToast{}, badRequest("Payload", where+"variant", fmt.Sprintf(
			`Expected "info" | "success" | "warning" | "error", got %q at [%q]`, clip(*in.Variant), where+"variant"))
	}
	t := tuiToast{Title: in.Title, Message: *in.Message, Variant: *in.Variant, Duration: toastDuration}
	if in.Duration != nil {
		if *in.Duration <= 0 {
			return tuiToast{}, badRequest("Payload", where+"duration", fmt.Sprintf(
				"Expected a value greater than 0, got %d at [%q]", *in.Duration, where+"duration"))
		}
		t.Duration = *in.Duration
	}
	return t, nil
}

func (in tuiSessionIn) check(where string) (tuiSession, error) {
	if in.SessionID == nil {
		return tuiSession{}, tuiMissingKey(where + "sessionID")
	}
	if err := checkID(identifier.Session, *in.SessionID, where+"sessionID"); err != nil {
		return tuiSession{}, err
	}
	return tuiSession{SessionID: *in.SessionID}, nil
}

// tuiPublish publishes a TUI event with the given properties in the
// request's directory and answers true.
func (s *Server) tuiPublish(w http.ResponseWriter, r *http.Request, typ string, props any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify writes "<", ">" and "&"
	if err := enc.Encode(props); err != nil {
		return err
	}
	if s.cfg.Publish != nil {
		s.cfg.Publish(&opencode.Event{ID: s.ids.NewEvent(), Type: typ, Directory: s.directory(r),
			Data: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}

// tuiInput is a request body (or /tui/publish's properties) that checks
// itself into an event's properties; where prefixes the paths its errors
// name.
type tuiInput[P any] interface {
	check(where string) (P, error)
}

// tuiBody decodes and checks the request's body as an I.
func tuiBody[I tuiInput[P], P any](r *http.Request) (P, error) {
	var in I
	if err := decodeBody(r, &in, false); err != nil {
		var zero P
		return zero, err
	}
	return in.check("")
}

// tuiProperties decodes and checks /tui/publish's properties as an I.
func tuiProperties[I tuiInput[P], P any](raw []byte, where string) (any, error) {
	var in I
	if err := decodeStrict(raw, &in, where); err != nil {
		return nil, err
	}
	return in.check(where)
}

// tuiEvents are the events /tui/publish takes, each with its properties'
// decoder.
var tuiEvents = map[string]func(raw []byte, where string) (any, error){
	evTUIPromptAppend:   tuiProperties[tuiPromptIn, tuiPrompt],
	evTUICommandExecute: tuiProperties[tuiCommandIn, tuiCommand],
	evTUIToastShow:      tuiProperties[tuiToastIn, tuiToast],
	evTUISessionSelect:  tuiProperties[tuiSessionIn, tuiSession],
}

// tuiPost is a route whose body, an I, becomes a typ event.
func tuiPost[I tuiInput[P], P any](s *Server, typ string) http.HandlerFunc {
	return s.h(v1, func(w http.ResponseWriter, r *http.Request) error {
		p, err := tuiBody[I](r)
		if err != nil {
			return err
		}
		return s.tuiPublish(w, r, typ, p)
	})
}

// tuiExecuteCommand is POST /tui/execute-command {command}: a legacy name
// (agent_cycle) becomes the TUI's (agent.cycle); any other name is the
// TUI's own and passes as it is (OpenCode publishes {} for it).
func (s *Server) tuiExecuteCommand(w http.ResponseWriter, r *http.Request) error {
	c, err := tuiBody[tuiCommandIn](r)
	if err != nil {
		return err
	}
	if name, ok := tuiLegacyCommands[c.Command]; ok {
		c.Command = name
	}
	return s.tuiPublish(w, r, evTUICommandExecute, c)
}

// tuiPublishEvent is POST /tui/publish {type, properties}: any of the four
// TUI events, its properties checked as the routes above check them (a
// session ID is not looked up, as in OpenCode).
func (s *Server) tuiPublishEvent(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Type       *string         `json:"type"`
		Properties json.RawMessage `json:"properties"`
	}
	if err := decodeBody(r, &in, false); err != nil {
		return err
	}
	if in.Type == nil {
		return tuiMissingKey("type")
	}
	decode, ok := tuiEvents[*in.Type]
	switch {
	case !ok:
		return badRequest("Payload", "type", fmt.Sprintf("Expected one of %s, %s, %s, %s at [\"type\"], got %q",
			evTUIPromptAppend, evTUICommandExecute, evTUIToastShow, evTUISessionSelect, clip(*in.Type)))
	case in.Properties == nil || string(in.Properties) == "null":
		return tuiMissingKey("properties")
	case in.Properties[0] != '{':
		return badRequest("Payload", "properties", fmt.Sprintf(`Expected an object at ["properties"], got %s`, clip(string(in.Properties))))
	}
	props, err := decode(in.Properties, "properties.")
	if err != nil {
		return err
	}
	return s.tuiPublish(w, r, *in.Type, props)
}

// tuiSelectSession is POST /tui/select-session {sessionID}: the TUI opens
// the session, which must exist.
func (s *Server) tuiSelectSession(w http.ResponseWriter, r *http.Request) error {
	sel, err := tuiBody[tuiSessionIn](r)
	if err != nil {
		return err
	}
	if _, err := s.m.GetSession(r.Context(), sel.SessionID); err != nil {
		return err
	}
	return s.tuiPublish(w, r, evTUISessionSelect, sel)
}

// tuiControlNext is GET /tui/control/next: the next request of OpenCode's
// legacy TUI bridge, a long poll. Nothing queues one, here as in OpenCode
// 1.18.33 (whose TUI reads events instead), so it waits until the client
// goes away, or answers 503 when the server shuts down. Each waiting
// request holds one of the client's stream slots.
func (s *Server) tuiControlNext(w http.ResponseWriter, r *http.Request) error {
	release, ok := s.streams.acquire(r)
	if !ok {
		return tooManyStreams
	}
	defer release()
	select {
	case <-r.Context().Done():
		return r.Context().Err()
	case <-s.cfg.Done:
		return &opencode.Error{Code: opencode.EUnavailable, Message: "server is shutting down"}
	}
}

// tuiControlResponse is POST /tui/control/response: any JSON value, the
// answer to a bridge request. None is ever waiting for one (OpenCode
// queues it unread), so it is checked and dropped.
func (s *Server) tuiControlResponse(w http.ResponseWriter, r *http.Request) error {
	var v json.RawMessage
	if err := decodeBody(r, &v, false); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, true)
	return nil
}
