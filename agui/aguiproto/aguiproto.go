// Package aguiproto is AG-UI's protobuf transport: an event in its JSON form
// becomes the length-prefixed frame @ag-ui/encoder 1.0.0 writes when the client
// accepts application/vnd.ag-ui.event+proto, and a frame reads back into the
// JSON form @ag-ui/proto 1.0.0's decode returns (package aguipbjson).
//
// The wire schema is proto/ag_ui/*.proto (read off @ag-ui/proto 1.0.0, see
// their headers). Encode writes it directly, with encoding/protowire from the
// field tables in schema.go, so the server links no protobuf runtime (its
// registry and generated descriptors cost up to 3 MB of RSS at start); the
// generated package aguipb, and aguipbjson, which reads frames back, are for
// tests, which hold Encode to proto.Marshal's bytes. Every field AG-UI 1.0's
// JSON events define has a wire form, RUN_FINISHED's outcome included
// (flattened into outcome, pendingToolCallIds and interrupts, as 1.0.0
// does). What the wire does not carry, here as in @ag-ui/proto: keys an event, message or
// interrupt has beyond its schema; an optional field set to null (absent
// instead); a success outcome's interrupts and an interrupt outcome's
// pendingToolCallIds; an assistant message's empty toolCalls; and the key
// order of objects inside state, metadata and other free JSON (Encode writes
// map entries sorted by key).
//
// Where @ag-ui/proto encodes best effort (an event its schema rejects is
// encoded as given, "undefined" and all), Encode is strict: a field of the
// wrong JSON type, an unknown event type, patch op, content part or source,
// a number beyond a double's range or a value nested deeper than MaxDepth is
// an error wrapping ErrInvalidEvent, so a producer's bug shows instead of
// reaching the client as a mangled event. A missing required field encodes
// as the wire's default ("" or empty), which is what the decoder then reads.
package aguiproto

//go:generate protoc -I proto --go_out=../.. --go_opt=module=github.com/opencode-server/opencode-server proto/ag_ui/patch.proto proto/ag_ui/types.proto proto/ag_ui/events.proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MediaType is the Content-Type of a protobuf event stream, exactly: the
// client (@ag-ui/client 1.0.0) compares the response's Content-Type to it
// with ===, so a parameter such as charset makes it read the stream as SSE.
const MediaType = "application/vnd.ag-ui.event+proto"

// MaxFrame is the largest frame (length prefix included) the client reads;
// a bigger one ends its stream with an error.
const MaxFrame = 10 << 20

// ErrInvalidEvent is wrapped by every error Encode returns for an event it
// cannot encode, and by aguipbjson's ReadFrame and JSON for bytes that are no
// event.
var ErrInvalidEvent = errors.New("aguiproto: invalid event")

// ErrTooLarge is wrapped when an event's frame would exceed MaxFrame.
var ErrTooLarge = errors.New("aguiproto: frame exceeds the client's 10 MiB limit")

func invalid(path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidEvent, path, fmt.Sprintf(format, args...))
}

// Encode returns the frame for one event: a 4-byte big-endian length, then
// the serialized ag_ui.Event. The event is its JSON form (what the SSE
// transport sends after "data: "): json.RawMessage or []byte as is, anything
// else (map[string]any, a struct) through encoding/json first.
//
// The bytes are those proto.Marshal (deterministic) writes for the generated
// aguipb.Event that aguipbjson.Event makes of the same JSON; Struct entries
// go in key order, so one event always gives the same bytes (@ag-ui/proto
// writes them in JavaScript's object key order instead, which protobuf
// readers do not see).
func Encode(event any) ([]byte, error) {
	var data []byte
	switch e := event.(type) {
	case json.RawMessage:
		data = e
	case []byte:
		data = e
	default:
		b, err := json.Marshal(event)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
		}
		data = b
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // integers (timestamp, token counts) are checked exactly, not through float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if dec.More() {
		return nil, invalid("", "more than one JSON value")
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("", "an event is a JSON object")
	}
	// The prefix is filled in last; a frame is seldom longer than its JSON.
	frame, err := appendEvent(make([]byte, 4, 4+len(data)), o)
	if err != nil {
		return nil, err
	}
	if len(frame) > MaxFrame {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, len(frame))
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame, nil
}

// Accepts reports whether an Accept header names MediaType with a non-zero
// q. Only the media type itself counts: a wildcard such as */* keeps SSE,
// the transport every client reads (@ag-ui/encoder's negotiation would pick
// protobuf for */*, which would hand curl and EventSource binary).
func Accepts(accept string) bool {
	for _, r := range strings.Split(accept, ",") {
		params := strings.Split(r, ";")
		if !strings.EqualFold(strings.TrimSpace(params[0]), MediaType) {
			continue
		}
		q := 1.0
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.Trim(strings.TrimSpace(v), `"`), 64)
				if err != nil {
					f = 0
				}
				q = f
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}
