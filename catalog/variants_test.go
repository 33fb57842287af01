package catalog

import (
	"strings"
	"testing"
)

// TestVariants: each model gets OpenCode 1.18.33's thinking variants
// (transform.ts variants()) for the package that serves it, in order.
func TestVariants(t *testing.T) {
	for _, c := range []struct {
		npm, id, released string
		output            int64
		reasoning         bool
		want              string
	}{
		{"@ai-sdk/anthropic", "claude-sonnet-4-5", "", 64000, true,
			`high={"thinking":{"type":"enabled","budgetTokens":16000}} max={"thinking":{"type":"enabled","budgetTokens":31999}}`},
		{"@ai-sdk/anthropic", "claude-haiku-4-5", "", 8000, true,
			`high={"thinking":{"type":"enabled","budgetTokens":3999}} max={"thinking":{"type":"enabled","budgetTokens":7999}}`},
		{"@ai-sdk/anthropic", "claude-sonnet-4-6", "", 64000, true, `low medium high max`},
		{"@ai-sdk/anthropic", "claude-opus-4-7", "", 128000, true, `low={"thinking":{"type":"adaptive","display":"summarized"},"effort":"low"} medium high xhigh max`},
		{"@ai-sdk/anthropic", "claude-opus-4-5", "", 64000, true, `low={"thinking":{"type":"enabled","budgetTokens":16000},"effort":"low"} medium high`},
		{"@ai-sdk/anthropic", "claude-sonnet-4-5", "", 64000, false, ``},
		{"@ai-sdk/openai", "gpt-5", "2025-08-07", 128000, true, `minimal={"reasoningEffort":"minimal","reasoningSummary":"auto","include":["reasoning.encrypted_content"]} low medium high`},
		{"@ai-sdk/openai", "gpt-5.1", "2025-11-13", 128000, true, `none low medium high`},
		{"@ai-sdk/openai", "gpt-5.2", "2025-12-11", 128000, true, `none low medium high xhigh`},
		{"@ai-sdk/openai", "gpt-5-codex", "", 128000, true, `low medium high`},
		{"@ai-sdk/openai", "gpt-5.3-codex", "", 128000, true, `none low medium high xhigh`},
		{"@ai-sdk/openai", "gpt-5-pro", "", 128000, true, `high`},
		{"@ai-sdk/openai", "gpt-5.2-pro", "", 128000, true, `medium high xhigh`},
		{"@ai-sdk/openai", "gpt-5-chat-latest", "", 128000, true, ``},
		{"@ai-sdk/openai", "o3", "2025-04-16", 100000, true, `low medium high`},
		{"@ai-sdk/google", "gemini-2.5-pro", "", 65536, true,
			`high={"thinkingConfig":{"includeThoughts":true,"thinkingBudget":16000}} max={"thinkingConfig":{"includeThoughts":true,"thinkingBudget":32768}}`},
		{"@ai-sdk/google", "gemini-2.5-flash", "", 65536, true, `high max={"thinkingConfig":{"includeThoughts":true,"thinkingBudget":24576}}`},
		{"@ai-sdk/google", "gemini-3-pro-preview", "", 65536, true, `low={"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"low"}} medium high`},
		{"@ai-sdk/google", "gemini-3-flash-preview", "", 65536, true, `minimal low medium high`},
		{"@ai-sdk/openai-compatible", "claude-sonnet-4-5", "", 64000, true, `low={"reasoningEffort":"low"} medium high`},
		{"@ai-sdk/openai-compatible", "deepseek-v4-pro", "", 64000, true, `low medium high max`},
		{"@ai-sdk/openai-compatible", "qwen3-coder", "", 64000, true, ``},
		{"@ai-sdk/openai-compatible", "glm-5.2", "", 64000, true, `high={"reasoningEffort":"high"} max`},
		{"@ai-sdk/amazon-bedrock", "anthropic.claude-sonnet-4-5", "", 64000, true, ``},
	} {
		m := &Model{ID: c.id, Reasoning: c.reasoning, Output: c.output, ReleaseDate: c.released}
		var got []string
		for i, v := range Variants(c.npm, m) {
			if i == 0 || strings.Contains(c.want, v.Name+"=") {
				got = append(got, v.Name+"="+string(v.Options))
			} else {
				got = append(got, v.Name)
			}
		}
		want := c.want
		if len(got) > 0 && !strings.Contains(strings.Fields(want)[0], "=") {
			got[0] = strings.SplitN(got[0], "=", 2)[0]
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%s %s: %s\n want %s", c.npm, c.id, g, want)
		}
	}
}
