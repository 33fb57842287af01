package routes

// SSE is written by hand on net/http rather than with github.com/r3labs/sse/v2:
// that library always writes an `id:` line (OpenCode's /event frames have
// none), its publish blocks on one slow client, and its client goroutines
// outlive removed streams. Here each stream is one goroutine reading a
// bounded eventbus subscription, with a write deadline per frame, and every
// event is encoded once for all subscribers (opencode.Event.Frame).

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// subscriberQueue is each SSE client's buffer; a client that falls this far
// behind is cut off (v1 clients reconnect, v2 clients resume from a cursor).
const subscriberQueue = 2048

// writeTimeout bounds one frame write so a client that stops reading cannot
// hold its goroutine forever.
const writeTimeout = 10 * time.Second

// encodeV1 is the /event payload {id, type, properties}. Durable v2 events
// carry `timestamp` as epoch ms in their log data but as an ISO string on
// /event, as the real server does.
func encodeV1Payload(e *opencode.Event) []byte {
	props := e.Data
	if e.IsV2() {
		props = isoTimestamp(props)
	}
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeString(&b, e.ID)
	b.WriteString(`,"type":`)
	writeString(&b, e.Type)
	b.WriteString(`,"properties":`)
	b.Write(props)
	b.WriteByte('}')
	return b.Bytes()
}

func isoTimestamp(data json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	ts, ok := m["timestamp"]
	if !ok {
		return data
	}
	ms, err := strconv.ParseInt(string(ts), 10, 64)
	if err != nil {
		return data
	}
	iso, _ := json.Marshal(time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
	m["timestamp"] = iso
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

func writeString(b *bytes.Buffer, s string) {
	j, _ := json.Marshal(s)
	b.Write(j)
}

// frameV1 is the whole /event frame, encoded once per event.
func frameV1(e *opencode.Event) []byte {
	return e.Frame(opencode.FrameV1, func(e *opencode.Event) []byte {
		p := encodeV1Payload(e)
		out := make([]byte, 0, len(p)+8)
		out = append(out, "data: "...)
		out = append(out, p...)
		return append(out, "\n\n"...)
	})
}

// frameGlobal is the whole /global/event frame: the /event payload wrapped
// as {directory, project, payload}. Every project here is "global" (the
// projectID sessions carry).
func frameGlobal(e *opencode.Event) []byte {
	return e.Frame(opencode.FrameGlobal, func(e *opencode.Event) []byte {
		v1 := frameV1(e)
		payload := v1[len("data: ") : len(v1)-2]
		var b bytes.Buffer
		b.WriteString(`data: {"directory":`)
		writeString(&b, e.Directory)
		if e.Directory != "" {
			b.WriteString(`,"project":"global"`)
		}
		b.WriteString(`,"payload":`)
		b.Write(payload)
		b.WriteString("}\n\n")
		return b.Bytes()
	})
}

// frameDurable is a /api/session/{id}/event frame: an `id:` line with the
// sequence (so EventSource resumes by itself; OpenCode's clients ignore it)
// and the durable payload {id, type, durable, data}.
func frameDurable(e *opencode.Event) []byte {
	return e.Frame(opencode.FrameDurable, encodeDurableFrame)
}

func encodeDurableFrame(e *opencode.Event) []byte {
	var b bytes.Buffer
	b.WriteString("id: ")
	b.WriteString(strconv.FormatInt(e.Seq, 10))
	b.WriteString("\ndata: ")
	b.Write(durablePayload(e))
	b.WriteString("\n\n")
	return b.Bytes()
}

func durablePayload(e *opencode.Event) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	writeString(&b, e.ID)
	b.WriteString(`,"type":`)
	writeString(&b, e.Type)
	writeDurableRef(&b, e)
	b.WriteString(`,"data":`)
	b.Write(e.Data)
	b.WriteByte('}')
	return b.Bytes()
}

// writeDurableRef writes a durable event's `,"durable":{aggregateID, seq,
// version}` member.
func writeDurableRef(b *bytes.Buffer, e *opencode.Event) {
	b.WriteString(`,"durable":{"aggregateID":`)
	writeString(b, e.SessionID)
	b.WriteString(`,"seq":`)
	b.WriteString(strconv.FormatInt(e.Seq, 10))
	b.WriteString(`,"version":`)
	b.WriteString(strconv.Itoa(max(e.Version, 1)))
	b.WriteByte('}')
}

// connectionFrame is a frame the stream itself originates (connected,
// heartbeat); its event ID is the stream's own, not one lifecycle owns.
func (s *Server) connectionFrame(kind opencode.FrameKind, typ string) []byte {
	if kind == opencode.FrameNative {
		// /api/event: {id, type, data}; heartbeats are SSE comments.
		if typ == opencode.EvHeartbeat {
			return []byte(": heartbeat\n\n")
		}
		return []byte(`data: {"id":"` + s.ids.NewEvent() + `","type":"` + typ + `","data":{}}` + "\n\n: heartbeat\n\n")
	}
	payload := `{"id":"` + s.ids.NewEvent() + `","type":"` + typ + `","properties":{}}`
	if kind == opencode.FrameGlobal {
		return []byte(`data: {"payload":` + payload + "}\n\n")
	}
	return []byte("data: " + payload + "\n\n")
}

// sseHeaders are the headers the real server sends on /event.
func sseHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("x-accel-buffering", "no")
}

// eventStream serves /event and /global/event: server.connected first, then
// every bus event, with heartbeats, until the client goes or the server stops.
func (s *Server) eventStream(kind opencode.FrameKind) http.HandlerFunc {
	encode := frameV1
	if kind == opencode.FrameGlobal {
		encode = frameGlobal
	}
	return func(w http.ResponseWriter, r *http.Request) {
		release, ok := s.streams.acquire(r)
		if !ok {
			writeError(w, r, v1, s.log, tooManyStreams)
			return
		}
		defer release()
		// /event is one project's stream, as OpenCode serves it per
		// instance: events of sessions in other directories are left out
		// (at the bus, so a blocking POST elsewhere does not wait for this
		// stream). /global/event carries every directory and says which.
		var filter func(*opencode.Event) bool
		if kind == opencode.FrameV1 {
			dir := s.directory(r)
			filter = func(e *opencode.Event) bool { return e.Directory == "" || e.Directory == dir }
		}
		sub := s.m.Subscribe(subscriberQueue, filter)
		sub.Track()
		defer sub.Close()
		sseHeaders(w)
		w.WriteHeader(http.StatusOK)
		sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
		if !sw.write(s.connectionFrame(kind, opencode.EvServerConnected)) || !sw.flush() {
			return
		}
		s.pump(r, sw, sub, kind, encode, nil)
	}
}

// pump copies subscription events to the stream. skip drops events already
// sent by a replay.
func (s *Server) pump(r *http.Request, sw *streamWriter, sub *eventbus.Subscription, kind opencode.FrameKind,
	encode func(*opencode.Event) []byte, skip func(*opencode.Event) bool) {
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case e, ok := <-sub.C:
			if !ok {
				return // cut off for being slow, or shutting down
			}
			last := e.Pos
			if skip == nil || !skip(e) {
				if !sw.write(encode(e)) {
					return
				}
			}
			// Drain what is already queued before one flush.
		drain:
			for range 256 {
				select {
				case e, ok = <-sub.C:
					if !ok {
						sw.flush()
						return
					}
					last = e.Pos
					if skip == nil || !skip(e) {
						if !sw.write(encode(e)) {
							return
						}
					}
				default:
					break drain
				}
			}
			if !sw.flush() {
				return
			}
			sub.Ack(last)
		case <-hb.C:
			if kind == opencode.FrameDurable {
				continue // the v2 session stream has no heartbeats in the real server
			}
			if !sw.write(s.connectionFrame(kind, opencode.EvHeartbeat)) || !sw.flush() {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.cfg.Done:
			// The server is going away: drop the connection rather than end
			// the response cleanly. A clean end (the last chunk) reads as
			// "stream finished" and the SDK never reconnects; a cut
			// connection makes every client reconnect (with Last-Event-ID).
			panic(http.ErrAbortHandler)
		}
	}
}

type streamWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	armed bool // a write deadline is set for the current batch
}

// write buffers one frame; the first write after a flush sets the write
// deadline for the whole batch (one deadline per flush, not per frame).
func (sw *streamWriter) write(b []byte) bool {
	if !sw.armed {
		_ = sw.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		sw.armed = true
	}
	_, err := sw.w.Write(b)
	return err == nil
}

func (sw *streamWriter) flush() bool {
	if !sw.armed {
		_ = sw.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	sw.armed = false
	return sw.rc.Flush() == nil
}
