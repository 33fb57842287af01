package opencode

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// SyncEvent is one event of a session's sync history as POST /sync/replay
// takes it: OpenCode's SerializedEvent. Type is "<type>.<version>"; Seq is
// the event's place in the session's history (session.created.1 is 0).
type SyncEvent struct {
	ID          string
	AggregateID string
	Seq         int64
	Type        string
	Data        json.RawMessage
}

// SchemaPath is where in a request a schema issue is, as OpenCode's
// (Effect Schema's) messages name it: keys quoted, indices bare,
// ["events"][0]["seq"].
func SchemaPath(path ...any) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('[')
		switch v := p.(type) {
		case int:
			b.WriteString(strconv.Itoa(v))
		case string:
			b.WriteString(strconv.Quote(v))
		}
		b.WriteByte(']')
	}
	return b.String()
}

// SchemaIssue is one of OpenCode's schema messages: the issue, then where
// ("Missing key\n  at [\"directory\"]"). No path: the issue alone.
func SchemaIssue(issue string, path ...any) string {
	if len(path) == 0 {
		return issue
	}
	return issue + "\n  at " + SchemaPath(path...)
}

// Shown is a JSON value as OpenCode's schema messages show it ("got 1.5",
// "got \"x\"", "got {\"a\":1}"): compact JSON, numbers as JavaScript prints
// them; an absent value (nil) is undefined.
func Shown(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "undefined"
	}
	switch raw[0] {
	case '"', 't', 'f', 'n':
		return string(raw)
	case '{', '[':
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return b.String()
		}
		return string(raw)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return string(raw)
	}
	return JSNumber(f)
}

// JSNumber formats f as JavaScript's Number#toString does: plain digits
// from 1e-6 up to 1e21, an exponent with its sign beyond (1e+300).
func JSNumber(f float64) string {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
		return mant + "e" + sign + digits
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
