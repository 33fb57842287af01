package anthropic

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/jsonw"
	"github.com/opencode-server/opencode-server/provider"
)

// Betas the request itself adds, as @ai-sdk/anthropic adds them.
const (
	betaPDFs              = "pdfs-2024-09-25"
	betaStructuredOutputs = "structured-outputs-2025-11-13"
	betaMidSystem         = "mid-conversation-system-2026-04-07"
)

// cacheMark is what a prompt-caching breakpoint adds to a block: OpenCode's
// applyCaching puts {anthropic:{cacheControl:{type:"ephemeral"}}} on the
// message and the AI SDK writes it as the block's last key.
const cacheMark = `,"cache_control":{"type":"ephemeral"}}`

// maxBreakpoints is the AI SDK's CacheControlValidator limit: marks past
// the fourth (in prompt order) are dropped.
const maxBreakpoints = 4

// Flags of a message's encoding (the first byte of its memo).
const (
	// flagKept: OpenCode's empty-content filter for @ai-sdk/anthropic keeps
	// the message (it counts for caching even if no block comes of it).
	flagKept = 1 << iota
	// flagCacheable: the message's last content part became a block that
	// takes cache_control (not thinking, not dropped reasoning).
	flagCacheable
	// flagToolUse: an assistant message with tool_use blocks.
	flagToolUse
	// flagPDF: a user message with a PDF document (the pdfs beta).
	flagPDF
	// flagLastText: the last content part is a text block (trimmed when
	// the prompt ends with this assistant message).
	flagLastText
)

// block is one content block in its wire form.
type block struct {
	raw      []byte
	toolUse  bool
	thinking bool // thinking or redacted_thinking
}

// encoder is one request's encoding settings that reach into messages.
type encoder struct {
	sanitize bool // claude model: tool-call IDs as OpenCode sanitises them
}

// memoKey names the encoding in a message's memo (it depends on whether
// tool-call IDs are sanitised).
func (e encoder) memoKey() string {
	if e.sanitize {
		return "anthropic-messages/claude"
	}
	return "anthropic-messages"
}

var unsafeID = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// toolID is id as OpenCode sends it to a claude model:
// id.replace(/[^a-zA-Z0-9_-]/g, "_").
func (e encoder) toolID(id string) string {
	if !e.sanitize {
		return id
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			// JS replaces UTF-16 code units; a multi-byte rune counts as
			// one (or two, above the BMP) there.
			return unsafeID.ReplaceAllStringFunc(id, func(s string) string {
				r := []rune(s)[0]
				if r > 0xFFFF {
					return "__"
				}
				return "_"
			})
		}
	}
	return id
}

// encode is a message's memo value: its flags byte, then its blocks
// joined by commas.
func (e encoder) encode(m *provider.Message) []byte {
	blocks, flags := e.blocks(m, false)
	n := 1
	for _, b := range blocks {
		n += len(b.raw) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, flags)
	for i, b := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b.raw...)
	}
	return out
}

// reasoningMeta is a reasoning part's metadata from this provider.
type reasoningMeta struct {
	Anthropic *struct {
		Signature    *string `json:"signature"`
		RedactedData *string `json:"redactedData"`
	} `json:"anthropic"`
}

func parseReasoningMeta(raw json.RawMessage) (sig, redacted *string) {
	if len(raw) == 0 {
		return nil, nil
	}
	var md reasoningMeta
	if json.Unmarshal(raw, &md) != nil || md.Anthropic == nil {
		return nil, nil
	}
	return md.Anthropic.Signature, md.Anthropic.RedactedData
}

// blocks encodes one message's content blocks, applying OpenCode's
// empty-content filter first. trim trims the last text (the prompt ends
// with this assistant message, which the API takes as a prefill).
func (e encoder) blocks(m *provider.Message, trim bool) ([]block, byte) {
	var (
		out   []block
		flags byte
		// the last part's fate, for flagCacheable and flagLastText
		lastCacheable, lastText, kept bool
		lastTextStr                   string
	)
	addText := func(text string) {
		b := jsonw.AppendString([]byte(`{"type":"text","text":`), text)
		out = append(out, block{raw: append(b, '}')})
		lastCacheable, lastText, kept, lastTextStr = true, true, true, text
	}
	switch m.Role {
	case "system":
		if t := m.Texts(); t != "" {
			addText(t)
		}
	case "user":
		if m.Parts == nil {
			if m.Content != "" {
				addText(m.Content)
			}
			break
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			switch p.Type {
			case provider.PartText:
				if p.Text != "" {
					addText(p.Text)
				}
			case provider.PartFile:
				b, pdf, ok := fileBlock(p)
				if !ok {
					continue
				}
				if pdf {
					flags |= flagPDF
				}
				out = append(out, block{raw: b})
				lastCacheable, lastText, kept = true, false, true
			}
		}
	case "tool":
		b := append([]byte(nil), `{"type":"tool_result","tool_use_id":`...)
		b = jsonw.AppendString(b, e.toolID(m.ToolCallID))
		b = append(b, `,"content":`...)
		b = jsonw.AppendString(b, m.Content)
		if m.IsError {
			b = append(b, `,"is_error":true`...)
		}
		out = append(out, block{raw: append(b, '}')})
		lastCacheable, lastText, kept = true, false, true
	case "assistant":
		if m.Parts == nil {
			if m.Content != "" {
				addText(m.Content)
			}
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			switch p.Type {
			case provider.PartText:
				if p.Text != "" {
					addText(p.Text)
				}
			case provider.PartReasoning:
				sig, red := parseReasoningMeta(p.Metadata)
				if strings.TrimSpace(p.Text) == "" && sig == nil && red == nil {
					continue // OpenCode drops it
				}
				kept = true
				lastCacheable, lastText = false, false
				switch {
				case sig != nil:
					b := append([]byte(nil), `{"type":"thinking","thinking":`...)
					b = jsonw.AppendString(b, p.Text)
					b = append(b, `,"signature":`...)
					b = jsonw.AppendString(b, *sig)
					out = append(out, block{raw: append(b, '}'), thinking: true})
				case red != nil:
					b := append([]byte(nil), `{"type":"redacted_thinking","data":`...)
					b = jsonw.AppendString(b, *red)
					out = append(out, block{raw: append(b, '}'), thinking: true})
				}
				// Reasoning without this provider's metadata: the AI SDK
				// warns "unsupported reasoning metadata" and drops it.
			case provider.PartFile:
				// The AI SDK sends no files in assistant messages.
				kept = true
				lastCacheable, lastText = false, false
			}
		}
		for _, tc := range m.ToolCalls {
			b := append([]byte(nil), `{"type":"tool_use","id":`...)
			b = jsonw.AppendString(b, e.toolID(tc.ID))
			b = append(b, `,"name":`...)
			b = jsonw.AppendString(b, tc.Name)
			b = append(b, `,"input":`...)
			b = jsonw.AppendCompact(b, tc.Arguments, "{", "{}")
			out = append(out, block{raw: append(b, '}'), toolUse: true})
			flags |= flagToolUse
			lastCacheable, lastText, kept = true, false, true
		}
	}
	if trim && lastText && len(out) > 0 {
		// The last text trimmed (JS String.prototype.trim): the API
		// refuses a prefill ending in whitespace.
		b := jsonw.AppendString([]byte(`{"type":"text","text":`), strings.TrimFunc(lastTextStr, isJSSpace))
		out[len(out)-1] = block{raw: append(b, '}')}
	}
	if kept {
		flags |= flagKept
	}
	if lastCacheable {
		flags |= flagCacheable
	}
	if lastText {
		flags |= flagLastText
	}
	return out, flags
}

// isJSSpace is what JavaScript's trim removes.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// item is one message of the prompt with its encoding.
type item struct {
	m     *provider.Message
	enc   []byte // flags byte + joined blocks
	class byte   // 's' system, 'u' user and tool, 'a' assistant
	mark  bool
}

func (it *item) flags() byte  { return it.enc[0] }
func (it *item) body() []byte { return it.enc[1:] }
func (it *item) empty() bool  { return len(it.enc) <= 1 }
func (it *item) marked() bool { return it.mark && it.flags()&flagCacheable != 0 }
func (it *item) isTool() bool { return it.m.Role == "tool" }

// classOf groups roles as the AI SDK's groupIntoBlocks does (0: not sent).
func classOf(role string) byte {
	switch role {
	case "system":
		return 's'
	case "user", "tool":
		return 'u'
	case "assistant":
		return 'a'
	}
	return 0
}

// orderedSet is a JavaScript Set of strings: insertion order, no repeats.
type orderedSet []string

func (s *orderedSet) add(v string) {
	for _, x := range *s {
		if x == v {
			return
		}
	}
	*s = append(*s, v)
}

// buildBody appends the request body for req to dst and returns it with
// the betas the request adds (before the configured ones).
func (p *Provider) buildBody(dst []byte, req *provider.Request) ([]byte, orderedSet, error) {
	enc := encoder{sanitize: strings.Contains(req.ModelID, "claude")}
	key := enc.memoKey()
	var betas orderedSet

	// The prompt as OpenCode hands it to the AI SDK: the system message,
	// then the conversation, with empty content filtered out.
	items := make([]item, 0, len(req.Messages)+1)
	if req.System != "" {
		items = append(items, item{m: &provider.Message{Role: "system", Content: req.System}, enc: p.systemEnc(req.System), class: 's'})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		c := classOf(m.Role)
		if c == 0 {
			continue
		}
		if m.Role == "user" {
			for _, part := range m.Parts {
				if part.Type == provider.PartFile && !supportedFile(part.MediaType) {
					return nil, nil, &provider.APIError{Message: "'media type: " + part.MediaType + "' functionality not supported."}
				}
			}
		}
		var e []byte
		if m.Memo != nil {
			e = m.Memo.Bytes(key, func() []byte { return enc.encode(m) })
		} else {
			e = enc.encode(m)
		}
		if e[0]&flagKept == 0 {
			continue
		}
		items = append(items, item{m: m, enc: e, class: c, mark: m.Cache})
	}
	applyCaching(items)

	// Drop what encodes to nothing (an API error as an empty message).
	kept := items[:0]
	for _, it := range items {
		if !it.empty() {
			kept = append(kept, it)
		}
	}
	items = kept

	caps := modelCapabilities(req.ModelID)
	thinking := defaultThinking(req.ModelID)
	effort, budget := "", 0
	if req.Purpose == provider.PurposeTitle {
		thinking, effort, budget = "", "", 0
		if req.Reasons(func(string) bool { return false }) {
			thinking, effort, budget = titleVariant(req.ModelID, req.OutputLimit)
		}
	} else if v := req.VariantOptions(); v != nil {
		// The chosen variant over the defaults (OpenCode's mergeDeep, then
		// block binding from Claude 5.1 on).
		if t := v.Thinking; t != nil {
			thinking, budget = variantThinking(req.ModelID, t.Type, t.BudgetTokens, t.Display)
		}
		if v.Effort != "" {
			effort = v.Effort
		}
	}
	temp, topP := req.Temperature, req.TopP
	if temp != nil {
		t := min(max(*temp, 0), 1)
		temp = &t
	}
	if caps.rejectsSampling {
		temp, topP = nil, nil
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = caps.maxOutput
	}
	if thinking != "" && !strings.Contains(thinking, `"disabled"`) {
		temp, topP = nil, nil
		// The AI SDK adds the thinking budget to max_tokens.
		maxTokens += budget
	} else if (caps.known || strings.Contains(req.ModelID, "claude-")) && topP != nil && temp != nil {
		topP = nil
	}
	if caps.known && maxTokens > caps.maxOutput {
		maxTokens = caps.maxOutput
	}

	b := append(dst, `{"model":`...)
	b = jsonw.AppendString(b, req.ModelID)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if temp != nil {
		b = append(b, `,"temperature":`...)
		b = jsonw.AppendFloat(b, *temp)
	}
	if topP != nil {
		b = append(b, `,"top_p":`...)
		b = jsonw.AppendFloat(b, *topP)
	}
	if thinking != "" {
		b = append(b, `,"thinking":`...)
		b = append(b, thinking...)
	}
	if effort != "" {
		b = append(b, `,"output_config":{"effort":`...)
		b = jsonw.AppendString(b, effort)
		b = append(b, '}')
	}

	// The first run of system messages is the top-level system (the AI
	// SDK hoists it even from later in the prompt); later ones are
	// mid-conversation system messages. Runs are taken on the whole
	// prompt, so the hoisted run still separates its neighbours.
	sysStart, sysEnd := -1, -1
	for i := range items {
		if items[i].class == 's' {
			sysStart, sysEnd = i, runEnd(items, i)
			break
		}
	}
	if sysStart >= 0 {
		b = append(b, `,"system":[`...)
		b = appendRun(b, items[sysStart:sysEnd])
		b = append(b, ']')
	}
	b = append(b, `,"messages":[`...)
	first := true
	for i := 0; i < len(items); {
		end := runEnd(items, i)
		if i == sysStart {
			i = end
			continue
		}
		run := items[i:end]
		for k := range run {
			if run[k].flags()&flagPDF != 0 {
				betas.add(betaPDFs)
			}
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		switch run[0].class {
		case 's':
			betas.add(betaMidSystem)
			b = append(b, `{"role":"system","content":[`...)
			b = appendRun(b, run)
		case 'u':
			b = append(b, `{"role":"user","content":[`...)
			b = appendRun(b, run)
		case 'a':
			b = append(b, `{"role":"assistant","content":[`...)
			b = appendAssistant(b, run, enc, end == len(items))
		}
		b = append(b, `]}`...)
		i = end
	}
	b = append(b, ']')

	if len(req.Tools) > 0 {
		eager := strings.Contains(req.ModelID, "claude")
		b = append(b, `,"tools":[`...)
		for i, t := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonw.AppendString(b, t.Name)
			b = append(b, `,"description":`...)
			b = jsonw.AppendString(b, t.Description)
			b = append(b, `,"input_schema":`...)
			b = jsonw.AppendCompact(b, t.Parameters, "{", emptySchema)
			if eager {
				b = append(b, `,"eager_input_streaming":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, `],"tool_choice":{"type":"auto"}`...)
		if caps.structuredOutput {
			betas.add(betaStructuredOutputs)
		}
	}
	b = append(b, `,"stream":true}`...)
	return b, betas, nil
}

const emptySchema = `{"type":"object","properties":{}}`

// runEnd is the end of the run of items of items[i]'s class from i.
func runEnd(items []item, i int) int {
	j := i + 1
	for j < len(items) && items[j].class == items[i].class {
		j++
	}
	return j
}

// appendRun appends the blocks of a run of messages merged into one, each
// message's last block carrying its cache mark.
func appendRun(b []byte, run []item) []byte {
	for k := range run {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, &run[k])
	}
	return b
}

func appendItem(b []byte, it *item) []byte {
	body := it.body()
	if it.marked() {
		b = append(b, body[:len(body)-1]...)
		return append(b, cacheMark...)
	}
	return append(b, body...)
}

// appendAssistant appends a run of assistant messages merged into one.
// Memoised blocks serve the common case; the AI SDK's moveToolUseBlocksToEnd
// (tool_use blocks after the others, between thinking blocks) and the
// trimmed prefill text need the blocks one by one.
func appendAssistant(b []byte, run []item, enc encoder, last bool) []byte {
	reorder := false
	for k := 0; k < len(run)-1; k++ {
		if run[k].flags()&flagToolUse != 0 {
			reorder = true
		}
	}
	trim := last && run[len(run)-1].flags()&flagLastText != 0
	if !reorder && !trim {
		return appendRun(b, run)
	}
	var all []block
	for k := range run {
		blocks, _ := enc.blocks(run[k].m, trim && k == len(run)-1)
		if run[k].marked() && len(blocks) > 0 {
			l := &blocks[len(blocks)-1]
			l.raw = append(l.raw[:len(l.raw)-1:len(l.raw)-1], cacheMark...)
		}
		all = append(all, blocks...)
	}
	for k, bl := range moveToolUseToEnd(all) {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, bl.raw...)
	}
	return b
}

// moveToolUseToEnd is the AI SDK's moveToolUseBlocksToEnd.
func moveToolUseToEnd(blocks []block) []block {
	out := make([]block, 0, len(blocks))
	var seg []block
	flush := func() {
		for _, x := range seg {
			if !x.toolUse {
				out = append(out, x)
			}
		}
		for _, x := range seg {
			if x.toolUse {
				out = append(out, x)
			}
		}
		seg = seg[:0]
	}
	for _, x := range blocks {
		if x.thinking {
			flush()
			out = append(out, x)
		} else {
			seg = append(seg, x)
		}
	}
	flush()
	return out
}

// applyCaching marks items as OpenCode 1.18.33's applyCaching
// (provider/transform.ts) does for Anthropic:
//
//	const system = msgs.filter((msg) => msg.role === "system").slice(0, 2)
//	const final = msgs.filter((msg) => msg.role !== "system").slice(-2)
//	for (const msg of unique([...system, ...final])) { ... cacheControl: {type: "ephemeral"} }
//
// on the message (provider "anthropic") or its last content part (any
// other provider ID): both end up on the message's last block. A tool
// message of OpenCode's holds all of a step's results, so consecutive
// tool results count as one message, marked on its last result. Explicit
// Message.Cache marks are added, and the AI SDK keeps the first four.
func applyCaching(items []item) {
	sys := 0
	for i := range items {
		if items[i].class == 's' && sys < 2 {
			items[i].mark = true
			sys++
		}
	}
	final := 0
	for i := len(items) - 1; i >= 0 && final < 2; i-- {
		if items[i].class == 's' {
			continue
		}
		items[i].mark = true
		final++
		if items[i].isTool() {
			for i > 0 && items[i-1].isTool() {
				i--
			}
		}
	}
	n := 0
	for i := range items {
		if items[i].mark {
			n++
			if n > maxBreakpoints {
				items[i].mark = false
			}
		}
	}
}
