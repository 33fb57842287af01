package openairesponses

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/provider"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func f64(v float64) *float64 { return &v }

// body builds req's body with a fresh provider of providerID.
func body(t testing.TB, providerID string, req provider.Request) []byte {
	t.Helper()
	p := New(Config{BaseURL: "http://x", ProviderID: providerID})
	b, err := p.buildBody(nil, &req)
	if err != nil {
		t.Fatalf("buildBody: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("invalid JSON body:\n%s", b)
	}
	return b
}

// wire is a body parsed back.
type wire struct {
	Model           string          `json:"model"`
	Input           []recItem       `json:"input"`
	Temperature     *float64        `json:"temperature"`
	TopP            *float64        `json:"top_p"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Text            json.RawMessage `json:"text"`
	Store           *bool           `json:"store"`
	Include         []string        `json:"include"`
	PromptCacheKey  *string         `json:"prompt_cache_key"`
	Reasoning       json.RawMessage `json:"reasoning"`
	Tools           []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Stream     bool            `json:"stream"`
}

type recItem struct {
	Type             string          `json:"type"`
	Role             string          `json:"role"`
	ID               *string         `json:"id"`
	Content          json.RawMessage `json:"content"`
	Phase            string          `json:"phase"`
	CallID           string          `json:"call_id"`
	Name             string          `json:"name"`
	Arguments        string          `json:"arguments"`
	Output           string          `json:"output"`
	EncryptedContent *string         `json:"encrypted_content"`
	Summary          []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"summary"`
}

// parts is a message item's content parts (a string content as one
// input_text).
func (it recItem) parts(t testing.TB) []recPart {
	t.Helper()
	if len(it.Content) > 0 && it.Content[0] == '"' {
		var s string
		_ = json.Unmarshal(it.Content, &s)
		return []recPart{{Type: "input_text", Text: s}}
	}
	var ps []recPart
	if err := json.Unmarshal(it.Content, &ps); err != nil {
		t.Fatalf("content %s: %v", it.Content, err)
	}
	return ps
}

type recPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	FileURL  string `json:"file_url"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

func parse(t testing.TB, b []byte) wire {
	t.Helper()
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return w
}

func reasoningMD(item, enc string) json.RawMessage {
	return json.RawMessage(`{"openai":{"itemId":"` + item + `","reasoningEncryptedContent":"` + enc + `"}}`)
}

// recorded turns a body opencode 1.18.33 sent (testdata/opencode) back
// into the request lifecycle makes of that conversation: the system
// prompt, user messages (one text as Content), assistant messages with
// their reasoning (with the metadata the stream gave it), texts and calls,
// tool results.
func recorded(t *testing.T, raw []byte) provider.Request {
	t.Helper()
	var w wire
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatal(err)
	}
	req := provider.Request{ModelID: w.Model, SessionID: "ses_untitled", Purpose: provider.PurposeTitle}
	if w.PromptCacheKey != nil {
		req.SessionID, req.Purpose = *w.PromptCacheKey, ""
	}
	if w.MaxOutputTokens != nil {
		req.MaxTokens = *w.MaxOutputTokens
	} else if req.Purpose == "" {
		req.MaxTokens = 32000 // what lifecycle asks for; the "openai" provider drops it
	}
	for _, tl := range w.Tools {
		req.Tools = append(req.Tools, provider.ToolSpec{Name: tl.Name, Description: tl.Description, Parameters: tl.Parameters})
	}
	var asst *provider.Message
	flush := func() {
		if asst != nil {
			req.Messages = append(req.Messages, *asst)
			asst = nil
		}
	}
	open := func() *provider.Message {
		if asst == nil {
			asst = &provider.Message{Role: "assistant"}
		}
		return asst
	}
	for n, it := range w.Input {
		switch {
		case it.Role == "developer" || it.Role == "system":
			if n != 0 {
				t.Fatalf("system item at %d", n)
			}
			req.System = it.parts(t)[0].Text
		case it.Role == "user":
			flush()
			m := provider.Message{Role: "user"}
			ps := it.parts(t)
			if len(ps) == 1 && ps[0].Type == "input_text" {
				m.Content = ps[0].Text
			} else {
				for _, p := range ps {
					switch p.Type {
					case "input_text":
						m.Parts = append(m.Parts, provider.Part{Type: provider.PartText, Text: p.Text})
					case "input_image":
						mt, _, _ := strings.Cut(strings.TrimPrefix(p.ImageURL, "data:"), ";")
						m.Parts = append(m.Parts, provider.Part{Type: provider.PartFile, MediaType: mt, Data: p.ImageURL})
					case "input_file":
						m.Parts = append(m.Parts, provider.Part{Type: provider.PartFile, MediaType: "application/pdf", Data: p.FileData, Filename: p.Filename})
					}
				}
			}
			req.Messages = append(req.Messages, m)
		case it.Role == "assistant":
			if asst != nil && len(asst.ToolCalls) > 0 {
				flush()
			}
			a := open()
			text := it.parts(t)[0].Text
			if a.Parts == nil {
				a.Content = text
			} else {
				a.Parts = append(a.Parts, provider.Part{Type: provider.PartText, Text: text})
			}
		case it.Type == "reasoning":
			a := open()
			text := ""
			if len(it.Summary) > 0 {
				text = it.Summary[0].Text
			}
			a.Parts = append(a.Parts, provider.Part{Type: provider.PartReasoning, Text: text,
				Metadata: reasoningMD(fmt.Sprint("rs_", n), *it.EncryptedContent)})
		case it.Type == "function_call":
			a := open()
			a.ToolCalls = append(a.ToolCalls, provider.ToolCall{ID: it.CallID, Name: it.Name, Arguments: json.RawMessage(it.Arguments),
				Metadata: json.RawMessage(`{"openai":{"itemId":"fc_1"}}`)})
		case it.Type == "function_call_output":
			flush()
			req.Messages = append(req.Messages, provider.Message{Role: "tool", ToolCallID: it.CallID, Content: it.Output})
		default:
			t.Fatalf("unexpected item %+v", it)
		}
	}
	flush()
	return req
}

// TestOpenCodeRecorded: for conversations opencode 1.18.33 sent to the
// stub (testdata/opencode, recorded with its "openai" provider and a
// "proxy" provider of the same package: gpt-5.1 with reasoning, a call
// and its result sent back, gpt-4.1 with an image, gpt-5.1 with a PDF,
// o3, the title request to gpt-5-nano), the body is byte for byte the
// one OpenCode sent.
func TestOpenCodeRecorded(t *testing.T) {
	cases := []struct{ file, providerID string }{
		{"openai-gpt-5.1-tools.json", "openai"},
		{"openai-gpt-4.1-image.json", "openai"},
		{"proxy-gpt-5.1-pdf.json", "proxy"},
		{"proxy-o3.json", "proxy"},
		{"title-gpt-5-nano.json", "openai"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "opencode", c.file))
			if err != nil {
				t.Fatal(err)
			}
			raw = bytes.TrimSpace(raw)
			req := recorded(t, raw)
			got := body(t, c.providerID, req)
			if !bytes.Equal(got, raw) {
				i := 0
				for i < len(got) && i < len(raw) && got[i] == raw[i] {
					i++
				}
				lo := max(i-200, 0)
				t.Fatalf("body differs at byte %d:\n got …%s…\nwant …%s…", i, got[lo:min(i+200, len(got))], raw[lo:min(i+200, len(raw))])
			}
		})
	}
}

// goldenRequest has every kind of content: a system prompt, a user text,
// image and PDF, an assistant's reasoning (one with its encrypted
// content, one without, one of another provider), texts and two calls,
// their results (one failed), and a last user text.
func goldenRequest() provider.Request {
	return provider.Request{
		ModelID:     "gpt-5.1-codex",
		SessionID:   "ses_golden",
		System:      "You are a coding agent.\nBe brief.",
		MaxTokens:   32000,
		Temperature: f64(0.3),
		Messages: []provider.Message{
			{Role: "user", Parts: []provider.Part{
				{Type: provider.PartText, Text: "What is in this picture and this document?"},
				{Type: provider.PartFile, MediaType: "image/png", Filename: "pic.png", Data: "data:image/png;base64,iVBORw0KGgo="},
				{Type: provider.PartFile, MediaType: "application/pdf", Data: "data:application/pdf;base64,JVBERi0="},
			}},
			{Role: "assistant", Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: "**Looking**\n\nThe user wants a description.", Metadata: reasoningMD("rs_1", "gAAAAenc1")},
				{Type: provider.PartReasoning, Text: "An earlier summary part.", Metadata: json.RawMessage(`{"openai":{"itemId":"rs_1"}}`)},
				{Type: provider.PartReasoning, Text: "Claude's thinking.", Metadata: json.RawMessage(`{"anthropic":{"signature":"sig"}}`)},
				{Type: provider.PartText, Text: "", Metadata: json.RawMessage(`{"openai":{"itemId":"msg_1"}}`)},
				{Type: provider.PartText, Text: "Let me look at the files.", Metadata: json.RawMessage(`{"openai":{"itemId":"msg_2","phase":"commentary"}}`)},
			}, ToolCalls: []provider.ToolCall{
				{ID: "call_A", Name: "read", Arguments: json.RawMessage(`{ "filePath": "/tmp/a.go" }`), Metadata: json.RawMessage(`{"openai":{"itemId":"fc_1"}}`)},
				{ID: "call_B", Name: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)},
			}},
			{Role: "tool", ToolCallID: "call_A", ToolName: "read", IsError: true, Content: "File not found: /tmp/a.go"},
			{Role: "tool", ToolCallID: "call_B", ToolName: "glob", Content: "b.go\nc.go"},
			{Role: "assistant", Content: "Two files."},
			{Role: "user", Content: "Thanks <3 & bye"},
		},
		Tools: []provider.ToolSpec{
			{Name: "glob", Description: "Find files.", Parameters: json.RawMessage(`{"type": "object", "properties": {"pattern": {"type": "string"}}}`)},
			{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"}},"required":["filePath"]}`)},
		},
	}
}

func TestGoldenRequest(t *testing.T) {
	b := body(t, "proxy", goldenRequest())
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "request.golden.json")
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("body differs from %s:\n%s", path, pretty.Bytes())
	}
}

func TestSettings(t *testing.T) {
	cases := []struct {
		model, providerID, purpose string
		role                       string // the system prompt's
		reasoning, text            string // raw JSON, "" : absent
		include, sampling          bool
		cacheKey                   bool
	}{
		{model: "gpt-5.1", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, text: `{"verbosity":"low"}`, include: true, cacheKey: true},
		{model: "gpt-5", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, include: true, cacheKey: true},
		{model: "gpt-5-mini", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, include: true, cacheKey: true},
		{model: "gpt-5.1-codex", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, include: true, cacheKey: true},
		{model: "gpt-5.2-chat-latest", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, include: true, cacheKey: true},
		{model: "gpt-5-pro", role: "developer", include: true, cacheKey: true},
		{model: "gpt-5-pro", providerID: "opencode", role: "developer", reasoning: `{"summary":"auto"}`, include: true, cacheKey: true},
		{model: "gpt-5-chat-latest", role: "system", sampling: true, cacheKey: true},
		{model: "o3", role: "developer", include: true, cacheKey: true},
		{model: "o4-mini", role: "developer", include: true, cacheKey: true},
		{model: "gpt-4.1", role: "system", sampling: true, cacheKey: true},
		{model: "gpt-4o", role: "system", sampling: true, cacheKey: true},
		// OpenCode's gpt-5 defaults apply to any ID with gpt-5 in it, and
		// forceReasoning makes the AI SDK treat it as reasoning.
		{model: "openai/gpt-5.1", role: "developer", reasoning: `{"effort":"medium","summary":"auto"}`, text: `{"verbosity":"low"}`, include: true, cacheKey: true},
		{model: "my-finetune", role: "system", sampling: true, cacheKey: true},
		// Titles: smallOptions, the first variant's effort, no cache key.
		{model: "gpt-5-nano", purpose: provider.PurposeTitle, role: "developer", reasoning: `{"effort":"minimal","summary":"auto"}`, include: true},
		{model: "gpt-5.1", purpose: provider.PurposeTitle, role: "developer", reasoning: `{"effort":"none","summary":"auto"}`, include: true, sampling: true},
		{model: "gpt-4.1-mini", purpose: provider.PurposeTitle, role: "system", sampling: true},
		{model: "gpt-5-chat-latest", purpose: provider.PurposeTitle, role: "system", sampling: true},
	}
	for _, c := range cases {
		t.Run(c.model+"/"+c.providerID+c.purpose, func(t *testing.T) {
			req := provider.Request{ModelID: c.model, SessionID: "ses_1", System: "sys", Purpose: c.purpose, Temperature: f64(0.5), TopP: f64(0.9),
				Messages: []provider.Message{{Role: "user", Content: "hi"}}}
			w := parse(t, body(t, c.providerID, req))
			if w.Input[0].Role != c.role || string(w.Reasoning) != c.reasoning || string(w.Text) != c.text ||
				(len(w.Include) > 0) != c.include || (w.Temperature != nil) != c.sampling || (w.TopP != nil) != c.sampling ||
				(w.PromptCacheKey != nil) != c.cacheKey || w.Store == nil || *w.Store || !w.Stream {
				t.Errorf("role %s reasoning %s text %s include %v temperature %v top_p %v cache key %v store %v",
					w.Input[0].Role, w.Reasoning, w.Text, w.Include, w.Temperature != nil, w.TopP != nil, w.PromptCacheKey != nil, w.Store)
			}
			if c.include && !reflect.DeepEqual(w.Include, []string{"reasoning.encrypted_content"}) {
				t.Errorf("include %v", w.Include)
			}
		})
	}
}

func TestFirstVariant(t *testing.T) {
	for id, want := range map[string]string{
		"gpt-5": "minimal", "gpt-5-nano": "minimal", "gpt-5-mini": "minimal", "gpt-5.1": "none", "gpt-5.2": "none", "gpt-5.4-mini": "none",
		"gpt-5-codex": "low", "gpt-5.1-codex": "low", "gpt-5.1-codex-max": "low", "gpt-5.2-codex": "low", "gpt-5.3-codex": "none",
		"gpt-5-pro": "high", "gpt-5.2-pro": "medium", "gpt-5-chat-latest": "", "gpt-5.1-chat-latest": "medium",
		"o3": "low", "o4-mini": "low", "o3-deep-research": "medium", "gpt-4.1": "", "gpt-4o-mini": "",
	} {
		if got := firstVariant(id); got != want {
			t.Errorf("firstVariant(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestParameters(t *testing.T) {
	user := []provider.Message{{Role: "user", Content: "hi"}}
	// max_output_tokens: sent, except to the "openai" provider (OpenCode's
	// OpenAI plugin drops it); none for 0.
	for _, c := range []struct {
		providerID string
		max        int
		want       *int
	}{{"proxy", 32000, func() *int { n := 32000; return &n }()}, {"openai", 32000, nil}, {"proxy", 0, nil}} {
		w := parse(t, body(t, c.providerID, provider.Request{ModelID: "gpt-4.1", MaxTokens: c.max, Messages: user}))
		if !reflect.DeepEqual(w.MaxOutputTokens, c.want) {
			t.Errorf("%s %d: max_output_tokens %v", c.providerID, c.max, w.MaxOutputTokens)
		}
	}
	// Tools: function tools, strict false, tool_choice auto; none without.
	w := parse(t, body(t, "proxy", provider.Request{ModelID: "gpt-4.1", Messages: user,
		Tools: []provider.ToolSpec{{Name: "t", Parameters: json.RawMessage(`not json`)}}}))
	if len(w.Tools) != 1 || w.Tools[0].Type != "function" || w.Tools[0].Strict == nil || *w.Tools[0].Strict ||
		string(w.Tools[0].Parameters) != emptySchema || string(w.ToolChoice) != `"auto"` {
		t.Errorf("tools %+v tool_choice %s", w.Tools, w.ToolChoice)
	}
	w = parse(t, body(t, "proxy", provider.Request{ModelID: "gpt-4.1", Messages: user}))
	if w.Tools != nil || w.ToolChoice != nil {
		t.Errorf("tools without tools: %+v %s", w.Tools, w.ToolChoice)
	}
	// A prompt without a session has no cache key.
	if w.PromptCacheKey != nil {
		t.Errorf("prompt_cache_key %q", *w.PromptCacheKey)
	}
}

func TestMessages(t *testing.T) {
	msgs := []provider.Message{
		{Role: "system", Content: "mid-conversation system"},
		{Role: "user", Content: ""},
		{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: ""}, {Type: provider.PartText, Text: "b"}}},
		{Role: "assistant", Content: ""},
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Name: "t", Arguments: json.RawMessage(`not json`)}}},
		{Role: "tool", ToolCallID: "c1", Content: ""},
		{Role: "assistant", Parts: []provider.Part{
			{Type: provider.PartReasoning, Text: "", Metadata: reasoningMD("rs_9", "enc")},
			{Type: provider.PartReasoning, Text: "no encrypted", Metadata: json.RawMessage(`{"openai":{"itemId":"rs_9","reasoningEncryptedContent":null}}`)},
			{Type: provider.PartFile, MediaType: "image/png", Data: "data:image/png;base64,AA=="},
		}},
	}
	b := body(t, "proxy", provider.Request{ModelID: "o3", Messages: msgs})
	want := `"input":[{"role":"developer","content":"mid-conversation system"},` +
		`{"role":"user","content":[{"type":"input_text","text":""}]},` +
		`{"role":"user","content":[{"type":"input_text","text":"b"}]},` +
		`{"type":"function_call","call_id":"c1","name":"t","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":""},` +
		`{"type":"reasoning","encrypted_content":"enc","summary":[]}]`
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("body\n%s\nwant it to contain\n%s", b, want)
	}
}

// TestToolMedia: a tool result with media goes as OpenCode sends it to
// @ai-sdk/openai, a content list.
func TestToolMedia(t *testing.T) {
	msgs := []provider.Message{{Role: "tool", ToolCallID: "c1", Parts: []provider.Part{
		{Type: provider.PartText, Text: "Image read successfully"},
		{Type: provider.PartText, Text: ""},
		{Type: provider.PartFile, MediaType: "image/png", Data: "data:image/png;base64,iVBO", Filename: "a.png"},
		{Type: provider.PartFile, MediaType: "application/pdf", Data: "data:application/pdf;base64,JVBE"},
		{Type: provider.PartFile, MediaType: "image/png", Data: "https://example.com/not-inlined.png"},
	}}}
	b := body(t, "proxy", provider.Request{ModelID: "gpt-4.1", Messages: msgs})
	want := `"input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"Image read successfully"},` +
		`{"type":"input_image","image_url":"data:image/png;base64,iVBO"},{"type":"input_file","filename":"data","file_data":"data:application/pdf;base64,JVBE"}]}]`
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("body\n%s\nwant it to contain\n%s", b, want)
	}
}

func TestFiles(t *testing.T) {
	msgs := []provider.Message{{Role: "user", Parts: []provider.Part{
		{Type: provider.PartText, Text: ""}, // dropped: the PDF is the AI SDK's part 3
		{Type: provider.PartText, Text: "look"},
		{Type: provider.PartFile, MediaType: "image/*", Data: "data:image/png;base64,/9j/"},
		{Type: provider.PartFile, MediaType: "image/png", Data: "https://example.com/a.png"},
		{Type: provider.PartFile, MediaType: "application/pdf", Data: "data:application/pdf;base64,JVBERi0="},
		{Type: provider.PartFile, MediaType: "application/pdf", Data: "https://example.com/a.pdf", Filename: "a.pdf"},
		{Type: provider.PartFile, MediaType: "application/pdf", Data: "file-abc123"},
		{Type: provider.PartFile, MediaType: "image/gif", Data: "data:image/gif,GIF89a"},
	}}}
	b := body(t, "proxy", provider.Request{ModelID: "gpt-4.1", Messages: msgs})
	want := `[{"type":"input_text","text":"look"},` +
		`{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"},` +
		`{"type":"input_image","image_url":"https://example.com/a.png"},` +
		`{"type":"input_file","filename":"part-3.pdf","file_data":"data:application/pdf;base64,JVBERi0="},` +
		`{"type":"input_file","file_url":"https://example.com/a.pdf"},` +
		`{"type":"input_file","file_id":"file-abc123"},` +
		`{"type":"input_image","image_url":"data:image/gif;base64,R0lGODlh"}]`
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
	p := New(Config{})
	for _, mt := range []string{"text/plain", "audio/wav"} {
		_, err := p.buildBody(nil, &provider.Request{ModelID: "m", Messages: []provider.Message{{Role: "user", Parts: []provider.Part{
			{Type: provider.PartFile, MediaType: mt, Data: "data:" + mt + ";base64,AA=="}}}}})
		if err == nil || err.Error() != "'file part media type "+mt+"' functionality not supported." {
			t.Errorf("%s: %v", mt, err)
		}
	}
}

// history is a long conversation with memos, as lifecycle keeps it.
func history(n int) []provider.Message {
	msgs := make([]provider.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%04d", i)
		msgs = append(msgs,
			provider.Message{Role: "user", Content: strings.Repeat(fmt.Sprintf("question %d ", i), 20), Memo: &provider.Memo{}},
			provider.Message{Role: "assistant", Memo: &provider.Memo{}, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: strings.Repeat("thinking about it. ", 30), Metadata: reasoningMD(fmt.Sprint("rs_", i), strings.Repeat("gAAAAB", 200))},
				{Type: provider.PartText, Text: "Let me run a command.", Metadata: json.RawMessage(`{"openai":{"itemId":"msg_x"}}`)}},
				ToolCalls: []provider.ToolCall{{ID: id, Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la /tmp","description":"list"}`)}}},
			provider.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("drwxr-xr-x file\n", 60), Memo: &provider.Memo{}},
		)
	}
	return msgs[:n]
}

// withoutMemo is msgs with fresh encodings.
func withoutMemo(msgs []provider.Message) []provider.Message {
	out := append([]provider.Message(nil), msgs...)
	for i := range out {
		out[i].Memo = nil
	}
	return out
}

// TestMemo: a history is encoded once; later calls with more messages,
// and calls to another model, reuse the encodings and send what a fresh
// encoding sends.
func TestMemo(t *testing.T) {
	msgs := history(120)
	p := New(Config{})
	req := func(model string, m []provider.Message) provider.Request {
		return provider.Request{ModelID: model, SessionID: "ses_1", System: "sys", Messages: m}
	}
	first, err := p.buildBody(nil, ptr(req("gpt-5.1", msgs[:100])))
	if err != nil {
		t.Fatal(err)
	}
	if want := body(t, "", req("gpt-5.1", withoutMemo(msgs[:100]))); !bytes.Equal(first, want) {
		t.Fatal("memoised body differs from a fresh one")
	}
	for i := range msgs[:100] {
		msgs[i].Memo.Bytes(memoKey, func() []byte { t.Fatalf("message %d: not memoised", i); return nil })
	}
	for _, model := range []string{"gpt-5.1", "gpt-4.1"} {
		got, err := p.buildBody(nil, ptr(req(model, msgs)))
		if err != nil {
			t.Fatal(err)
		}
		if want := body(t, "", req(model, withoutMemo(msgs))); !bytes.Equal(got, want) {
			t.Fatalf("%s: memoised body differs from a fresh one", model)
		}
	}
}

func ptr(r provider.Request) *provider.Request { return &r }

func BenchmarkEncode200(b *testing.B) {
	msgs := history(200)
	tools := make([]provider.ToolSpec, 12)
	for i := range tools {
		tools[i] = provider.ToolSpec{Name: fmt.Sprint("tool", i), Description: strings.Repeat("Does things. ", 40),
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The command"},"timeout":{"type":"number"}},"required":["command"]}`)}
	}
	req := provider.Request{ModelID: "gpt-5.1", SessionID: "ses_bench", System: strings.Repeat("You are a coding agent. ", 400), Messages: msgs, Tools: tools, MaxTokens: 32000}
	p := New(Config{})
	out, _ := p.buildBody(nil, &req)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, _ = p.buildBody(out[:0], &req)
	}
}
