package google

import (
	"encoding/json"
	"github.com/opencode-server/opencode-server/jsonw"
	"regexp"
	"strconv"
	"strings"

	"github.com/opencode-server/opencode-server/provider"
)

// memoKey names this encoder's per-message encoding in Message.Memo. A
// message's parts encode the same for every Gemini model (the model only
// changes the system prompt's place and the generation settings).
const memoKey = "google-generative-ai/parts"

// unsupported is the AI SDK's UnsupportedFunctionalityError message.
func unsupported(functionality string) error {
	return &provider.APIError{Message: "'" + functionality + "' functionality not supported."}
}

// partMeta is a part's metadata from this provider, as the AI SDK reads
// it back: providerOptions.google, else providerOptions.vertex.
type partMeta struct {
	Google *metaFields `json:"google"`
	Vertex *metaFields `json:"vertex"`
}

type metaFields struct {
	ThoughtSignature json.RawMessage `json:"thoughtSignature"`
	Thought          json.RawMessage `json:"thought"`
}

// parseMeta returns the thought signature (nil: none) and whether the
// part was a thought, from a part's or a tool call's metadata.
func parseMeta(raw json.RawMessage) (sig *string, thought bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var md partMeta
	if json.Unmarshal(raw, &md) != nil {
		return nil, false
	}
	f := md.Google
	if f == nil {
		f = md.Vertex
	}
	if f == nil {
		return nil, false
	}
	if len(f.ThoughtSignature) > 0 {
		if v, err := parseJSON(f.ThoughtSignature); err == nil && v != nil {
			s := jsString(v) // String(providerOpts.thoughtSignature)
			sig = &s
		}
	}
	return sig, string(f.Thought) == "true"
}

func appendSig(b []byte, sig *string) []byte {
	if sig == nil {
		return b
	}
	b = append(b, `,"thoughtSignature":`...)
	return jsonw.AppendString(b, *sig)
}

// partWriter joins encoded parts with commas.
type partWriter struct{ b []byte }

func (w *partWriter) next() {
	if len(w.b) > 0 {
		w.b = append(w.b, ',')
	}
}

func (w *partWriter) text(s string, thought bool, sig *string) {
	w.next()
	w.b = jsonw.AppendString(append(w.b, `{"text":`...), s)
	if thought {
		w.b = append(w.b, `,"thought":true`...)
	}
	w.b = append(appendSig(w.b, sig), '}')
}

// encodeParts is a message's parts in their wire form, joined by commas
// (the memo value): what @ai-sdk/google's
// convertToGoogleGenerativeAIMessages makes of the AI SDK prompt OpenCode
// builds, after the AI SDK's own filter of empty texts.
func encodeParts(m *provider.Message) ([]byte, error) {
	var w partWriter
	switch m.Role {
	case "user":
		if m.Parts == nil {
			if m.Content != "" {
				w.text(m.Content, false, nil)
			}
			break
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			switch p.Type {
			case provider.PartText:
				if p.Text != "" {
					w.text(p.Text, false, nil)
				}
			case provider.PartFile:
				w.next()
				w.b = appendUserFile(w.b, p)
			}
		}
	case "assistant":
		if m.Parts == nil && m.Content != "" {
			w.text(m.Content, false, nil)
		}
		for i := range m.Parts {
			p := &m.Parts[i]
			sig, thought := parseMeta(p.Metadata)
			switch p.Type {
			case provider.PartText:
				if p.Text != "" {
					w.text(p.Text, false, sig)
				}
			case provider.PartReasoning:
				if p.Text != "" {
					w.text(p.Text, true, sig)
				}
			case provider.PartFile:
				if provider.IsHTTPURL(p.Data) {
					return nil, unsupported("File data URLs in assistant messages are not supported")
				}
				mt, data := fileData(p)
				w.next()
				w.b = append(w.b, `{"inlineData":{"mimeType":`...)
				w.b = jsonw.AppendString(w.b, mt)
				w.b = append(w.b, `,"data":`...)
				w.b = append(jsonw.AppendString(w.b, data), '}')
				if thought {
					w.b = append(w.b, `,"thought":true`...)
				}
				w.b = append(appendSig(w.b, sig), '}')
			}
		}
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			sig, _ := parseMeta(tc.Metadata)
			w.next()
			w.b = append(w.b, `{"functionCall":{"name":`...)
			w.b = jsonw.AppendString(w.b, tc.Name)
			w.b = append(w.b, `,"args":`...)
			w.b = append(jsonw.AppendCompact(w.b, tc.Arguments, "{", "{}"), '}')
			w.b = append(appendSig(w.b, sig), '}')
		}
	case "tool":
		// OpenCode's tool outputs are text (or error-text): the SDK's
		// {name, response: {name, content: output.value}}.
		w.next()
		w.b = append(w.b, `{"functionResponse":{"name":`...)
		w.b = jsonw.AppendString(w.b, m.ToolName)
		w.b = append(w.b, `,"response":{"name":`...)
		w.b = jsonw.AppendString(w.b, m.ToolName)
		w.b = append(w.b, `,"content":`...)
		w.b = jsonw.AppendString(w.b, m.Content)
		w.b = append(w.b, `}}}`...)
	}
	if w.b == nil {
		w.b = []byte{}
	}
	return w.b, nil
}

// fileData is a file's media type and base64 content as the AI SDK takes
// them from a data: URL (the URL's media type wins over the part's);
// anything else is taken as base64 already.
func fileData(p *provider.Part) (mediaType, data string) {
	mt, data := provider.FileData(p.Data)
	if mt == "" {
		mt = p.MediaType
	}
	return mt, data
}

// appendUserFile is a user file part: inlineData with base64 content, or
// fileData for a URL (image/* becomes image/jpeg).
func appendUserFile(b []byte, p *provider.Part) []byte {
	if provider.IsHTTPURL(p.Data) {
		mt := p.MediaType
		if mt == "image/*" {
			mt = "image/jpeg"
		}
		b = append(b, `{"fileData":{"mimeType":`...)
		b = jsonw.AppendString(b, mt)
		b = append(b, `,"fileUri":`...)
		b = jsonw.AppendString(b, p.Data)
		return append(b, `}}`...)
	}
	mt, data := fileData(p)
	if mt == "image/*" {
		mt = "image/jpeg"
	}
	b = append(b, `{"inlineData":{"mimeType":`...)
	b = jsonw.AppendString(b, mt)
	b = append(b, `,"data":`...)
	b = jsonw.AppendString(b, data)
	return append(b, `}}`...)
}

// Model families, as OpenCode 1.18.33's provider/transform.ts tells them:
//
//	var zN=/gemini-2[.-]5(?:[.-]|$)/i,
//	    Ny=/gemini-(?:(?:flash|pro)-)?[12](?:[.-]|$)/i,
//	    xJ=[zN,/gemini-3-(?:flash|pro)(?:[.-]|$)/,/gemini-3[.-]1(?:[.-]|$)/,/gemini-3[.-]5-flash(?!-lite)(?:[.-]|$)/]
var (
	gemini25     = regexp.MustCompile(`(?i)gemini-2[.-]5(?:[.-]|$)`)
	gemini12     = regexp.MustCompile(`(?i)gemini-(?:(?:flash|pro)-)?[12](?:[.-]|$)`)
	gemini3      = regexp.MustCompile(`gemini-3-(?:flash|pro)(?:[.-]|$)`)
	gemini31     = regexp.MustCompile(`gemini-3[.-]1(?:[.-]|$)`)
	gemini35head = regexp.MustCompile(`gemini-3[.-]5-flash`)
)

// sampled reports whether OpenCode gives the model its Gemini sampling
// defaults (temperature 1, topP 0.95, topK 64): a model of xJ, tested on
// the lower-cased API ID.
func sampled(id string) bool {
	l := strings.ToLower(id)
	if gemini25.MatchString(l) || gemini3.MatchString(l) || gemini31.MatchString(l) {
		return true
	}
	// /gemini-3[.-]5-flash(?!-lite)(?:[.-]|$)/ without RE2's missing
	// lookahead: some occurrence followed by the end, or by . or - but
	// not by -lite.
	for _, loc := range gemini35head.FindAllStringIndex(l, -1) {
		rest := l[loc[1]:]
		if rest == "" || (rest[0] == '.' || rest[0] == '-') && !strings.HasPrefix(rest, "-lite") {
			return true
		}
	}
	return false
}

var (
	geminiVersion = regexp.MustCompile(`gemini-(\d+)(?:[.-](\d+))?`)
	gemmaVersion  = regexp.MustCompile(`gemma-(\d+)`)
)

// reasoning guesses the catalog's capabilities.reasoning for a Google
// model from its ID (the provider is not given the catalog): as
// models.dev has it for the google provider, Gemini 2.5 and later, the
// -latest aliases, Gemma 4 and later, deep research and the image models
// reason; embeddings, Veo, Lyria, Imagen, the 2.5 speech models and older
// Geminis do not.
func reasoning(id string) bool {
	l := strings.ToLower(id)
	for _, no := range []string{"embedding", "veo-", "lyria", "imagen", "aqa", "live-translate"} {
		if strings.Contains(l, no) {
			return false
		}
	}
	if m := gemmaVersion.FindStringSubmatch(l); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n >= 4
	}
	if strings.Contains(l, "deep-research") || strings.Contains(l, "nano-banana") {
		return true
	}
	if m := geminiVersion.FindStringSubmatch(l); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major == 2 && minor == 5 && strings.Contains(l, "tts") {
			return false
		}
		return major > 2 || major == 2 && minor >= 5 || strings.Contains(l, "thinking")
	}
	return strings.Contains(l, "gemini") && (strings.Contains(l, "latest") || strings.Contains(l, "omni"))
}

// defaultThinking is the thinkingConfig OpenCode 1.18.33 sends on a turn
// (ProviderTransform.options, no variant chosen), "" for none:
//
//	if ($.model.api.npm==="@ai-sdk/google"||$.model.api.npm==="@ai-sdk/google-vertex") {
//	  if ($.model.capabilities.reasoning) {
//	    if (Z.thinkingConfig={includeThoughts:!0}, !_J($.model.api.id)) Z.thinkingConfig.thinkingLevel="high" } }
func defaultThinking(id string) string {
	if gemini12.MatchString(id) {
		return `{"includeThoughts":true}`
	}
	return `{"includeThoughts":true,"thinkingLevel":"high"}`
}

// mergeThinking is the turn's thinkingConfig with the chosen variant's
// merged over it (OpenCode's mergeDeep), written in the AI SDK's key
// order (thinkingBudget, includeThoughts, thinkingLevel).
func mergeThinking(base string, v *provider.VariantOptions) string {
	var c struct {
		ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
		IncludeThoughts *bool  `json:"includeThoughts,omitempty"`
		ThinkingLevel   string `json:"thinkingLevel,omitempty"`
	}
	if base != "" {
		_ = json.Unmarshal([]byte(base), &c)
	}
	tc := v.ThinkingConfig
	if tc.ThinkingBudget != nil {
		c.ThinkingBudget = tc.ThinkingBudget
	}
	if tc.IncludeThoughts != nil {
		c.IncludeThoughts = tc.IncludeThoughts
	}
	if tc.ThinkingLevel != "" {
		c.ThinkingLevel = tc.ThinkingLevel
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// titleThinking is the thinkingConfig of a title request: OpenCode's
// smallOptions, the model's first variant. Gemini 2.5's variants are
// thinking budgets (models.dev's budget_tokens range through
// reasoningVariants: high is half the maximum, capped at 31999 —
// 16000 for pro, 12288 for the others); the others' are OpenCode's
// thinking levels, of which the first is taken:
//
//	function by($){let Z=$.toLowerCase();if(Z.includes("gemma"))return["minimal","high"];if(_J(Z))return["low","high"];
//	  if(Z.includes("flash-image"))return["minimal","high"];if(Z.includes("pro-image"))return["high"];
//	  if(Z.includes("flash"))return["minimal","low","medium","high"];return["low","medium","high"]}
func titleThinking(id string) string {
	l := strings.ToLower(id)
	if gemini25.MatchString(l) {
		max := 24576
		if strings.Contains(l, "pro") && !strings.Contains(l, "flash") {
			max = 32768
		}
		budget := (min(max, 31999) + 1) / 2
		return `{"thinkingBudget":` + strconv.Itoa(budget) + `,"includeThoughts":true}`
	}
	level := "low"
	switch {
	case strings.Contains(l, "gemma"):
		level = "minimal"
	case gemini12.MatchString(l):
		level = "low"
	case strings.Contains(l, "flash-image"):
		level = "minimal"
	case strings.Contains(l, "pro-image"):
		level = "high"
	case strings.Contains(l, "flash"):
		level = "minimal"
	}
	return `{"includeThoughts":true,"thinkingLevel":"` + level + `"}`
}

// modelPath is the SDK's getModelPath: an ID with a slash is a full
// resource name.
func modelPath(id string) string {
	if strings.Contains(id, "/") {
		return id
	}
	return "models/" + id
}

// encodeMemo is encodeParts through the message's memo.
func encodeMemo(m *provider.Message) ([]byte, error) {
	if m.Memo == nil {
		return encodeParts(m)
	}
	var err error
	enc := m.Memo.Bytes(memoKey, func() []byte {
		b, e := encodeParts(m)
		err = e
		return b
	})
	if enc == nil {
		// A failed encoding is not kept (nil): this call reports it.
		if err == nil {
			_, err = encodeParts(m)
		}
		return nil, err
	}
	return enc, nil
}

// content is one entry of contents before assembly: the encodings
// encs[start:end] (several for a run of tool results).
type content struct {
	role       string // "user" or "model"
	start, end int
}

// buildBody appends the request body for req to dst: the SDK's args in
// its key order (generationConfig, contents, systemInstruction, tools,
// toolConfig).
func (p *Provider) buildBody(dst []byte, req *provider.Request) ([]byte, error) {
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	contents := make([]content, 0, len(req.Messages))
	encs := make([][]byte, 0, len(req.Messages))
	started := false
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case "system":
			if started {
				return nil, unsupported("system messages are only supported at the beginning of the conversation")
			}
			system = append(system, m.Texts())
			continue
		case "user", "assistant", "tool":
		default:
			continue
		}
		started = true
		enc, err := encodeMemo(m)
		if err != nil {
			return nil, err
		}
		encs = append(encs, enc)
		k := len(encs)
		switch m.Role {
		case "user":
			contents = append(contents, content{role: "user", start: k - 1, end: k})
		case "assistant":
			contents = append(contents, content{role: "model", start: k - 1, end: k})
		case "tool":
			// One OpenCode tool message holds a step's results: consecutive
			// results are one user content.
			if i > 0 && req.Messages[i-1].Role == "tool" && len(contents) > 0 {
				contents[len(contents)-1].end = k
			} else {
				contents = append(contents, content{role: "user", start: k - 1, end: k})
			}
		}
	}

	id := req.ModelID
	gemma := strings.HasPrefix(strings.ToLower(id), "gemma-")

	b := append(dst, `{"generationConfig":{`...)
	n := len(b)
	field := func(name string) {
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	if req.MaxTokens > 0 {
		field("maxOutputTokens")
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	defaults := sampled(id)
	temp := req.Temperature
	if temp == nil && req.Purpose == provider.PurposeTitle {
		// OpenCode's title agent has temperature 0.5 (the request's agent
		// settings leave it out).
		half := 0.5
		temp = &half
	}
	if t := temp; t != nil {
		field("temperature")
		b = jsonw.AppendFloat(b, *t)
	} else if defaults {
		field("temperature")
		b = append(b, '1')
	}
	if defaults {
		field("topK")
		b = append(b, "64"...)
	}
	if tp := req.TopP; tp != nil {
		field("topP")
		b = jsonw.AppendFloat(b, *tp)
	} else if defaults {
		field("topP")
		b = append(b, "0.95"...)
	}
	thinking := ""
	if req.Reasons(reasoning) {
		thinking = defaultThinking(id)
		if req.Purpose == provider.PurposeTitle {
			thinking = titleThinking(id)
		}
	}
	if v := req.VariantOptions(); v != nil && v.ThinkingConfig != nil && req.Purpose != provider.PurposeTitle {
		thinking = mergeThinking(thinking, v)
	}
	if thinking != "" {
		field("thinkingConfig")
		b = append(b, thinking...)
	}
	b = append(b, `},"contents":[`...)
	for i, c := range contents {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":"`...)
		b = append(b, c.role...)
		b = append(b, `","parts":[`...)
		first := true
		if i == 0 && gemma && len(system) > 0 && c.role == "user" {
			b = jsonw.AppendString(append(b, `{"text":`...), strings.Join(system, "\n\n")+"\n\n")
			b = append(b, '}')
			first = false
		}
		for _, part := range encs[c.start:c.end] {
			if len(part) == 0 {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, part...)
		}
		b = append(b, `]}`...)
	}
	b = append(b, ']')
	if len(system) > 0 && !gemma {
		b = append(b, `,"systemInstruction":{"parts":[`...)
		for i, s := range system {
			if i > 0 {
				b = append(b, ',')
			}
			if i == 0 && req.System != "" {
				b = append(b, p.systemEnc(s)...)
				continue
			}
			b = jsonw.AppendString(append(b, `{"text":`...), s)
			b = append(b, '}')
		}
		b = append(b, `]}`...)
	}
	if len(req.Tools) > 0 {
		sanitize := p.providerID == "google" || strings.Contains(id, "gemini")
		b = append(b, `,"tools":[{"functionDeclarations":[`...)
		for i := range req.Tools {
			t := &req.Tools[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(append(b, `{"name":`...), t.Name)
			b = jsonw.AppendString(append(b, `,"description":`...), t.Description)
			if params, ok := p.parameters(t.Parameters, sanitize); ok {
				b = append(b, `,"parameters":`...)
				b = append(b, params...)
			}
			b = append(b, '}')
		}
		// The AI SDK's tool choice defaults to auto.
		b = append(b, `]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}`...)
	}
	return append(b, '}'), nil
}
