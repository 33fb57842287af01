package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/mcpstub"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// modelRequest is what the stub received for one model call.
type modelRequest struct {
	// Messages' content: a string, or an array's texts joined.
	Messages []stubmodel.Message `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func decodeRequests(t *testing.T, raw []json.RawMessage) []modelRequest {
	t.Helper()
	out := make([]modelRequest, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (m modelRequest) tools() []string {
	var out []string
	for _, t := range m.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// TestSystemPromptSections: on a git project with instruction files, a
// config instruction and a skill, the model call's one system message holds,
// in order, the base prompt, the environment block naming the directory,
// work tree and model, the instruction files (global, then the project's
// nearest first; CLAUDE.md left out since AGENTS.md exists; then the
// config's), the skills block, and the prompt's own system text last.
func TestSystemPromptSections(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	proj := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", proj).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	pkg := filepath.Join(proj, "pkg")
	files := map[string]string{
		filepath.Join(home, ".config", "opencode", "AGENTS.md"):         "Global rules.",
		filepath.Join(proj, "AGENTS.md"):                                "Root rules: use tabs.",
		filepath.Join(proj, "CLAUDE.md"):                                "Claude rules (unused).",
		filepath.Join(pkg, "AGENTS.md"):                                 "Pkg rules.",
		filepath.Join(proj, "docs", "rules.md"):                         "Docs rules.",
		filepath.Join(proj, ".opencode", "skill", "review", "SKILL.md"): "---\nname: review\ndescription: Review code carefully.\n---\nRead every line.\n",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	cfg := stubConfig(stub.URL(), "")
	cfg.Instructions = []string{"docs/rules.md"}
	srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: pkg})
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"hello there"}],"system":"Extra system text."}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 1 || len(reqs[0].Messages) == 0 || reqs[0].Messages[0].Role != "system" {
		t.Fatalf("requests: %+v", reqs)
	}
	sys := reqs[0].Messages[0].Content
	want := []string{
		"You are opencode",
		"\nYou are powered by the model named " + stubmodel.ModelID + ". The exact model ID is stub/" + stubmodel.ModelID + "\n",
		"<env>\n  Working directory: " + pkg + "\n  Workspace root folder: " + proj + "\n  Is directory a git repo: yes\n  Platform: ",
		"</env>\nInstructions from: " + filepath.Join(home, ".config", "opencode", "AGENTS.md") + "\nGlobal rules.\n",
		"Instructions from: " + filepath.Join(pkg, "AGENTS.md") + "\nPkg rules.\n",
		"Instructions from: " + filepath.Join(proj, "AGENTS.md") + "\nRoot rules: use tabs.\n",
		"Instructions from: " + filepath.Join(proj, "docs", "rules.md") + "\nDocs rules.\n",
		"<available_skills>\n  <skill>\n    <name>review</name>\n    <description>Review code carefully.</description>\n    <location>" +
			filepath.Join(proj, ".opencode", "skill", "review", "SKILL.md") + "</location>\n  </skill>\n</available_skills>\n",
		"Extra system text.",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(sys[at:], w)
		if i < 0 {
			t.Fatalf("system prompt lacks (in order) %q\n---\n%s", w, sys)
		}
		at += i + len(w)
	}
	if !strings.HasSuffix(sys, "Extra system text.") {
		t.Errorf("the prompt's own system text is not last")
	}
	if strings.Contains(sys, "Claude rules") {
		t.Error("CLAUDE.md was used next to AGENTS.md")
	}
	// The title request went to the model on the side, with the first
	// message, and named the session.
	titles := decodeRequests(t, stub.Titles())
	if len(titles) != 1 || len(titles[0].Messages) != 3 || titles[0].Messages[2].Content != "hello there" || len(titles[0].Tools) != 0 {
		t.Fatalf("title requests: %+v", titles)
	}
	checkFor(t, 5*time.Second, "the session titled by the model", func() bool {
		var s struct{ Title string }
		r, err := http.Get(srv.URL + "/session/" + sid)
		if err != nil {
			return false
		}
		defer r.Body.Close()
		_ = json.NewDecoder(r.Body).Decode(&s)
		return s.Title == "hello there"
	})
}

// TestAgentsAndTodos: the plan agent's write is refused and its steps
// carry the plan reminder; the v1 tools map takes a tool out of the list;
// todowrite sets the session's todo list (GET /todo, todo.updated).
func TestAgentsAndTodos(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
	events := eventLog(t, srv.URL)
	sid := newSession(t, srv.URL)

	// plan: write is offered (its rule is narrower than a blanket deny) but refused.
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"agent":"plan","parts":[{"type":"text","text":"call:write {\"filePath\":\"x.txt\",\"content\":\"hi\"} then: planned"}]}`); code != 200 {
		t.Fatalf("plan prompt: %d %s", code, b)
	}
	if _, err := os.Stat(filepath.Join(srv.Directory, "x.txt")); err == nil {
		t.Error("the plan agent wrote a file")
	}
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "# Plan mode") {
		t.Errorf("plan step's last user message lacks the plan reminder: %q", last.Content)
	}
	toolMsg := reqs[1].Messages[len(reqs[1].Messages)-1]
	if !strings.Contains(toolMsg.Content, "edit is denied") {
		t.Errorf("the refused write's result: %q", toolMsg.Content)
	}

	// build after plan: the switch reminder; bash switched off by the tools map.
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"agent":"build","tools":{"bash":false},"parts":[{"type":"text","text":"go on"}]}`); code != 200 {
		t.Fatalf("build prompt: %d %s", code, b)
	}
	reqs = decodeRequests(t, stub.Requests())
	third := reqs[2]
	if names := strings.Join(third.tools(), ","); strings.Contains(names, "bash") || !strings.Contains(names, "todowrite") {
		t.Errorf("tools with bash off: %s", names)
	}
	var user string
	for _, m := range third.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	if !strings.Contains(user, "from plan to build") {
		t.Errorf("build after plan lacks the switch reminder: %q", user)
	}

	// todowrite.
	todos := `[{"content":"Write tests","status":"in_progress","priority":"high"},{"content":"Ship","status":"pending","priority":"low"}]`
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"call:todowrite {\"todos\":`+strings.ReplaceAll(todos, `"`, `\"`)+`} then: listed"}]}`); code != 200 {
		t.Fatalf("todo prompt: %d %s", code, b)
	}
	// The tools map became the session's permission: bash stays off.
	reqs = decodeRequests(t, stub.Requests())
	if names := strings.Join(reqs[3].tools(), ","); strings.Contains(names, "bash") {
		t.Errorf("bash is back on the prompt after the one that switched it off: %s", names)
	}
	r, err := http.Get(srv.URL + "/session/" + sid + "/todo")
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	_ = json.NewDecoder(r.Body).Decode(&got)
	r.Body.Close()
	if len(got) != 2 || got[0]["content"] != "Write tests" || got[1]["status"] != "pending" {
		t.Errorf("GET /todo = %v", got)
	}
	timeout := time.After(10 * time.Second)
	for sawTodo := false; !sawTodo; {
		select {
		case f := <-events:
			sawTodo = f.Type == "todo.updated" && strings.Contains(string(f.Properties), `"Write tests"`)
		case <-timeout:
			t.Fatal("no todo.updated")
		}
	}
}

// TestConfiguredAgent: an agent from a markdown file in the project's
// .opencode/agent (prompt, temperature, tools) is listed by GET /agent,
// accepted by a prompt, and shapes its model call: its prompt replaces the
// base prompt, its temperature is sent, its denied tools are not offered.
func TestConfiguredAgent(t *testing.T) {
	proj := t.TempDir()
	md := "---\ndescription: Reviews code\nmode: primary\ntemperature: 0.2\ntools:\n  bash: false\n---\nYou review code and never change it.\n"
	if err := os.MkdirAll(filepath.Join(proj, ".opencode", "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".opencode", "agent", "reviewer.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), ""), Directory: proj})
	r, err := http.Get(srv.URL + "/agent")
	if err != nil {
		t.Fatal(err)
	}
	var agents []struct {
		Name, Mode  string
		Native      bool
		Temperature *float64
	}
	json.NewDecoder(r.Body).Decode(&agents)
	r.Body.Close()
	found := false
	for _, a := range agents {
		if a.Name == "reviewer" {
			found = a.Mode == "primary" && !a.Native && a.Temperature != nil && *a.Temperature == 0.2
		}
	}
	if !found {
		t.Fatalf("GET /agent: %+v", agents)
	}
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"agent":"reviewer","parts":[{"type":"text","text":"look"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	var req struct {
		Temperature *float64 `json:"temperature"`
	}
	raw := stub.Requests()
	json.Unmarshal(raw[0], &req)
	reqs := decodeRequests(t, raw)
	if !strings.HasPrefix(reqs[0].Messages[0].Content, "You review code and never change it.\n") {
		t.Errorf("system prompt: %.80q", reqs[0].Messages[0].Content)
	}
	if req.Temperature == nil || *req.Temperature != 0.2 {
		t.Errorf("temperature %v", req.Temperature)
	}
	if strings.Contains(strings.Join(reqs[0].tools(), ","), "bash") {
		t.Errorf("bash offered to an agent that denies it: %v", reqs[0].tools())
	}
	if code, _ := post(t, srv.URL+"/session/"+sid+"/message", `{"agent":"nobody","parts":[{"type":"text","text":"x"}]}`); code != 400 {
		t.Errorf("an unknown agent: %d, want 400", code)
	}
}

// TestMCPTool: a local MCP server from the config (the test binary as a
// tiny stdio server) contributes its tool as "<server>_<tool>"; the model
// calls it and gets its answer; GET /mcp says it is connected.
func TestMCPTool(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	cfg := stubConfig(stub.URL(), "")
	cfg.MCP = map[string]config.MCPConfig{"stub": {Type: "local", Command: []string{os.Args[0], "-test.run=^$"},
		Environment: map[string]string{mcpstub.Env: "1"}}}
	srv := testserver.Start(t, testserver.Options{Config: cfg})
	r, err := http.Get(srv.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var status map[string]struct{ Status string }
	json.NewDecoder(r.Body).Decode(&status)
	r.Body.Close()
	if status["stub"].Status != "connected" {
		t.Fatalf("GET /mcp = %+v", status)
	}
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"call:stub_shout {\"text\":\"hi there\"} then: shouted"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 2 || !strings.Contains(","+strings.Join(reqs[0].tools(), ",")+",", ",stub_shout,") {
		t.Fatalf("tools offered: %v", reqs[0].tools())
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "tool" || last.Content != "HI THERE" {
		t.Errorf("MCP tool result %+v", last)
	}

	// Disconnected, its tool leaves the list; connected again, it is back;
	// a server added while running contributes its tool too.
	mcpStatus := func() map[string]struct{ Status string } {
		r, err := http.Get(srv.URL + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var st map[string]struct{ Status string }
		json.NewDecoder(r.Body).Decode(&st)
		return st
	}
	offered := func() string {
		if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"which tools"}]}`); code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
		reqs := decodeRequests(t, stub.Requests())
		return "," + strings.Join(reqs[len(reqs)-1].tools(), ",") + ","
	}
	if code, b := post(t, srv.URL+"/mcp/stub/disconnect", ``); code != 200 || string(b) != "true" {
		t.Fatalf("disconnect: %d %s", code, b)
	}
	if st := mcpStatus(); st["stub"].Status != "disabled" || strings.Contains(offered(), ",stub_shout,") {
		t.Errorf("after disconnect: %+v", st)
	}
	if code, b := post(t, srv.URL+"/mcp/stub/connect", ``); code != 200 || string(b) != "true" {
		t.Fatalf("connect: %d %s", code, b)
	}
	if st := mcpStatus(); st["stub"].Status != "connected" || !strings.Contains(offered(), ",stub_shout,") {
		t.Errorf("after connect: %+v", st)
	}
	add, _ := json.Marshal(map[string]any{"name": "more", "config": map[string]any{"type": "local",
		"command": []string{os.Args[0], "-test.run=^$"}, "environment": map[string]string{mcpstub.Env: "1"}}})
	if code, b := post(t, srv.URL+"/mcp", string(add)); code != 200 || !strings.Contains(string(b), `"more":{"status":"connected"}`) {
		t.Fatalf("add: %d %s", code, b)
	}
	if tools := offered(); !strings.Contains(tools, ",more_shout,") || !strings.Contains(tools, ",stub_shout,") {
		t.Errorf("after add: %s", tools)
	}
	if code, _ := post(t, srv.URL+"/mcp/nobody/connect", ``); code != 404 {
		t.Errorf("connect of an unknown server: %d, want 404", code)
	}
}

// TestAutoCompaction: a turn whose usage nears the model's context limit
// (input, cache reads and output beyond the context less the room for an
// answer) is followed by an automatic compaction turn (auto: true,
// session.compacted), ahead of what is queued; the next model call starts
// from the summary, not the whole history.
func TestAutoCompaction(t *testing.T) {
	// Summaries are short; everything else is echoed (so the long prompt
	// fills the context twice: as input and as the answer).
	stub := stubmodel.NewServer(t, func(req stubmodel.Request) stubmodel.Response {
		if len(req.Tools) == 0 {
			return stubmodel.Response{Text: "Summary: the user sent many words."}
		}
		return stubmodel.Echo(req)
	})
	cfg := stubConfig(stub.URL(), "")
	m := cfg.Provider["stub"].Models[stubmodel.ModelID]
	m.Limit.Context, m.Limit.Output = 4096+1500, 4096 // 1500 tokens of room
	cfg.Provider["stub"].Models[stubmodel.ModelID] = m
	srv := testserver.Start(t, testserver.Options{Config: cfg})
	events := eventLog(t, srv.URL)
	sid := newSession(t, srv.URL)
	long := strings.Repeat("word ", 1000)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"`+long+`"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	timeout := time.After(10 * time.Second)
	for compacted := false; !compacted; {
		select {
		case f := <-events:
			compacted = f.Type == "session.compacted"
		case <-timeout:
			t.Fatal("no session.compacted after a turn over the limit")
		}
	}
	c := newClient(t, srv)
	c.waitIdle(sid)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"short one"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3 (turn, summary, turn)", len(reqs))
	}
	if len(reqs[1].Tools) != 0 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "word word") ||
		!strings.Contains(reqs[2].Messages[len(reqs[2].Messages)-2].Content, "Summary: the user sent many words.") {
		t.Errorf("the summary request: tools %v", reqs[1].tools())
	}
	for _, msg := range reqs[2].Messages[1:] {
		if strings.Contains(msg.Content, long) && msg.Role == "user" && !strings.HasPrefix(msg.Content, "You said") {
			t.Errorf("the call after the compaction still carries the long prompt")
		}
	}
	var msgs []struct {
		Info  struct{ Role, Agent string }
		Parts []struct {
			Type string
			Auto bool
		}
	}
	r, _ := http.Get(srv.URL + "/session/" + sid + "/message")
	json.NewDecoder(r.Body).Decode(&msgs)
	r.Body.Close()
	auto := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			auto = auto || (p.Type == "compaction" && p.Auto)
		}
	}
	if !auto {
		t.Error("no automatic compaction part")
	}
}

// TestPruneToolOutputs: once a session's older tool outputs pass what
// OpenCode keeps (the last two user turns, then the newest 40,000 tokens),
// the older ones leave the model's view ("[Old tool result content
// cleared]") and their parts get time.compacted; newer ones stay.
func TestPruneToolOutputs(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
	if err := os.WriteFile(filepath.Join(srv.Directory, "big.txt"), []byte(strings.Repeat("0123456789abcdef\n", 1800)), 0o644); err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, srv.URL)
	calls := strings.Repeat(`call:bash {"command":"cat big.txt"} `, 10)
	for _, text := range []string{calls + "then: read", "second", "third"} {
		body, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": text}}})
		if code, b := post(t, srv.URL+"/session/"+sid+"/message", string(body)); code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
	}
	// The turn after the third: turn 1's outputs (10 × ~30 KB ≈ 75,000
	// tokens) are beyond the last two turns; the oldest go.
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"fourth"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	reqs := decodeRequests(t, stub.Requests())
	last := reqs[len(reqs)-1]
	cleared, kept := 0, 0
	for _, m := range last.Messages {
		if m.Role != "tool" {
			continue
		}
		if m.Content == "[Old tool result content cleared]" {
			cleared++
		} else if strings.Contains(m.Content, "0123456789abcdef") {
			kept++
		}
	}
	if cleared == 0 || kept == 0 || cleared+kept != 10 {
		t.Errorf("the last call's tool results: %d cleared, %d kept (of 10)", cleared, kept)
	}
	var msgs []struct {
		Parts []struct {
			Tool  string
			State struct{ Time struct{ Compacted *int64 } }
		}
	}
	r, _ := http.Get(srv.URL + "/session/" + sid + "/message")
	json.NewDecoder(r.Body).Decode(&msgs)
	r.Body.Close()
	stored := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Tool == "bash" && p.State.Time.Compacted != nil {
				stored++
			}
		}
	}
	if stored != cleared {
		t.Errorf("%d parts stored as compacted, %d cleared in the model's view", stored, cleared)
	}
}

// TestOverflowErrorCompacts: a model call the API refuses because the
// prompt is too long for the context window (OpenCode's overflow texts)
// is not a failed answer: the session reports ContextOverflowError
// (session.error), the assistant message carries no error, and an
// automatic compaction follows.
func TestOverflowErrorCompacts(t *testing.T) {
	var calls atomic.Int64
	stub := stubmodel.NewServer(t, func(req stubmodel.Request) stubmodel.Response {
		if len(req.Tools) == 0 {
			return stubmodel.Response{Text: "Summary: a long conversation."}
		}
		if calls.Add(1) == 1 {
			return stubmodel.Response{Status: 400, ErrorMessage: "prompt is too long: 210000 tokens > 200000 maximum"}
		}
		return stubmodel.Echo(req)
	})
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
	events := eventLog(t, srv.URL)
	sid := newSession(t, srv.URL)
	if code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"too much"}]}`); code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	timeout := time.After(10 * time.Second)
	var overflow bool
	for compacted := false; !compacted; {
		select {
		case f := <-events:
			if f.Type == "session.error" {
				var p struct {
					Error struct{ Name string } `json:"error"`
				}
				_ = json.Unmarshal(f.Properties, &p)
				overflow = overflow || p.Error.Name == "ContextOverflowError"
			}
			compacted = f.Type == "session.compacted"
		case <-timeout:
			t.Fatal("no session.compacted after the overflow error")
		}
	}
	if !overflow {
		t.Error("no session.error with ContextOverflowError")
	}
	var msgs []struct {
		Info struct {
			Role  string
			Error json.RawMessage
		}
	}
	r, err := http.Get(srv.URL + "/session/" + sid + "/message")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(r.Body).Decode(&msgs)
	r.Body.Close()
	if len(msgs) < 2 || msgs[1].Info.Role != "assistant" || len(msgs[1].Info.Error) > 0 {
		t.Errorf("the refused call's message: %+v", msgs)
	}
}
