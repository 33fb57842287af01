package openai

import (
	"context"
	"errors"
	"fmt"

	"github.com/opencode-server/opencode-server/opencode"
)

// Response is OpenAI's response object, read from the session: the turn
// the user message Response.ID started.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []outputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	// Conversation is the session the response is a turn of, always.
	Conversation *conversation  `json:"conversation"`
	Store        bool           `json:"store"`
	Background   bool           `json:"background"`
	Reasoning    *reasoningEcho `json:"reasoning"`
	Temperature  *float64       `json:"temperature"`
	TopP         *float64       `json:"top_p"`
	ToolChoice   string         `json:"tool_choice"`
	Tools        []funcTool     `json:"tools"`
	Text         textConfig     `json:"text"`
	Truncation   string         `json:"truncation"`
	Usage        *usage         `json:"usage"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type conversation struct {
	ID string `json:"id"`
}

type textConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type usage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// outputItem is a message output item: one assistant message of the
// turn (one step), its ID the message's msg_ ID, its content the
// message's text parts.
type outputItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []outputText `json:"content"`
	// call makes the item a function_call, reasoning a reasoning item
	// (see MarshalJSON).
	call      *functionCall
	reasoning *reasoningItem
}

// outputText is an output_text content part.
type outputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
}

func newOutputText(s string) outputText {
	return outputText{Type: "output_text", Text: s, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

// Response statuses, as OpenAI names them.
const (
	statusQueued     = "queued"
	statusInProgress = "in_progress"
	statusCompleted  = "completed"
	statusFailed     = "failed"
	statusCancelled  = "cancelled"
	statusIncomplete = "incomplete"
)

// header is the response object of an input before its turn's messages
// are read: the fields its request decided.
func header(in *opencode.Input) *Response {
	r := &Response{ID: in.ID, Object: "response", CreatedAt: in.TimeCreated / 1000, Status: statusInProgress,
		Metadata: map[string]string{}, Output: []outputItem{}, ParallelToolCalls: true,
		Conversation: &conversation{ID: in.SessionID}, Store: true, ToolChoice: "auto", Tools: []funcTool{},
		Truncation: "disabled"}
	r.Text.Format.Type = "text"
	if in.System != "" {
		s := in.System
		r.Instructions = &s
	}
	switch {
	case in.Model != nil:
		r.Model = in.Model.ProviderID + "/" + in.Model.ModelID
	case in.Agent != "":
		r.Model = in.Agent
	}
	meta := metaOf(in.Parts)
	r.Reasoning = echoReasoning(in, meta)
	if m := meta; m != nil {
		r.Background = m.Background
		for k, v := range m.Metadata {
			r.Metadata[k] = v
		}
		if m.PreviousResponseID != "" {
			p := m.PreviousResponseID
			r.PreviousResponseID = &p
		}
		if m.ToolChoice != "" {
			r.ToolChoice = m.ToolChoice
		}
	}
	r.Tools = echoTools(in)
	switch in.State {
	case opencode.InputPending:
		r.Status = statusQueued
	case opencode.InputRevoked:
		r.Status = statusCancelled // revoked before its turn began
	}
	return r
}

// buildAt reads a response of input in's turn from its session: the
// first ("" after) or the one after the client calls of assistant message
// after. Its output items are its steps' messages and client calls, their
// tokens its usage, the last one's error its status.
func (h *Handler) buildAt(ctx context.Context, in *opencode.Input, after string) (*Response, error) {
	r := header(in)
	if in.State != opencode.InputDelivered {
		return r, nil
	}
	// Only the messages after the response's user message: a turn's
	// steps follow its input, and a long session is not read whole for
	// each response.
	conv, err := h.o.Core.MessagesPage(ctx, in.SessionID, opencode.PageQuery{Anchor: in.ID})
	shown := true
	if oe := (*opencode.Error)(nil); errors.As(err, &oe) && oe.Code == opencode.EInvalid {
		conv, err, shown = nil, nil, false // the input is not a message of the session (yet)
	}
	if err != nil {
		return nil, err
	}
	if !shown {
		// Delivered, its user message gone: the response was deleted.
		return nil, notFound("", "", fmt.Sprintf("Response with id '%s' not found.", clip(in.ID)))
	}
	// The turn's steps: from its first assistant message (whose parent is
	// the response's user message; one before it is an earlier turn's, the
	// user message having been shown while that turn ran) to the one
	// recorded as its answer, or all so far while it runs. Turns of a
	// session do not overlap, so nothing in between is another's.
	// A steer delivered into the turn after the response's input ends the
	// response there (incomplete, "steered"): the steps after it are its
	// successor's, the response whose ID is the steer's.
	var steps []opencode.MessageWithParts
	steered := false
	if shown && in.Answer != in.ID {
		begun := false
		for _, m := range conv {
			if m.Info.Role != opencode.Assistant {
				if steered, err = h.steeredBy(ctx, in, m.Info.ID); err != nil {
					return nil, err
				}
				if steered {
					break
				}
				continue // a later input shown, or a core's synthetic message
			}
			if !begun && m.Info.ParentID != in.ID && m.Info.ID != in.Answer {
				continue
			}
			begun = true
			steps = append(steps, m)
			if m.Info.ID == in.Answer {
				break
			}
		}
	}
	return h.compose(ctx, r, in, conv, steps, steered, after)
}

// compose completes response r of input in's turn from its steps (the
// turn's assistant messages so far, up to a steer that ended it: steered)
// and, for a continuation (after), the conversation holding after.
func (h *Handler) compose(ctx context.Context, r *Response, in *opencode.Input, conv, steps []opencode.MessageWithParts,
	steered bool, after string) (*Response, error) {
	names := clientNames(in)
	steps, prev, cut, ok := segment(steps, names, in.ID, after)
	if !ok {
		return nil, notFound("", "", fmt.Sprintf("Response with id '%s' not found.", clip(after)))
	}
	if after != "" {
		continued(r, conv, after, prev)
	}
	var u usage
	for _, m := range steps {
		if m.Info.ProviderID != "" {
			r.Model = m.Info.ProviderID + "/" + m.Info.ModelID
		}
		t := m.Info.Tokens
		u.InputTokens += t.Input + t.Cache.Read + t.Cache.Write
		u.InputTokensDetails.CachedTokens += t.Cache.Read
		u.InputTokensDetails.CacheWriteTokens += t.Cache.Write
		u.OutputTokens += t.Output + t.Reasoning
		u.OutputTokensDetails.ReasoningTokens += t.Reasoning
		r.Output = append(r.Output, stepItems(m, names)...)
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	r.Usage = &u
	// A segment that ends at client calls is not where the steer came.
	steered = steered && !cut
	if cut {
		// Over once its calls are the client's to answer.
		if over, err := h.handedOver(ctx, r, in, steps[len(steps)-1]); err != nil || !over {
			return r, err
		}
	} else if in.Answer == "" && !steered {
		return r, nil // still running
	}
	r.Status = statusCompleted
	var last *opencode.Message
	if n := len(steps); n > 0 {
		last = &steps[n-1].Info
		if c := last.Time.Completed; c != nil {
			done := *c / 1000
			r.CompletedAt = &done
		}
	}
	if steered {
		r.Status, r.IncompleteDetails = statusIncomplete, &incompleteDetails{Reason: "steered"}
		return r, nil
	}
	if last != nil && last.Error != nil {
		if last.Error.Name == "MessageAbortedError" {
			r.Status = statusCancelled
		} else {
			r.Status = statusFailed
			msg, _ := last.Error.Data["message"].(string)
			if msg == "" {
				msg = last.Error.Name
			}
			r.Error = &responseError{Code: "server_error", Message: msg}
		}
	}
	return r, nil
}

// find reads the input a response ID names.
func (h *Handler) find(ctx context.Context, id string) (*opencode.Input, error) {
	in, err := h.o.Core.FindInput(ctx, id)
	if err != nil {
		var oe *opencode.Error
		if asNotFound(err, &oe) {
			return nil, notFound("", "", fmt.Sprintf("Response with id '%s' not found.", clip(id)))
		}
		return nil, err
	}
	return h.inherit(ctx, in), nil
}

// maxInherit bounds the steers followed back to the turn's tools.
const maxInherit = 64

// inherit gives a steer admitted by this door the client tools of the
// response it was aimed at (followed back through steers): its response
// carries the rest of that turn, whose model is offered them, so a call
// of one is a function_call of the steer's response, as OpenAI's
// successors inherit their predecessor's settings.
func (h *Handler) inherit(ctx context.Context, in *opencode.Input) *opencode.Input {
	cur := in
	for n := 0; n < maxInherit && cur.Delivery == opencode.Steer && len(in.ClientTools) == 0; n++ {
		m := metaOf(cur.Parts)
		if m == nil || m.PreviousResponseID == "" {
			break
		}
		prev, err := h.o.Core.FindInput(ctx, m.PreviousResponseID)
		if err != nil || prev.SessionID != in.SessionID {
			break
		}
		if len(prev.ClientTools) > 0 {
			cp := *in
			cp.ClientTools = prev.ClientTools
			return &cp
		}
		cur = prev
	}
	return in
}
