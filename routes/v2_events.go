package routes

// The v2 event routes: a session's durable log (replay, then tail) and
// the native stream of every event.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/opencode-server/opencode-server/opencode"
)

// cursorParam parses an exclusive, non-negative integer cursor.
func cursorParam(v, name string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, badRequest("Query", name, "Expected an integer within range at [\""+name+"\"]")
	}
	if err != nil {
		return 0, badRequest("Query", name, "Expected an integer, got NaN at [\""+name+"\"]")
	}
	if n < 0 {
		return 0, badRequest("Query", name, "Expected a non-negative integer at [\""+name+"\"]")
	}
	return n, nil
}

func (s *Server) v2History(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	after, err := cursorParam(r.URL.Query().Get("after"), "after")
	if err != nil {
		return err
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return badRequest("Query", "limit", "Expected an integer from 1 to 100 at [\"limit\"]")
		}
		limit = n
	}
	evs, err := s.v2Log(r.Context(), id, after, limit+1)
	if err != nil {
		return err
	}
	more := len(evs) > limit
	if more {
		evs = evs[:limit]
	}
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(durablePayload(e))
	}
	b.WriteString(`],"hasMore":`)
	b.WriteString(strconv.FormatBool(more))
	b.WriteString("}")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b.Bytes())
	return nil
}

// v2Log reads up to limit of a session's v2 events (session.next.* and
// our session.inbox.*) with seq > after, in seq order. The log of a
// session replayed from another server (POST /sync/replay) holds its v1
// snapshots too (session.updated, message.updated, ...), which the v2
// routes do not show, as OpenCode's do not.
func (s *Server) v2Log(ctx context.Context, id string, after int64, limit int) ([]*opencode.Event, error) {
	var out []*opencode.Event
	for {
		want := limit - len(out)
		evs, err := s.m.Events(ctx, id, after, want)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			after = e.Seq
			if e.IsV2() {
				out = append(out, e)
			}
		}
		if len(evs) < want || len(out) >= limit {
			return out, nil
		}
	}
}

// replayPage is how many log events one store read returns during replay.
const replayPage = 1000

// v2SessionEvents replays the session's log after the cursor, then tails
// live durable events: it subscribes before reading the log and drops live
// events the replay already sent, so the seam has no gap and no duplicate.
func (s *Server) v2SessionEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	// Last-Event-ID wins: the SDK reconnects with its original URL (and its
	// original ?after=) plus the header naming the last event it got.
	cur := r.Header.Get("Last-Event-ID")
	if cur == "" {
		cur = r.URL.Query().Get("after")
	}
	after, err := cursorParam(cur, "after")
	if err != nil {
		return err
	}
	if _, err := s.m.GetSession(r.Context(), id); err != nil {
		return err
	}
	release, ok := s.streams.acquire(r)
	if !ok {
		return tooManyStreams
	}
	defer release()
	sub := s.m.Subscribe(subscriberQueue, func(e *opencode.Event) bool { return e.Durable && e.SessionID == id })
	sub.Track()
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	sent := after
	for {
		evs, err := s.m.Events(r.Context(), id, sent, replayPage)
		if err != nil {
			return nil // headers are out; the stream just ends
		}
		for _, e := range evs {
			if e.IsV2() && !sw.write(frameDurable(e)) {
				return nil
			}
			sent = e.Seq
		}
		if !sw.flush() {
			return nil
		}
		if len(evs) < replayPage {
			break
		}
	}
	s.pump(r, sw, sub, opencode.FrameDurable, frameDurable, func(e *opencode.Event) bool {
		if e.Seq <= sent {
			return true // sent by the replay
		}
		if e.Seq > sent+1 {
			// A gap: events relayed from another instance (scale-out) may
			// start past what this stream sent. The log fills it, so the
			// stream stays gapless whoever published.
			evs, _ := s.m.Events(r.Context(), id, sent, int(e.Seq-sent-1))
			for _, g := range evs {
				if g.Seq < e.Seq && (!g.IsV2() || sw.write(frameDurable(g))) {
					sent = g.Seq
				}
			}
		}
		sent = e.Seq
		return false
	})
	return nil
}

// frameNative is an /api/event frame: the v2 native payload {id, type,
// durable?, location?, data}, as OpenCode sends it.
func frameNative(e *opencode.Event) []byte {
	return e.Frame(opencode.FrameNative, func(e *opencode.Event) []byte {
		var b bytes.Buffer
		b.WriteString(`data: {"id":`)
		writeString(&b, e.ID)
		b.WriteString(`,"type":`)
		writeString(&b, e.Type)
		if e.Durable {
			writeDurableRef(&b, e)
		}
		if e.Directory != "" {
			b.WriteString(`,"location":{"directory":`)
			writeString(&b, e.Directory)
			b.WriteByte('}')
		}
		b.WriteString(`,"data":`)
		b.Write(e.Data)
		b.WriteString("}\n\n")
		return b.Bytes()
	})
}

func (s *Server) v2AllEvents(w http.ResponseWriter, r *http.Request) {
	release, ok := s.streams.acquire(r)
	if !ok {
		writeError(w, r, v2, s.log, tooManyStreams)
		return
	}
	defer release()
	sub := s.m.Subscribe(subscriberQueue, nil)
	sub.Track()
	defer sub.Close()
	sseHeaders(w)
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	if !sw.write(s.connectionFrame(opencode.FrameNative, opencode.EvServerConnected)) || !sw.flush() {
		return
	}
	s.pump(r, sw, sub, opencode.FrameNative, frameNative, nil)
}
