package openai

import (
	"encoding/json"
	"net/http"

	"github.com/opencode-server/opencode-server/opencode"
)

// chatCompletion is a chat.completion object.
type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Message      chatOut   `json:"message"`
	FinishReason string    `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type chatOut struct {
	Role        string     `json:"role"`
	Content     *string    `json:"content"`
	Refusal     *string    `json:"refusal"`
	Annotations []struct{} `json:"annotations"`
	ToolCalls   []chatCall `json:"tool_calls,omitempty"`
	// ReasoningContent is the turn's reasoning (the de facto field of
	// DeepSeek's and vLLM's chat APIs; OpenAI's has none).
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// chatUsage is usage in chat completions' fields.
type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func chatUsageOf(u *usage) *chatUsage {
	if u == nil {
		return &chatUsage{}
	}
	c := &chatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	c.PromptTokensDetails.CachedTokens = u.InputTokensDetails.CachedTokens
	c.CompletionTokensDetails.ReasoningTokens = u.OutputTokensDetails.ReasoningTokens
	return c
}

// chatChunk is a chat.completion.chunk object.
type chatChunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *chatUsage    `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

type chunkDelta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ToolCalls        []chatCall `json:"tool_calls,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
}

// chatEmitter writes a response's stream as chat completion chunks: the
// response's text deltas are the content's, its text parts joined as an
// answer joins them; its end is the finish chunk, the usage chunk when
// asked, and [DONE].
type chatEmitter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      string
	created int64
	model   string
	usage   bool
	sent    bool // some content went out: the next part is joined to it
	sep     bool // a text part began after some content
	// calls are the tool calls streamed, their indexes by item ID.
	calls map[string]int
}

func (c *chatEmitter) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := c.w.Write([]byte("data: " + string(b) + "\n\n")); err != nil {
		return err
	}
	return c.rc.Flush()
}

func (c *chatEmitter) chunk(d chunkDelta, finish *string, u *chatUsage) error {
	ch := chatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
		Choices: []chunkChoice{{Delta: d, FinishReason: finish}}, Usage: u}
	if u != nil {
		ch.Choices = []chunkChoice{} // the usage chunk has no choice
	}
	return c.data(ch)
}

// emit maps one of the response stream's events.
func (c *chatEmitter) emit(typ string, v any) error {
	switch typ {
	case "response.created":
		if r := v.(responseEvent).Response; c.model == "" && r != nil {
			c.model = r.Model
		}
		empty := ""
		return c.chunk(chunkDelta{Role: "assistant", Content: &empty}, nil, nil)
	case "response.content_part.added":
		c.sep = c.sent
	case "response.output_text.delta":
		ev := v.(textEvent)
		if ev.Delta == nil || *ev.Delta == "" {
			return nil
		}
		d := *ev.Delta
		if c.sep {
			d, c.sep = textSep+d, false
		}
		c.sent = true
		return c.chunk(chunkDelta{Content: &d}, nil, nil)
	case "response.output_item.added":
		ev, ok := v.(callItemEvent)
		if !ok {
			return nil // a message item: its text parts stream
		}
		i := len(c.calls)
		c.calls[ev.Item.ID] = i
		tc := chatCall{Index: &i, ID: ev.Item.CallID, Type: "function"}
		tc.Function.Name = ev.Item.Name
		return c.chunk(chunkDelta{ToolCalls: []chatCall{tc}}, nil, nil)
	case "response.reasoning_summary_text.delta":
		ev := v.(summaryTextEvent)
		if ev.Delta == nil || *ev.Delta == "" {
			return nil
		}
		return c.chunk(chunkDelta{ReasoningContent: ev.Delta}, nil, nil)
	case "response.function_call_arguments.delta":
		ev := v.(argsEvent)
		i, ok := c.calls[ev.ItemID]
		if !ok || ev.Delta == nil {
			return nil
		}
		tc := chatCall{Index: &i}
		tc.Function.Arguments = *ev.Delta
		return c.chunk(chunkDelta{ToolCalls: []chatCall{tc}}, nil, nil)
	case "response.completed", "response.failed":
		r := v.(responseEvent).Response
		if r.Status == statusFailed {
			msg := "the turn failed"
			if r.Error != nil {
				msg += ": " + r.Error.Message
			}
			// OpenAI's mid-stream error: the SDKs read the error key.
			if err := c.data(struct {
				Error apiError `json:"error"`
			}{apiError{Message: msg, Type: opencode.KindOf(opencode.EUnavailable).OpenAI}}); err != nil {
				return err
			}
		} else {
			stop := "stop"
			if len(c.calls) > 0 {
				stop = "tool_calls"
			}
			if err := c.chunk(chunkDelta{}, &stop, nil); err != nil {
				return err
			}
			if c.usage {
				if err := c.chunk(chunkDelta{}, nil, chatUsageOf(r.Usage)); err != nil {
					return err
				}
			}
		}
		if _, err := c.w.Write([]byte("data: [DONE]\n\n")); err != nil {
			return err
		}
		return c.rc.Flush()
	}
	return nil
}
