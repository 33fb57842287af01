package provider

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
)

// overflowPatterns are OpenCode 1.18.33's texts of a prompt that does not
// fit the model's context window, per provider (Anthropic, Bedrock,
// OpenAI, LiteLLM, Gemini, xAI, Groq, OpenRouter, Copilot, llama.cpp,
// LM Studio, MiniMax, Kimi, vLLM, Ollama, …).
var overflowPatterns = regexp.MustCompile(`(?i)` + strings.Join([]string{
	`prompt is too long`,
	`request_too_large`,
	`input is too long for requested model`,
	`exceeds the context window`,
	`exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))`,
	`input token count.*exceeds the maximum`,
	`tokens in request more than max tokens allowed`,
	`maximum prompt length is \d+`,
	`reduce the length of the messages`,
	`maximum context length is \d+ tokens`,
	`exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?`,
	`input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)`,
	`exceeds the limit of \d+`,
	`exceeds the available context size`,
	`greater than the context length`,
	`context window exceeds limit`,
	`exceeded model token limit`,
	`context[_ ]length[_ ]exceeded`,
	`request entity too large`,
	`context length is only \d+ tokens`,
	`input length.*exceeds.*context length`,
	`prompt too long; exceeded (?:max )?context length`,
	`too large for model with \d+ maximum context length`,
	`prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?`,
	`model_context_window_exceeded`,
	`too many tokens`,
	`token limit exceeded`,
}, "|"))

var (
	// Rate limits and outages that happen to say "too many tokens" are
	// not overflows.
	notOverflow = regexp.MustCompile(`(?i)^(?:throttling error|service unavailable):|rate limit|too many requests`)
	// A bare 400 or 413 without a body: what some gateways answer.
	bareStatus = regexp.MustCompile(`(?i)^4(?:00|13)\s*(?:status code)?\s*\(no body\)`)
)

// ContextOverflow reports whether a failed model call says the prompt
// did not fit the model's context window, as OpenCode 1.18.33 tells one
// (its session then compacts instead of failing): the error's text
// matches its patterns, the status is 413, or the body carries OpenAI's
// error code context_length_exceeded.
func ContextOverflow(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.StatusCode == 413 || overflowCode(ae.ResponseBody) {
			return true
		}
		msg = ae.Message
	}
	return !notOverflow.MatchString(msg) && (overflowPatterns.MatchString(msg) || bareStatus.MatchString(msg))
}

// overflowCode reports an error body {"error":{"code":"context_length_exceeded"}}.
func overflowCode(body string) bool {
	if !strings.Contains(body, "context_length_exceeded") {
		return false
	}
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(body), &b) == nil && b.Error.Code == "context_length_exceeded"
}
