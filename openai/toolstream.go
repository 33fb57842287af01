package openai

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/opencode-server/opencode-server/opencode"
)

// The streamed events of function_call items.
type (
	callItemEvent struct {
		Type           string       `json:"type"`
		SequenceNumber int64        `json:"sequence_number"`
		OutputIndex    int          `json:"output_index"`
		Item           functionCall `json:"item"`
	}
	argsEvent struct {
		Type           string  `json:"type"`
		SequenceNumber int64   `json:"sequence_number"`
		ItemID         string  `json:"item_id"`
		OutputIndex    int     `json:"output_index"`
		Delta          *string `json:"delta,omitempty"`
		Arguments      *string `json:"arguments,omitempty"`
		Name           string  `json:"name,omitempty"`
	}
)

// callStream is one function_call item being streamed.
type callStream struct {
	item    functionCall
	index   int
	sent    strings.Builder
	catchUp bool // first seen in the log: its deltas were not
	done    bool
}

// toolStream is a stream's state of client calls.
type toolStream struct {
	names map[string]bool
	// skip are the messages before the response (a continuation's turn
	// so far): their events are not the response's.
	skip map[string]bool
	// cut is the step whose client calls end the response: a later
	// message is the next response's.
	cut   string
	calls map[string]*callStream // by call ID
	order []*callStream
	// part finds a call's tool part ID in the store.
	part func(messageID, callID string) string
}

// stepOf is the assistant message an event of a step is about ("" for
// other events).
func stepOf(e *opencode.Event) string {
	switch e.Type {
	case opencode.EvStepStarted, opencode.EvStepEnded, opencode.EvStepFailed,
		opencode.EvTextStarted, opencode.EvTextDelta, opencode.EvTextEnded,
		opencode.EvReasoningStarted, opencode.EvReasoningDelta, opencode.EvReasoningEnded,
		opencode.EvToolInputStarted, opencode.EvToolInputDelta, opencode.EvToolInputEnded,
		opencode.EvToolCalled, opencode.EvToolSuccess, opencode.EvToolFailed:
		return data[opencode.StepHeader](e).AssistantMessageID
	}
	return ""
}

// skipped reports whether an event of the turn is not this response's: a
// step before it, or one after its client calls (which ends it).
func (s *streamer) skipped(e *opencode.Event) bool {
	if len(s.tc.skip) == 0 && s.tc.cut == "" {
		return false // nothing to skip: no event is decoded twice
	}
	msg := stepOf(e)
	switch {
	case msg == "":
		return false
	case s.tc.skip[msg]:
		return true
	case s.tc.cut != "" && msg != s.tc.cut:
		s.over = true
		return true
	}
	return false
}

// toolEvent maps the events of a client call to its function_call item;
// the server's own calls are not items.
func (s *streamer) toolEvent(e *opencode.Event, replay bool) {
	if len(s.tc.names) == 0 {
		return // no client tools: no event to decode
	}
	switch e.Type {
	case opencode.EvToolInputStarted:
		p := data[opencode.ToolInputStarted](e)
		if s.tc.names[p.Name] {
			s.startCall(p.AssistantMessageID, p.CallID, p.Name, replay)
		}
	case opencode.EvToolInputDelta:
		p := data[opencode.ToolInputDelta](e)
		if c := s.tc.calls[p.CallID]; c != nil && !c.catchUp && !c.done {
			s.argsDelta(c, p.Delta)
		}
	case opencode.EvToolCalled:
		p := data[opencode.ToolCalled](e)
		if !s.tc.names[p.Tool] {
			return
		}
		args := string(p.Input)
		if len(p.Input) == 0 {
			args = "{}"
		}
		s.endCall(s.startCall(p.AssistantMessageID, p.CallID, p.Tool, replay), args)
	}
}

func (s *streamer) startCall(msgID, callID, name string, replay bool) *callStream {
	if c := s.tc.calls[callID]; c != nil {
		return c
	}
	s.closeReasoning(msgID)
	// Items go one after the other, as OpenAI's do: the step's message
	// item ends first if its text has.
	if it := s.byMsg[msgID]; it != nil && !it.done && !slices.ContainsFunc(it.texts, func(t *textStream) bool { return !t.done }) {
		s.endItem(it)
	}
	c := &callStream{index: len(s.items), catchUp: replay,
		item: functionCall{ID: s.tc.part(msgID, callID), Type: "function_call", CallID: callID, Name: name, Status: statusInProgress}}
	// A placeholder keeps the output indexes of message items after it;
	// done, so it is not ended as a message.
	s.items = append(s.items, &itemStream{id: c.item.ID, index: c.index, done: true})
	s.tc.calls[callID] = c
	s.tc.order = append(s.tc.order, c)
	s.tc.cut = msgID
	s.write("response.output_item.added", callItemEvent{Type: "response.output_item.added", SequenceNumber: s.next(),
		OutputIndex: c.index, Item: c.item})
	return c
}

func (s *streamer) argsDelta(c *callStream, d string) {
	if d == "" {
		return
	}
	c.sent.WriteString(d)
	s.write("response.function_call_arguments.delta", argsEvent{Type: "response.function_call_arguments.delta", SequenceNumber: s.next(),
		ItemID: c.item.ID, OutputIndex: c.index, Delta: &d})
}

// endCall ends a call with its arguments: what the deltas did not carry
// goes out as one more delta first.
func (s *streamer) endCall(c *callStream, args string) {
	if c.done {
		return
	}
	if rest, ok := strings.CutPrefix(args, c.sent.String()); ok {
		s.argsDelta(c, rest)
	}
	c.done = true
	c.item.Arguments, c.item.Status = args, statusCompleted
	s.write("response.function_call_arguments.done", argsEvent{Type: "response.function_call_arguments.done", SequenceNumber: s.next(),
		ItemID: c.item.ID, OutputIndex: c.index, Arguments: &args, Name: c.item.Name})
	s.write("response.output_item.done", callItemEvent{Type: "response.output_item.done", SequenceNumber: s.next(),
		OutputIndex: c.index, Item: c.item})
}

// endCalls ends the calls still open when the response ends (a turn
// aborted while the model streamed one) with what was sent of them.
func (s *streamer) endCalls() {
	for _, c := range s.tc.order {
		s.endCall(c, c.sent.String())
	}
}

// handed reports whether calls waiting for the client are this stream's.
func (s *streamer) handed(ids []string) bool {
	return slices.ContainsFunc(ids, func(id string) bool { return s.tc.calls[id] != nil })
}

// newToolStream is the tool state of a response of input in, after the
// steps in skip.
func (h *Handler) newToolStream(ctx context.Context, in *opencode.Input, skip map[string]bool) toolStream {
	return toolStream{names: clientNames(in), skip: skip, calls: map[string]*callStream{},
		part: func(messageID, callID string) string {
			// The part is committed before its events are published.
			ctx, cancel := context.WithTimeout(ctx, partLookup)
			defer cancel()
			m, err := h.o.Core.Message(ctx, in.SessionID, messageID)
			if err != nil {
				h.o.Logger.Warn("openai: a tool call's message could not be read", "session", in.SessionID, "message", messageID, "err", err)
				return ""
			}
			for _, p := range m.Parts {
				if p.Type == opencode.PartTool && p.CallID == callID {
					return p.ID
				}
			}
			return ""
		}}
}

// partLookup bounds the read of a call's tool part.
const partLookup = 10 * time.Second

// handOverPoll is how often a response with client tools asks the core
// whether its turn waits on the client alone: no event says when the
// model call returned and the step's server calls finished (AG-UI asks as
// often).
const handOverPoll = 20 * time.Millisecond

// watch sends the session's waiting client calls each time they change
// to a non-empty list, until ctx ends; nil for an input without client
// tools.
func (h *Handler) watch(ctx context.Context, in *opencode.Input) <-chan []string {
	if len(in.ClientTools) == 0 {
		return nil
	}
	out := make(chan []string)
	go func() {
		t := time.NewTicker(handOverPoll)
		defer t.Stop()
		var last []string
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ids, err := h.o.Core.WaitingClientCalls(ctx, in.SessionID)
			if err != nil || len(ids) == 0 || slices.Equal(ids, last) {
				if len(ids) == 0 {
					last = nil
				}
				continue
			}
			last = ids
			select {
			case out <- ids:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// settle waits until a response of input in (after: which one) is over:
// its turn ended, or it ends with client calls the turn now waits on.
func (h *Handler) settle(ctx context.Context, in *opencode.Input, after string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ended := make(chan error, 1)
	go func() {
		_, err := h.o.Core.Wait(ctx, in.SessionID, in.ID)
		ended <- err
	}()
	waiting := h.watch(ctx, in)
	for {
		select {
		case err := <-ended:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-waiting:
			// Waiting calls, maybe of another turn (ours is queued behind
			// it): the response says whether they are its.
			cur, err := h.find(ctx, in.ID)
			if err != nil {
				return err
			}
			if r, err := h.buildAt(ctx, cur, after); err == nil && r.Status != statusInProgress && r.Status != statusQueued {
				return nil
			}
		}
	}
}

// startOf is the response a stream starts with: the input's, or the
// continuation's (read from the session) with nothing of its turn yet.
func (h *Handler) startOf(ctx context.Context, in *opencode.Input, after string) *Response {
	r := header(in)
	if after != "" {
		if b, err := h.buildAt(ctx, in, after); err == nil {
			r = b
			r.Output, r.Usage, r.CompletedAt, r.Error = []outputItem{}, nil, nil, nil
		} else {
			r.ID = after
		}
	}
	r.Status = statusInProgress
	return r
}
