package openai

// Background responses and re-streaming. A response created with
// background: true is answered at once (queued or in_progress) and its
// turn runs on regardless of the client, as every turn does; its stream
// is recorded on the server from its admission, numbered as a stream of
// it, so a client may leave and re-attach with GET
// /v1/responses/{id}?stream=true&starting_after=N and get exactly the
// events after N. Any other response (or a background one this process
// no longer records: after a restart, or once forgotten) is re-streamed
// from the session's log, numbered from 0 as that re-stream goes.

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// maxRecordings bounds the background streams a handler remembers: past
// it the ended ones are forgotten, oldest first (a running one is kept).
const maxRecordings = 256

// frame is one recorded event.
type frame struct {
	typ  string
	data []byte
}

// recording is a background response's stream as the server makes it.
type recording struct {
	mu     sync.Mutex
	frames []frame
	done   bool
	// wake is closed (and replaced) when a frame is added or the stream
	// ends.
	wake chan struct{}
}

func newRecording() *recording { return &recording{wake: make(chan struct{})} }

func (rec *recording) add(typ string, b []byte) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.frames = append(rec.frames, frame{typ, b})
	close(rec.wake)
	rec.wake = make(chan struct{})
}

func (rec *recording) finish() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.done = true
	close(rec.wake)
	rec.wake = make(chan struct{})
}

// since is the frames from index i, whether the stream ended, and the
// channel closed at the next change.
func (rec *recording) since(i int) ([]frame, bool, <-chan struct{}) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []frame
	if i < len(rec.frames) {
		out = rec.frames[i:len(rec.frames):len(rec.frames)]
	}
	return out, rec.done, rec.wake
}

func (rec *recording) ended() bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.done
}

// recordings are the background streams by response ID.
type recordings struct {
	mu    sync.Mutex
	byID  map[string]*recording
	order []string
}

// start returns the recording of response id, and whether it is new (the
// caller then runs it).
func (rs *recordings) start(id string) (*recording, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rec := rs.byID[id]; rec != nil {
		return rec, false
	}
	if rs.byID == nil {
		rs.byID = map[string]*recording{}
	}
	if len(rs.order) >= maxRecordings {
		// Forget the ended ones, oldest first, down to three quarters.
		drop := len(rs.order) - maxRecordings*3/4
		keep := rs.order[:0]
		for _, k := range rs.order {
			if drop > 0 && rs.byID[k].ended() {
				delete(rs.byID, k)
				drop--
				continue
			}
			keep = append(keep, k)
		}
		rs.order = keep
	}
	rec := newRecording()
	rs.byID[id] = rec
	rs.order = append(rs.order, id)
	return rec, true
}

func (rs *recordings) get(id string) *recording {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.byID[id]
}

// background runs a response's stream into its recording until the
// response ends (or the server shuts down): the turn's events are mapped
// whether or not a client reads them. It owns sub.
func (h *Handler) background(sp streamSpec, sub *eventbus.Subscription) *recording {
	id := sp.in.ID
	if sp.after != "" {
		id = sp.after
	}
	rec, fresh := h.recs.start(id)
	if !fresh {
		sub.Close()
		return rec
	}
	ctx := context.Background()
	s := h.newStreamer(ctx, sp.in, sp.skip)
	s.mine = sp.after != ""
	s.emit = func(typ string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		rec.add(typ, b)
		return nil
	}
	go func() {
		defer rec.finish()
		defer sub.Close()
		h.follow(ctx, s, sp, sub)
	}()
	return rec
}

// replay serves a recording as server-sent events from the event after
// sequence number after (-1: all).
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, rec *recording, after int64) {
	sseHeader(w)
	rc := http.NewResponseController(w)
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	next := int(max(after+1, 0))
	for {
		frames, done, wake := rec.since(next)
		for _, f := range frames {
			if _, err := w.Write([]byte("event: " + f.typ + "\ndata: " + string(f.data) + "\n\n")); err != nil {
				return
			}
			next++
		}
		if err := rc.Flush(); err != nil || done && len(frames) == 0 {
			return
		}
		if len(frames) > 0 {
			continue // the stream may have ended meanwhile
		}
		select {
		case <-wake:
		case <-heartbeat.C:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
		case <-r.Context().Done():
			return // the client left; the response goes on
		case <-h.o.Done:
			return
		}
	}
}

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// retrieveParams reads GET /v1/responses/{id}'s stream (the query's, or
// a JSON body's: openai-go's GetStreaming sends {"stream": true}) and
// starting_after (-1: none).
func retrieveParams(w http.ResponseWriter, r *http.Request) (stream bool, after int64, err error) {
	q := r.URL.Query()
	if v := q.Get("stream"); v != "" {
		if stream, err = strconv.ParseBool(v); err != nil {
			return false, 0, invalid("stream", "invalid_type", "stream must be true or false")
		}
	}
	if r.Body != nil && r.ContentLength != 0 {
		body, err := readBody(w, r)
		if err != nil {
			return false, 0, err
		}
		var b struct {
			Stream *bool `json:"stream"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &b); err != nil {
				return false, 0, invalid("", "", "The body is not a valid request: "+err.Error())
			}
			if b.Stream != nil {
				stream = stream || *b.Stream
			}
		}
	}
	after = -1
	if v := q.Get("starting_after"); v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			return false, 0, invalid("starting_after", "invalid_type", "starting_after must be a sequence number (an integer, 0 or more)")
		}
		if !stream {
			return false, 0, invalid("starting_after", "invalid_value", "starting_after is for a stream: give stream=true")
		}
		after = n
	}
	return stream, after, nil
}

// restream serves GET /v1/responses/{id}?stream=true: the recorded stream
// of a background response after starting_after, or else the response
// streamed from the session's log (and live to its end), the events up
// to starting_after left out.
func (h *Handler) restream(w http.ResponseWriter, r *http.Request, id string, after int64) {
	ctx := r.Context()
	in, cont, err := h.locate(ctx, id)
	if err != nil {
		h.WriteError(w, r, err)
		return
	}
	if rec := h.recs.get(id); rec != nil {
		h.replay(w, r, rec, after)
		return
	}
	sp := streamSpec{in: in, after: cont, existed: true}
	if cont != "" {
		conv, err := h.o.Core.Messages(ctx, in.SessionID)
		if err != nil {
			h.WriteError(w, r, err)
			return
		}
		// The turn before the continuation is not its.
		sp.skip = map[string]bool{}
		for _, m := range conv {
			sp.skip[m.Info.ID] = true
			if m.Info.ID == cont {
				break
			}
		}
	}
	sub := h.o.Core.Subscribe(1<<14, func(e *opencode.Event) bool { return e.SessionID == in.SessionID && wanted(e) })
	defer sub.Close()
	sp.from = after + 1
	h.streamAt(w, r, sp, sub)
}

// createBackground serves a background POST /v1/responses once admitted:
// the stream is recorded on the server, and the answer is the response
// as it stands (queued or in_progress), or its stream from the start.
func (h *Handler) createBackground(w http.ResponseWriter, r *http.Request, sp streamSpec, sub *eventbus.Subscription, stream bool) {
	rec := h.background(sp, sub)
	if stream {
		h.replay(w, r, rec, -1)
		return
	}
	id := sp.in.ID
	if sp.after != "" {
		id = sp.after
	}
	h.respond(w, r, id)
}

// checkBackground validates background: a background response is stored
// (store: false is a 400, as OpenAI's); the HTTP steer is not taken in
// the background yet.
func (t *turn) checkBackground() error {
	if !t.req.Background {
		return nil
	}
	switch {
	case t.req.Store != nil && !*t.req.Store:
		return invalid("store", "invalid_value", "background responses are stored: store cannot be false with background")
	case t.req.Delivery == "steer":
		return invalid("background", "unsupported_parameter", "a steer (delivery steer) cannot be a background response yet")
	}
	return nil
}
