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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
// and validated, keys matched case-sensitively and unknown keys ignored as
// OpenCode's schemas do (a newer client must not be refused), duplicate
// keys, trailing data and invalid UTF-8 rejected, size and depth capped.
// An empty body decodes as {} when emptyOK.
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

// Request bodies are decoded with github.com/go-json-experiment/json (the
// proposed encoding/json/v2), not encoding/json, for three reasons:
//
//   - Names match exactly, as in OpenCode's Effect Schema validators:
//     {"PARTS":[...]} is an unknown key (ignored), so parts is missing;
//     encoding/json would fill Parts from it.
//   - A key twice in one object is an error (jsontext.ErrDuplicateName),
//     anywhere in the body, raw sub-values (parts, metadata) included;
//     encoding/json keeps the last. JSON.parse keeps the last too: here we
//     deliberately differ, since two values for one key is ambiguous.
//   - Errors are values to inspect (*jsontext.SyntacticError,
//     *jsonv2.SemanticError, each with a JSON Pointer), so jsonErrorAt maps
//     them by type, never by message text, which changes between versions.
//
// Unknown keys are still ignored (v2's default). json.RawMessage fields keep
// working: v2 calls their UnmarshalJSON method, as encoding/json does, null
// included. Escaped lone surrogates ("\ud800") decode to U+FFFD as with
// encoding/json (AllowInvalidUTF8; raw invalid UTF-8 is refused before).
var decodeOpts = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true))

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
	// A jsontext.Decoder over a bytes.Buffer parses the buffer in place:
	// no copy of the body. One pass decodes, then looks for trailing data.
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), decodeOpts)
	if err := jsonv2.UnmarshalDecode(dec, v); err != nil {
		return jsonErrorAt(err, "")
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return badRequest("Payload", "", "unexpected data after the JSON value")
	}
	return nil
}

// unmarshal decodes one complete JSON value (a raw sub-value of a body)
// with the body's rules.
func unmarshal(b []byte, v any) error {
	return jsonv2.Unmarshal(b, v, decodeOpts)
}

// jsonErrorAt maps a decoding error to a 400 naming the JSON path, by the
// error's type; where prefixes the path for values decoded on their own
// (a part of parts).
func jsonErrorAt(err error, where string) error {
	var oe *opencode.Error
	var se *jsontext.SyntacticError
	var te *jsonv2.SemanticError
	switch {
	case errors.As(err, &oe):
		return oe
	case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
		field := where + dotted(se.JSONPointer)
		return badRequest("Payload", field, fmt.Sprintf("Duplicate key at [%q]", field))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("Payload", "", "malformed JSON: unexpected end of input")
	case errors.As(err, &se):
		return badRequest("Payload", "", fmt.Sprintf("malformed JSON at offset %d: %v", se.ByteOffset, se.Err))
	case errors.As(err, &te):
		field := where + dotted(te.JSONPointer)
		at := fmt.Sprintf("at [%q]", field)
		if field == "" {
			at = "for the request body"
		}
		if te.JSONKind == 0 || te.GoType == nil {
			return badRequest("Payload", field, "Invalid value "+at)
		}
		return badRequest("Payload", field, fmt.Sprintf("Expected %s %s, got %s", jsonKind(te.GoType), at, kindName(te.JSONKind, te.JSONValue)))
	}
	return badRequest("Payload", "", "malformed JSON")
}

// dotted writes a JSON Pointer the way error paths are written here:
// /parts/0/text is parts.0.text.
func dotted(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names the kind of JSON value a client sent, as encoding/json's
// errors did ("number 1.5" where the number itself was the problem).
func kindName(k jsontext.Kind, v jsontext.Value) string {
	switch k {
	case '"':
		return "string"
	case '0':
		if len(v) > 0 && len(v) <= 40 {
			return "number " + string(v)
		}
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "a value"
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
		if err := unmarshal(rp, &head); err != nil {
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

// decodeStrict decodes a raw sub-value (already checked for syntax and
// duplicate keys as part of the body) into v; errors name where+path.
func decodeStrict(b []byte, v any, where string) error {
	if err := unmarshal(b, v); err != nil {
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
func (s *Server) messageIDOr(id, field string) (_ string, minted bool, _ error) {
	if id == "" {
		return s.ids.NewMessage(), true, nil
	}
	if err := checkID(identifier.Message, id, field); err != nil {
		return "", false, err
	}
	return id, false, nil
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
