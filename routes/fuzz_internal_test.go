package routes

// Internal fuzz targets of the body decoders. The test binary's TestMain
// (goleak) is in main_test.go, package routes_test; one per binary.

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// trueDepth is the nesting depth of valid JSON, by the decoder's tokens.
func trueDepth(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				deepest = max(deepest, depth)
			} else {
				depth--
			}
		}
	}
}

// FuzzCheckDepth: on valid JSON, checkDepth rejects exactly the bodies
// nested deeper than maxDepth.
func FuzzCheckDepth(f *testing.F) {
	for _, s := range []string{`{}`, `[[[]]]`, `{"a":"[[[["}`, `{"a\"[":[1]}`, `"\\"`, `[` + string(bytes.Repeat([]byte("["), 70)) + string(bytes.Repeat([]byte("]"), 71))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkDepth(b)
		if err != nil {
			var oe *opencode.Error
			if !errors.As(err, &oe) || opencode.KindOf(oe.Code).HTTP != 400 || oe.Message == "" {
				t.Fatalf("checkDepth error %#v", err)
			}
		}
		if !json.Valid(b) {
			return
		}
		if d := trueDepth(b); (err == nil) != (d <= maxDepth) {
			t.Fatalf("depth %d: checkDepth = %v", d, err)
		}
	})
}

// FuzzDecodePrompt: decodeJSON plus decodeParts never panic, every error is
// an httpError with a status and a message, an accepted body has no
// duplicate key, and every accepted part has a prt_ ID and a known type.
func FuzzDecodePrompt(f *testing.F) {
	for _, s := range []string{
		`{"parts":[{"type":"text","text":"x"}]}`,
		`{"parts":[{"type":"file","mime":"a/b","url":"u"},{"type":"agent","name":"n"},{"type":"subtask","prompt":"p","description":"d","agent":"a"}]}`,
		`{"parts":[{"type":"text","text":"x","id":"prt_1","time":{"start":1}}]}`,
		`{"parts":[null,1,"x",[]]}`,
		`{"parts":[{"type":"text","text":"a","text":"b"}]}`,
		`{"PARTS":[{"TYPE":"text","Text":"x"}],"parts":[{"type":"text","text":"\ud800"}]}`,
		`{"parts":[{"type":"text","text":"x","metadata":{"a":{"b":1,"b":2}}}],"p\u0061rts":[]}`,
	} {
		f.Add([]byte(s))
	}
	s := &Server{ids: identifier.Default()}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p promptBody
		err := decodeJSON(b, &p, false)
		// An accepted body is valid JSON without a duplicate key anywhere
		// (escaped lone surrogates aside, taken as U+FFFD).
		if err == nil && !jsontext.Value(b).IsValid(jsontext.AllowInvalidUTF8(true)) {
			t.Fatalf("accepted %q: invalid JSON or a duplicate key", b)
		}
		if err == nil && p.Parts != nil {
			var parts []any
			ps, perr := s.decodeParts(p.Parts)
			err = perr
			for _, x := range ps {
				parts = append(parts, x)
				if len(x.ID) < 5 || x.ID[:4] != "prt_" {
					t.Fatalf("part ID %q", x.ID)
				}
				switch x.Type {
				case "text", "file", "agent", "subtask":
				default:
					t.Fatalf("part type %q accepted", x.Type)
				}
			}
			if err == nil && len(parts) == 0 {
				t.Fatalf("no parts and no error for %q", b)
			}
		}
		if err != nil {
			var oe *opencode.Error
			if !errors.As(err, &oe) || opencode.KindOf(oe.Code).HTTP < 400 || opencode.KindOf(oe.Code).HTTP > 499 || oe.Message == "" {
				t.Fatalf("error %#v for %q", err, b)
			}
		}
	})
}
