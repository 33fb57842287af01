package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// maxBody caps request bodies; prompts with attached files as data: URLs
// are the largest legitimate bodies.
const maxBody = 16 << 20

// maxDepth bounds JSON nesting so a hostile body cannot make decoding deep.
const maxDepth = 64

var validate = newValidator()

// newValidator reports fields by their JSON names, as clients know them.
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		if name == "" {
			return f.Name
		}
		return name
	})
	return v
}

// decodeBody decodes a JSON body into v: every known field strictly typed
// and validated, unknown fields ignored as OpenCode's schemas ignore excess
// keys (a newer client must not be refused), trailing data rejected, size
// and depth capped. An empty body decodes as {} when
// emptyOK.
func decodeBody(r *http.Request, v any, emptyOK bool) error {
	// Sized from Content-Length when the client sent one: a prompt of N
	// bytes is read into one buffer of N bytes, not a doubling series.
	buf := bytes.NewBuffer(make([]byte, 0, max(0, min(r.ContentLength, maxBody))+512))
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, maxBody))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &opencode.Error{Code: opencode.ETooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", maxBody), Kind: "Payload"}
		}
		return badRequest("Payload", "", "could not read request body")
	}
	return decodeJSON(body, v, emptyOK)
}

func decodeJSON(body []byte, v any, emptyOK bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			body = []byte("{}")
		} else {
			return badRequest("Payload", "", "request body is required")
		}
	}
	if !utf8.Valid(body) {
		return badRequest("Payload", "", "request body is not valid UTF-8")
	}
	if err := checkDepth(body); err != nil {
		return err
	}
	// Unmarshal decodes in place (a Decoder would copy the body into its
	// own buffer first); only a failure takes the Decoder's path, which
	// tells a bad value from data after a good one.
	if json.Unmarshal(body, v) == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonErrorAt(err, "")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("Payload", "", "unexpected data after the JSON value")
	}
	return nil
}

func jsonError(err error) error { return jsonErrorAt(err, "") }

// jsonErrorAt maps a decoding error to a 400 naming the JSON path; where
// prefixes it for values decoded on their own (a part of parts).
func jsonErrorAt(err error, where string) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("Payload", "", fmt.Sprintf("malformed JSON at offset %d: %v", se.Offset, se))
	case errors.As(err, &te):
		field := where + te.Field
		at := fmt.Sprintf("at [%q]", field)
		if field == "" {
			field, at = "", "for the request body"
		}
		return badRequest("Payload", field, fmt.Sprintf("Expected %s %s, got %s", jsonKind(te.Type), at, te.Value))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("Payload", "", "malformed JSON: unexpected end of input")
	}
	var oe *opencode.Error
	if errors.As(err, &oe) {
		return oe
	}
	return badRequest("Payload", "", "malformed JSON: "+err.Error())
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// checkDepth rejects JSON nested deeper than maxDepth without decoding it.
func checkDepth(b []byte) error {
	depth := 0
	inStr, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr:
			if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
			if depth > maxDepth {
				return badRequest("Payload", "", fmt.Sprintf("JSON nested deeper than %d levels", maxDepth))
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// validationError turns validator errors into a 400 naming the field by its
// JSON path (where prefixes it, e.g. "parts.0.").
func validationError(err error, where string) error {
	var ves validator.ValidationErrors
	if errors.As(err, &ves) && len(ves) > 0 {
		fe := ves[0]
		path := fe.Namespace()
		if i := strings.IndexByte(path, '.'); i >= 0 {
			path = path[i+1:] // drop the Go struct name
		}
		path = where + path
		switch fe.Tag() {
		case "required":
			return badRequest("Payload", path, fmt.Sprintf("Missing key at [%q]", path))
		case "oneof":
			return badRequest("Payload", path, fmt.Sprintf("Expected one of %s at [%q]", strings.ReplaceAll(fe.Param(), " ", ", "), path))
		}
		return badRequest("Payload", path, fmt.Sprintf("Invalid value at [%q] (%s)", path, fe.Tag()))
	}
	return badRequest("Payload", "", err.Error())
}

// checkID validates a client-supplied ID for its prefix.
func checkID(p identifier.Prefix, id, field string) error {
	if err := identifier.Check(p, id); err != nil {
		return badRequest("Payload", field, fmt.Sprintf("Invalid %s: expected an ID starting with %q", field, string(p)+"_"))
	}
	return nil
}

// Part inputs of a v1 prompt, decoded by type.
type textPartIn struct {
	Type      string          `json:"type"`
	ID        string          `json:"id,omitempty"`
	Text      *string         `json:"text" validate:"required"`
	Synthetic bool            `json:"synthetic,omitempty"`
	Ignored   bool            `json:"ignored,omitempty"`
	Time      *partTimeIn     `json:"time,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

type partTimeIn struct {
	Start int64  `json:"start" validate:"min=0"`
	End   *int64 `json:"end,omitempty"`
}

type filePartIn struct {
	Type     string          `json:"type"`
	ID       string          `json:"id,omitempty"`
	Mime     string          `json:"mime" validate:"required"`
	URL      string          `json:"url" validate:"required"`
	Filename string          `json:"filename,omitempty"`
	Source   json.RawMessage `json:"source,omitempty"`
}

type agentPartIn struct {
	Type   string          `json:"type"`
	ID     string          `json:"id,omitempty"`
	Name   string          `json:"name" validate:"required"`
	Source json.RawMessage `json:"source,omitempty"`
}

type subtaskPartIn struct {
	Type        string                 `json:"type"`
	ID          string                 `json:"id,omitempty"`
	Prompt      string                 `json:"prompt" validate:"required"`
	Description string                 `json:"description" validate:"required"`
	Agent       string                 `json:"agent" validate:"required"`
	Model       *opencode.MessageModel `json:"model,omitempty"`
	Command     string                 `json:"command,omitempty"`
}

// decodeParts decodes the part union by `type`, validates each part and
// gives each its prt_ ID: the client's (prefix-checked) or a new one.
func (s *Server) decodeParts(raw []json.RawMessage) ([]opencode.Part, error) {
	if len(raw) == 0 {
		return nil, badRequest("Payload", "parts", "parts must contain at least one part")
	}
	out := make([]opencode.Part, 0, len(raw))
	for i, rp := range raw {
		where := fmt.Sprintf("parts.%d.", i)
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(rp, &head); err != nil {
			return nil, badRequest("Payload", where+"type", fmt.Sprintf("Expected an object at [%q]", fmt.Sprintf("parts.%d", i)))
		}
		var p opencode.Part
		var id string
		var err error
		switch head.Type {
		case opencode.PartText:
			var v textPartIn
			if err = decodeStrict(rp, &v, where); err == nil {
				if err = validate.Struct(v); err == nil {
					p = opencode.Part{Type: v.Type, Text: *v.Text, Synthetic: v.Synthetic, Ignored: v.Ignored, Metadata: v.Metadata}
					if v.Time != nil {
						p.Time = &opencode.PartTime{Start: v.Time.Start, End: v.Time.End}
					}
					id = v.ID
				}
			}
		case opencode.PartFile:
			var v filePartIn
			if err = decodeStrict(rp, &v, where); err == nil {
				if err = validate.Struct(v); err == nil {
					p = opencode.Part{Type: v.Type, Mime: v.Mime, URL: v.URL, Filename: v.Filename, Source: v.Source}
					id = v.ID
				}
			}
		case opencode.PartAgent:
			var v agentPartIn
			if err = decodeStrict(rp, &v, where); err == nil {
				if err = validate.Struct(v); err == nil {
					p = opencode.Part{Type: v.Type, Name: v.Name, Source: v.Source}
					id = v.ID
				}
			}
		case opencode.PartSubtask:
			var v subtaskPartIn
			if err = decodeStrict(rp, &v, where); err == nil {
				if err = validate.Struct(v); err == nil {
					p = opencode.Part{Type: v.Type, Prompt: v.Prompt, Description: v.Description, Agent: v.Agent, Model: v.Model, Command: v.Command}
					id = v.ID
				}
			}
		case "":
			return nil, badRequest("Payload", where+"type", fmt.Sprintf("Missing key at [%q]", where+"type"))
		default:
			return nil, badRequest("Payload", where+"type", fmt.Sprintf("Expected one of text, file, agent, subtask at [%q], got %q", where+"type", clip(head.Type)))
		}
		if err != nil {
			var oe *opencode.Error
			if errors.As(err, &oe) {
				return nil, oe // decodeStrict already named the path
			}
			return nil, validationError(err, where)
		}
		if id != "" {
			if err := checkID(identifier.Part, id, where+"id"); err != nil {
				return nil, err
			}
			for j, q := range out {
				if q.ID == id {
					return nil, badRequest("Payload", where+"id", fmt.Sprintf("Part ID %s is used twice in this prompt (also part %d) at [%q]", id, j, where+"id"))
				}
			}
			p.ID = id
		} else {
			p.ID = s.ids.NewPart()
		}
		out = append(out, p)
	}
	return out, nil
}

func decodeStrict(b []byte, v any, where string) error {
	if err := json.Unmarshal(b, v); err != nil {
		return jsonErrorAt(err, where)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// messageIDOr is the client's message ID (prefix-checked; field names it in
// errors) or, when it sent none, a new one: minted here, once.
func (s *Server) messageIDOr(id, field string) (string, error) {
	if id == "" {
		return s.ids.NewMessage(), nil
	}
	if err := checkID(identifier.Message, id, field); err != nil {
		return "", err
	}
	return id, nil
}

// decodeValid decodes a required JSON body into v (a pointer to a struct
// with validate tags) and validates it.
func decodeValid(r *http.Request, v any) error {
	if err := decodeBody(r, v, false); err != nil {
		return err
	}
	if err := validate.Struct(v); err != nil {
		return validationError(err, "")
	}
	return nil
}
