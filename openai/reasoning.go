package openai

// Reasoning output items: each reasoning part of a step (the model's
// thinking, as the session stores it) is one "reasoning" output item
// under the part's prt_ ID, its text the item's one summary_text (none
// for a part without text). In the
// output a step's reasoning items come where their parts began, so
// usually before the step's message item; streamed, each is
// response.output_item.added, response.reasoning_summary_part.added,
// response.reasoning_summary_text.delta…, .done,
// response.reasoning_summary_part.done, response.output_item.done, in
// OpenAI's order.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/opencode"
)

// reasoningItem is a reasoning output item.
type reasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Summary []summaryText `json:"summary"`
	Status  string        `json:"status"`
}

// summaryText is a reasoning item's summary part.
type summaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// reasonItem is a reasoning item; one without text (a provider's
// encrypted reasoning, or none summarized) has no summary part, as
// OpenAI's.
func reasonItem(id, text, status string) outputItem {
	r := reasoningItem{ID: id, Type: "reasoning", Summary: []summaryText{}, Status: status}
	if text != "" {
		r.Summary = append(r.Summary, summaryText{Type: "summary_text", Text: text})
	}
	return outputItem{ID: id, Type: "reasoning", reasoning: &r}
}

// isReasoning reports whether a stored part is a reasoning item.
func isReasoning(p opencode.Part) bool { return p.Type == opencode.PartReasoning && !p.Ignored }

// reasoningParam is the request's reasoning: effort names the model's
// thinking variant (the user message's variant, as a TUI prompt picks
// one: a model without that variant runs with its defaults); summary is
// taken and answered back, the reasoning being always the summary.
type reasoningParam struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// reasoningEcho is the response's reasoning field.
type reasoningEcho struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// The streamed events of reasoning items.
type (
	summaryPartEvent struct {
		Type           string      `json:"type"`
		SequenceNumber int64       `json:"sequence_number"`
		ItemID         string      `json:"item_id"`
		OutputIndex    int         `json:"output_index"`
		SummaryIndex   int         `json:"summary_index"`
		Part           summaryText `json:"part"`
	}
	summaryTextEvent struct {
		Type           string  `json:"type"`
		SequenceNumber int64   `json:"sequence_number"`
		ItemID         string  `json:"item_id"`
		OutputIndex    int     `json:"output_index"`
		SummaryIndex   int     `json:"summary_index"`
		Delta          *string `json:"delta,omitempty"`
		Text           *string `json:"text,omitempty"`
	}
)

// reasonStream is one reasoning item being streamed.
type reasonStream struct {
	id      string
	index   int
	sent    strings.Builder
	catchUp bool // first seen in the log: its deltas were not
	// part: its summary part was added (at its first text).
	part bool
	done bool
}

// startReasoning adds the item of a reasoning part, if new.
func (s *streamer) startReasoning(key, msgID string, replay bool) *reasonStream {
	if r := s.reasons[key]; r != nil {
		return r
	}
	// Items go one after the other: the step's message item ends first
	// if its text has.
	if it := s.byMsg[msgID]; it != nil && !it.done && !slices.ContainsFunc(it.texts, func(t *textStream) bool { return !t.done }) {
		s.endItem(it)
	}
	id := key
	if identifier.Check(identifier.Part, key) != nil && s.storedPart != nil {
		// An external agent's "reasoning-0": the store derived the
		// part's ID; the step's n-th reasoning part is it.
		n := len(s.reasonsOf[msgID])
		if p := s.storedPart(msgID, func(p opencode.Part) bool {
			if p.Type != opencode.PartReasoning {
				return false
			}
			n--
			return n < 0
		}); p != nil {
			id = p.ID
		}
	}
	r := &reasonStream{id: id, index: len(s.items), catchUp: replay}
	// A placeholder keeps the output indexes; done, so not ended as a
	// message.
	s.items = append(s.items, &itemStream{id: id, index: r.index, done: true})
	if s.reasons == nil {
		s.reasons, s.reasonsOf = map[string]*reasonStream{}, map[string][]*reasonStream{}
	}
	s.reasons[key] = r
	s.reasonsOf[msgID] = append(s.reasonsOf[msgID], r)
	s.reasonOrder = append(s.reasonOrder, r)
	s.write("response.output_item.added", itemEvent{Type: "response.output_item.added", SequenceNumber: s.next(),
		OutputIndex: r.index, Item: reasonItem(id, "", statusInProgress)})
	return r
}

func (s *streamer) reasonDelta(r *reasonStream, d string) {
	if d == "" {
		return
	}
	if !r.part {
		r.part = true
		s.write("response.reasoning_summary_part.added", summaryPartEvent{Type: "response.reasoning_summary_part.added",
			SequenceNumber: s.next(), ItemID: r.id, OutputIndex: r.index, Part: summaryText{Type: "summary_text"}})
	}
	r.sent.WriteString(d)
	s.write("response.reasoning_summary_text.delta", summaryTextEvent{Type: "response.reasoning_summary_text.delta",
		SequenceNumber: s.next(), ItemID: r.id, OutputIndex: r.index, Delta: &d})
}

// endReasoning ends a reasoning item with its stored text: what the
// deltas did not carry goes out as one more delta first.
func (s *streamer) endReasoning(r *reasonStream, text string) {
	if r.done {
		return
	}
	if rest, ok := strings.CutPrefix(text, r.sent.String()); ok {
		s.reasonDelta(r, rest)
	} else {
		text = r.sent.String() // the deltas went out: the done events repeat them
	}
	r.done = true
	if r.part {
		s.write("response.reasoning_summary_text.done", summaryTextEvent{Type: "response.reasoning_summary_text.done",
			SequenceNumber: s.next(), ItemID: r.id, OutputIndex: r.index, Text: &text})
		s.write("response.reasoning_summary_part.done", summaryPartEvent{Type: "response.reasoning_summary_part.done",
			SequenceNumber: s.next(), ItemID: r.id, OutputIndex: r.index, Part: summaryText{Type: "summary_text", Text: text}})
	}
	s.write("response.output_item.done", itemEvent{Type: "response.output_item.done", SequenceNumber: s.next(),
		OutputIndex: r.index, Item: reasonItem(r.id, text, statusCompleted)})
}

// endReasonings ends the reasoning items still open when the response
// ends (an aborted step) with what was sent of them.
func (s *streamer) endReasonings() {
	for _, r := range s.reasonOrder {
		s.endReasoning(r, r.sent.String())
	}
}

// reasoningEvent maps the events of a reasoning part.
func (s *streamer) reasoningEvent(e *opencode.Event, replay bool) bool {
	switch e.Type {
	case opencode.EvReasoningStarted:
		p := data[opencode.ReasoningStarted](e)
		s.startReasoning(p.ReasoningID, p.AssistantMessageID, replay)
	case opencode.EvReasoningDelta:
		p := data[opencode.ReasoningDelta](e)
		if r := s.reasons[p.ReasoningID]; r != nil && !r.catchUp && !r.done {
			s.reasonDelta(r, p.Delta)
		}
	case opencode.EvReasoningEnded:
		p := data[opencode.ReasoningEnded](e)
		s.endReasoning(s.startReasoning(p.ReasoningID, p.AssistantMessageID, replay), p.Text)
	default:
		return false
	}
	return true
}

// closeReasoning ends the open reasoning items of a step before its
// next item (a text, a call) begins: OpenAI's items go one after the
// other, and a provider may end a reasoning part only with its step. The
// item ends with the text its deltas carried, or, first seen in the log,
// with the stored part's text.
func (s *streamer) closeReasoning(msgID string) {
	for _, r := range s.reasonsOf[msgID] {
		if r.done {
			continue
		}
		text := r.sent.String()
		if r.catchUp && s.storedPart != nil {
			if p := s.storedPart(msgID, func(p opencode.Part) bool { return p.ID == r.id }); p != nil {
				text = p.Text
			}
		}
		s.endReasoning(r, text)
	}
}

// storedPart finds a part of a step in the store (nil: none, or the
// store could not be read).
func (h *Handler) storedPart(ctx context.Context, sid, msgID string, match func(opencode.Part) bool) *opencode.Part {
	ctx, cancel := context.WithTimeout(ctx, partLookup)
	defer cancel()
	m, err := h.o.Core.Message(ctx, sid, msgID)
	if err != nil {
		h.o.Logger.Warn("openai: a step's message could not be read", "session", sid, "message", msgID, "err", err)
		return nil
	}
	for i := range m.Parts {
		if match(m.Parts[i]) {
			return &m.Parts[i]
		}
	}
	return nil
}

// decodeReasoning reads the request's reasoning parameter.
func (t *turn) decodeReasoning() error {
	raw := t.req.Reasoning
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var p reasoningParam
	if err := json.Unmarshal(raw, &p); err != nil {
		return invalid("reasoning", "invalid_type", `reasoning must be an object: {"effort", "summary"}`)
	}
	if p.Effort != nil {
		switch *p.Effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh", "max":
			t.variant = *p.Effort
		default:
			return invalid("reasoning.effort", "invalid_value", "reasoning.effort must be one of none, minimal, low, medium, high, xhigh, max")
		}
	}
	if p.Summary != nil {
		switch *p.Summary {
		case "", "auto", "concise", "detailed":
			t.summary = *p.Summary
		default:
			return invalid("reasoning.summary", "invalid_value", "reasoning.summary must be one of auto, concise, detailed")
		}
	}
	return nil
}

// echoReasoning is an input's reasoning field: the variant its request
// named, and the summary it asked for.
func echoReasoning(in *opencode.Input, m *requestMeta) *reasoningEcho {
	r := &reasoningEcho{}
	if in.Variant != "" {
		v := in.Variant
		r.Effort = &v
	}
	if m != nil && m.ReasoningSummary != "" {
		s := m.ReasoningSummary
		r.Summary = &s
	}
	return r
}
