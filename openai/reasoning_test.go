package openai_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/opencode"
)

// reasoningStream streams a response with openai-go and checks its
// reasoning items' events: each in OpenAI's order (item added, summary
// part added, text deltas, text done, part done, item done) before the
// next item begins, the deltas adding up to the text; sequence numbers
// from 0, every event a type the SDK knows. It returns the final
// response and the reasoning texts streamed.
func reasoningStream(t *testing.T, st interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) (*responses.Response, []string) {
	t.Helper()
	var final *responses.Response
	var types, texts []string
	state := map[string]string{}
	deltas := map[string]*strings.Builder{}
	open := "" // the item whose events go out
	n := int64(0)
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		checkRequired(t, ev.Type, reflect.ValueOf(ev))
		if ev.SequenceNumber != n {
			t.Errorf("event %d (%s) has sequence_number %d", n, ev.Type, ev.SequenceNumber)
		}
		n++
		step := func(id, from, to string) {
			t.Helper()
			if state[id] != from {
				t.Errorf("%s of %s after %q; want after %q (events %v)", ev.Type, id, state[id], from, types)
			}
			state[id] = to
		}
		switch e := ev.AsAny().(type) {
		case responses.ResponseOutputItemAddedEvent:
			if open != "" {
				t.Errorf("item %s added while %s is open", e.Item.ID, open)
			}
			open = e.Item.ID
			if e.Item.Type == "reasoning" {
				step(e.Item.ID, "", "added")
				deltas[e.Item.ID] = &strings.Builder{}
			}
		case responses.ResponseReasoningSummaryPartAddedEvent:
			step(e.ItemID, "added", "part")
		case responses.ResponseReasoningSummaryTextDeltaEvent:
			if state[e.ItemID] == "part" {
				state[e.ItemID] = "delta"
			}
			step(e.ItemID, "delta", "delta")
			deltas[e.ItemID].WriteString(e.Delta)
		case responses.ResponseReasoningSummaryTextDoneEvent:
			step(e.ItemID, "delta", "text done")
			if e.Text != deltas[e.ItemID].String() {
				t.Errorf("summary text done %q; the deltas say %q", e.Text, deltas[e.ItemID].String())
			}
		case responses.ResponseReasoningSummaryPartDoneEvent:
			step(e.ItemID, "text done", "part done")
			if e.Part.Text != deltas[e.ItemID].String() {
				t.Errorf("summary part done %q", e.Part.Text)
			}
		case responses.ResponseOutputItemDoneEvent:
			if e.Item.ID != open {
				t.Errorf("item %s done while %s is open", e.Item.ID, open)
			}
			open = ""
			if e.Item.Type == "reasoning" {
				step(e.Item.ID, "part done", "done")
				r := e.Item.AsReasoning()
				if len(r.Summary) != 1 || r.Summary[0].Text != deltas[e.Item.ID].String() || r.Status != "completed" {
					t.Errorf("reasoning item done %s", e.Item.RawJSON())
				}
				texts = append(texts, r.Summary[0].Text)
			}
		case responses.ResponseCompletedEvent:
			r := e.Response
			final = &r
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v (after %v)", err, types)
	}
	if final == nil || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Fatalf("events %v", types)
	}
	for id, s := range state {
		if s != "done" {
			t.Errorf("reasoning item %s ended at %q", id, s)
		}
	}
	return final, texts
}

// checkReasoningOutput checks a response's output: a reasoning item
// under the step's reasoning part's prt_ ID with the thought as its one
// summary_text, then the message item.
func checkReasoningOutput(t *testing.T, r *responses.Response, thought, answer string, part opencode.Part) {
	t.Helper()
	checkRequired(t, "response", reflect.ValueOf(*r))
	if len(r.Output) != 2 || r.Output[0].Type != "reasoning" || r.Output[1].Type != "message" {
		t.Fatalf("output %s", r.RawJSON())
	}
	rs := r.Output[0].AsReasoning()
	if rs.ID != part.ID || len(rs.Summary) != 1 || rs.Summary[0].Type != "summary_text" || rs.Summary[0].Text != thought || rs.Status != "completed" {
		t.Errorf("reasoning item %s; want %s with %q", r.Output[0].RawJSON(), part.ID, thought)
	}
	if r.OutputText() != answer {
		t.Errorf("text %q; want %q", r.OutputText(), answer)
	}
}

// TestReasoningItems: a step's reasoning is a reasoning output item under
// its part's prt_ ID, before the message item, in the JSON response, the
// stream (OpenAI's event order, deltas adding up), Get and the re-stream
// of GET ?stream=true; reasoning.effort is the user message's variant.
func TestReasoningItems(t *testing.T) {
	const thought = "pondering the question deeply"
	for _, streaming := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[streaming]
		t.Run(name, func(t *testing.T) {
			srv, _ := stubServer(t, stubmodel.WithChunks(4))
			c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			prompt := "think: " + thought + "\nreply: the answer"
			p := responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(prompt)},
				Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh, Summary: shared.ReasoningSummaryDetailed}}
			var r *responses.Response
			if streaming {
				var texts []string
				r, texts = reasoningStream(t, c.Responses.NewStreaming(ctx, p))
				if len(texts) != 1 || texts[0] != thought {
					t.Errorf("streamed reasoning %q", texts)
				}
			} else {
				var err error
				if r, err = c.Responses.New(ctx, p); err != nil {
					t.Fatalf("Responses.New: %v", err)
				}
			}
			conv := messages(t, srv.URL, r.Conversation.ID)
			if len(conv) != 2 {
				t.Fatalf("%d messages", len(conv))
			}
			var part opencode.Part
			for _, p := range conv[1].Parts {
				if p.Type == opencode.PartReasoning {
					part = p
				}
			}
			checkReasoningOutput(t, r, thought, "the answer", part)
			if conv[0].Info.Model == nil || conv[0].Info.Model.Variant != "high" {
				t.Errorf("reasoning.effort high: the user message's model %+v", conv[0].Info.Model)
			}
			if r.Reasoning.Effort != shared.ReasoningEffortHigh || r.Reasoning.Summary != shared.ReasoningSummaryDetailed {
				t.Errorf("reasoning answered back %+v", r.Reasoning)
			}

			got, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			checkReasoningOutput(t, got, thought, "the answer", part)
			again, texts := reasoningStream(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}))
			checkReasoningOutput(t, again, thought, "the answer", part)
			if len(texts) != 1 || texts[0] != thought {
				t.Errorf("re-streamed reasoning %q", texts)
			}
		})
	}
}

// TestChatReasoning: a chat completion carries the turn's reasoning as
// the message's reasoning_content, and streamed as reasoning_content
// deltas before the content.
func TestChatReasoning(t *testing.T) {
	srv, _ := stubServer(t, stubmodel.WithChunks(3))
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const thought = "weighing the options"
	p := oai.ChatCompletionNewParams{Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("think: " + thought + "\nreply: done")}}
	r, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var rc string
	if f, ok := r.Choices[0].Message.JSON.ExtraFields["reasoning_content"]; !ok || json.Unmarshal([]byte(f.Raw()), &rc) != nil || rc != thought {
		t.Errorf("reasoning_content %q in %s", rc, r.RawJSON())
	}
	if r.Choices[0].Message.Content != "done" {
		t.Errorf("content %q", r.Choices[0].Message.Content)
	}
	st := c.Chat.Completions.NewStreaming(ctx, p)
	var reasoning, content strings.Builder
	for st.Next() {
		ch := st.Current()
		if len(ch.Choices) == 0 {
			continue
		}
		if f, ok := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
			var d string
			_ = json.Unmarshal([]byte(f.Raw()), &d)
			if content.Len() > 0 {
				t.Errorf("a reasoning delta %q after the content", d)
			}
			reasoning.WriteString(d)
		}
		content.WriteString(ch.Choices[0].Delta.Content)
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != thought || content.String() != "done" {
		t.Errorf("streamed reasoning %q, content %q", reasoning.String(), content.String())
	}
}
