package catalog

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// Variant is one of a model's thinking variants: its name and the
// provider options OpenCode 1.18.33 gives it (transform.ts variants(), in
// the AI SDK's option names: what GET /provider shows, and what a prompt
// that names the variant adds to the model call).
type Variant struct {
	Name    string
	Options json.RawMessage
}

// Variants are the model's thinking variants in OpenCode's order, for
// the package that serves it (npm): none unless the model reasons.
// Packages this server does not speak get none.
func Variants(npm string, m *Model) []Variant {
	if !m.Reasoning {
		return nil
	}
	id := strings.ToLower(m.ID)
	glm52 := containsAny(id, "glm-5.2", "glm-5-2", "glm-5p2")
	if strings.Contains(id, "minimax-m3") && (npm == "@ai-sdk/anthropic" || npm == "@ai-sdk/openai-compatible") {
		return []Variant{{"none", raw(`{"thinking":{"type":"disabled"}}`)}, {"thinking", raw(`{"thinking":{"type":"adaptive"}}`)}}
	}
	switch {
	case glm52 && npm == "@ai-sdk/openai-compatible":
		return efforts([]string{"high", "max"}, `{"reasoningEffort":%q}`)
	case glm52 && npm == "@ai-sdk/anthropic":
		return efforts([]string{"high", "max"}, `{"effort":%q}`)
	case npm == "@ai-sdk/anthropic" && containsAny(strings.ToLower(m.ProviderID+" "+m.ID), "kimi", "moonshot"):
		return efforts([]string{"low", "medium", "high", "xhigh", "max"}, `{"thinking":{"type":"adaptive","display":"summarized"},"effort":%q}`)
	case containsAny(id, "deepseek-chat", "deepseek-reasoner", "deepseek-r1", "deepseek-v3", "minimax", "kimi", "k2p", "qwen", "big-pickle") ||
		strings.Contains(id, "glm") && !glm52:
		return nil
	case strings.Contains(id, "grok") && strings.Contains(id, "grok-3-mini"):
		return efforts([]string{"low", "high"}, `{"reasoningEffort":%q}`)
	}
	switch npm {
	case "@ai-sdk/openai-compatible":
		if strings.Contains(id, "north-mini-code") {
			return efforts([]string{"none", "high"}, `{"reasoningEffort":%q}`)
		}
		levels := []string{"low", "medium", "high"}
		if strings.Contains(id, "deepseek-v4") {
			levels = append(levels, "max")
		}
		return efforts(levels, `{"reasoningEffort":%q}`)
	case "@ai-sdk/openai":
		return efforts(openAIEfforts(m.ID, m.ReleaseDate), `{"reasoningEffort":%q,"reasoningSummary":"auto","include":["reasoning.encrypted_content"]}`)
	case "@ai-sdk/anthropic":
		if levels := adaptiveEfforts(m.ID); levels != nil {
			display := ""
			if claudeFrom47(m.ID) {
				display = `,"display":"summarized"`
			}
			return efforts(levels, `{"thinking":{"type":"adaptive"`+display+`},"effort":%q}`)
		}
		high := strconv.FormatInt(min(16000, floorHalfLess1(m.Output)), 10)
		if containsAny(m.ID, "opus-4-5", "opus-4.5") {
			return efforts([]string{"low", "medium", "high"}, `{"thinking":{"type":"enabled","budgetTokens":`+high+`},"effort":%q}`)
		}
		return []Variant{
			{"high", raw(`{"thinking":{"type":"enabled","budgetTokens":` + high + `}}`)},
			{"max", raw(`{"thinking":{"type":"enabled","budgetTokens":` + strconv.FormatInt(min(31999, m.Output-1), 10) + `}}`)},
		}
	case "@ai-sdk/google":
		if gemini25.MatchString(id) {
			max := "24576"
			if strings.Contains(id, "pro") && !strings.Contains(id, "flash") {
				max = "32768"
			}
			return []Variant{
				{"high", raw(`{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":16000}}`)},
				{"max", raw(`{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":` + max + `}}`)},
			}
		}
		return efforts(geminiLevels(id), `{"thinkingConfig":{"includeThoughts":true,"thinkingLevel":%q}}`)
	}
	return nil
}

// VariantOptions are the options of the model's variant named name (nil:
// no such variant, or the model's own defaults, "default").
func VariantOptions(npm string, m *Model, name string) json.RawMessage {
	if name == "" || name == "default" {
		return nil
	}
	for _, v := range Variants(npm, m) {
		if v.Name == name {
			return v.Options
		}
	}
	return nil
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// efforts is one variant per level, its options format with the level.
func efforts(levels []string, format string) []Variant {
	out := make([]Variant, 0, len(levels))
	for _, l := range levels {
		out = append(out, Variant{l, raw(strings.Replace(format, "%q", strconv.Quote(l), 1))})
	}
	return out
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// floorHalfLess1 is Math.floor(n/2 - 1).
func floorHalfLess1(n int64) int64 {
	if n%2 == 0 || n >= 0 {
		return n/2 - 1
	}
	return n/2 - 2
}

var (
	gpt5      = regexp.MustCompile(`(?:^|/)gpt-5(?:[.-]|$)`)
	gpt5Minor = regexp.MustCompile(`(?:^|/)gpt-5[.-](\d+)(?:[.-]|$)`)
	gpt5Pro   = regexp.MustCompile(`(?:^|/)gpt-5[.-]?pro(?:[.-]|$)`)
	gpt5NPro  = regexp.MustCompile(`(?:^|/)gpt-5[.-]\d+[.-]pro(?:[.-]|$)`)
	gemini25  = regexp.MustCompile(`gemini-2[.-]5(?:[.-]|$)`)
	gemini12  = regexp.MustCompile(`gemini-(?:(?:flash|pro)-)?[12](?:[.-]|$)`)
	claudeVer = regexp.MustCompile(`(?i)claude-(?:[a-z]+-)?(\d+)(?:[.-](\d{1,2}))?(?:[.@-]|$)`)
)

// openAIEfforts is OpenCode's effort list for an OpenAI model (M7): by
// the GPT-5 line's minor version, its pro, codex and chat models, and the
// release date (none from 2025-11-13, xhigh from 2025-12-04).
func openAIEfforts(id, released string) []string {
	q := strings.ToLower(id)
	minor := 0
	if m := gpt5Minor.FindStringSubmatch(q); m != nil {
		minor, _ = strconv.Atoi(m[1])
	}
	base := []string{"low", "medium", "high"}
	switch {
	case strings.Contains(q, "deep-research"):
		return []string{"medium"}
	case gpt5.MatchString(q) && strings.Contains(q, "-chat"):
		if minor == 0 {
			return nil
		}
		return []string{"medium"}
	case gpt5Pro.MatchString(q):
		return []string{"high"}
	case gpt5.MatchString(q) && strings.Contains(q, "codex"):
		switch {
		case minor >= 3:
			return []string{"none", "low", "medium", "high", "xhigh"}
		case strings.Contains(q, "codex-max") || minor >= 2:
			return append(base, "xhigh")
		}
		return base
	case gpt5NPro.MatchString(q):
		return []string{"medium", "high", "xhigh"}
	case minor == 1:
		return append([]string{"none"}, base...)
	case minor > 1:
		return append(append([]string{"none"}, base...), "xhigh")
	}
	levels := append([]string(nil), base...)
	if gpt5.MatchString(q) {
		levels = append([]string{"minimal"}, levels...)
	}
	if released >= "2025-11-13" {
		levels = append([]string{"none"}, levels...)
	}
	if released >= "2025-12-04" {
		levels = append(levels, "xhigh")
	}
	return levels
}

// adaptiveEfforts are a Claude model's adaptive thinking efforts (from
// 4.7 on, and Opus/Sonnet 4.6), nil for budget-thinking models.
func adaptiveEfforts(id string) []string {
	if claudeFrom47(id) {
		return []string{"low", "medium", "high", "xhigh", "max"}
	}
	if containsAny(id, "opus-4-6", "opus-4.6", "4-6-opus", "4.6-opus", "sonnet-4-6", "sonnet-4.6", "4-6-sonnet", "4.6-sonnet") {
		return []string{"low", "medium", "high", "max"}
	}
	return nil
}

// claudeFrom47 is OpenCode's test for a Claude model from 4.7 on (a
// claude- ID without a version counts as new).
func claudeFrom47(id string) bool {
	if !strings.Contains(strings.ToLower(id), "claude-") {
		return false
	}
	m := claudeVer.FindStringSubmatch(id)
	if m == nil {
		return true
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major > 4 || major == 4 && minor >= 7
}

// geminiLevels are OpenCode's thinking levels for a Gemini model that
// does not take budgets.
func geminiLevels(id string) []string {
	switch {
	case strings.Contains(id, "gemma"):
		return []string{"minimal", "high"}
	case gemini12.MatchString(id):
		return []string{"low", "high"}
	case strings.Contains(id, "flash-image"):
		return []string{"minimal", "high"}
	case strings.Contains(id, "pro-image"):
		return []string{"high"}
	case strings.Contains(id, "flash"):
		return []string{"minimal", "low", "medium", "high"}
	}
	return []string{"low", "medium", "high"}
}
