// Package aguiproto is AG-UI's protobuf transport: an event in its JSON form
// becomes the length-prefixed frame @ag-ui/encoder 1.0.0 writes when the client
// accepts application/vnd.ag-ui.event+proto, and a frame reads back into the
// JSON form @ag-ui/proto 1.0.0's decode returns.
//
// The wire schema is proto/ag_ui/*.proto (read off @ag-ui/proto 1.0.0, see their
// headers), compiled into package aguipb. Every field AG-UI 1.0's JSON events
// define has a wire form, RUN_FINISHED's outcome included (flattened into
// outcome, pendingToolCallIds and interrupts, as 1.0.0 does). What the wire
// does not carry, here as in @ag-ui/proto: keys an event, message or
// interrupt has beyond its schema; an optional field set to null (absent
// instead); a success outcome's interrupts and an interrupt outcome's
// pendingToolCallIds; an assistant message's empty toolCalls; and the key
// order of objects inside state, metadata and other free JSON (Frame writes
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
	"io"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
)

// MediaType is the Content-Type of a protobuf event stream, exactly: the
// client (@ag-ui/client 1.0.0) compares the response's Content-Type to it
// with ===, so a parameter such as charset makes it read the stream as SSE.
const MediaType = "application/vnd.ag-ui.event+proto"

// MaxFrame is the largest frame (length prefix included) the client reads;
// a bigger one ends its stream with an error.
const MaxFrame = 10 << 20

// ErrInvalidEvent is wrapped by every error Encode returns for an event it
// cannot encode, and by ReadFrame and JSON for bytes that are no event.
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
// the serialized aguipb.Event. The event is its JSON form (what the SSE
// transport sends after "data: "): json.RawMessage or []byte as is, anything
// else (map[string]any, a struct) through encoding/json first.
func Encode(event any) ([]byte, error) {
	ev, err := Event(event)
	if err != nil {
		return nil, err
	}
	return Frame(ev)
}

// Event converts one event in its JSON form (as Encode takes it) to the
// protobuf envelope, mapping it as @ag-ui/proto 1.0.0's encode does.
func Event(event any) (*aguipb.Event, error) {
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
	return fromJSON(o)
}

// Frame serializes an envelope and prefixes its length. Map entries (Struct
// fields) go in key order, so one event always gives the same bytes;
// @ag-ui/proto writes them in JavaScript's object key order instead, which
// protobuf readers do not see.
func Frame(ev *aguipb.Event) ([]byte, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if 4+len(body) > MaxFrame {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, 4+len(body))
	}
	frame := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(frame, uint32(len(body)))
	copy(frame[4:], body)
	return frame, nil
}

// ReadFrame reads one frame from r. At a clean end of stream it returns
// io.EOF; a stream cut inside a frame is io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (*aguipb.Event, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if 4+uint64(n) > MaxFrame {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, 4+uint64(n))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	ev := &aguipb.Event{}
	if err := proto.Unmarshal(body, ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return ev, nil
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
