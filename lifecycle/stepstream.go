package lifecycle

// A step's streamed text and reasoning: the model's deltas become parts,
// committed before they are published, closed when the step ends.

import (
	"encoding/json"
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
	"github.com/opencode-server/opencode-server/provider"
)

func (r *runner) onStream(msg streamMsg) {
	if msg.then != nil {
		msg.then()
		return
	}
	if msg.title != nil {
		r.applyTitle(*msg.title)
		return
	}
	if msg.ext != nil {
		r.onExternal(msg.ext)
		return
	}
	if r.turn == nil || r.turn.step == nil || r.turn.step.n != msg.step {
		// A model call or tool of an aborted step keeps talking for a moment.
		if msg.ask != nil {
			msg.ask.resp <- askResp{action: "deny"}
		}
		if msg.question != nil {
			msg.question.resp <- nil
		}
		return
	}
	st := r.turn.step
	switch {
	case msg.done:
		st.streamed, st.err = true, msg.err
		r.maybeEndStep()
		return
	case msg.tool != nil:
		r.toolDone(st, msg.tool)
		return
	case msg.ask != nil:
		r.onAsk(st, msg.ask)
		return
	case msg.question != nil:
		r.onQuestion(st, msg.question)
		return
	case msg.progress != nil:
		r.toolProgress(st, msg.progress)
		return
	}
	c := msg.chunk
	switch c.Kind {
	case provider.TextDelta:
		r.delta(st, &st.text, textStream, c.Text, c.Metadata)
	case provider.ReasoningDelta:
		r.delta(st, &st.reasoning, reasoningStream, c.Text, c.Metadata)
	case provider.ReasoningEnd:
		// One reasoning block is whole: it is its own part (its signature
		// covers it alone), and the next one opens another.
		if st.reasoning != nil {
			if len(c.Metadata) > 0 {
				st.reasoning.part.Metadata = c.Metadata
			}
			r.closeSlot(r.outbox(), st, &st.reasoning, r.m.now())
		}
	case provider.ToolInputStart:
		if c.ToolCall != nil {
			r.toolPending(st, c.ToolCall)
		}
	case provider.ToolInputDelta:
		if c.ToolCall != nil {
			r.toolInputDelta(st, c.ToolCall, c.Text)
		}
	case provider.ToolCallChunk:
		if c.ToolCall != nil {
			r.toolCall(st, c.ToolCall)
		}
	case provider.Retry:
		r.publishLive(opencode.SessionStatus{SessionID: r.id, Status: opencode.SessionStatusInfo{Type: "retry",
			SessionRetry: &opencode.SessionRetry{Attempt: c.Attempt, Message: c.Message, Next: c.Next}}})
	case provider.Finish:
		st.finish = c
	}
}

// streamKind tells text and reasoning parts apart: their part type, and
// their durable and live v2 events of part id (h says where and when).
type streamKind struct {
	partType string
	started  func(h opencode.StepHeader, id string) opencode.Payload
	delta    func(h opencode.StepHeader, id, delta string) opencode.Payload
	ended    func(h opencode.StepHeader, id, text string) opencode.Payload
}

// streaming is a text or reasoning part being streamed: opened (ID minted,
// committed with text "") on the first delta, closed with its full text.
type streaming struct {
	kind streamKind
	part opencode.Part
	buf  strings.Builder
}

// delta appends streamed text to the step's open part of kind k, opening
// it on the first delta. Deltas are live-only, as in OpenCode: published,
// never committed.
func (r *runner) delta(st *step, slot **streaming, k streamKind, text string, md json.RawMessage) {
	now := r.m.now()
	if *slot == nil {
		s := &streaming{kind: k, part: opencode.Part{ID: r.m.ids.NewPart(), SessionID: r.id, MessageID: st.msg.ID,
			Type: k.partType, Time: &opencode.PartTime{Start: now}}}
		*slot = s
		t := r.outbox()
		t.durable(k.started(r.stepHeader(now, st.msg.ID), s.part.ID))
		t.part(s.part, now)
		// Commit the new part now, ahead of the rest of the burst: its
		// first delta then goes out after a small unsynced commit, not
		// after the end of the turn (which may be in the same burst and
		// is synced).
		r.cut = true
	}
	s := *slot
	if len(md) > 0 {
		s.part.Metadata = md
	}
	if text == "" {
		return // metadata only (a signature at the end of reasoning)
	}
	s.buf.WriteString(text)
	r.publishLive(opencode.PartDelta{SessionID: r.id, MessageID: st.msg.ID, PartID: s.part.ID, Field: "text", Delta: text})
	r.publishLive(k.delta(r.stepHeader(now, st.msg.ID), s.part.ID, text))
}

// closeText ends the open reasoning and text parts, committing their text.
func (r *runner) closeText(t *outbox, st *step, now int64) {
	r.closeSlot(t, st, &st.reasoning, now)
	r.closeSlot(t, st, &st.text, now)
}

// closeSlot ends one streamed part, if open, committing its text.
func (r *runner) closeSlot(t *outbox, st *step, slot **streaming, now int64) {
	s := *slot
	if s == nil {
		return
	}
	p := s.part
	p.Text = s.buf.String()
	end := now
	p.Time = &opencode.PartTime{Start: s.part.Time.Start, End: &end}
	t.part(p, now)
	t.durable(s.kind.ended(r.stepHeader(now, st.msg.ID), p.ID, p.Text))
	st.parts = append(st.parts, p)
	*slot = nil
}
