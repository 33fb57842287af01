package openairesponses

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/jsonw"
	"github.com/opencode-server/opencode-server/provider"
)

// memoKey names this package's encoding of a message in its memo. The
// items of user, assistant and tool messages do not depend on the model
// (system messages, whose role does, are not memoised).
const memoKey = "openai-responses"

// includeEncrypted is OpenCode's include list (transform.ts:
// S1=["reasoning.encrypted_content"]), which the AI SDK also adds by
// itself for a reasoning model when store is false.
const includeEncrypted = `["reasoning.encrypted_content"]`

// settings are what OpenCode 1.18.33 and @ai-sdk/openai 3.0.88 decide for
// one call from the model: OpenCode's provider options (transform.ts
// options(), or smallOptions() for a title), then the AI SDK's getArgs.
type settings struct {
	// reasoning is the AI SDK's isReasoningModel (forceReasoning, which
	// OpenCode sets when it sets an effort or a summary, else the model's
	// capabilities): the system prompt goes as a developer message, the
	// reasoning options are sent, sampling is dropped, and encrypted
	// reasoning is included (store is false).
	reasoning bool
	effort    string // reasoning.effort ("" : not sent)
	summary   string // reasoning.summary
	verbosity string // text.verbosity
	// sampling keeps temperature and top_p on a reasoning model (effort
	// "none" on gpt-5.1 and later).
	sampling bool
	cacheKey string // prompt_cache_key
}

// gptVersion is the AI SDK's getGptVersion: /^gpt-(\d+)(?:\.(\d+))?(?:-(.+))?$/.
var gptVersionRE = regexp.MustCompile(`^gpt-(\d+)(?:\.(\d+))?(?:-(.+))?$`)

type gptVersion struct {
	major, minor int
	hasMinor     bool
	variant      string
}

func parseGPT(id string) (gptVersion, bool) {
	m := gptVersionRE.FindStringSubmatch(id)
	if m == nil {
		return gptVersion{}, false
	}
	v := gptVersion{variant: m[3]}
	v.major, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		v.minor, _ = strconv.Atoi(m[2])
		v.hasMinor = true
	}
	return v, true
}

var oSeriesRE = regexp.MustCompile(`^o(\d+)(?:-|$)`)

// sdkReasoning is the AI SDK's getOpenAILanguageModelCapabilities:
// isReasoningModel (o-series, gpt-5 and later except gpt-5-chat) and
// supportsNonReasoningParameters (gpt-5.1 and later).
func sdkReasoning(id string) (reasoning, nonReasoningParams bool) {
	if oSeriesRE.MatchString(id) {
		reasoning = true
	}
	if v, ok := parseGPT(id); ok {
		chat := !v.hasMinor && strings.HasPrefix(v.variant, "chat")
		if v.major >= 5 && !chat {
			reasoning = true
		}
		nonReasoningParams = v.major > 5 || v.major == 5 && v.minor >= 1
	}
	return reasoning, nonReasoningParams
}

// gpt5 is OpenCode's test for its gpt-5 defaults:
// id.includes("gpt-5") && !id.includes("gpt-5-chat").
func gpt5(id string) bool {
	return strings.Contains(id, "gpt-5") && !strings.Contains(id, "gpt-5-chat")
}

// modelSettings are the settings of a call to id. OpenCode's options()
// for @ai-sdk/openai (provider/transform.ts):
//
//	if (model.providerID === "openai" || model.api.npm === "@ai-sdk/openai" || ...) result["store"] = false
//	... else if (model.api.npm === "@ai-sdk/openai" || ...) result["promptCacheKey"] = input.sessionID
//	if (model.api.id.includes("gpt-5") && !model.api.id.includes("gpt-5-chat")) {
//	  if (!model.api.id.includes("gpt-5-pro")) {
//	    result["reasoningEffort"] = "medium"
//	    if (npm === "@ai-sdk/openai" || ...) result["reasoningSummary"] = "auto"
//	    if (npm === "@ai-sdk/openai" || ...) result["include"] = ["reasoning.encrypted_content"]
//	  }
//	  if (id.includes("gpt-5.") && !id.includes("codex") && !id.includes("-chat") && npm === "@ai-sdk/openai" ...)
//	    result["textVerbosity"] = "low"
//	  if (model.providerID.startsWith("opencode") && setCacheKey !== false)
//	    result["promptCacheKey"] = sessionID, result["include"] = [...], result["reasoningSummary"] = "auto"
//	}
//
// and for a title smallOptions(): {store: false} with the model's first
// variant ({reasoningEffort, reasoningSummary: "auto", include}). Then
// providerOptions() adds forceReasoning: true when the model reasons or an
// effort or summary is set.
func modelSettings(id, providerID string, req *provider.Request) settings {
	var s settings
	if req.Purpose == provider.PurposeTitle {
		// A model the catalog says does not reason has no variants.
		if e := firstVariant(id); e != "" && req.Reasons(func(string) bool { return true }) {
			s.effort, s.summary = e, "auto"
		}
	} else {
		s.cacheKey = req.SessionID
		if gpt5(id) {
			if !strings.Contains(id, "gpt-5-pro") {
				s.effort, s.summary = "medium", "auto"
			}
			if strings.Contains(id, "gpt-5.") && !strings.Contains(id, "codex") && !strings.Contains(id, "-chat") {
				s.verbosity = "low"
			}
			if strings.HasPrefix(providerID, "opencode") {
				s.summary = "auto"
			}
		}
	}
	if v := req.VariantOptions(); v != nil && req.Purpose != provider.PurposeTitle {
		// The chosen variant over the defaults (OpenCode's mergeDeep).
		if v.ReasoningEffort != "" {
			s.effort = v.ReasoningEffort
		}
		if v.ReasoningSummary != "" {
			s.summary = v.ReasoningSummary
		}
		if v.TextVerbosity != "" {
			s.verbosity = v.TextVerbosity
		}
	}
	// capabilities.reasoning, or the AI SDK's own rule for a model the
	// catalog does not know.
	caps, nonReasoningParams := sdkReasoning(id)
	caps = req.Reasons(func(string) bool { return caps })
	s.reasoning = caps || s.effort != "" || s.summary != ""
	s.sampling = s.effort == "none" && nonReasoningParams
	return s
}

var (
	gpt5Any      = regexp.MustCompile(`(?:^|/)gpt-5(?:[.-]|$)`)
	gpt5Minor    = regexp.MustCompile(`(?:^|/)gpt-5[.-](\d+)(?:[.-]|$)`)
	gpt5Pro      = regexp.MustCompile(`(?:^|/)gpt-5[.-]?pro(?:[.-]|$)`)
	gpt5MinorPro = regexp.MustCompile(`(?:^|/)gpt-5[.-]\d+[.-]pro(?:[.-]|$)`)
)

// firstVariant is the reasoning effort of the first of the model's
// variants, which OpenCode's smallOptions() sends with a title request
// ("" when the model has none): its effort list (transform.ts M7) for
// the model's ID. The release-date rules (none from 2025-11-13, xhigh
// from 2025-12-04) are taken from the version, as OpenAI's dates follow
// it; a model that reasons by neither the AI SDK nor OpenCode has none.
func firstVariant(id string) string {
	if r, _ := sdkReasoning(id); !r && !gpt5(id) {
		return ""
	}
	q := strings.ToLower(id)
	minor := 0
	if m := gpt5Minor.FindStringSubmatch(q); m != nil {
		minor, _ = strconv.Atoi(m[1])
	}
	switch {
	case strings.Contains(q, "deep-research"):
		return "medium"
	case gpt5Any.MatchString(q) && strings.Contains(q, "-chat"):
		if minor == 0 {
			return ""
		}
		return "medium"
	case gpt5Pro.MatchString(q):
		return "high"
	case gpt5Any.MatchString(q) && strings.Contains(q, "codex"):
		if minor >= 3 {
			return "none"
		}
		return "low"
	case gpt5MinorPro.MatchString(q):
		return "medium"
	case minor >= 1:
		return "none"
	case gpt5Any.MatchString(q):
		return "minimal"
	}
	return "low"
}

// reasoningMeta is a reasoning part's metadata from this provider, as the
// AI SDK writes it (ResponsesReasoningProviderMetadata).
type reasoningMeta struct {
	OpenAI *struct {
		ItemID                    *string `json:"itemId"`
		ReasoningEncryptedContent *string `json:"reasoningEncryptedContent"`
	} `json:"openai"`
}

// encryptedContent is a reasoning part's encrypted reasoning (nil: none).
func encryptedContent(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	var md reasoningMeta
	if json.Unmarshal(raw, &md) != nil || md.OpenAI == nil {
		return nil
	}
	return md.OpenAI.ReasoningEncryptedContent
}

// textPhase is a text part's phase metadata ("" : none).
func textPhase(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var md struct {
		OpenAI *struct {
			Phase *string `json:"phase"`
		} `json:"openai"`
	}
	if json.Unmarshal(raw, &md) != nil || md.OpenAI == nil || md.OpenAI.Phase == nil {
		return ""
	}
	return *md.OpenAI.Phase
}

// encode is a message's input items joined by commas (nothing when it
// makes none), as convertToOpenAIResponsesInput writes them with store
// false and the providerOptions OpenCode passes (it deletes itemId from
// them when store is not true, so no item carries an id):
//
//   - user: {"role":"user","content":[input_text | input_image | input_file]}
//   - assistant: one {"role":"assistant","content":[{"type":"output_text",...}]}
//     per text, {"type":"reasoning","encrypted_content":...,"summary":[...]}
//     per reasoning with encrypted content (others are dropped), then
//     {"type":"function_call","call_id","name","arguments"} per call
//   - tool: {"type":"function_call_output","call_id","output"}, the output
//     its text, or for a result with Parts (media) a content list
func encode(m *provider.Message) []byte {
	var b []byte
	item := func() {
		if len(b) > 0 {
			b = append(b, ',')
		}
	}
	text := func(t string, md json.RawMessage) {
		item()
		b = append(b, `{"role":"assistant","content":[{"type":"output_text","text":`...)
		b = jsonw.AppendString(b, t)
		b = append(b, `}]`...)
		if ph := textPhase(md); ph != "" {
			b = append(b, `,"phase":`...)
			b = jsonw.AppendString(b, ph)
		}
		b = append(b, '}')
	}
	switch m.Role {
	case "user":
		b = append(b, `{"role":"user","content":[`...)
		if m.Parts == nil {
			b = appendInputText(b, m.Content)
		}
		k := 0 // the part's index in the content the AI SDK gets
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Type != provider.PartFile && (p.Type != provider.PartText || p.Text == "") {
				// OpenCode's toModelMessages keeps a user's non-empty texts.
				continue
			}
			if k > 0 {
				b = append(b, ',')
			}
			if p.Type == provider.PartFile {
				b = appendFile(b, p, k)
			} else {
				b = appendInputText(b, p.Text)
			}
			k++
		}
		b = append(b, `]}`...)
	case "assistant":
		if m.Parts == nil && m.Content != "" {
			text(m.Content, nil)
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			switch p.Type {
			case provider.PartText:
				text(p.Text, p.Metadata)
			case provider.PartReasoning:
				enc := encryptedContent(p.Metadata)
				if enc == nil {
					// Without its encrypted content a reasoning item is
					// not sent when store is false (nor one of another
					// provider).
					continue
				}
				item()
				b = append(b, `{"type":"reasoning","encrypted_content":`...)
				b = jsonw.AppendString(b, *enc)
				b = append(b, `,"summary":[`...)
				if p.Text != "" {
					b = append(b, `{"type":"summary_text","text":`...)
					b = jsonw.AppendString(b, p.Text)
					b = append(b, '}')
				}
				b = append(b, `]}`...)
			}
			// Files in an assistant message are not sent.
		}
		for _, tc := range m.ToolCalls {
			item()
			b = append(b, `{"type":"function_call","call_id":`...)
			b = jsonw.AppendString(b, tc.ID)
			b = append(b, `,"name":`...)
			b = jsonw.AppendString(b, tc.Name)
			b = append(b, `,"arguments":`...)
			// JSON.stringify(input): the parsed arguments written compactly,
			// as a string.
			b = jsonw.AppendString(b, string(jsonw.AppendCompact(nil, tc.Arguments, "", "{}")))
			b = append(b, '}')
		}
	case "tool":
		b = append(b, `{"type":"function_call_output","call_id":`...)
		b = jsonw.AppendString(b, m.ToolCallID)
		b = append(b, `,"output":`...)
		if m.Parts == nil {
			b = jsonw.AppendString(b, m.Content)
		} else {
			b = appendToolContent(b, m.Parts)
		}
		b = append(b, '}')
	case "system":
		// Only the system prompt's role depends on the model; a system
		// message in the conversation is encoded by the caller.
	}
	return b
}

// appendToolContent appends a tool result with media as the content list
// OpenCode makes of it for @ai-sdk/openai (message-v2 toModelOutput: its
// text unless empty, then each data: URL attachment as media, which the AI
// SDK turns into image-data or file-data): input_text, input_image with a
// data URL, input_file named "data".
func appendToolContent(b []byte, parts []provider.Part) []byte {
	b = append(b, '[')
	n := len(b)
	for i := range parts {
		p := &parts[i]
		switch {
		case p.Type == provider.PartText && p.Text != "":
			if len(b) > n {
				b = append(b, ',')
			}
			b = appendInputText(b, p.Text)
		case p.Type == provider.PartFile && strings.HasPrefix(p.Data, "data:") && strings.Contains(p.Data, ","):
			if len(b) > n {
				b = append(b, ',')
			}
			url := "data:" + p.MediaType + ";base64," + provider.Base64(p.Data)
			if strings.HasPrefix(p.MediaType, "image/") {
				b = append(b, `{"type":"input_image","image_url":`...)
				b = jsonw.AppendString(b, url)
			} else {
				b = append(b, `{"type":"input_file","filename":"data","file_data":`...)
				b = jsonw.AppendString(b, url)
			}
			b = append(b, '}')
		}
	}
	return append(b, ']')
}

func appendInputText(b []byte, text string) []byte {
	b = append(b, `{"type":"input_text","text":`...)
	b = jsonw.AppendString(b, text)
	return append(b, '}')
}

// appendSystem appends the system prompt as the AI SDK sends it: a
// developer message for a reasoning model, else a system message, with
// the text as its string content.
func appendSystem(b []byte, text string, developer bool) []byte {
	if developer {
		b = append(b, `{"role":"developer","content":`...)
	} else {
		b = append(b, `{"role":"system","content":`...)
	}
	b = jsonw.AppendString(b, text)
	return append(b, '}')
}

// isFileID is the AI SDK's isFileId with the provider's fileIdPrefixes
// (["file-"]): such data is an uploaded file's ID.
func isFileID(data string) bool { return strings.HasPrefix(data, "file-") }

// mediaTypeOf is a file's media type as the AI SDK uses it.
func mediaTypeOf(p *provider.Part) string {
	if p.MediaType == "image/*" {
		return "image/jpeg"
	}
	return p.MediaType
}

// supportedFile reports whether the AI SDK sends a user file (it throws
// on any other): images, and PDFs.
func supportedFile(p *provider.Part) bool {
	mt := mediaTypeOf(p)
	return strings.HasPrefix(mt, "image/") || mt == "application/pdf"
}

// appendFile appends a user file (supportedFile) as the AI SDK sends it:
// an image as input_image with its URL or a data URL, a PDF as input_file
// with its URL, or its data URL and file name (part-<index>.pdf when it
// has none).
func appendFile(b []byte, p *provider.Part, index int) []byte {
	mt := mediaTypeOf(p)
	if strings.HasPrefix(mt, "image/") {
		b = append(b, `{"type":"input_image",`...)
		switch {
		case provider.IsHTTPURL(p.Data):
			b = append(b, `"image_url":`...)
			b = jsonw.AppendString(b, p.Data)
		case isFileID(p.Data):
			b = append(b, `"file_id":`...)
			b = jsonw.AppendString(b, p.Data)
		default:
			b = append(b, `"image_url":`...)
			b = jsonw.AppendString(b, "data:"+mt+";base64,"+provider.Base64(p.Data))
		}
		return append(b, '}')
	}
	b = append(b, `{"type":"input_file",`...)
	switch {
	case provider.IsHTTPURL(p.Data):
		b = append(b, `"file_url":`...)
		b = jsonw.AppendString(b, p.Data)
	case isFileID(p.Data):
		b = append(b, `"file_id":`...)
		b = jsonw.AppendString(b, p.Data)
	default:
		name := p.Filename
		if name == "" {
			name = "part-" + strconv.Itoa(index) + ".pdf"
		}
		b = append(b, `"filename":`...)
		b = jsonw.AppendString(b, name)
		b = append(b, `,"file_data":`...)
		b = jsonw.AppendString(b, "data:"+mt+";base64,"+provider.Base64(p.Data))
	}
	return append(b, '}')
}

const emptySchema = `{"type":"object","properties":{}}`

// buildBody appends the request body for req to dst: the AI SDK's
// getArgs with stream: true, its keys in the SDK's order (undefined ones
// left out).
func (p *Provider) buildBody(dst []byte, req *provider.Request) ([]byte, error) {
	s := modelSettings(req.ModelID, p.providerID, req)

	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != "user" {
			continue
		}
		for k := range m.Parts {
			if part := &m.Parts[k]; part.Type == provider.PartFile && !supportedFile(part) {
				return nil, &provider.APIError{Message: "'file part media type " + mediaTypeOf(part) + "' functionality not supported."}
			}
		}
	}

	b := append(dst, `{"model":`...)
	b = jsonw.AppendString(b, req.ModelID)
	b = append(b, `,"input":[`...)
	n := len(b)
	if req.System != "" {
		b = append(b, p.systemEnc(req.System, s.reasoning)...)
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		var e []byte
		switch {
		case m.Role == "system":
			if t := m.Texts(); t != "" {
				e = appendSystem(nil, t, s.reasoning)
			}
		case m.Memo != nil:
			e = m.Memo.Bytes(memoKey, func() []byte { return encode(m) })
		default:
			e = encode(m)
		}
		if len(e) == 0 {
			continue
		}
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, ']')

	if !s.reasoning || s.sampling {
		if req.Temperature != nil {
			b = append(b, `,"temperature":`...)
			b = jsonw.AppendFloat(b, *req.Temperature)
		}
		if req.TopP != nil {
			b = append(b, `,"top_p":`...)
			b = jsonw.AppendFloat(b, *req.TopP)
		}
	}
	// OpenCode's OpenAI plugin (chat.params) drops maxOutputTokens for the
	// "openai" provider.
	if req.MaxTokens > 0 && p.providerID != "openai" {
		b = append(b, `,"max_output_tokens":`...)
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if s.verbosity != "" {
		b = append(b, `,"text":{"verbosity":`...)
		b = jsonw.AppendString(b, s.verbosity)
		b = append(b, '}')
	}
	b = append(b, `,"store":false`...)
	if s.reasoning {
		b = append(b, `,"include":`...)
		b = append(b, includeEncrypted...)
	}
	if s.cacheKey != "" {
		b = append(b, `,"prompt_cache_key":`...)
		b = jsonw.AppendString(b, s.cacheKey)
	}
	if s.effort != "" || s.summary != "" {
		b = append(b, `,"reasoning":{`...)
		if s.effort != "" {
			b = append(b, `"effort":`...)
			b = jsonw.AppendString(b, s.effort)
		}
		if s.summary != "" {
			if s.effort != "" {
				b = append(b, ',')
			}
			b = append(b, `"summary":`...)
			b = jsonw.AppendString(b, s.summary)
		}
		b = append(b, '}')
	}
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","name":`...)
			b = jsonw.AppendString(b, t.Name)
			b = append(b, `,"description":`...)
			b = jsonw.AppendString(b, t.Description)
			b = append(b, `,"parameters":`...)
			b = jsonw.AppendCompact(b, t.Parameters, "{", emptySchema)
			// OpenCode's session/llm.ts sets strict: false on every tool
			// for @ai-sdk/openai.
			b = append(b, `,"strict":false}`...)
		}
		b = append(b, `],"tool_choice":"auto"`...)
	}
	b = append(b, `,"stream":true}`...)
	return b, nil
}
