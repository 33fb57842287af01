package anthropic

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
func body(t testing.TB, req provider.Request) ([]byte, []string) {
	t.Helper()
	p := New(Config{BaseURL: "http://x"})
	b, betas, err := p.buildBody(nil, &req)
	if err != nil {
		t.Fatalf("buildBody: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("invalid JSON body:\n%s", b)
	}
	return b, betas
}

// wire is a body parsed back.
type wire struct {
	Model        string          `json:"model"`
	MaxTokens    int             `json:"max_tokens"`
	Temperature  *float64        `json:"temperature"`
	TopP         *float64        `json:"top_p"`
	Thinking     json.RawMessage `json:"thinking"`
	OutputConfig struct {
		Effort string `json:"effort"`
	} `json:"output_config"`
	System   []wireBlock `json:"system"`
	Messages []struct {
		Role    string      `json:"role"`
		Content []wireBlock `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name  string `json:"name"`
		Eager bool   `json:"eager_input_streaming"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Stream     bool            `json:"stream"`
}

type wireBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`
	ToolUseID    string          `json:"tool_use_id"`
	Input        json.RawMessage `json:"input"`
	CacheControl json.RawMessage `json:"cache_control"`
}

func parse(t testing.TB, b []byte) wire {
	t.Helper()
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("parse: %v\n%s", err, b)
	}
	return w
}

// marks lists the blocks with cache_control as "system:0" or
// "role#message:block(type)".
func marks(w wire) []string {
	var out []string
	for i, b := range w.System {
		if b.CacheControl != nil {
			out = append(out, fmt.Sprintf("system:%d", i))
		}
	}
	for i, m := range w.Messages {
		for j, b := range m.Content {
			if b.CacheControl != nil {
				if string(b.CacheControl) != `{"type":"ephemeral"}` {
					panic(string(b.CacheControl))
				}
				out = append(out, fmt.Sprintf("%s#%d:%d(%s)", m.Role, i, j, b.Type))
			}
		}
	}
	return out
}

func sig(s string) json.RawMessage {
	return json.RawMessage(`{"anthropic":{"signature":"` + s + `"}}`)
}

// goldenRequest has every kind of content: a system prompt, a user text
// and image, an assistant's thinking with its signature, text and two
// tool calls (one ID that needs sanitising), their results (one failed),
// and a last user text.
func goldenRequest() provider.Request {
	return provider.Request{
		ModelID:     "claude-sonnet-4-5",
		System:      "You are a coding agent.\nBe brief.",
		MaxTokens:   32000,
		Temperature: f64(0.3),
		Messages: []provider.Message{
			{Role: "user", Parts: []provider.Part{
				{Type: provider.PartText, Text: "What is in this picture?"},
				{Type: provider.PartFile, MediaType: "image/png", Filename: "pic.png", Data: "data:image/png;base64,iVBORw0KGgo="},
			}},
			{Role: "assistant", Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: "The user wants a description.", Metadata: sig("c2lnbmF0dXJl")},
				{Type: provider.PartText, Text: ""},
				{Type: provider.PartText, Text: "Let me look at the files."},
			}, ToolCalls: []provider.ToolCall{
				{ID: "call.1:read", Name: "read", Arguments: json.RawMessage(`{ "filePath": "/tmp/a.go" }`)},
				{ID: "toolu_02", Name: "glob", Arguments: json.RawMessage(`{"pattern":"*.go"}`)},
			}},
			{Role: "tool", ToolCallID: "call.1:read", ToolName: "read", IsError: true, Content: "File not found: /tmp/a.go"},
			{Role: "tool", ToolCallID: "toolu_02", ToolName: "glob", Content: "b.go\nc.go"},
			{Role: "user", Content: "Thanks <3 & bye"},
		},
		Tools: []provider.ToolSpec{
			{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"filePath":{"type":"string"}},"required":["filePath"]}`)},
			{Name: "glob", Description: "Find files.", Parameters: json.RawMessage(`{"type": "object", "properties": {"pattern": {"type": "string"}}}`)},
		},
	}
}

func TestGoldenRequest(t *testing.T) {
	b, betas := body(t, goldenRequest())
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
	if want := []string{betaStructuredOutputs}; !reflect.DeepEqual([]string(betas), want) {
		t.Errorf("betas %v, want %v", betas, want)
	}
	// The marks: the system block, the last of the two results (one
	// OpenCode tool message) and the last user text. Four at most.
	if got, want := marks(parse(t, b)), []string{"system:0", "user#2:1(tool_result)", "user#2:2(text)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
}

func TestCachingMarks(t *testing.T) {
	user := func(s string) provider.Message { return provider.Message{Role: "user", Content: s} }
	asst := func(s string) provider.Message { return provider.Message{Role: "assistant", Content: s} }
	call := func(id string) provider.Message {
		return provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: id, Name: "bash", Arguments: json.RawMessage(`{}`)}}}
	}
	result := func(id string) provider.Message { return provider.Message{Role: "tool", ToolCallID: id, Content: "ok"} }
	cases := []struct {
		name   string
		system string
		msgs   []provider.Message
		want   []string
	}{
		{"one user", "sys", []provider.Message{user("hi")}, []string{"system:0", "user#0:0(text)"}},
		{"no system", "", []provider.Message{user("a"), asst("b"), user("c")}, []string{"assistant#1:0(text)", "user#2:0(text)"}},
		{"last two of many", "sys", []provider.Message{user("a"), asst("b"), user("c"), asst("d"), user("e")},
			[]string{"system:0", "assistant#3:0(text)", "user#4:0(text)"}},
		{"call then results", "sys", []provider.Message{user("a"), call("1"), result("1")},
			[]string{"system:0", "assistant#1:0(tool_use)", "user#2:0(tool_result)"}},
		{"three results are one message", "sys", []provider.Message{user("a"), {Role: "assistant", ToolCalls: []provider.ToolCall{
			{ID: "1", Name: "a"}, {ID: "2", Name: "b"}, {ID: "3", Name: "c"}}}, result("1"), result("2"), result("3")},
			[]string{"system:0", "assistant#1:2(tool_use)", "user#2:2(tool_result)"}},
		{"results then user", "sys", []provider.Message{user("a"), call("1"), result("1"), user("more")},
			[]string{"system:0", "user#2:0(tool_result)", "user#2:1(text)"}},
		{"empty messages do not count", "sys", []provider.Message{user("a"), asst("b"), user(""), {Role: "assistant", Parts: []provider.Part{{Type: provider.PartText}}}},
			[]string{"system:0", "user#0:0(text)", "assistant#1:0(text)"}},
		{"unsigned reasoning last: counted, not sent", "sys", []provider.Message{user("a"), {Role: "assistant", Parts: []provider.Part{
			{Type: provider.PartText, Text: "b"}, {Type: provider.PartReasoning, Text: "hmm"}}}},
			[]string{"system:0", "user#0:0(text)"}},
		{"thinking last takes no mark", "sys", []provider.Message{user("a"), {Role: "assistant", Parts: []provider.Part{
			{Type: provider.PartText, Text: "b"}, {Type: provider.PartReasoning, Text: "hmm", Metadata: sig("s")}}}, user("c")},
			[]string{"system:0", "user#2:0(text)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := body(t, provider.Request{ModelID: "claude-sonnet-4-5", System: c.system, Messages: c.msgs})
			if got := marks(parse(t, b)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("marks %v, want %v\n%s", got, c.want, b)
			}
		})
	}
}

func TestExplicitCacheMarksCapped(t *testing.T) {
	var msgs []provider.Message
	for i := range 6 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, provider.Message{Role: role, Content: fmt.Sprint("m", i), Cache: i < 3})
	}
	b, _ := body(t, provider.Request{ModelID: "claude-sonnet-4-5", System: "sys", Messages: msgs})
	// system + m0..m2 reach four; the last two are past the AI SDK's limit.
	want := []string{"system:0", "user#0:0(text)", "assistant#1:0(text)", "user#2:0(text)"}
	if got := marks(parse(t, b)); !reflect.DeepEqual(got, want) {
		t.Errorf("marks %v, want %v", got, want)
	}
}

func TestToolIDSanitising(t *testing.T) {
	msgs := []provider.Message{
		{Role: "user", Content: "go"},
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "functions.bash:0", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}},
		{Role: "tool", ToolCallID: "functions.bash:0", Content: "x"},
	}
	for model, want := range map[string]string{"claude-sonnet-4-5": "functions_bash_0", "glm-4.6": "functions.bash:0"} {
		w := parse(t, must(body(t, provider.Request{ModelID: model, Messages: msgs})))
		if id, res := w.Messages[1].Content[0].ID, w.Messages[2].Content[0].ToolUseID; id != want || res != want {
			t.Errorf("%s: tool_use %q, tool_result %q, want %q", model, id, res, want)
		}
	}
	if got := (encoder{sanitize: true}).toolID("a.é😀-_Z9"); got != "a____-_Z9" {
		t.Errorf("toolID %q (JS counts UTF-16 units)", got)
	}
}

func must(b []byte, _ []string) []byte { return b }

func TestMerging(t *testing.T) {
	msgs := []provider.Message{
		{Role: "user", Content: "a"},
		{Role: "user", Content: "b"},
		{Role: "assistant", Content: "c"},
		{Role: "assistant", Content: "d"},
		{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "1", Content: "r"},
		{Role: "user", Content: "e"},
	}
	w := parse(t, must(body(t, provider.Request{ModelID: "m", Messages: msgs})))
	var got []string
	for _, m := range w.Messages {
		var parts []string
		for _, b := range m.Content {
			parts = append(parts, b.Type+":"+b.Text+b.ToolUseID+b.ID)
		}
		got = append(got, m.Role+"["+strings.Join(parts, " ")+"]")
	}
	want := []string{"user[text:a text:b]", "assistant[text:c text:d tool_use:1]", "user[tool_result:1 text:e]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages %v, want %v", got, want)
	}
}

// TestToolUseMovedToEnd: merged assistant messages keep tool_use blocks
// after the other blocks between thinking blocks (moveToolUseBlocksToEnd),
// and the marks stay on their blocks.
func TestToolUseMovedToEnd(t *testing.T) {
	msgs := []provider.Message{
		{Role: "user", Content: "a"},
		{Role: "assistant", Content: "one", ToolCalls: []provider.ToolCall{{ID: "1", Name: "t"}}},
		{Role: "assistant", Content: "two", Cache: true},
		{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "r", Metadata: sig("s")}, {Type: provider.PartText, Text: "three  "}}},
	}
	w := parse(t, must(body(t, provider.Request{ModelID: "m", Messages: msgs})))
	var got []string
	for _, b := range w.Messages[1].Content {
		s := b.Type + ":" + b.Text + b.ID
		if b.CacheControl != nil {
			s += "*"
		}
		got = append(got, s)
	}
	// The last text of a prompt ending with the assistant is trimmed.
	want := []string{"text:one", "text:two*", "tool_use:1", "thinking:", "text:three*"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
}

func TestEmptyContentFilter(t *testing.T) {
	msgs := []provider.Message{
		{Role: "user", Content: ""},
		{Role: "user", Parts: []provider.Part{{Type: provider.PartText, Text: ""}, {Type: provider.PartText, Text: "q"}}},
		{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "  "}, {Type: provider.PartText, Text: ""}}},
		{Role: "assistant", Parts: []provider.Part{{Type: provider.PartReasoning, Text: "", Metadata: sig("only-sig")},
			{Type: provider.PartReasoning, Text: "", Metadata: json.RawMessage(`{"anthropic":{"redactedData":"REDACTED"}}`)}},
			ToolCalls: []provider.ToolCall{{ID: "1", Name: "t", Arguments: json.RawMessage(`not json`)}}},
		{Role: "tool", ToolCallID: "1", Content: ""},
	}
	b := must(body(t, provider.Request{ModelID: "m", Messages: msgs}))
	want := `"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"only-sig"},{"type":"redacted_thinking","data":"REDACTED"},{"type":"tool_use","id":"1","name":"t","input":{},"cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":"","cache_control":{"type":"ephemeral"}}]}]`
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("body\n%s\nwant it to contain\n%s", b, want)
	}
}

func TestFiles(t *testing.T) {
	msgs := []provider.Message{{Role: "user", Parts: []provider.Part{
		{Type: provider.PartFile, MediaType: "application/pdf", Filename: "doc.pdf", Data: "data:application/pdf;base64,JVBERi0="},
		{Type: provider.PartFile, MediaType: "image/*", Data: "data:image/jpeg;base64,/9j/"},
		{Type: provider.PartFile, MediaType: "image/png", Data: "https://example.com/a.png"},
		{Type: provider.PartFile, MediaType: "text/plain", Data: "data:text/plain;base64,aGVsbG8="},
	}}}
	b, betas := body(t, provider.Request{ModelID: "claude-sonnet-4-5", Messages: msgs})
	want := `[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"doc.pdf"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}},` +
		`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},` +
		`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"},"cache_control":{"type":"ephemeral"}}]`
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}
	if !reflect.DeepEqual([]string(betas), []string{betaPDFs}) {
		t.Errorf("betas %v", betas)
	}
	p := New(Config{})
	_, _, err := p.buildBody(nil, &provider.Request{ModelID: "m", Messages: []provider.Message{{Role: "user", Parts: []provider.Part{
		{Type: provider.PartFile, MediaType: "audio/wav", Data: "data:audio/wav;base64,AA=="}}}}})
	if err == nil || !strings.Contains(err.Error(), "media type: audio/wav") {
		t.Errorf("audio: %v", err)
	}
}

func TestParameters(t *testing.T) {
	user := []provider.Message{{Role: "user", Content: "hi"}}
	tool := []provider.ToolSpec{{Name: "t", Parameters: json.RawMessage(`{"type":"object"}`)}}
	cases := []struct {
		name       string
		req        provider.Request
		maxTokens  int
		temp, topP *float64
		thinking   string
		effort     string
		eager      bool
	}{
		{name: "claude defaults", req: provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 32000, Tools: tool},
			maxTokens: 32000, eager: true},
		{name: "clamped to the model", req: provider.Request{ModelID: "claude-3-haiku-20240307", MaxTokens: 32000},
			maxTokens: 4096},
		{name: "unknown model default", req: provider.Request{ModelID: "glm-4.6", Tools: tool}, maxTokens: 4096},
		{name: "unknown model not clamped", req: provider.Request{ModelID: "glm-4.6", MaxTokens: 32000}, maxTokens: 32000},
		{name: "temperature clamped, top_p dropped with it", req: provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 10,
			Temperature: f64(1.5), TopP: f64(0.9)}, maxTokens: 10, temp: f64(1)},
		{name: "both kept for other models", req: provider.Request{ModelID: "minimax-m2", MaxTokens: 10,
			Temperature: f64(0.5), TopP: f64(0.9)}, maxTokens: 10, temp: f64(0.5), topP: f64(0.9)},
		{name: "sampling rejected", req: provider.Request{ModelID: "claude-opus-4-7", MaxTokens: 10, Temperature: f64(0.5)},
			maxTokens: 10},
		{name: "adaptive thinking from 5.1", req: provider.Request{ModelID: "claude-sonnet-5-1", MaxTokens: 32000, TopP: f64(0.5)},
			maxTokens: 32000, thinking: `{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`},
		{name: "no default thinking for 5.0", req: provider.Request{ModelID: "claude-opus-5", MaxTokens: 32000}, maxTokens: 32000},
		{name: "minimax-m3", req: provider.Request{ModelID: "MiniMax-M3", MaxTokens: 100, Temperature: f64(0.2)},
			maxTokens: 100, thinking: `{"type":"adaptive"}`},
		// Title requests take the first thinking variant of a model the
		// catalog says reasons; the budget is added to max_tokens.
		{name: "title: high budget", req: provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 32000, Purpose: provider.PurposeTitle,
			Reasoning: new(true), OutputLimit: 64000, Temperature: f64(0.5)},
			maxTokens: 48000, thinking: `{"type":"enabled","budget_tokens":16000}`},
		{name: "title: budget from a small output limit", req: provider.Request{ModelID: "claude-haiku-4-5", MaxTokens: 8000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 8000},
			maxTokens: 11999, thinking: `{"type":"enabled","budget_tokens":3999}`},
		{name: "title: capped at the model's maximum", req: provider.Request{ModelID: "claude-opus-4-1", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 32000},
			maxTokens: 32000, thinking: `{"type":"enabled","budget_tokens":15999}`},
		{name: "title: no variant without reasoning", req: provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(false), OutputLimit: 64000}, maxTokens: 32000},
		{name: "title: not in the catalog", req: provider.Request{ModelID: "claude-sonnet-4-5", MaxTokens: 32000,
			Purpose: provider.PurposeTitle}, maxTokens: 32000},
		{name: "title: adaptive 4.6", req: provider.Request{ModelID: "claude-sonnet-4-6", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 64000}, maxTokens: 32000,
			thinking: `{"type":"adaptive"}`, effort: "low"},
		{name: "title: adaptive summarized from 4.7", req: provider.Request{ModelID: "claude-opus-4-7", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 128000}, maxTokens: 32000,
			thinking: `{"type":"adaptive","display":"summarized"}`, effort: "low"},
		{name: "title: block binding from 5.1", req: provider.Request{ModelID: "claude-sonnet-5-1", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 128000}, maxTokens: 32000,
			thinking: `{"type":"adaptive","display":"summarized","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`, effort: "low"},
		{name: "title: opus 4.5 effort with a budget", req: provider.Request{ModelID: "claude-opus-4-5", MaxTokens: 32000,
			Purpose: provider.PurposeTitle, Reasoning: new(true), OutputLimit: 64000}, maxTokens: 48000,
			thinking: `{"type":"enabled","budget_tokens":16000}`, effort: "low"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Messages = user
			w := parse(t, must(body(t, c.req)))
			if w.MaxTokens != c.maxTokens || !reflect.DeepEqual(w.Temperature, c.temp) || !reflect.DeepEqual(w.TopP, c.topP) ||
				string(w.Thinking) != c.thinking || !w.Stream {
				t.Errorf("max_tokens %d temperature %v top_p %v thinking %s stream %v", w.MaxTokens, ptr(w.Temperature), ptr(w.TopP), w.Thinking, w.Stream)
			}
			if w.OutputConfig.Effort != c.effort {
				t.Errorf("output_config.effort %q, want %q", w.OutputConfig.Effort, c.effort)
			}
			if len(c.req.Tools) > 0 {
				if len(w.Tools) != 1 || w.Tools[0].Eager != c.eager || string(w.ToolChoice) != `{"type":"auto"}` {
					t.Errorf("tools %+v tool_choice %s", w.Tools, w.ToolChoice)
				}
			} else if w.Tools != nil || w.ToolChoice != nil {
				t.Errorf("tools without tools: %+v %s", w.Tools, w.ToolChoice)
			}
		})
	}
}

func ptr(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// history is a long conversation with memos, as lifecycle keeps it.
func history(n int) []provider.Message {
	msgs := make([]provider.Message, 0, n)
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("toolu_%04d", i)
		msgs = append(msgs,
			provider.Message{Role: "user", Content: strings.Repeat(fmt.Sprintf("question %d ", i), 20), Memo: &provider.Memo{}},
			provider.Message{Role: "assistant", Memo: &provider.Memo{}, Parts: []provider.Part{
				{Type: provider.PartReasoning, Text: strings.Repeat("thinking about it. ", 30), Metadata: sig(fmt.Sprintf("sig%d", i))},
				{Type: provider.PartText, Text: "Let me run a command."}},
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

// TestMemo: a history is encoded once; later calls with more messages
// (marks moved) reuse the encodings and send what a fresh encoding sends.
func TestMemo(t *testing.T) {
	msgs := history(120)
	p := New(Config{})
	first, _, err := p.buildBody(nil, &provider.Request{ModelID: "claude-sonnet-4-5", System: "sys", Messages: msgs[:100]})
	if err != nil {
		t.Fatal(err)
	}
	if want := must(body(t, provider.Request{ModelID: "claude-sonnet-4-5", System: "sys", Messages: withoutMemo(msgs[:100])})); !bytes.Equal(first, want) {
		t.Fatal("memoised body differs from a fresh one")
	}
	for i := range msgs[:100] {
		msgs[i].Memo.Bytes("anthropic-messages/claude", func() []byte { t.Fatalf("message %d: not memoised", i); return nil })
	}
	second, _, err := p.buildBody(nil, &provider.Request{ModelID: "claude-sonnet-4-5", System: "sys", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if want := must(body(t, provider.Request{ModelID: "claude-sonnet-4-5", System: "sys", Messages: withoutMemo(msgs)})); !bytes.Equal(second, want) {
		t.Fatal("second memoised body differs from a fresh one")
	}
	if got := len(marks(parse(t, second))); got != 3 {
		t.Errorf("%d marks on the second call", got)
	}
	// Another model (no sanitising) gets its own encoding, not these bytes.
	other, _, _ := p.buildBody(nil, &provider.Request{ModelID: "glm-4.6", Messages: msgs})
	if want := must(body(t, provider.Request{ModelID: "glm-4.6", Messages: withoutMemo(msgs)})); !bytes.Equal(other, want) {
		t.Fatal("other model's body differs from a fresh one")
	}
}

func BenchmarkEncode200(b *testing.B) {
	msgs := history(200)
	tools := make([]provider.ToolSpec, 12)
	for i := range tools {
		tools[i] = provider.ToolSpec{Name: fmt.Sprint("tool", i), Description: strings.Repeat("Does things. ", 40),
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"The command"},"timeout":{"type":"number"}},"required":["command"]}`)}
	}
	req := provider.Request{ModelID: "claude-sonnet-4-5", System: strings.Repeat("You are a coding agent. ", 400), Messages: msgs, Tools: tools, MaxTokens: 32000}
	p := New(Config{})
	out, _, _ := p.buildBody(nil, &req)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		out, _, _ = p.buildBody(out[:0], &req)
	}
}
