// Package aguipbjson is AG-UI's protobuf transport through the generated
// aguipb types: an event's JSON form to an aguipb.Event (Event, mapping it as
// @ag-ui/proto 1.0.0's encode does), an envelope to its frame (Frame), and a
// frame back to the JSON form 1.0.0's decode returns (ReadFrame, JSON).
//
// Tests only. It links the protobuf runtime (protoimpl, the registry, the
// generated descriptors), up to 3 MB of RSS the server does not pay: the
// server only encodes, and aguiproto.Encode writes the wire directly. Here
// the same mapping, done through protoreflect and proto.Marshal, is the
// reference aguiproto's tests hold Encode to byte for byte, and the decoder
// that reads its frames back.
package aguipbjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/opencode-server/opencode-server/agui/aguiproto"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipb"
)

func invalid(path, format string, args ...any) error {
	if path == "" {
		return fmt.Errorf("%w: %s", aguiproto.ErrInvalidEvent, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%w: %s: %s", aguiproto.ErrInvalidEvent, path, fmt.Sprintf(format, args...))
}

// Event converts one event in its JSON form (as aguiproto.Encode takes it)
// to the protobuf envelope, mapping it as @ag-ui/proto 1.0.0's encode does.
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
			return nil, fmt.Errorf("%w: %v", aguiproto.ErrInvalidEvent, err)
		}
		data = b
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // integers (timestamp, token counts) are checked exactly, not through float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", aguiproto.ErrInvalidEvent, err)
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
// fields) go in key order, as aguiproto.Encode writes them.
func Frame(ev *aguipb.Event) ([]byte, error) {
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", aguiproto.ErrInvalidEvent, err)
	}
	if 4+len(body) > aguiproto.MaxFrame {
		return nil, fmt.Errorf("%w (%d bytes)", aguiproto.ErrTooLarge, 4+len(body))
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
	if 4+uint64(n) > aguiproto.MaxFrame {
		return nil, fmt.Errorf("%w (%d bytes)", aguiproto.ErrTooLarge, 4+uint64(n))
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
		return nil, fmt.Errorf("%w: %v", aguiproto.ErrInvalidEvent, err)
	}
	return ev, nil
}
