package google

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

// body builds req's body with a fresh provider.
func body(t testing.TB, req provider.Request) []byte {
	t.Helper()
	return bodyFor(t, New(Config{ProviderID: "google"}), req)
}

func bodyFor(t testing.TB, p *Provider, req provider.Request) []byte {
	t.Helper()
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
	GenerationConfig  map[string]json.RawMessage `json:"generationConfig"`
	Contents          []wireContent              `json:"contents"`
	SystemInstruction *wireContent               `json:"systemInstruction"`
	Tools             []struct {
		FunctionDeclarations []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	ToolConfig json.RawMessage `json:"toolConfig"`
}

type wireContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

func parse(t testing.TB, b []byte) wire {
	t.Helper()
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return w
}

func gsig(s string) json.RawMessage {
	return json.RawMessage(`{"google":{"thoughtSignature":"` + s + `"}}`)
}

// goldenRequest has every kind of content: a system prompt, a user text,
// image and PDF, an assistant's signed thought, texts (one empty) and two
// tool calls (the first signed), their results (one failed), and a last
// user text.
func goldenRequest() provider.Request {
	return provider.Request{
		ModelID:   "gemini-3-pro-preview",
		System:    "You are a coding agent.\nBe brief.",
		MaxTokens: 32000,
		Messages: []provider.Message{
			{Role: "user", Parts: []provider.Part{
				{Type: provider.PartText, Text: "What is in this picture?"},
				{Type: provider.PartFile, MediaType: "image/png", Filename: "pic.png", Data: "data:image/png;base64,iVBORw0KGgo="},
				{Type: provider.PartFile, MediaType: "application/pdf", Filename: "doc.pdf", Data: "data:application/pdf;base64,JVBERi0="},
			}},
			{Role: "assistant", Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: "The user wants a description.", Metadata: gsig("c2lnbmF0dXJl")},
				{Type: provider.PartText, Text: ""},
				{Type: provider.PartText, Text: "Let me look at the files."},
			}, ToolCalls: []provider.ToolCall{
				{ID: "aB3dE5fG7hJ9kL1m", Name: "read", Arguments: json.RawMessage(`{ "filePath": "/tmp/a.go" }`), Metadata: gsig("Y2FsbA==")},
				{ID: "nP2qR4sT6uV8wX0y", Name: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)},
			}},
			{Role: "tool", ToolCallID: "aB3dE5fG7hJ9kL1m", ToolName: "read", IsError: true, Content: "File not found: /tmp/a.go"},
			{Role: "tool", ToolCallID: "nP2qR4sT6uV8wX0y", ToolName: "glob", Content: "b.go\nc.go"},
			{Role: "user", Content: "Thanks <3 & bye"},
		},
		Tools: []provider.ToolSpec{
			{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"filePath":{"type":"string"},"limit":{"type":"integer","enum":[10,20]}},"required":["filePath","offset"],"additionalProperties":false}`)},
			{Name: "glob", Description: "Find files.", Parameters: json.RawMessage(`{"type": "object", "properties": {"pattern": {"type": ["string", "null"]}}}`)},
			{Name: "todoread", Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		},
	}
}

func TestGoldenRequest(t *testing.T) {
	b := body(t, goldenRequest())
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

// reference is a request the real opencode serve 1.18.33 sent to a
// Gemini model (recorded through internal/geministub; temporary paths
// normalised): the last call of a session whose first prompt had a text
// and an image, answered with a signed thought, a text and a signed read
// call, then "Done reading."; a second prompt "and again" answered with
// an unsigned thought and a text; a third "read both" answered with two
// parallel calls, the first signed, whose results (one failed) are the
// last content.
type reference struct {
	raw  []byte
	body struct {
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Parts []struct {
				Text             string `json:"text"`
				FunctionResponse *struct {
					Response struct {
						Content string `json:"content"`
					} `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
}

func loadReference(t *testing.T, name string) *reference {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "opencode", name))
	if err != nil {
		t.Fatal(err)
	}
	r := &reference{raw: bytes.TrimSpace(raw)}
	if err := json.Unmarshal(r.raw, &r.body); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOpencodeReference rebuilds the recorded requests from the messages
// lifecycle keeps for that session and wants them byte for byte. The
// system prompt and the tools (already in Gemini's form, which the schema
// rewrite leaves as it is) are taken from the recording.
func TestOpencodeReference(t *testing.T) {
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	for _, model := range []string{"gemini-3-flash-preview", "gemini-2.5-flash"} {
		t.Run(model, func(t *testing.T) {
			ref := loadReference(t, model+".turn.json")
			var tools []provider.ToolSpec
			for _, d := range ref.body.Tools[0].FunctionDeclarations {
				tools = append(tools, provider.ToolSpec{Name: d.Name, Description: d.Description, Parameters: d.Parameters})
			}
			result := func(c, p int) string { return ref.body.Contents[c].Parts[p].FunctionResponse.Response.Content }
			req := provider.Request{SessionID: "ses_1", ModelID: model, System: ref.body.SystemInstruction.Parts[0].Text,
				MaxTokens: 32000, Tools: tools, Messages: []provider.Message{
					{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: "read main.go please"},
						{Type: provider.PartFile, MediaType: "image/png", Filename: "dot.png", Data: png}}},
					{Role: "assistant", Parts: []provider.Part{
						{Type: provider.PartReasoning, Text: "pondering the file", Metadata: gsig("sig-thought-1")},
						{Type: provider.PartText, Text: "Let me read it."}},
						ToolCalls: []provider.ToolCall{{ID: "gm0QG0GUFKAyq3E7", Name: "read", Arguments: json.RawMessage(`{"filePath":"main.go"}`),
							Metadata: gsig("sig-call-1")}}},
					{Role: "tool", ToolCallID: "gm0QG0GUFKAyq3E7", ToolName: "read", Content: result(2, 0)},
					{Role: "assistant", Content: "Done reading."},
					{Role: "user", Content: "and again"},
					{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "second thought"},
						{Type: provider.PartText, Text: "Second answer."}}},
					{Role: "user", Content: "read both"},
					{Role: "assistant", ToolCalls: []provider.ToolCall{
						{ID: "c1", Name: "read", Arguments: json.RawMessage(`{"filePath":"missing.go"}`), Metadata: gsig("sig-calls-4")},
						{ID: "c2", Name: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)}}},
					{Role: "tool", ToolCallID: "c1", ToolName: "read", Content: result(8, 0), IsError: true},
					{Role: "tool", ToolCallID: "c2", ToolName: "glob", Content: result(8, 1)},
				}}
			if got := body(t, req); !bytes.Equal(got, ref.raw) {
				t.Errorf("body differs from the reference:\n got %s\nwant %s", got, ref.raw)
			}
			// The title request: the small model's first variant, the
			// title agent's temperature, the question and the first
			// message as two user contents.
			title := loadReference(t, model+".title.json")
			treq := provider.Request{SessionID: "ses_1", ModelID: model, Purpose: provider.PurposeTitle, MaxTokens: 32000,
				System:   title.body.SystemInstruction.Parts[0].Text,
				Messages: []provider.Message{{Role: "user", Content: "Generate a title for this conversation:\n"}, req.Messages[0]}}
			if got := body(t, treq); !bytes.Equal(got, title.raw) {
				t.Errorf("title body differs from the reference:\n got %s\nwant %s", got, title.raw)
			}
		})
	}
}

func TestParameters(t *testing.T) {
	user := []provider.Message{{Role: "user", Content: "hi"}}
	cases := []struct {
		model   string
		req     provider.Request
		want    string
		purpose string
	}{
		{model: "gemini-3-pro-preview",
			want: `{"maxOutputTokens":1000,"temperature":1,"topK":64,"topP":0.95,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-2.5-pro", req: provider.Request{Temperature: f64(0.3), TopP: f64(0.5)},
			want: `{"maxOutputTokens":1000,"temperature":0.3,"topK":64,"topP":0.5,"thinkingConfig":{"includeThoughts":true}}`},
		// Not one of xJ: no sampling defaults; still a reasoning model.
		{model: "gemini-flash-latest",
			want: `{"maxOutputTokens":1000,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-3.5-flash", want: `{"maxOutputTokens":1000,"temperature":1,"topK":64,"topP":0.95,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-3.5-flash-lite", want: `{"maxOutputTokens":1000,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-3.1-pro-preview", want: `{"maxOutputTokens":1000,"temperature":1,"topK":64,"topP":0.95,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-2.0-flash", want: `{"maxOutputTokens":1000}`},
		{model: "gemini-2.5-flash-preview-tts", want: `{"maxOutputTokens":1000,"temperature":1,"topK":64,"topP":0.95}`},
		{model: "gemma-4-31b-it", want: `{"maxOutputTokens":1000,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemma-3-27b-it", req: provider.Request{MaxTokens: -1}, want: `{}`},
		// Title requests: the first variant.
		{model: "gemini-2.5-pro", purpose: provider.PurposeTitle,
			want: `{"maxOutputTokens":1000,"temperature":0.5,"topK":64,"topP":0.95,"thinkingConfig":{"thinkingBudget":16000,"includeThoughts":true}}`},
		{model: "gemini-3-pro-preview", purpose: provider.PurposeTitle, req: provider.Request{Temperature: f64(0.2)},
			want: `{"maxOutputTokens":1000,"temperature":0.2,"topK":64,"topP":0.95,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"low"}}`},
		{model: "gemini-3-pro-image-preview", purpose: provider.PurposeTitle,
			want: `{"maxOutputTokens":1000,"temperature":0.5,"topK":64,"topP":0.95,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"high"}}`},
		{model: "gemini-2.0-flash", purpose: provider.PurposeTitle, want: `{"maxOutputTokens":1000,"temperature":0.5}`},
		// The catalog's capabilities.reasoning decides over the ID.
		{model: "gemini-2.5-pro", req: provider.Request{Reasoning: new(false)},
			want: `{"maxOutputTokens":1000,"temperature":1,"topK":64,"topP":0.95}`},
		{model: "gemini-2.5-pro", purpose: provider.PurposeTitle, req: provider.Request{Reasoning: new(false)},
			want: `{"maxOutputTokens":1000,"temperature":0.5,"topK":64,"topP":0.95}`},
		{model: "gemini-2.0-flash", req: provider.Request{Reasoning: new(true)},
			want: `{"maxOutputTokens":1000,"thinkingConfig":{"includeThoughts":true}}`},
	}
	for _, c := range cases {
		t.Run(c.model+c.purpose, func(t *testing.T) {
			req := c.req
			req.ModelID, req.Messages, req.Purpose = c.model, user, c.purpose
			if req.MaxTokens == 0 {
				req.MaxTokens = 1000
			}
			b := body(t, req)
			if got := string(parse(t, b).GenerationConfigRaw(b)); got != c.want {
				t.Errorf("generationConfig\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// GenerationConfigRaw is the generationConfig as sent (key order kept).
func (wire) GenerationConfigRaw(b []byte) []byte {
	var raw struct {
		G json.RawMessage `json:"generationConfig"`
	}
	_ = json.Unmarshal(b, &raw)
	return raw.G
}

func TestModelFamilies(t *testing.T) {
	for id, want := range map[string][3]bool{ // reasoning, sampled, level
		"gemini-2.5-flash":          {true, true, false},
		"models/gemini-2.5-flash":   {true, true, false},
		"gemini-2.5-flash-lite":     {true, true, false},
		"gemini-3-flash-preview":    {true, true, true},
		"gemini-3.5-flash-001":      {true, true, true},
		"gemini-3.5-flash-lite":     {true, false, true},
		"gemini-3.6-flash":          {true, false, true},
		"gemini-pro-latest":         {true, false, true},
		"gemini-2.0-flash-thinking": {true, false, false},
		"gemini-1.5-pro":            {false, false, false},
		"gemini-embedding-001":      {false, false, false},
		"veo-3.1-generate-preview":  {false, false, false},
		"gemma-4-26b-a4b-it":        {true, false, true},
		"deep-research-preview":     {true, false, true},
		"claude-sonnet-4-5":         {false, false, false},
	} {
		level := reasoning(id) && strings.Contains(defaultThinking(id), "thinkingLevel")
		if got := [3]bool{reasoning(id), sampled(id), level}; got != want {
			t.Errorf("%s: reasoning, sampled, level %v, want %v", id, got, want)
		}
	}
	if got := modelPath("tunedModels/my-model"); got != "tunedModels/my-model" {
		t.Errorf("modelPath %q", got)
	}
}

func TestContents(t *testing.T) {
	msgs := []provider.Message{
		{Role: "user", Content: "a"},
		{Role: "user", Content: "b"},
		{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: ""}}},
		{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "", Metadata: gsig("dropped")},
			{Type: provider.PartText, Text: "c", Metadata: json.RawMessage(`{"vertex":{"thoughtSignature":"v"}}`)}}},
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`not json`)},
			{ID: "2", Name: "u", Arguments: json.RawMessage(`{"x": [1, 2]}`), Metadata: json.RawMessage(`{"google":{"thoughtSignature":7}}`)}}},
		{Role: "tool", ToolCallID: "1", ToolName: "t", Content: ""},
		{Role: "tool", ToolCallID: "2", ToolName: "u", Content: "r"},
		{Role: "user", Content: "e"},
		{Role: "tool", ToolCallID: "3", ToolName: "v", Content: "late"},
	}
	w := parse(t, body(t, provider.Request{ModelID: "gemini-2.5-flash", Messages: msgs}))
	var got []string
	for _, c := range w.Contents {
		var parts []string
		for _, p := range c.Parts {
			parts = append(parts, string(p))
		}
		got = append(got, c.Role+"["+strings.Join(parts, " ")+"]")
	}
	want := []string{
		`user[{"text":"a"}]`, `user[{"text":"b"}]`, `user[]`,
		`model[{"text":"c","thoughtSignature":"v"}]`,
		`model[{"functionCall":{"name":"t","args":{}}} {"functionCall":{"name":"u","args":{"x":[1,2]}},"thoughtSignature":"7"}]`,
		`user[{"functionResponse":{"name":"t","response":{"name":"t","content":""}}} {"functionResponse":{"name":"u","response":{"name":"u","content":"r"}}}]`,
		`user[{"text":"e"}]`,
		`user[{"functionResponse":{"name":"v","response":{"name":"v","content":"late"}}}]`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("contents\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w.SystemInstruction != nil || w.Tools != nil || w.ToolConfig != nil {
		t.Errorf("system %v tools %v toolConfig %s", w.SystemInstruction, w.Tools, w.ToolConfig)
	}
}

func TestSystem(t *testing.T) {
	user := provider.Message{Role: "user", Content: "hi"}
	// Leading system messages join the system instruction as parts.
	w := parse(t, body(t, provider.Request{ModelID: "gemini-2.5-flash", System: "one",
		Messages: []provider.Message{{Role: "system", Content: "two"}, user}}))
	if w.SystemInstruction == nil || len(w.SystemInstruction.Parts) != 2 || string(w.SystemInstruction.Parts[1]) != `{"text":"two"}` {
		t.Errorf("systemInstruction %+v", w.SystemInstruction)
	}
	// Later ones are refused, as the AI SDK refuses them.
	p := New(Config{})
	_, err := p.buildBody(nil, &provider.Request{ModelID: "m", Messages: []provider.Message{user, {Role: "system", Content: "late"}}})
	if err == nil || !strings.Contains(err.Error(), "system messages are only supported at the beginning of the conversation") {
		t.Errorf("late system: %v", err)
	}
	// Gemma takes the system prompt as the first user text.
	b := body(t, provider.Request{ModelID: "gemma-3-27b-it", System: "sys", Messages: []provider.Message{{Role: "system", Content: "more"}, user}})
	if w := parse(t, b); w.SystemInstruction != nil || string(w.Contents[0].Parts[0]) != `{"text":"sys\n\nmore\n\n"}` || string(w.Contents[0].Parts[1]) != `{"text":"hi"}` {
		t.Errorf("gemma body %s", b)
	}
	// ... unless the conversation starts with the model: then it is lost.
	b = body(t, provider.Request{ModelID: "gemma-3-27b-it", System: "sys", Messages: []provider.Message{{Role: "assistant", Content: "x"}, user}})
	if bytes.Contains(b, []byte("sys")) {
		t.Errorf("gemma body %s", b)
	}
}

func TestFiles(t *testing.T) {
	msgs := []provider.Message{{Role: "user", Parts: []provider.Part{
		{Type: provider.PartFile, MediaType: "image/*", Data: "data:image/*;base64,/9j/"},
		{Type: provider.PartFile, MediaType: "image/png", Data: "data:image/jpeg;base64,/9j/"},
		{Type: provider.PartFile, MediaType: "image/*", Data: "https://example.com/a.png"},
		{Type: provider.PartFile, MediaType: "text/plain", Data: "data:text/plain,hello%20there"},
		{Type: provider.PartFile, MediaType: "audio/wav", Data: "UklGRg=="},
	}}}
	w := parse(t, body(t, provider.Request{ModelID: "gemini-2.5-flash", Messages: msgs}))
	var got []string
	for _, p := range w.Contents[0].Parts {
		got = append(got, string(p))
	}
	want := []string{
		`{"inlineData":{"mimeType":"image/jpeg","data":"/9j/"}}`,
		`{"inlineData":{"mimeType":"image/jpeg","data":"/9j/"}}`,
		`{"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/a.png"}}`,
		`{"inlineData":{"mimeType":"text/plain","data":"aGVsbG8gdGhlcmU="}}`,
		`{"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parts\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A model's file goes back inline with its thought flag; a URL is
	// refused.
	asst := provider.Message{Role: "assistant", Parts: []provider.Part{{Type: provider.PartFile, MediaType: "image/png",
		Data: "data:image/png;base64,AAAA", Metadata: json.RawMessage(`{"google":{"thought":true,"thoughtSignature":"s"}}`)}}}
	w = parse(t, body(t, provider.Request{ModelID: "gemini-2.5-flash", Messages: []provider.Message{asst}}))
	if got := string(w.Contents[0].Parts[0]); got != `{"inlineData":{"mimeType":"image/png","data":"AAAA"},"thought":true,"thoughtSignature":"s"}` {
		t.Errorf("model file %s", got)
	}
	asst.Parts[0].Data = "https://example.com/x.png"
	if _, err := New(Config{}).buildBody(nil, &provider.Request{ModelID: "m", Messages: []provider.Message{asst}}); err == nil ||
		!strings.Contains(err.Error(), "File data URLs in assistant messages are not supported") {
		t.Errorf("model file URL: %v", err)
	}
}

func TestToolsSanitisedFor(t *testing.T) {
	tools := []provider.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","enum":[1]}}}`)}}
	msgs := []provider.Message{{Role: "user", Content: "x"}}
	for _, c := range []struct {
		providerID, model, want string
	}{
		{"google", "gemma-3-27b-it", `{"type":"object","properties":{"n":{"type":"string","enum":["1"]}}}`},
		{"proxy", "gemini-2.5-pro", `{"type":"object","properties":{"n":{"type":"string","enum":["1"]}}}`},
		{"proxy", "gemma-3-27b-it", `{"type":"object","properties":{"n":{"type":"integer","enum":[1]}}}`},
	} {
		p := New(Config{ProviderID: c.providerID})
		w := parse(t, bodyFor(t, p, provider.Request{ModelID: c.model, Messages: msgs, Tools: tools}))
		if got := string(w.Tools[0].FunctionDeclarations[0].Parameters); got != c.want || string(w.ToolConfig) != `{"functionCallingConfig":{"mode":"AUTO"}}` {
			t.Errorf("%s %s: parameters %s toolConfig %s", c.providerID, c.model, got, w.ToolConfig)
		}
	}
}

// history is a long conversation with memos, as lifecycle keeps it.
func history(n int) []provider.Message {
	msgs := make([]provider.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("call%012d", i)
		msgs = append(msgs,
			provider.Message{Role: "user", Content: strings.Repeat(fmt.Sprintf("question %d ", i), 20), Memo: &provider.Memo{}},
			provider.Message{Role: "assistant", Memo: &provider.Memo{}, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: strings.Repeat("thinking about it. ", 30), Metadata: gsig(fmt.Sprintf("sig%d", i))},
				{Type: provider.PartText, Text: "Let me run a command."}},
				ToolCalls: []provider.ToolCall{{ID: id, Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la /tmp","description":"list"}`),
					Metadata: gsig(fmt.Sprintf("call-sig%d", i))}}},
			provider.Message{Role: "tool", ToolCallID: id, ToolName: "bash", Content: strings.Repeat("drwxr-xr-x file\n", 60), Memo: &provider.Memo{}},
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

// TestMemo: a history is encoded once; later calls with more messages
// reuse the encodings and send what a fresh encoding sends, for any
// Gemini model.
func TestMemo(t *testing.T) {
	msgs := history(120)
	p := New(Config{ProviderID: "google"})
	first := bodyFor(t, p, provider.Request{ModelID: "gemini-2.5-pro", System: "sys", Messages: msgs[:100]})
	if want := body(t, provider.Request{ModelID: "gemini-2.5-pro", System: "sys", Messages: withoutMemo(msgs[:100])}); !bytes.Equal(first, want) {
		t.Fatal("memoised body differs from a fresh one")
	}
	for i := range msgs[:100] {
		msgs[i].Memo.Bytes(memoKey, func() []byte { t.Fatalf("message %d: not memoised", i); return nil })
	}
	for _, model := range []string{"gemini-3-pro-preview", "gemma-4-31b-it"} {
		second := bodyFor(t, p, provider.Request{ModelID: model, System: "sys", Messages: msgs})
		if want := body(t, provider.Request{ModelID: model, System: "sys", Messages: withoutMemo(msgs)}); !bytes.Equal(second, want) {
			t.Fatalf("%s: memoised body differs from a fresh one", model)
		}
	}
	// Another encoder's bytes in the memo are not taken for ours.
	m := provider.Message{Role: "user", Content: "mine", Memo: &provider.Memo{}}
	m.Memo.Bytes("anthropic-messages", func() []byte { return []byte(`{"type":"text","text":"theirs"}`) })
	if b := body(t, provider.Request{ModelID: "gemini-2.5-pro", Messages: []provider.Message{m}}); !bytes.Contains(b, []byte(`{"text":"mine"}`)) {
		t.Errorf("body %s", b)
	}
}

func BenchmarkEncode200(b *testing.B) {
	msgs := history(200)
	tools := make([]provider.ToolSpec, 12)
	for i := range tools {
		tools[i] = provider.ToolSpec{Name: fmt.Sprint("tool", i), Description: strings.Repeat("Does things. ", 40),
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The command"},"timeout":{"type":"number"}},"required":["command"],"additionalProperties":false}`)}
	}
	req := provider.Request{ModelID: "gemini-3-pro-preview", System: strings.Repeat("You are a coding agent. ", 400), Messages: msgs, Tools: tools, MaxTokens: 32000}
	p := New(Config{ProviderID: "google"})
	out, _ := p.buildBody(nil, &req)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, _ = p.buildBody(out[:0], &req)
	}
}
