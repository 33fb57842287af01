package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/eventbus"
	"github.com/opencode-server/opencode-server/opencode"
)

// wanted is the events a response's stream looks at: the durable ones
// (the v2 step, text and prompt events among them) and the live text
// deltas.
func wanted(e *opencode.Event) bool {
	return e.Durable || e.Type == opencode.EvTextDelta || e.Type == opencode.EvToolInputDelta || e.Type == opencode.EvReasoningDelta
}

// The streamed events, in OpenAI's shapes. None has a top-level "error"
// key: the SDKs read any as a stream error.
type (
	responseEvent struct {
		Type           string    `json:"type"`
		SequenceNumber int64     `json:"sequence_number"`
		Response       *Response `json:"response"`
	}
	itemEvent struct {
		Type           string     `json:"type"`
		SequenceNumber int64      `json:"sequence_number"`
		OutputIndex    int        `json:"output_index"`
		Item           outputItem `json:"item"`
	}
	partEvent struct {
		Type           string     `json:"type"`
		SequenceNumber int64      `json:"sequence_number"`
		ItemID         string     `json:"item_id"`
		OutputIndex    int        `json:"output_index"`
		ContentIndex   int        `json:"content_index"`
		Part           outputText `json:"part"`
	}
	textEvent struct {
		Type           string     `json:"type"`
		SequenceNumber int64      `json:"sequence_number"`
		ItemID         string     `json:"item_id"`
		OutputIndex    int        `json:"output_index"`
		ContentIndex   int        `json:"content_index"`
		Delta          *string    `json:"delta,omitempty"`
		Text           *string    `json:"text,omitempty"`
		Logprobs       []struct{} `json:"logprobs"`
	}
)

// textStream is one text part of an output item: what was sent of it.
type textStream struct {
	item  *itemStream
	index int
	sent  strings.Builder
	// catchUp: first seen in the log (a retry attached to a running or
	// ended turn): its earlier deltas were never seen, so it sends its
	// whole text when it ends.
	catchUp bool
	done    bool
}

// itemStream is one output item (an assistant message) being streamed.
type itemStream struct {
	id    string
	index int
	texts []*textStream
	done  bool
}

// streamer maps a session's events to one response's stream.
type streamer struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	err  error
	seq  int64
	id   string // the response: its user message
	mine bool   // the user message was delivered: its turn runs
	over bool   // a later queued turn began, or a steer was delivered: ours is over
	// successor is the steer whose delivery ended the response: the
	// response that carries the rest of the turn.
	successor string
	// settle, if set, runs before a steered response's terminal event,
	// with the steer's ID (the WebSocket answers the steer first).
	settle func(steer string)
	last   int64 // the last durable event's sequence mapped
	// steps are the assistant messages of the turn whose steps began
	// while the response was mapped.
	steps []string
	// hold: more events are at hand; written, they are flushed together.
	hold bool
	// dropped: the bus cut the subscription off (it fell behind); the
	// rest of the turn is read from the log.
	dropped bool
	// items are the output items in order, by message ID in byMsg.
	items []*itemStream
	byMsg map[string]*itemStream
	texts map[string]*textStream
	tc    toolStream
	// reasons are the reasoning items by their event key, reasonsOf by
	// step, reasonOrder in order; storedPart reads a step's part.
	reasons     map[string]*reasonStream
	reasonsOf   map[string][]*reasonStream
	reasonOrder []*reasonStream
	storedPart  func(msgID string, match func(opencode.Part) bool) *opencode.Part
	// from is the first sequence number written: a re-stream's client
	// has those before (starting_after).
	from int64
	// emit, if set, writes the events in another shape (chat
	// completions' chunks) or elsewhere (the WebSocket) instead.
	emit func(typ string, v any) error
}

func (s *streamer) write(typ string, v any) {
	if s.err != nil || s.seq-1 < s.from {
		return // failed, or an event the client has (starting_after)
	}
	if s.emit != nil {
		s.err = s.emit(typ, v)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	if _, s.err = s.w.Write([]byte("event: " + typ + "\ndata: " + string(b) + "\n\n")); s.err == nil && !s.hold {
		s.err = s.rc.Flush()
	}
}

// flush sends what the held writes left buffered.
func (s *streamer) flush() {
	s.hold = false
	if s.err == nil && s.w != nil {
		s.err = s.rc.Flush()
	}
}

func (s *streamer) next() int64 {
	n := s.seq
	s.seq++
	return n
}

func (s *streamer) response(typ string, r *Response) {
	s.write(typ, responseEvent{Type: typ, SequenceNumber: s.next(), Response: r})
}

// item is the output item of an assistant message, added if new.
func (s *streamer) item(msgID string) *itemStream {
	if it := s.byMsg[msgID]; it != nil {
		return it
	}
	it := &itemStream{id: msgID, index: len(s.items)}
	s.items = append(s.items, it)
	s.byMsg[msgID] = it
	s.write("response.output_item.added", itemEvent{Type: "response.output_item.added", SequenceNumber: s.next(),
		OutputIndex: it.index, Item: outputItem{ID: msgID, Type: "message", Role: "assistant", Status: statusInProgress, Content: []outputText{}}})
	return it
}

func (s *streamer) startText(partID, msgID string, replay bool) *textStream {
	if t := s.texts[partID]; t != nil {
		return t
	}
	s.closeReasoning(msgID)
	it := s.item(msgID)
	t := &textStream{item: it, index: len(it.texts), catchUp: replay}
	it.texts = append(it.texts, t)
	s.texts[partID] = t
	s.write("response.content_part.added", partEvent{Type: "response.content_part.added", SequenceNumber: s.next(),
		ItemID: it.id, OutputIndex: it.index, ContentIndex: t.index, Part: newOutputText("")})
	return t
}

func (s *streamer) delta(t *textStream, d string) {
	if d == "" {
		return
	}
	t.sent.WriteString(d)
	s.write("response.output_text.delta", textEvent{Type: "response.output_text.delta", SequenceNumber: s.next(),
		ItemID: t.item.id, OutputIndex: t.item.index, ContentIndex: t.index, Delta: &d, Logprobs: []struct{}{}})
}

// endText ends a text with its stored text: what the deltas did not
// carry of it goes out as one more delta first, so the deltas always add
// up to the text.
func (s *streamer) endText(t *textStream, text string) {
	if t.done {
		return
	}
	if rest, ok := strings.CutPrefix(text, t.sent.String()); ok {
		s.delta(t, rest)
	}
	t.done = true
	s.write("response.output_text.done", textEvent{Type: "response.output_text.done", SequenceNumber: s.next(),
		ItemID: t.item.id, OutputIndex: t.item.index, ContentIndex: t.index, Text: &text, Logprobs: []struct{}{}})
	s.write("response.content_part.done", partEvent{Type: "response.content_part.done", SequenceNumber: s.next(),
		ItemID: t.item.id, OutputIndex: t.item.index, ContentIndex: t.index, Part: newOutputText(text)})
}

// endItem ends an assistant message's item with the texts it streamed.
func (s *streamer) endItem(it *itemStream) {
	if it == nil || it.done {
		return
	}
	out := outputItem{ID: it.id, Type: "message", Role: "assistant", Status: statusCompleted}
	for _, t := range it.texts {
		s.endText(t, t.sent.String())
		out.Content = append(out.Content, newOutputText(t.sent.String()))
	}
	it.done = true
	s.write("response.output_item.done", itemEvent{Type: "response.output_item.done", SequenceNumber: s.next(),
		OutputIndex: it.index, Item: out})
}

func data[T any](e *opencode.Event) T {
	var v T
	_ = json.Unmarshal(e.Data, &v)
	return v
}

// add maps one event; replay is true for the log read before the stream
// went live.
func (s *streamer) add(e *opencode.Event, replay bool) {
	if e.Durable {
		if e.Seq <= s.last {
			return // mapped already
		}
		s.last = e.Seq
	}
	if s.over {
		return
	}
	if e.Type == opencode.EvPrompted {
		p := data[opencode.Prompted](e)
		switch {
		case p.MessageID == s.id:
			s.mine = true
		case s.mine && p.Delivery == opencode.Queue:
			s.over = true // the next turn is another response's
		case s.mine && p.Delivery == opencode.Steer:
			// Steered: the rest of the turn is the steer's response (or,
			// if our turn ended first, the steer starts the next turn).
			s.over, s.successor = true, p.MessageID
		}
		return
	}
	if !s.mine {
		return // an earlier turn, before ours was delivered
	}
	if s.skipped(e) {
		return
	}
	switch e.Type {
	case opencode.EvStepStarted:
		s.steps = append(s.steps, data[opencode.StepStarted](e).AssistantMessageID)
	case opencode.EvTextStarted:
		p := data[opencode.TextStarted](e)
		s.startText(p.TextID, p.AssistantMessageID, replay)
	case opencode.EvTextDelta:
		p := data[opencode.TextDelta](e)
		if t := s.texts[p.TextID]; t != nil && !t.catchUp && !t.done {
			s.delta(t, p.Delta)
		}
	case opencode.EvTextEnded:
		p := data[opencode.TextEnded](e)
		s.endText(s.startText(p.TextID, p.AssistantMessageID, replay), p.Text)
	case opencode.EvStepEnded:
		s.endItem(s.byMsg[data[opencode.StepEnded](e).AssistantMessageID])
	case opencode.EvStepFailed:
		s.endItem(s.byMsg[data[opencode.StepFailed](e).AssistantMessageID])
	default:
		if !s.reasoningEvent(e, replay) {
			s.toolEvent(e, replay)
		}
	}
}

// readLog maps the session's durable events after the last one mapped.
func (s *streamer) readLog(ctx context.Context, core Core, sid string) error {
	for !s.over {
		evs, err := core.Events(ctx, sid, s.last, 500)
		if err != nil {
			return err
		}
		for _, e := range evs {
			s.add(e, true)
		}
		if len(evs) < 500 {
			return nil
		}
	}
	return nil
}

// drain maps what the subscription holds now, without waiting, up to
// the end of the response (what follows is a successor's).
func (s *streamer) drain(sub *eventbus.Subscription) {
	for !s.over {
		select {
		case e, ok := <-sub.C:
			if !ok {
				s.dropped = true
				return
			}
			s.add(e, false)
			sub.Ack(e.Pos)
		default:
			return
		}
	}
}

// stream serves a response as OpenAI's server-sent events: created and
// in_progress, then its turn's output items as they run, then
// response.completed (or .incomplete, .failed) with the response read
// from the session. A retried request (existed) first reads its turn from
// the log.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, in *opencode.Input, existed bool, sub *eventbus.Subscription) {
	h.streamAt(w, r, streamSpec{in: in, existed: existed}, sub)
}

// streamSpec is what streamAt streams: a response of input in's turn,
// the first, or the continuation after the client calls of assistant
// message after, whose turn so far (skip) is not streamed; existed: a
// retry, whose turn so far is read from the log first.
type streamSpec struct {
	in      *opencode.Input
	after   string
	skip    map[string]bool
	existed bool
	emit    func(typ string, v any) error
	// from: the events numbered before are not written (starting_after).
	from int64
}

// streamAt streams a response (see streamSpec) as server-sent events.
func (h *Handler) streamAt(w http.ResponseWriter, r *http.Request, sp streamSpec, sub *eventbus.Subscription) {
	sseHeader(w)
	s := h.newStreamer(r.Context(), sp.in, sp.skip)
	s.w, s.rc = w, http.NewResponseController(w)
	s.mine, s.emit, s.from = sp.after != "", sp.emit, sp.from
	h.follow(r.Context(), s, sp, sub)
}

func (h *Handler) newStreamer(ctx context.Context, in *opencode.Input, skip map[string]bool) *streamer {
	return &streamer{id: in.ID, byMsg: map[string]*itemStream{}, texts: map[string]*textStream{},
		tc: h.newToolStream(ctx, in, skip),
		storedPart: func(msgID string, match func(opencode.Part) bool) *opencode.Part {
			return h.storedPart(ctx, in.SessionID, msgID, match)
		}}
}

// follow streams one response on s until its terminal event: created and
// in_progress, its output items, then the terminal event. A successor's
// streamer comes with mine set and the log position of its delivery (its
// predecessor's stream mapped the events up to there). It reports
// whether the terminal event went out; s.successor then names the steer
// that ended the response, if one did.
func (h *Handler) follow(ctx context.Context, s *streamer, sp streamSpec, sub *eventbus.Subscription) bool {
	in, after, existed := sp.in, sp.after, sp.existed
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	core := h.o.Core
	start := h.startOf(ctx, in, after)
	s.response("response.created", start)
	s.response("response.in_progress", start)

	// The turn's end: the core answers Wait once the turn's events are
	// committed and published.
	type waited struct {
		res opencode.Result
		err error
	}
	ended := make(chan waited, 1)
	go func() {
		res, err := core.Wait(ctx, in.SessionID, in.ID)
		ended <- waited{res, err}
	}()
	var end *waited
	if s.last == 0 {
		// What the log holds before the admission is not this response's
		// (a successor starts where its predecessor's stream stopped).
		s.last = max(in.AdmittedSeq-1, 0)
	}
	if existed {
		if err := s.readLog(ctx, core, in.SessionID); err != nil {
			h.o.Logger.Warn("openai: the session's log could not be read", "session", in.SessionID, "err", err)
		}
	}
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	waiting := h.watch(ctx, in)
	live := sub.C
loop:
	for s.err == nil && !(s.over && (s.tc.cut != "" || s.successor != "")) {
		select {
		case e, ok := <-live:
			if !ok {
				live, s.dropped = nil, true // fell behind: the log has the rest once the turn ends
				continue
			}
			// Events already queued go out in one flush.
			s.hold = len(live) > 0
			s.add(e, false)
			sub.Ack(e.Pos)
		case ids := <-waiting:
			// The core answers only once the step's events are on the
			// bus: they are mapped first.
			s.drain(sub)
			if s.handed(ids) {
				break loop
			}
		case w := <-ended:
			end = &w
			break loop
		case <-heartbeat.C:
			// A comment keeps proxies from closing a quiet stream; the
			// SDKs' SSE decoders skip it (a WebSocket has no w).
			if s.w != nil {
				if _, s.err = s.w.Write([]byte(": keep-alive\n\n")); s.err == nil {
					s.err = s.rc.Flush()
				}
			}
		case <-ctx.Done():
			return false // the client left: its turn goes on in the core
		case <-h.o.Done:
			return false
		}
	}
	if s.hold {
		s.flush()
	}
	if s.err != nil {
		if !errors.Is(s.err, context.Canceled) {
			h.o.Logger.Debug("openai: the client left the stream", "response", in.ID, "err", s.err)
		}
		return false
	}
	s.drain(sub)
	// The core answers Wait once the turn's events are on the bus, so a
	// subscription that kept up has them all.
	if s.dropped {
		if err := s.readLog(ctx, core, in.SessionID); err != nil {
			h.o.Logger.Warn("openai: the session's log could not be read", "session", in.SessionID, "err", err)
		}
	}
	s.endReasonings()
	for _, it := range s.items {
		s.endItem(it)
	}
	s.endCalls()
	var final *Response
	var err error
	var last *opencode.MessageWithParts
	if end != nil && end.err == nil && end.res.Message.Info.ID != "" {
		last = &end.res.Message
	}
	if last != nil && after == "" && s.successor == "" && end.res.Seq > 0 {
		h.ends.put(in.ID, turnEnd{session: in.SessionID, answer: last.Info.ID, seq: end.res.Seq})
	}
	if last != nil && !existed && !s.dropped && after == "" && s.successor == "" &&
		len(s.steps) == 1 && s.steps[0] == last.Info.ID {
		// A turn of one step that ended: the core answered its message as
		// committed, so the response is composed from it without reading
		// the session again.
		done := *in
		done.State, done.Answer = opencode.InputDelivered, last.Info.ID
		final, err = h.compose(ctx, header(&done), &done, nil, []opencode.MessageWithParts{*last}, false, "")
	} else {
		final, err = h.final(ctx, in.ID, after)
	}
	if err != nil {
		h.o.Logger.Warn("openai: the response could not be read", "response", start.ID, "err", err)
		final = start
		final.Status = statusFailed
		final.Error = &responseError{Code: "server_error", Message: "the response could not be read; GET /v1/responses/" + start.ID + " has it"}
	}
	if s.successor != "" && s.settle != nil {
		s.settle(s.successor)
	}
	switch final.Status {
	case statusCompleted:
		s.response("response.completed", final)
	case statusIncomplete:
		s.response("response.incomplete", final)
	default:
		s.response("response.failed", final)
	}
	return s.err == nil
}

// final reads a response once its turn ended.
func (h *Handler) final(ctx context.Context, id, after string) (*Response, error) {
	in, err := h.find(ctx, id)
	if err != nil {
		return nil, err
	}
	return h.buildAt(ctx, in, after)
}
