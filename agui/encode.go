package agui

import (
	"encoding/json"
	"net/http"

	"github.com/opencode-server/opencode-server/agui/aguiproto"
)

// encoder writes a run's events in the format the client asked for:
// AG-UI's protobuf frames when its Accept names their media type, else
// SSE (`data: <json>\n\n`, LF only).
type encoder interface {
	contentType() string
	write(w http.ResponseWriter, ev event) error
	// keepAlive writes what keeps a quiet stream open, if the format
	// has anything that is no event.
	keepAlive(w http.ResponseWriter) error
}

func newEncoder(accept string) encoder {
	if aguiproto.Accepts(accept) {
		return protoEncoder{}
	}
	return sseEncoder{}
}

type sseEncoder struct{}

func (sseEncoder) contentType() string { return "text/event-stream" }

func (sseEncoder) write(w http.ResponseWriter, ev event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, '\n', '\n')
	_, err = w.Write(buf)
	return err
}

// keepAlive is an SSE comment: the client reads only data lines.
func (sseEncoder) keepAlive(w http.ResponseWriter) error {
	_, err := w.Write([]byte(":\n\n"))
	return err
}

type protoEncoder struct{}

func (protoEncoder) keepAlive(http.ResponseWriter) error { return nil }

func (protoEncoder) contentType() string { return aguiproto.MediaType }

func (protoEncoder) write(w http.ResponseWriter, ev event) error {
	frame, err := aguiproto.Encode(map[string]any(ev))
	if err != nil {
		return err
	}
	_, err = w.Write(frame)
	return err
}
