package apitest

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
)

// recorder passes a response through while keeping its status, headers and
// (unless it is an event stream) body for validation.
type recorder struct {
	http.ResponseWriter
	wroteHeader bool
	status      int
	header      http.Header
	stream      bool
	body        bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.wroteHeader {
		r.ResponseWriter.WriteHeader(status) // let net/http log the superfluous call
		return
	}
	r.wroteHeader = true
	r.status = status
	r.header = r.Header().Clone()
	ct, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	r.stream = ct == "text/event-stream"
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wroteHeader {
		if r.Header().Get("Content-Type") == "" {
			r.Header().Set("Content-Type", http.DetectContentType(b)) // as net/http would
		}
		r.WriteHeader(http.StatusOK)
	}
	if !r.stream {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, as the wrapped writer does.
func (r *recorder) Flush() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer
// (deadlines, flushing).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func decodeJSON(b []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}
