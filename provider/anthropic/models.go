package anthropic

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/jsonw"
)

// Model knowledge: what each Claude model can do and which thinking OpenCode
// sends it, by model ID, apart from the encoding of the request itself.

// capabilities is @ai-sdk/anthropic's getModelCapabilities.
type capabilities struct {
	maxOutput        int
	structuredOutput bool
	rejectsSampling  bool
	known            bool
}

func modelCapabilities(id string) capabilities {
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(id, x) {
				return true
			}
		}
		return false
	}
	switch {
	case has("claude-opus-5"):
		return capabilities{128000, true, true, true}
	case has("claude-opus-4-8", "claude-opus-4-7", "claude-fable-5", "claude-sonnet-5"):
		return capabilities{128000, true, true, true}
	case has("claude-sonnet-4-6", "claude-opus-4-6"):
		return capabilities{128000, true, false, true}
	case has("claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5"):
		return capabilities{64000, true, false, true}
	case has("claude-opus-4-1"):
		return capabilities{32000, true, false, true}
	case has("claude-sonnet-4-"):
		return capabilities{64000, false, false, true}
	case has("claude-opus-4-"):
		return capabilities{32000, false, false, true}
	case has("claude-3-haiku"):
		return capabilities{4096, false, false, true}
	case legacyClaude.MatchString(id):
		return capabilities{4096, false, false, false}
	case has("claude-"):
		return capabilities{128000, true, true, false}
	}
	return capabilities{4096, false, false, false}
}

// legacyClaude is the AI SDK's /claude-(?:instant(?:-|$)|v?2(?=$|[-.:])|3(?=$|[-.]))/
// without the lookaheads RE2 lacks (the next byte is matched instead).
var legacyClaude = regexp.MustCompile(`claude-(?:instant(?:-|$)|v?2(?:$|[-.:])|3(?:$|[-.]))`)

// adaptiveClaude is OpenCode's check (transform.ts) for claude models from
// 5.1 on, which get adaptive thinking with block binding by default.
var adaptiveClaude = regexp.MustCompile(`(?i)claude-(?:([a-z]+)-)?(\d+)(?:[.-](\d{1,2}))?(?:-([a-z]+))?(?:[.@-]|$)`)

// defaultThinking is the thinking field OpenCode 1.18.33 sends for a model
// when no variant is chosen ("" for none).
func defaultThinking(id string) string {
	if m := adaptiveClaude.FindStringSubmatch(id); m != nil {
		major, _ := strconv.Atoi(m[2])
		minor := 0
		if m[3] != "" {
			minor, _ = strconv.Atoi(m[3])
		}
		fam := m[1]
		if fam == "" {
			fam = m[4]
		}
		mythos := major == 5 && minor == 1 && strings.EqualFold(fam, "mythos")
		if !mythos && (major > 5 || major == 5 && minor >= 1) {
			return `{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`
		}
	}
	if strings.Contains(strings.ToLower(id), "minimax-m3") {
		return `{"type":"adaptive"}`
	}
	return ""
}

// titleVariant is the thinking of a title request: OpenCode's
// smallOptions() takes the small model's first variant (transform.ts
// variants() for @ai-sdk/anthropic, offered only to a model whose
// capabilities.reasoning is set), then adds block binding to Claude 5.1
// on as for a turn:
//
//   - Claude 4.6 Opus/Sonnet and from 4.7 on: adaptive efforts, the first
//     "low"; from 4.7 on with display "summarized";
//   - Opus 4.5: effort levels with a thinking budget, the first "low";
//   - the others: "high", thinking enabled with a budget of
//     min(16000, floor(limit.output/2 - 1)).
//
// It returns the thinking object, the effort (output_config) and the
// budget the AI SDK adds to max_tokens.
func titleVariant(id string, outputLimit int) (thinking, effort string, budget int) {
	claude47 := claudeFrom47(id)
	adaptive := claude47
	for _, s := range []string{"opus-4-6", "opus-4.6", "4-6-opus", "4.6-opus", "sonnet-4-6", "sonnet-4.6", "4-6-sonnet", "4.6-sonnet"} {
		adaptive = adaptive || strings.Contains(id, s)
	}
	binding := ""
	if strings.Contains(defaultThinking(id), "block_binding") {
		binding = `,"block_binding":{"prefix_mismatch_behavior":"drop_block"}`
	}
	if adaptive {
		display := ""
		if claude47 {
			display = `,"display":"summarized"`
		}
		return `{"type":"adaptive"` + display + binding + `}`, "low", 0
	}
	budget = min(16000, int(math.Floor(float64(outputLimit)/2-1)))
	if budget <= 0 {
		// No output limit known: the AI SDK's default budget.
		budget = 1024
	}
	thinking = `{"type":"enabled","budget_tokens":` + strconv.Itoa(budget) + binding + `}`
	if strings.Contains(id, "opus-4-5") || strings.Contains(id, "opus-4.5") {
		effort = "low"
	}
	return thinking, effort, budget
}

// variantThinking is the thinking field of a variant's thinking option,
// and the budget the AI SDK adds to max_tokens (an enabled one without a
// budget gets the AI SDK's 1024).
func variantThinking(id, typ string, budget *int, display string) (string, int) {
	binding := ""
	if strings.Contains(defaultThinking(id), "block_binding") && (typ == "adaptive" || typ == "enabled") {
		binding = `,"block_binding":{"prefix_mismatch_behavior":"drop_block"}`
	}
	switch typ {
	case "enabled":
		n := 1024
		if budget != nil {
			n = *budget
		}
		return `{"type":"enabled","budget_tokens":` + strconv.Itoa(n) + binding + `}`, n
	case "adaptive":
		d := ""
		if display != "" {
			d = `,"display":` + string(jsonw.AppendString(nil, display))
		}
		return `{"type":"adaptive"` + d + binding + `}`, 0
	case "disabled":
		return `{"type":"disabled"}`, 0
	}
	return "", 0
}

// claudeFrom47 is OpenCode's check for a Claude model from 4.7 on (a
// claude- ID without a version counts as new).
func claudeFrom47(id string) bool {
	if !strings.Contains(strings.ToLower(id), "claude-") {
		return false
	}
	m := claudeVersion.FindStringSubmatch(id)
	if m == nil {
		return true
	}
	major, _ := strconv.Atoi(m[1])
	minor := 0
	if m[2] != "" {
		minor, _ = strconv.Atoi(m[2])
	}
	return major > 4 || major == 4 && minor >= 7
}

var claudeVersion = regexp.MustCompile(`(?i)claude-(?:[a-z]+-)?(\d+)(?:[.-](\d{1,2}))?(?:[.@-]|$)`)
