package lifecycle_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/mcpstub"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider"
)

// slowOrDirectives streams a prompt that says "slow" in pieces a second
// apart (so it can be aborted mid-answer); every other request is run by
// the directives (tool calls).
func slowOrDirectives(req stubmodel.Request) stubmodel.Response {
	if !req.IsTitle() && strings.Contains(req.LastUserText(), "slow") {
		resp := stubmodel.Echo(req)
		resp.Chunks, resp.Delay = 4, time.Second
		return resp
	}
	return stubmodel.Directives(req)
}

// TestInputHistoryAfterRestart: what the user gave and what happened to it
// (an attached file, an aborted answer, a failed tool call) reaches the
// model on later calls the same way whether the server kept the
// conversation in memory or read it back after a restart: one session runs
// straight through, another with a restart before its last prompt, and
// the last model call of both carries the same messages.
func TestInputHistoryAfterRestart(t *testing.T) {
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "README.md"), []byte("# Demo\n\nHello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := "file://" + filepath.Join(project, "README.md")
	run := func(restart bool) []json.RawMessage {
		stub := stubmodel.NewServer(t, slowOrDirectives)
		data := t.TempDir()
		opts := testserver.Options{SQLite: true, DataDir: data, Directory: project, Config: stubConfig(stub.URL(), "")}
		srv := testserver.Start(t, opts)
		sid := newSession(t, srv.URL)
		prompt := func(srv *testserver.Server, path, body string, want int) {
			t.Helper()
			if code, b := post(t, srv.URL+"/session/"+sid+"/"+path, body); code != want {
				t.Fatalf("POST %s: %d %s", path, code, b)
			}
		}
		prompt(srv, "message", `{"parts":[{"type":"text","text":"summarize @README.md"},`+
			`{"type":"file","mime":"text/plain","filename":"README.md","url":"`+readme+`"}]}`, 200)
		prompt(srv, "message", `{"parts":[{"type":"text","text":"call:read {\"filePath\":\"missing.txt\"} then: looked"}]}`, 200)
		prompt(srv, "prompt_async", `{"parts":[{"type":"text","text":"answer slow"}]}`, 204)
		// Abort once the answer has begun: its text part is stored at the
		// first delta.
		checkFor(t, 10*time.Second, "the slow answer to begin", func() bool {
			resp, err := http.Get(srv.URL + "/session/" + sid + "/message")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var msgs []struct {
				Info  struct{ Role string }
				Parts []struct{ Type string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&msgs)
			n := len(msgs)
			return n > 0 && msgs[n-1].Info.Role == "assistant" && len(msgs[n-1].Parts) > 0 &&
				msgs[n-1].Parts[len(msgs[n-1].Parts)-1].Type == "text"
		})
		prompt(srv, "abort", `{}`, 200)
		if restart {
			srv.Stop()
			srv = testserver.Start(t, opts)
		}
		prompt(srv, "message", `{"parts":[{"type":"text","text":"and now?"}]}`, 200)
		reqs := stub.Requests()
		return reqs
	}
	straight, restarted := run(false), run(true)
	if len(straight) != len(restarted) {
		t.Fatalf("%d model calls straight through, %d with a restart", len(straight), len(restarted))
	}
	last := func(raws []json.RawMessage) []string {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(raws[len(raws)-1], &req); err != nil {
			t.Fatal(err)
		}
		ids := regexp.MustCompile(`call_\d+_\d+`)
		var out []string
		for _, m := range req.Messages[1:] { // the system prompt aside
			out = append(out, ids.ReplaceAllString(string(m), "call_N"))
		}
		return out
	}
	a, b := last(straight), last(restarted)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the last call differs after a restart:\n straight  %s\n restarted %s", strings.Join(a, "\n           "), strings.Join(b, "\n           "))
	}
	// And it carries each kind of history as OpenCode sends it.
	all := strings.Join(a, "\n")
	for _, want := range []string{
		`Called the Read tool with the following input: {\"filePath\":\"` + filepath.Join(project, "README.md") + `\"}`,
		`1: # Demo`,
		`"role":"tool","content":"File not found: ` + filepath.Join(project, "missing.txt") + `"`,
		`{"role":"user","content":"answer slow"}`,
		`{"role":"assistant","content":"You said:`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the last call lacks %s:\n%s", want, all)
		}
	}
}

// TestSubtaskCommand: a command with subtask: true runs as OpenCode runs
// it: the user message holds a subtask part, the turn starts with a task
// call of the command's agent (a child session gets the expanded template
// as its prompt), then the model goes on from the task's result after a
// synthetic "Summarize the task tool output above" message.
func TestSubtaskCommand(t *testing.T) {
	project := t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, ".opencode", "command"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := "---\ndescription: look around\nagent: explore\nsubtask: true\n---\nLook at $ARGUMENTS and report.\n"
	if err := os.WriteFile(filepath.Join(project, ".opencode", "command", "look.md"), []byte(cmd), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := stubmodel.NewServer(t, stubmodel.Echo)
	srv := testserver.Start(t, testserver.Options{Directory: project, Config: stubConfig(stub.URL(), "")})
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/command", `{"command":"look","arguments":"main.go"}`); code != 200 {
		t.Fatalf("command: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2 (the subagent's, then the session's)", len(reqs))
	}
	child := reqs[0].Messages[len(reqs[0].Messages)-1]
	if child.Role != "user" || child.Content != "Look at main.go and report." {
		t.Errorf("the subagent was sent %q", child.Content)
	}
	msgs := reqs[1].Messages
	var roles []string
	for _, m := range msgs[1:] {
		roles = append(roles, m.Role+": "+m.Content)
	}
	got := strings.Join(roles, "\n")
	for _, want := range []string{
		"user: The following tool was executed by the user",
		"tool: ",
		"user: Summarize the task tool output above and continue with your task.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the session's call lacks %q:\n%s", want, got)
		}
	}
	if n := len(msgs); msgs[n-1].Role != "user" || !strings.HasPrefix(msgs[n-1].Content, "Summarize the task tool output") {
		t.Errorf("the last message is %s %q", msgs[n-1].Role, msgs[n-1].Content)
	}
	if len(msgs) < 3 || msgs[len(msgs)-3].ToolCalls == nil || msgs[len(msgs)-3].ToolCalls[0].Function.Name != "task" {
		t.Errorf("no task call before the result:\n%s", got)
	}
}

// TestMCPResourcePart: GET /experimental/resource lists the MCP servers'
// resources as OpenCode keys them; a file part whose source names one is
// stored as OpenCode 1.18.33 stores it (what was read, the text as a
// synthetic part; a PNG as a note and an image part) and the model is sent
// those texts (the image as OpenCode's error text on a text-only model).
func TestMCPResourcePart(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Echo)
	cfg := stubConfig(stub.URL(), "")
	cfg.MCP = map[string]config.MCPConfig{"stub": {Type: "local", Command: []string{os.Args[0], "-test.run=^$"},
		Environment: map[string]string{mcpstub.Env: "1"}}}
	srv := testserver.Start(t, testserver.Options{Config: cfg})
	resp, err := http.Get(srv.URL + "/experimental/resource")
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]struct{ Name, URI, MimeType, Client string }
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if r := list["stub:notes"]; r.URI != mcpstub.NotesURI || r.Client != "stub" || r.MimeType != "text/plain" {
		t.Fatalf("GET /experimental/resource = %+v", list)
	}
	sid := newSession(t, srv.URL)
	part := func(name, uri, mime string) string {
		return `{"type":"file","mime":"` + mime + `","filename":"` + name + `","url":"` + uri + `",` +
			`"source":{"type":"resource","clientName":"stub","uri":"` + uri + `","text":{"value":"@` + name + `","start":0,"end":1}}}`
	}
	body := `{"parts":[{"type":"text","text":"use these"},` + part("notes", mcpstub.NotesURI, "text/plain") + `,` +
		part("dot", mcpstub.DotURI, "image/png") + `,` + part("gone", "stub://gone", "text/plain") + `]}`
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", body); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	var raw struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(stub.Requests()[len(reqs)-1], &raw); err != nil {
		t.Fatal(err)
	}
	var content []struct{ Type, Text string }
	if err := json.Unmarshal(raw.Messages[len(raw.Messages)-1].Content, &content); err != nil {
		t.Fatalf("last user content %s: %v", raw.Messages[len(raw.Messages)-1].Content, err)
	}
	var texts []string
	for _, c := range content {
		texts = append(texts, c.Type+": "+c.Text)
	}
	want := []string{
		"text: use these",
		"text: Reading MCP resource: notes (" + mcpstub.NotesURI + ")",
		"text: " + mcpstub.NotesText,
		"text: Reading MCP resource: dot (" + mcpstub.DotURI + ")",
		"text: [Binary MCP resource attached: " + mcpstub.DotURI + " (image/png)]",
		`text: ERROR: Cannot read "` + mcpstub.DotURI + `" (this model does not support image input). Inform the user.`,
		"text: Reading MCP resource: gone (stub://gone)",
	}
	got := strings.Join(texts, "\n")
	if len(texts) != len(want)+1 || !strings.HasPrefix(got, strings.Join(want, "\n")) ||
		!strings.HasPrefix(texts[len(want)], "text: Failed to read MCP resource gone: ") {
		t.Errorf("the model was sent\n%s\nwant\n%s\n(then Failed to read MCP resource gone: …)", got, strings.Join(want, "\n"))
	}
}

// signingModel answers with signed reasoning and a text, and keeps every
// turn request it gets.
type signingModel struct {
	mu   sync.Mutex
	reqs []provider.Request
}

func (m *signingModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	if req.Purpose == provider.PurposeTitle {
		emit(provider.Chunk{Kind: provider.TextDelta, Text: "a title"})
		emit(provider.Chunk{Kind: provider.Finish, Reason: "stop"})
		return nil
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	emit(provider.Chunk{Kind: provider.ReasoningDelta, Text: "thinking"})
	emit(provider.Chunk{Kind: provider.ReasoningDelta, Metadata: json.RawMessage(`{"anthropic":{"signature":"sig-1"}}`)})
	emit(provider.Chunk{Kind: provider.TextDelta, Text: "answer"})
	emit(provider.Chunk{Kind: provider.Finish, Reason: "stop"})
	return nil
}

func (m *signingModel) last() provider.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// TestReasoningMetadata: a reasoning part's provider metadata (a
// signature) is stored with the part and sent back, with the reasoning,
// to the model that wrote it, before and after a restart; a call to
// another model gets the reasoning as text and no metadata (OpenCode's
// toModelMessages).
func TestReasoningMetadata(t *testing.T) {
	data := t.TempDir()
	model := &signingModel{}
	stub := stubmodel.NewServer(t, stubmodel.Echo)
	opts := testserver.Options{SQLite: true, DataDir: data, Provider: model, Config: stubConfig(stub.URL(), "")}
	opts.Config.Model = "scripted/scripted-model"
	srv := testserver.Start(t, opts)
	sid := newSession(t, srv.URL)
	prompt := func(srv *testserver.Server, body string) {
		t.Helper()
		if code, b := post(t, srv.URL+"/session/"+sid+"/message", body); code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
	}
	prompt(srv, `{"parts":[{"type":"text","text":"one"}]}`)
	prompt(srv, `{"parts":[{"type":"text","text":"two"}]}`)
	check := func(what string, msgs []provider.Message) {
		t.Helper()
		a := msgs[1]
		if a.Role != "assistant" || len(a.Parts) != 2 || a.Parts[0].Type != provider.PartReasoning || a.Parts[0].Text != "thinking" ||
			string(a.Parts[0].Metadata) != `{"anthropic":{"signature":"sig-1"}}` || a.Parts[1].Text != "answer" {
			t.Errorf("%s: the answer went back as %+v", what, a)
		}
	}
	check("live", model.last().Messages)
	srv.Stop()
	srv = testserver.Start(t, opts)
	prompt(srv, `{"parts":[{"type":"text","text":"three"}]}`)
	check("after a restart", model.last().Messages)

	// Another model gets the reasoning as text, without the signature.
	prompt(srv, `{"model":{"providerID":"stub","modelID":"`+stubmodel.ModelID+`"},"parts":[{"type":"text","text":"four"}]}`)
	reqs := stub.Requests()
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1], &req); err != nil {
		t.Fatal(err)
	}
	a := req.Messages[2]
	if a["role"] != "assistant" || a["content"] != "thinkinganswer" || a["reasoning_content"] != nil {
		t.Errorf("another model got the answer as %v", a)
	}
}

// twoBlocks streams two signed reasoning blocks, each ended, then a text.
type twoBlocks struct{ signingModel }

func (m *twoBlocks) Stream(ctx context.Context, req provider.Request, emit func(provider.Chunk)) error {
	if req.Purpose == provider.PurposeTitle {
		return m.signingModel.Stream(ctx, req, emit)
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	for _, b := range []string{"first", "second"} {
		emit(provider.Chunk{Kind: provider.ReasoningDelta, Text: b + " thought"})
		emit(provider.Chunk{Kind: provider.ReasoningEnd, Metadata: json.RawMessage(`{"anthropic":{"signature":"sig-` + b + `"}}`)})
	}
	emit(provider.Chunk{Kind: provider.TextDelta, Text: "answer"})
	emit(provider.Chunk{Kind: provider.Finish, Reason: "stop"})
	return nil
}

// TestReasoningBlocks: each reasoning block a provider ends is a part of
// its own, stored and sent back with its own signature.
func TestReasoningBlocks(t *testing.T) {
	model := &twoBlocks{}
	srv := testserver.Start(t, testserver.Options{Provider: model})
	sid := newSession(t, srv.URL)
	for _, text := range []string{"one", "two"} {
		if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"`+text+`"}]}`); code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
	}
	a := model.last().Messages[1]
	if len(a.Parts) != 3 || a.Parts[0].Text != "first thought" || string(a.Parts[0].Metadata) != `{"anthropic":{"signature":"sig-first"}}` ||
		a.Parts[1].Text != "second thought" || string(a.Parts[1].Metadata) != `{"anthropic":{"signature":"sig-second"}}` ||
		a.Parts[2].Type != provider.PartText {
		t.Fatalf("the answer went back as %+v", a.Parts)
	}
}

// TestCompactionCutOffRedone: a compaction a restart cuts off (the server
// stops while the summary streams) is redone after the restart from the
// conversation before it, not from the bare "What did we do so far?".
func TestCompactionCutOffRedone(t *testing.T) {
	var summaries atomic.Int64
	stub := stubmodel.NewServer(t, func(req stubmodel.Request) stubmodel.Response {
		if len(req.Tools) == 0 && strings.Contains(req.LastUserText(), "<conversation>") {
			resp := stubmodel.Response{Text: "Summary: the user told a fact about alpha."}
			if summaries.Add(1) == 1 {
				resp.Chunks, resp.Delay = 4, 2*time.Second // cut off by the stop
			}
			return resp
		}
		return stubmodel.Echo(req)
	})
	data := t.TempDir()
	opts := testserver.Options{SQLite: true, DataDir: data, Config: stubConfig(stub.URL(), "")}
	srv := testserver.Start(t, opts)
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"remember the alpha fact"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	go func() {
		_, _ = post(t, srv.URL+"/session/"+sid+"/summarize", `{"providerID":"stub","modelID":"`+stubmodel.ModelID+`"}`)
	}()
	checkFor(t, 10*time.Second, "the summary to stream", func() bool { return summaries.Load() == 1 })
	srv.Stop()
	srv = testserver.Start(t, opts)
	checkFor(t, 20*time.Second, "the compaction redone", func() bool { return summaries.Load() >= 2 })
	var redone string
	for _, raw := range stub.Requests() {
		var req stubmodel.Request
		if json.Unmarshal(raw, &req) == nil && strings.Contains(req.LastUserText(), "<conversation>") {
			redone = req.LastUserText()
		}
	}
	if !strings.Contains(redone, "remember the alpha fact") {
		t.Errorf("the redone summary request lacks the conversation:\n%s", redone)
	}
}
