package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// createRequest is the body of POST /v1/responses: the fields this door
// acts on. The sampling fields an SDK may send (temperature, top_p, ...)
// are accepted and left to the model's and agent's settings.
type createRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID string            `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	// Delivery is this door's extension (steer.go): "steer" admits the
	// input into the running turn of previous_response_id; "queue" (or
	// none) runs it as the session's next turn.
	Delivery string `json:"delivery"`
	// Reasoning is {effort, summary} (reasoning.go).
	Reasoning json.RawMessage `json:"reasoning"`
}

// inputItem is one item of an input list: a message (type "message", or
// none with a role), or another item type this door refuses by name.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// CallID and Output are a function_call_output item's; CallID, Name
	// and Arguments a function_call's.
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	// ID is the item's ID as the client gives it.
	ID string `json:"id"`
}

// contentPart is one part of a message's content list.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// input_image: image_url (a data: or http(s) URL); input_file:
	// file_data (a data: URL, or base64 with filename) or file_url.
	// file_id names OpenAI's Files API, which this server has not.
	// (image_url is an object in chat completions' image parts.)
	ImageURL json.RawMessage `json:"image_url"`
	FileData string          `json:"file_data"`
	FileURL  string          `json:"file_url"`
	Filename string          `json:"filename"`
	FileID   string          `json:"file_id"`
}

// partMeta is what a response's user message keeps of its request, in
// its first part's metadata under "openai": what the response object
// shows again, and the Idempotency-Key a retry is found by.
type partMeta struct {
	OpenAI *requestMeta `json:"openai,omitempty"`
}

type requestMeta struct {
	Metadata           map[string]string `json:"metadata,omitempty"`
	PreviousResponseID string            `json:"previousResponseID,omitempty"`
	IdempotencyKey     string            `json:"idempotencyKey,omitempty"`
	// ToolChoice and Strict are what the request said of its function
	// tools, answered back (the tools themselves are the input's client
	// tools).
	ToolChoice string   `json:"toolChoice,omitempty"`
	Strict     []string `json:"strict,omitempty"`
	// ReasoningSummary is the request's reasoning.summary, answered back;
	// Background whether it was a background response (background.go).
	ReasoningSummary string `json:"reasoningSummary,omitempty"`
	Background       bool   `json:"background,omitempty"`
}

// metaOf reads a user message's request metadata (nil: none).
func metaOf(parts []opencode.Part) *requestMeta {
	for _, p := range parts {
		if len(p.Metadata) == 0 {
			continue
		}
		var m partMeta
		if json.Unmarshal(p.Metadata, &m) == nil && m.OpenAI != nil {
			return m.OpenAI
		}
	}
	return nil
}

// turn is a validated request: what is admitted, and where.
type turn struct {
	req      createRequest
	texts    []string
	system   string
	agent    string
	model    *opencode.MessageModel
	session  string // the conversation's session ("": from previous_response_id, or new)
	previous string
	calls    // the function tools, and the function_call_output items
	// conversation: the input is a whole conversation (history.go), whose
	// earlier part is history.
	conversation bool
	history      []convItem
	// files are the user message's images and files (after its texts).
	files []opencode.Part
	// messageID is the response's msg_ ID when the request names it (the
	// OpenCode-Message-ID header): sent again, it is the same response.
	messageID string
	// variant and summary are the request's reasoning (reasoning.go).
	variant, summary string
}

// OpenAI's metadata limits: 16 pairs, keys up to 64 characters, values up
// to 512.
const (
	maxMetadata      = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// decodeRequest validates a body; nothing is read from the core but the
// model and agent names.
func (h *Handler) decodeRequest(body []byte) (*turn, error) {
	var t turn
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&t.req); err != nil {
		return nil, invalid("", "", "The body is not a valid request: "+err.Error())
	}
	req := &t.req
	if err := t.checkBackground(); err != nil {
		return nil, err
	}
	if err := t.decodeTools(); err != nil {
		return nil, err
	}
	if err := t.decodeReasoning(); err != nil {
		return nil, err
	}
	if err := t.decodeInput(); err != nil {
		return nil, err
	}
	if req.Instructions != nil && *req.Instructions != "" {
		t.system = strings.TrimSpace(strings.Join([]string{*req.Instructions, t.system}, "\n"))
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return nil, err
	}
	if err := h.resolveModel(&t); err != nil {
		return nil, err
	}
	conv, err := conversationID(req.Conversation)
	if err != nil {
		return nil, err
	}
	switch {
	case conv != "" && req.PreviousResponseID != "":
		return nil, invalid("conversation", "", "previous_response_id and conversation cannot both be given: a response continues one session")
	case conv != "" && identifier.Check(identifier.Session, conv) != nil:
		return nil, invalid("conversation", "invalid_value", fmt.Sprintf("conversation %q is not a session ID (ses_…): a conversation is a session of this server", clip(conv)))
	case req.PreviousResponseID != "" && identifier.Check(identifier.Message, req.PreviousResponseID) != nil:
		return nil, notFound("previous_response_id", "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", clip(req.PreviousResponseID)))
	}
	t.session, t.previous = conv, req.PreviousResponseID
	if t.conversation && req.Delivery == "steer" {
		return nil, invalid("input", "unsupported_value", "a steer is user input: a conversation (assistant, function_call items) goes in a request without delivery steer")
	}
	if err := t.checkDelivery(); err != nil {
		return nil, err
	}
	return &t, nil
}

// decodeInput reads input: a string, or a list of message items whose
// content is a string or input_text parts. User messages become the
// admitted user message's text parts; system and developer messages join
// the instructions.
func (t *turn) decodeInput() error {
	raw := bytes.TrimSpace(t.req.Input)
	if len(raw) == 0 || string(raw) == "null" {
		return invalid("input", "missing_required_parameter", "input is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return invalid("input", "empty_string", "input must not be empty")
		}
		t.texts = []string{s}
		return nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return invalid("input", "invalid_type", "input must be a string or a list of input items")
	}
	if isConversation(items) {
		return t.decodeConversation(items)
	}
	var system []string
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		if typ == "function_call_output" {
			if err := t.addOutput(it, param); err != nil {
				return err
			}
			continue
		}
		if typ == "reasoning" {
			continue // dropped (history.go)
		}
		if typ != "message" {
			return invalid(param+".type", "unsupported_value", fmt.Sprintf("input items of type %q are not supported: send message, function_call, function_call_output and reasoning items", clip(typ)))
		}
		if it.Role == "user" {
			texts, files, err := userContent(it.Content, param+".content")
			if err != nil {
				return err
			}
			t.texts, t.files = append(t.texts, texts...), append(t.files, files...)
			continue
		}
		texts, err := contentTexts(it.Content, param+".content")
		if err != nil {
			return err
		}
		switch it.Role {
		case "system", "developer":
			system = append(system, texts...)
		default:
			return invalid(param+".role", "invalid_value", fmt.Sprintf("role %q is not one of user, system, developer", clip(it.Role)))
		}
	}
	if len(t.outputs) > 0 && len(t.texts)+len(t.files) > 0 {
		return invalid("input", "unsupported_value", "function_call_output items go alone: they answer the calls of a running turn; send the next user message in a request of its own")
	}
	if len(t.texts)+len(t.files) == 0 && len(t.outputs) == 0 {
		return invalid("input", "missing_required_parameter", "input has no user message with text")
	}
	t.system = strings.Join(system, "\n")
	return nil
}

// contentTexts reads a message's content: a string or input_text parts.
func contentTexts(raw json.RawMessage, param string) ([]string, error) {
	texts, _, err := content(raw, param, false)
	return texts, err
}

// userContent reads a user message's content: a string, or input_text,
// input_image and input_file parts (the images and files as our file
// parts, sent to the model as the TUI's attachments are).
func userContent(raw json.RawMessage, param string) ([]string, []opencode.Part, error) {
	return content(raw, param, true)
}

// content reads a message's content: a string or input_text parts, and
// with files input_image and input_file parts.
func content(raw json.RawMessage, param string, files bool) ([]string, []opencode.Part, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil, invalid(param, "empty_string", "a message's content must not be empty")
		}
		return []string{s}, nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		return nil, nil, invalid(param, "invalid_type", "a message's content must be a string or a list of input_text parts")
	}
	texts := make([]string, 0, len(parts))
	var out []opencode.Part
	for j, p := range parts {
		at := fmt.Sprintf("%s[%d]", param, j)
		switch {
		case p.Type == "input_text" || p.Type == "text":
			if p.Text == "" {
				return nil, nil, invalid(at+".text", "empty_string", "an input_text part must have text")
			}
			texts = append(texts, p.Text)
		case (p.Type == "input_image" || p.Type == "input_file") && files:
			f, err := filePart(p, at)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, f)
		case p.Type == "input_image" || p.Type == "input_file":
			return nil, nil, invalid(at+".type", "unsupported_value", p.Type+" parts are taken in a user message only")
		default:
			return nil, nil, invalid(at+".type", "unsupported_value", fmt.Sprintf("content parts of type %q are not supported yet: send input_text", clip(p.Type)))
		}
	}
	return texts, out, nil
}

// filePart is an input_image or input_file part as our file part.
func filePart(p contentPart, at string) (opencode.Part, error) {
	if p.FileID != "" {
		return opencode.Part{}, invalid(at+".file_id", "unsupported_value", "file_id names OpenAI's Files API, which this server has not: send the content as a data: URL")
	}
	var url string
	_ = json.Unmarshal(p.ImageURL, &url)
	name := p.Filename
	if p.Type == "input_file" {
		url = p.FileURL
		if p.FileData != "" {
			url = p.FileData
			if !strings.HasPrefix(url, "data:") {
				// Base64 content with its filename, as the SDKs send a file.
				url = "data:" + mimeOf(name) + ";base64," + url
			}
		}
	}
	field := map[string]string{"input_image": ".image_url", "input_file": ".file_data"}[p.Type]
	media := ""
	switch {
	case strings.HasPrefix(url, "data:"):
		m, _, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ",")
		m, _, _ = strings.Cut(m, ";")
		if !ok || m == "" {
			return opencode.Part{}, invalid(at+field, "invalid_value", "a data: URL needs its media type and its data")
		}
		media = m
	case strings.HasPrefix(url, "https://"), strings.HasPrefix(url, "http://"):
		media = mimeOf(url)
	default:
		return opencode.Part{}, invalid(at+field, "invalid_value", p.Type+" needs a data: or http(s) URL")
	}
	if p.Type == "input_image" && !strings.HasPrefix(media, "image/") && media != "application/octet-stream" {
		return opencode.Part{}, invalid(at+field, "invalid_value", "input_image's media type is "+clip(media)+", not an image")
	}
	if name == "" {
		name = map[string]string{"input_image": "image", "input_file": "file"}[p.Type]
	}
	return opencode.Part{Type: opencode.PartFile, Mime: media, URL: url, Filename: name}, nil
}

// mimeOf is the media type of a file name or URL by its extension.
func mimeOf(name string) string {
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		name = name[:i]
	}
	if m := mime.TypeByExtension(path.Ext(name)); m != "" {
		m, _, _ = strings.Cut(m, ";")
		return m
	}
	return "application/octet-stream"
}

func checkMetadata(md map[string]string) error {
	if len(md) > maxMetadata {
		return invalid("metadata", "object_above_max_properties", fmt.Sprintf("metadata has %d pairs; at most %d", len(md), maxMetadata))
	}
	for k, v := range md {
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return invalid("metadata", "string_above_max_length", fmt.Sprintf("metadata key %q is longer than %d characters", clip(k), maxMetadataKey))
		}
		if utf8.RuneCountInString(v) > maxMetadataValue {
			return invalid("metadata", "string_above_max_length", fmt.Sprintf("metadata value of %q is longer than %d characters", clip(k), maxMetadataValue))
		}
	}
	return nil
}

// resolveModel reads model: "provider/model" of the catalog, or the name
// of one of the server's agents, or "" for the session's defaults.
func (h *Handler) resolveModel(t *turn) error {
	name := t.req.Model
	if name == "" {
		return nil
	}
	if p, m, ok := strings.Cut(name, "/"); ok {
		if !h.o.Core.HasModel(p, m) {
			return notFound("model", "model_not_found", fmt.Sprintf("The model `%s` does not exist: name a model as provider/model (GET /v1/models) or one of the server's agents", clip(name)))
		}
		t.model = &opencode.MessageModel{ProviderID: p, ModelID: m}
		return nil
	}
	for _, a := range h.o.Core.Agents() {
		if a.Name == name && a.Mode != "subagent" {
			t.agent = name
			return nil
		}
	}
	return notFound("model", "model_not_found", fmt.Sprintf("The model `%s` does not exist: name a model as provider/model (GET /v1/models) or one of the server's agents", clip(name)))
}

// conversationID reads conversation: a session ID, or {"id": ...}.
func conversationID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.ID == "" {
		return "", invalid("conversation", "invalid_type", "conversation must be a session ID or {\"id\": session ID}")
	}
	return o.ID, nil
}

// clip shortens a client's string quoted back in an error.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "…"
}

// parts are the admitted user message's parts, their IDs minted here;
// the first carries the request's metadata.
func (h *Handler) parts(t *turn, key string) []opencode.Part {
	parts := make([]opencode.Part, len(t.texts), len(t.texts)+len(t.files))
	for i, s := range t.texts {
		parts[i] = opencode.Part{ID: h.o.IDs.NewPart(), Type: opencode.PartText, Text: s}
	}
	for _, f := range t.files {
		f.ID = h.o.IDs.NewPart()
		parts = append(parts, f)
	}
	meta := requestMeta{Metadata: t.req.Metadata, PreviousResponseID: t.previous, IdempotencyKey: key,
		ToolChoice: t.choice, Strict: t.strict, ReasoningSummary: t.summary, Background: t.req.Background}
	if b, err := json.Marshal(partMeta{OpenAI: &meta}); err == nil {
		parts[0].Metadata = b
	}
	return parts
}
