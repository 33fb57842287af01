package provider

import (
	"errors"
	"fmt"
	"testing"
)

func TestContextOverflow(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&APIError{StatusCode: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum"}, true},                                           // Anthropic
		{&APIError{StatusCode: 400, Message: "Your input exceeds the context window of this model. Please adjust your input and try again."}, true}, // OpenAI
		{&APIError{StatusCode: 400, Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}, true},      // Gemini
		{&APIError{StatusCode: 400, Message: "This model's maximum context length is 128000 tokens. However, you requested 130000 tokens."}, true},  // OpenRouter, DeepSeek
		{&APIError{StatusCode: 400, Message: "bad", ResponseBody: `{"error":{"code":"context_length_exceeded","message":"x"}}`}, true},
		{&APIError{StatusCode: 413, Message: "Payload Too Large"}, true},
		{errors.New("400 status code (no body)"), true},
		{fmt.Errorf("stream: %w", &APIError{Message: "Input exceeds context window: context_length_exceeded"}), true},
		{&APIError{StatusCode: 429, Message: "Rate limit reached: too many tokens per minute"}, false},
		{&APIError{StatusCode: 503, Message: "Service unavailable: too many tokens"}, false},
		{&APIError{StatusCode: 400, Message: "messages.1.content: field required"}, false},
		{&APIError{StatusCode: 400, Message: "bad", ResponseBody: `{"error":{"code":"invalid_prompt","message":"context_length_exceeded"}}`}, false},
		{nil, false},
	} {
		if got := ContextOverflow(c.err); got != c.want {
			t.Errorf("ContextOverflow(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
