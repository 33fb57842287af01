// Package jsonw appends JSON as JavaScript's JSON.stringify writes it (no
// HTML escaping, invalid UTF-8 as U+FFFD, numbers as JavaScript prints
// them): the wire formats the providers build by hand, and the stubs that
// speak them, share it.
package jsonw

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendCompact appends raw compacted when it is valid JSON whose first
// byte is one of first (any value when first is ""), else fallback.
func AppendCompact(b []byte, raw []byte, first string, fallback string) []byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (first != "" && strings.IndexByte(first, t[0]) < 0) {
		return append(b, fallback...)
	}
	var buf bytes.Buffer
	buf.Grow(len(t))
	if err := json.Compact(&buf, t); err != nil {
		return append(b, fallback...)
	}
	return append(b, buf.Bytes()...)
}

// AppendFloat appends f as JavaScript prints a number (encoding/json
// formats floats as ES6 does; -0 is 0).
func AppendFloat(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if out, err := json.Marshal(f); err == nil {
		return append(b, out...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}
