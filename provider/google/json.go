package google

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/opencode-server/opencode-server/jsonw"
	"io"
	"strconv"
	"strings"
)

// A JSON value as JavaScript holds it after JSON.parse, for the schema
// rewrites that must keep key order: nil (null), bool, float64, string,
// []any, or *object. undefinedValue stands for a JavaScript undefined
// (omitted from objects, null in arrays).
type object struct {
	keys []string
	vals []any
}

type undefined struct{}

var undefinedValue any = undefined{}

// get returns the value under k (undefined when absent).
func (o *object) get(k string) any {
	for i, x := range o.keys {
		if x == k {
			return o.vals[i]
		}
	}
	return undefinedValue
}

func (o *object) has(k string) bool {
	for _, x := range o.keys {
		if x == k {
			return true
		}
	}
	return false
}

// set assigns k as JavaScript does: in place when present, else last.
func (o *object) set(k string, v any) {
	for i, x := range o.keys {
		if x == k {
			o.vals[i] = v
			return
		}
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *object) del(k string) {
	for i, x := range o.keys {
		if x == k {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			o.vals = append(o.vals[:i], o.vals[i+1:]...)
			return
		}
	}
}

// errDepth stops parsing absurdly nested documents.
var errDepth = errors.New("JSON nested too deeply")

const maxDepth = 512

// parseJSON parses raw into JavaScript-like values (numbers as float64,
// objects ordered, a repeated key keeping its first place and its last
// value, as JSON.parse does).
func parseJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, errors.New("unexpected delimiter")
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			// Out of range: JSON.parse gives ±Infinity, which
			// JSON.stringify writes as null.
			return nil, nil
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}

// appendValue appends v as JSON.stringify writes it.
func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil, undefined:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, x)
	case float64:
		return jsonw.AppendFloat(b, x)
	case string:
		return jsonw.AppendString(b, x)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	case *object:
		b = append(b, '{')
		n := 0
		for i, k := range x.keys {
			if _, skip := x.vals[i].(undefined); skip {
				continue
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = jsonw.AppendString(b, k)
			b = append(b, ':')
			b = appendValue(b, x.vals[i])
		}
		return append(b, '}')
	}
	return append(b, "null"...)
}

// truthy is JavaScript's truthiness of a JSON value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && x == x
	case string:
		return x != ""
	}
	return true
}

// jsString is JavaScript's String(v) of a JSON value.
func jsString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case undefined:
		return "undefined"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return string(jsonw.AppendFloat(nil, x))
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e == nil {
				continue
			}
			if _, u := e.(undefined); u {
				continue
			}
			parts[i] = jsString(e)
		}
		return strings.Join(parts, ",")
	case *object:
		return "[object Object]"
	}
	return ""
}
