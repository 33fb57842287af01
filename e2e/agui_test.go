package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// aguiDir is the Node project (relative to this package) that drives our
// POST /agui with the official AG-UI client, @ag-ui/client's HttpAgent, and
// validates every event with @ag-ui/core's schemas: e2e/agui/client.mjs.
// package.json and package-lock.json pin one exact version of each package.
const aguiDir = "agui"

// aguiPackages are the AG-UI packages the script imports, all pinned.
var aguiPackages = []string{"@ag-ui/client", "@ag-ui/core", "@ag-ui/encoder", "@ag-ui/proto"}

// aguiReport is the last line e2e/agui/client.mjs prints.
type aguiReport struct {
	Versions              map[string]string  `json:"versions"`
	Tag                   string             `json:"tag"`
	ThreadID              string             `json:"threadId"`
	SessionBefore         int                `json:"sessionBefore"`
	SessionAfter          int                `json:"sessionAfter"`
	FirstClientMessageID  string             `json:"firstClientMessageId"`
	SecondClientMessageID string             `json:"secondClientMessageId"`
	FrontendToolResult    string             `json:"frontendToolResult"`
	SteerText             string             `json:"steerText"`
	SteerWaitError        string             `json:"steerWaitError"`
	Runs                  map[string]aguiRun `json:"runs"`
	Final                 []aguiHTTPMessage  `json:"final"`
	Warnings              []string           `json:"warnings"`
	Fatal                 string             `json:"fatal"`
}

// aguiRun is one HttpAgent.runAgent as the script observed it.
type aguiRun struct {
	Label            string            `json:"label"`
	HTTPBefore       []aguiHTTPMessage `json:"httpBefore"`
	HTTPAfter        []aguiHTTPMessage `json:"httpAfter"`
	VerifyError      string            `json:"verifyError"`
	MS               int               `json:"ms"`
	Request          aguiRequest       `json:"request"`
	Status           int               `json:"status"`
	ContentType      string            `json:"contentType"`
	ReadError        string            `json:"readError"`
	Events           []aguiEvent       `json:"events"`
	WireErrors       []string          `json:"wireErrors"`
	SchemaErrors     []json.RawMessage `json:"schemaErrors"`
	ClientEventTypes []string          `json:"clientEventTypes"`
	MessagesAfter    []aguiMessage     `json:"messagesAfter"`
	PendingInterrupt []aguiInterrupt   `json:"pendingInterrupts"`
	Warnings         []string          `json:"warnings"`
}

type aguiRequest struct {
	URL    string `json:"url"`
	Accept string `json:"accept"`
	Body   struct {
		ThreadID string        `json:"threadId"`
		RunID    string        `json:"runId"`
		Messages []aguiMessage `json:"messages"`
	} `json:"body"`
	RawBody json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the body as sent, for comparing two requests.
func (r *aguiRequest) UnmarshalJSON(b []byte) error {
	type plain aguiRequest
	var raw struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	r.RawBody = raw.Body
	return nil
}

// aguiEvent is an AG-UI event as it came off the wire (the members the
// test reads).
type aguiEvent struct {
	Type            string          `json:"type"`
	ThreadID        string          `json:"threadId"`
	RunID           string          `json:"runId"`
	ParentRunID     string          `json:"parentRunId"`
	MessageID       string          `json:"messageId"`
	ParentMessageID string          `json:"parentMessageId"`
	ToolCallID      string          `json:"toolCallId"`
	ToolCallName    string          `json:"toolCallName"`
	Delta           string          `json:"delta"`
	Content         string          `json:"content"`
	Role            string          `json:"role"`
	StepName        string          `json:"stepName"`
	Code            string          `json:"code"`
	Message         string          `json:"message"`
	Messages        []aguiMessage   `json:"messages"`
	Snapshot        json.RawMessage `json:"snapshot"`
	Outcome         *struct {
		Type               string          `json:"type"`
		PendingToolCallIDs []string        `json:"pendingToolCallIds"`
		Interrupts         []aguiInterrupt `json:"interrupts"`
	} `json:"outcome"`
}

type aguiInterrupt struct {
	ID             string          `json:"id"`
	Reason         string          `json:"reason"`
	ToolCallID     string          `json:"toolCallId"`
	ResponseSchema json.RawMessage `json:"responseSchema"`
}

// aguiMessage is an AG-UI message (the client's, a snapshot's or a run's
// input).
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"toolCalls"`
}

// text is a message's content when it is a string.
func (m aguiMessage) text() string {
	var s string
	_ = json.Unmarshal(m.Content, &s)
	return s
}

// aguiHTTPMessage is a message of GET /session/{id}/message, as the script
// reduced it.
type aguiHTTPMessage struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	ParentID string `json:"parentID"`
	Parts    []struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Synthetic bool            `json:"synthetic"`
		Metadata  json.RawMessage `json:"metadata"`
		Tool      string          `json:"tool"`
		CallID    string          `json:"callID"`
		Status    string          `json:"status"`
		Output    string          `json:"output"`
	} `json:"parts"`
}

// text is the message's non-synthetic text.
func (m aguiHTTPMessage) text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" && !p.Synthetic {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// aguiSlowPrompt makes the stub model answer slowly (the steer's turn).
const aguiSlowPrompt = "reply slowly"

// TestAGUI drives POST /agui with the official AG-UI client, @ag-ui/client
// 1.0.0's HttpAgent (pinned in e2e/agui/package-lock.json), on a
// tool-calling stub model: a run on a new thread (an unknown ses_ ID creates
// the session), a second run on it (history kept, only the new message
// admitted), the same runs sent again (nothing admitted), a backend tool
// turn, a frontend tool round trip, a permission interrupt answered through
// resume (and a run refused while it waits), a steer posted during a running
// run, and a run in AG-UI's protobuf encoding. Every stream passes the
// client's own verification and every event @ag-ui/core's EventSchema; the
// message IDs of the events are the session's over GET
// /session/{id}/message; and the real TUI, attached to the session after the
// first run, shows the second live.
func TestAGUI(t *testing.T) {
	t.Parallel()
	node, dir, pinned := aguiNode(t)

	stub := stubmodel.NewServer(t, aguiScript, stubmodel.WithChunks(3), stubmodel.WithDelay(30*time.Millisecond))
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	body := `{"model":"stub/stub-model","small_model":"stub/stub-model","permission":{"bash":"ask"},` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"Stub","options":{"baseURL":"` + stub.URL() +
		`","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model","tool_call":true,"limit":{"context":128000,"output":4096}}}}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	password := "agui-" + randomTag()
	srv := startServer(t, serverOptions{config: cfg, password: password})
	if err := os.WriteFile(filepath.Join(srv.Dir, "README.md"), []byte("# Demo\nhello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := strings.ToLower(randomTag())

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGUI_URL="+srv.URL, "AGUI_PASSWORD="+password, "AGUI_PAUSE=1", "AGUI_TAG="+tag)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	var waitErr error
	finish := func() error {
		if !waited {
			waited = true
			_ = stdin.Close()
			_, _ = io.Copy(io.Discard, stdoutPipe)
			waitErr = cmd.Wait()
		}
		return waitErr
	}
	defer finish()

	// The script's lines: checkpoints, then the report.
	var x *tmux
	var raw []byte
	lines := bufio.NewReader(stdoutPipe)
	for raw == nil {
		line, err := lines.ReadBytes('\n')
		if err != nil {
			werr := finish()
			t.Fatalf("node client.mjs: no report (%v; exit: %v)\nstdout:\n%s\nstderr:\n%s", err, werr, line, stderr.String())
		}
		var msg struct {
			Pause    string          `json:"pause"`
			ThreadID string          `json:"threadId"`
			Text     string          `json:"text"`
			Report   json.RawMessage `json:"report"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(line), &msg); err != nil {
			t.Fatalf("client.mjs printed a line that is not JSON: %v\n%s\nstderr:\n%s", err, line, stderr.String())
		}
		switch {
		case msg.Report != nil:
			raw = msg.Report
			continue
		case msg.Pause == "attach":
			// The TUI on the session the first run made, before the second.
			x = aguiTUI(t, srv, password, msg.ThreadID)
			if err := aguiWaitUserBar(x, msg.Text, ""); err != nil {
				t.Errorf("TUI attached after the first run: %v", err)
			}
		case msg.Pause == "look":
			// The second run's prompt and reply, in the TUI attached
			// before it: it shows them from the events it reads live.
			if err := aguiWaitUserBar(x, msg.Text, "You said: "+msg.Text); err != nil {
				t.Errorf("TUI during the second run: %v", err)
			}
		default:
			t.Fatalf("client.mjs: unknown checkpoint %s", line)
		}
		if _, err := io.WriteString(stdin, "go\n"); err != nil {
			t.Fatalf("client.mjs stdin: %v", err)
		}
	}
	if err := finish(); err != nil {
		t.Fatalf("node client.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("node client.mjs (@ag-ui/client %s): %v", pinned["@ag-ui/client"], time.Since(start).Round(time.Millisecond))
	var r aguiReport
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("client.mjs report: %v\n%s", err, raw)
	}
	defer func() {
		if t.Failed() {
			path := filepath.Join(t.TempDir(), "agui-report.json")
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, raw, "", "  ")
			_ = os.WriteFile(path, pretty.Bytes(), 0o644)
			if keep := os.Getenv("OPENCODE_E2E_ARTIFACTS"); keep != "" {
				_ = os.MkdirAll(keep, 0o755)
				_ = os.WriteFile(filepath.Join(keep, "agui-report.json"), pretty.Bytes(), 0o644)
			}
			t.Logf("report (%s):\n%s\nclient stderr:\n%s", path, tail(pretty.String(), 400), stderr.String())
		}
	}()
	var reqs []stubmodel.Request
	for _, b := range stub.Requests() {
		var q stubmodel.Request
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatalf("stub request: %v", err)
		}
		reqs = append(reqs, q)
	}
	checkAGUI(t, r, pinned, reqs)
}

// aguiScript is stubmodel.Directives, slowed down for aguiSlowPrompt: a
// reply long enough in time for a steer to be posted while it streams.
func aguiScript(req stubmodel.Request) stubmodel.Response {
	resp := stubmodel.Directives(req)
	if req.LastMessage().Role == "user" && strings.Contains(req.LastUserText(), aguiSlowPrompt) && !req.IsTitle() {
		resp.Chunks, resp.Delay = 30, 100*time.Millisecond
	}
	return resp
}

// aguiTUI attaches the real TUI to the session under tmux.
func aguiTUI(t *testing.T, srv *server, password, sessionID string) *tmux {
	t.Helper()
	oc := newClient(t, srv.Dir, "OPENCODE_SERVER_PASSWORD="+password)
	x := newTmux(t, oc.Env)
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env(1) not found: %v", err)
	}
	x.start(oc.Dir, append(append([]string{envBin, "-i"}, oc.Env...), oc.bin, "attach", srv.URL, "--session", sessionID)...)
	return x
}

// aguiWaitUserBar waits until the TUI shows text in a user message's bar
// (and reply, if not empty); it says what the screen showed if it does not
// within 30s (the caller goes on: the report is still worth checking).
func aguiWaitUserBar(x *tmux, text, reply string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := x.cmd("capture-pane", "-p", "-t", x.target)
		if err != nil {
			return err
		}
		own := slices.ContainsFunc(strings.Split(s, "\n"), func(l string) bool {
			return strings.HasPrefix(strings.TrimSpace(l), "┃  "+text)
		})
		if own && strings.Contains(s, reply) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 30s the TUI does not show %q in a user bar and %q; screen:\n%s", text, reply, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// aguiNode makes e2e/agui ready (nodeProject): Node, the project's
// directory and the pinned versions of aguiPackages.
func aguiNode(t *testing.T) (node, dir string, pinned map[string]string) {
	t.Helper()
	return nodeProject(t, aguiDir, aguiPackages...)
}

// checkAGUI asserts what issue 25 requires of the report.
func checkAGUI(t *testing.T, r aguiReport, pinned map[string]string, reqs []stubmodel.Request) {
	t.Helper()
	if r.Fatal != "" {
		t.Errorf("client.mjs stopped: %s", r.Fatal)
	}
	for p, v := range pinned {
		if r.Versions[p] != v {
			t.Errorf("the script ran %s %q, package-lock.json pins %q", p, r.Versions[p], v)
		}
	}
	if !isID("ses_", r.ThreadID) {
		t.Fatalf("threadId %q is not a ses_ ID", r.ThreadID)
	}
	order := []string{"first", "second", "repeatFirst", "repeatSecond", "backendTool", "frontendTool",
		"frontendToolResult", "permission", "whileInterrupted", "resume", "slow", "steer", "proto", "protoReplay"}
	for _, name := range order {
		run, ok := r.Runs[name]
		if !ok {
			t.Errorf("run %s: not in the report (the script stopped before it)", name)
			continue
		}
		checkAGUIStream(t, name, run, r.ThreadID)
	}
	if t.Failed() && len(r.Runs) < len(order) {
		return
	}
	checkAGUIFirst(t, r, reqs)
	checkAGUISecond(t, r)
	checkAGUIRepeats(t, r)
	checkAGUIBackendTool(t, r)
	checkAGUIFrontendTool(t, r, reqs)
	checkAGUIPermission(t, r)
	checkAGUISteer(t, r)
	checkAGUIProto(t, r)
}

func isID(prefix, id string) bool { return strings.HasPrefix(id, prefix) && len(id) > len(prefix) }

// checkAGUIStream asserts what every stream owes: the client verified it and
// handed over every event, each event is valid, the framing is AG-UI's, it
// opens with RUN_STARTED and the conversation, it ends with RUN_FINISHED or
// RUN_ERROR, and its message IDs are the session's.
func checkAGUIStream(t *testing.T, name string, run aguiRun, thread string) {
	t.Helper()
	if run.VerifyError != "" {
		t.Errorf("run %s: HttpAgent.runAgent failed (the client's verifier or transport): %s", name, run.VerifyError)
	}
	if run.Status != 200 {
		t.Errorf("run %s: POST %s answered %d", name, run.Request.URL, run.Status)
	}
	if run.ReadError != "" {
		t.Errorf("run %s: reading the body: %s", name, run.ReadError)
	}
	for _, e := range run.WireErrors {
		t.Errorf("run %s: framing: %s", name, e)
	}
	for _, e := range run.SchemaErrors {
		t.Errorf("run %s: an event fails @ag-ui/core's EventSchema: %s", name, e)
	}
	for _, w := range run.Warnings {
		t.Errorf("run %s: the client logged: %s", name, w)
	}
	var types []string
	for _, e := range run.Events {
		types = append(types, e.Type)
	}
	if !slices.Equal(types, run.ClientEventTypes) {
		t.Errorf("run %s: the wire carried %q, the client handed its subscriber %q", name, types, run.ClientEventTypes)
	}
	if len(run.Events) < 2 {
		t.Errorf("run %s: %d events: %q", name, len(run.Events), types)
		return
	}
	first, last := run.Events[0], run.Events[len(run.Events)-1]
	if first.Type != "RUN_STARTED" || first.ThreadID != thread || first.RunID != run.Request.Body.RunID {
		t.Errorf("run %s: first event %s thread %q run %q, want RUN_STARTED of thread %s run %s", name, first.Type, first.ThreadID, first.RunID, thread, run.Request.Body.RunID)
	}
	if last.Type != "RUN_FINISHED" && last.Type != "RUN_ERROR" {
		t.Errorf("run %s: last event %s, want RUN_FINISHED or RUN_ERROR", name, last.Type)
	}
	if last.Type == "RUN_FINISHED" && (last.ThreadID != thread || last.RunID != run.Request.Body.RunID) {
		t.Errorf("run %s: RUN_FINISHED of thread %q run %q, want %s %s", name, last.ThreadID, last.RunID, thread, run.Request.Body.RunID)
	}
	if last.Type != "RUN_ERROR" && run.Events[1].Type != "MESSAGES_SNAPSHOT" {
		t.Errorf("run %s: second event %s, want MESSAGES_SNAPSHOT (the conversation under its canonical IDs)", name, run.Events[1].Type)
	}

	// Message IDs: assistant messages are msg_ IDs of the session's
	// assistant messages, tool results the tool part's prt_ ID.
	roles, toolParts := map[string]string{}, map[string]string{}
	for _, m := range run.HTTPAfter {
		roles[m.ID] = m.Role
		for _, p := range m.Parts {
			if p.Type == "tool" {
				toolParts[p.CallID] = p.ID
			}
		}
	}
	// A text message is the assistant's unless its start says otherwise
	// (a steer's user message, streamed into the running turn).
	textRoles := map[string]string{}
	for i, e := range run.Events {
		switch e.Type {
		case "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END":
			if e.Type == "TEXT_MESSAGE_START" {
				textRoles[e.MessageID] = cmp.Or(e.Role, "assistant")
			}
			if role := textRoles[e.MessageID]; !isID("msg_", e.MessageID) || roles[e.MessageID] != role {
				t.Errorf("run %s: event %d %s messageId %q is not a%s %s message of GET /session/%s/message (there: %q)", name, i, e.Type, e.MessageID,
					map[bool]string{true: "n"}[role == "assistant"], role, thread, roles[e.MessageID])
			}
		case "TOOL_CALL_START":
			if !isID("msg_", e.ParentMessageID) || roles[e.ParentMessageID] != "assistant" {
				t.Errorf("run %s: event %d TOOL_CALL_START parentMessageId %q is not an assistant message of GET /session/%s/message", name, i, e.ParentMessageID, thread)
			}
		case "TOOL_CALL_RESULT":
			if !isID("prt_", e.MessageID) || toolParts[e.ToolCallID] != e.MessageID {
				t.Errorf("run %s: event %d TOOL_CALL_RESULT messageId %q, want the prt_ ID of call %s's tool part (%q)", name, i, e.MessageID, e.ToolCallID, toolParts[e.ToolCallID])
			}
		case "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END":
			if !isID("prt_", e.MessageID) {
				t.Errorf("run %s: event %d %s messageId %q, want a prt_ ID", name, i, e.Type, e.MessageID)
			}
		case "MESSAGES_SNAPSHOT":
			for _, m := range e.Messages {
				prefix := "msg_"
				if m.Role == "tool" {
					prefix = "prt_"
				}
				if !isID(prefix, m.ID) {
					t.Errorf("run %s: MESSAGES_SNAPSHOT has a %s message %q, want a %s ID", name, m.Role, m.ID, prefix)
				}
			}
		}
	}
	// The client took the canonical IDs of every message from the snapshot:
	// none of its own (UUIDs) remains.
	if last.Type == "RUN_FINISHED" {
		for _, m := range run.MessagesAfter {
			if !isID("msg_", m.ID) && !isID("prt_", m.ID) {
				t.Errorf("run %s: after the run HttpAgent.messages still has the %s message %q under the client's ID", name, m.Role, m.ID)
			}
		}
	}
	// Every assistant message the run's turn made is in its stream.
	if name == "whileInterrupted" || strings.HasPrefix(name, "repeat") || name == "protoReplay" {
		return
	}
	streamed := aguiStreamedAssistants(run)
	before := map[string]bool{}
	for _, m := range run.HTTPBefore {
		before[m.ID] = true
	}
	for _, m := range run.HTTPAfter {
		if m.Role == "assistant" && !before[m.ID] && !streamed[m.ID] {
			t.Errorf("run %s: assistant message %s (%q) of GET /session/%s/message is in none of the run's events", name, m.ID, m.text(), thread)
		}
	}
}

// aguiStreamedAssistants is the set of assistant message IDs a run's
// events name.
func aguiStreamedAssistants(run aguiRun) map[string]bool {
	out := map[string]bool{}
	for _, e := range run.Events {
		switch e.Type {
		case "TEXT_MESSAGE_START":
			out[e.MessageID] = true
		case "TOOL_CALL_START":
			out[e.ParentMessageID] = true
		}
	}
	return out
}

// aguiText is the text a run streamed, by message ID, and the IDs in order.
func aguiText(run aguiRun) (map[string]string, []string) {
	text := map[string]string{}
	var ids []string
	for _, e := range run.Events {
		switch e.Type {
		case "TEXT_MESSAGE_START":
			ids = append(ids, e.MessageID)
			text[e.MessageID] += ""
		case "TEXT_MESSAGE_CONTENT":
			text[e.MessageID] += e.Delta
		}
	}
	return text, ids
}

// aguiUserTexts is the user text messages a run streamed (ID: text).
func aguiUserTexts(run aguiRun) []string {
	text, _ := aguiText(run)
	var out []string
	for _, e := range run.Events {
		if e.Type == "TEXT_MESSAGE_START" && e.Role == "user" {
			out = append(out, e.MessageID+": "+text[e.MessageID])
		}
	}
	return out
}

// aguiAllText is all the text a run streamed.
func aguiAllText(run aguiRun) string {
	text, ids := aguiText(run)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(text[id])
		b.WriteString("\n")
	}
	return b.String()
}

func aguiSnapshot(run aguiRun) []aguiMessage {
	for _, e := range run.Events {
		if e.Type == "MESSAGES_SNAPSHOT" {
			return e.Messages
		}
	}
	return nil
}

func aguiFinished(run aguiRun) aguiEvent {
	if n := len(run.Events); n > 0 {
		return run.Events[n-1]
	}
	return aguiEvent{}
}

// aguiUsers is the user message IDs of a conversation over HTTP.
func aguiUsers(ms []aguiHTTPMessage) []string {
	var out []string
	for _, m := range ms {
		if m.Role == "user" {
			out = append(out, m.ID)
		}
	}
	return out
}

func aguiSnapshotUsers(run aguiRun) []string {
	var out []string
	for _, m := range aguiSnapshot(run) {
		if m.Role == "user" {
			out = append(out, m.ID)
		}
	}
	return out
}

func aguiIDs(ms []aguiHTTPMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// aguiNew is the messages of after that before lacks.
func aguiNew(before, after []aguiHTTPMessage) []aguiHTTPMessage {
	had := map[string]bool{}
	for _, m := range before {
		had[m.ID] = true
	}
	var out []aguiHTTPMessage
	for _, m := range after {
		if !had[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

func aguiSuccess(t *testing.T, name string, run aguiRun) {
	t.Helper()
	if f := aguiFinished(run); f.Type != "RUN_FINISHED" || f.Outcome != nil && f.Outcome.Type != "success" {
		t.Errorf("run %s: ends with %s outcome %+v, want RUN_FINISHED success", name, f.Type, f.Outcome)
	} else if f.Outcome != nil && len(f.Outcome.PendingToolCallIDs) > 0 {
		t.Errorf("run %s: RUN_FINISHED leaves tool calls %q pending", name, f.Outcome.PendingToolCallIDs)
	}
}

// checkAGUISnapshotUsers: the snapshot's user messages are the session's
// (over HTTP after the run, less the ones admitted later: except).
func checkAGUISnapshotUsers(t *testing.T, name string, run aguiRun, except ...string) {
	t.Helper()
	want := slices.DeleteFunc(aguiUsers(run.HTTPAfter), func(id string) bool { return slices.Contains(except, id) })
	if got := aguiSnapshotUsers(run); !slices.Equal(got, want) {
		t.Errorf("run %s: MESSAGES_SNAPSHOT user messages %q, GET /session/{id}/message has %q", name, got, want)
	}
}

func checkAGUIFirst(t *testing.T, r aguiReport, reqs []stubmodel.Request) {
	t.Helper()
	run := r.Runs["first"]
	if r.SessionBefore != 404 || r.SessionAfter != 200 {
		t.Errorf("GET /session/%s: %d before the first run, %d after; want 404, then 200 (the run creates the session under the thread's ID)", r.ThreadID, r.SessionBefore, r.SessionAfter)
	}
	aguiSuccess(t, "first", run)
	prompt := "first agui prompt " + r.Tag
	ms := run.HTTPAfter
	if len(ms) != 2 || ms[0].Role != "user" || ms[1].Role != "assistant" {
		t.Fatalf("after the first run GET /session/%s/message has %d messages %q, want a user and an assistant message", r.ThreadID, len(ms), aguiIDs(ms))
	}
	u, a := ms[0], ms[1]
	if u.text() != prompt || !isID("msg_", u.ID) || u.ID == r.FirstClientMessageID {
		t.Errorf("first user message %s %q, want %q under a msg_ ID of the server's (the client's was %s)", u.ID, u.text(), prompt, r.FirstClientMessageID)
	}
	if !bytes.Contains(aguiPartsMetadata(u), []byte(r.FirstClientMessageID)) {
		t.Errorf("first user message %s: its parts' metadata %s do not keep the client's message ID %s (the admission's idempotency key)", u.ID, aguiPartsMetadata(u), r.FirstClientMessageID)
	}
	text, ids := aguiText(run)
	if !slices.Equal(ids, []string{a.ID}) || text[a.ID] != a.text() || !strings.Contains(text[a.ID], prompt) {
		t.Errorf("first run: TEXT_MESSAGE_START IDs %q, text %q; want the assistant message %s, its text %q quoting the prompt", ids, text, a.ID, a.text())
	}
	checkAGUISnapshotUsers(t, "first", run)
	// The client took the canonical IDs: no UUID of its own remains.
	var clientIDs []string
	for _, m := range run.MessagesAfter {
		clientIDs = append(clientIDs, m.ID)
	}
	if !slices.Equal(clientIDs, []string{u.ID, a.ID}) {
		t.Errorf("first run: HttpAgent.messages IDs %q, want the session's %q", clientIDs, []string{u.ID, a.ID})
	}
	// context[] reached the model.
	if !slices.ContainsFunc(reqs, func(q stubmodel.Request) bool {
		return !q.IsTitle() && strings.Contains(q.LastUserText(), "ctx-"+r.Tag)
	}) {
		t.Errorf("no model request carries the run's context value ctx-%s", r.Tag)
	}
	if run.ContentType != "text/event-stream" {
		t.Errorf("first run: Content-Type %q, want text/event-stream", run.ContentType)
	}
}

// aguiPartsMetadata is the metadata of a message's parts, joined.
func aguiPartsMetadata(m aguiHTTPMessage) []byte {
	var b []byte
	for _, p := range m.Parts {
		b = append(b, p.Metadata...)
	}
	return b
}

func checkAGUISecond(t *testing.T, r aguiReport) {
	t.Helper()
	run := r.Runs["second"]
	aguiSuccess(t, "second", run)
	first := r.Runs["first"].HTTPAfter
	// The run's input: the history under the canonical IDs, and the new
	// message under the client's.
	var sent []string
	for _, m := range run.Request.Body.Messages {
		sent = append(sent, m.ID)
	}
	if want := append(aguiIDs(first), r.SecondClientMessageID); !slices.Equal(sent, want) {
		t.Errorf("second run: HttpAgent sent messages %q, want the first run's %q and its new one", sent, want)
	}
	added := aguiNew(run.HTTPBefore, run.HTTPAfter)
	prompt := "second agui prompt " + r.Tag
	if len(added) != 2 || added[0].Role != "user" || added[0].text() != prompt || added[1].Role != "assistant" {
		t.Errorf("second run admitted %d messages %q, want the new user message %q and its reply", len(added), aguiIDs(added), prompt)
	}
	if n := len(aguiUsers(run.HTTPAfter)); n != 2 {
		t.Errorf("after the second run the session has %d user messages, want 2 (history kept, no duplicate)", n)
	}
	checkAGUISnapshotUsers(t, "second", run)
	if len(added) == 2 {
		text, ids := aguiText(run)
		if !slices.Equal(ids, []string{added[1].ID}) || !strings.Contains(text[added[1].ID], prompt) {
			t.Errorf("second run: text messages %q %q, want the reply %s quoting %q", ids, text, added[1].ID, prompt)
		}
	}
}

func checkAGUIRepeats(t *testing.T, r aguiReport) {
	t.Helper()
	for _, p := range [][2]string{{"repeatFirst", "first"}, {"repeatSecond", "second"}} {
		name, orig := p[0], p[1]
		run, o := r.Runs[name], r.Runs[orig]
		if !jsonEqual(run.Request.RawBody, o.Request.RawBody) {
			t.Errorf("run %s: the body sent differs from the %s run's (the test's own error):\n%s\n%s", name, orig, run.Request.RawBody, o.Request.RawBody)
		}
		aguiSuccess(t, name, run)
		if got, want := aguiIDs(run.HTTPAfter), aguiIDs(run.HTTPBefore); !slices.Equal(got, want) {
			t.Errorf("run %s (the %s run sent again) admitted something: messages %q → %q", name, orig, want, got)
		}
		// The repeat replays the turn its messages made.
		text, ids := aguiText(run)
		otext, oids := aguiText(o)
		if !slices.Equal(ids, oids) || !maps.Equal(text, otext) {
			t.Errorf("run %s: streamed text messages %q %q, want the %s run's %q %q", name, ids, text, orig, oids, otext)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// aguiCalls is the tool calls a run streamed, by call ID: name and args.
func aguiCalls(run aguiRun) (names, args, results map[string]string, order []string) {
	names, args, results = map[string]string{}, map[string]string{}, map[string]string{}
	for _, e := range run.Events {
		switch e.Type {
		case "TOOL_CALL_START":
			names[e.ToolCallID] = e.ToolCallName
			order = append(order, e.ToolCallID)
		case "TOOL_CALL_ARGS":
			args[e.ToolCallID] += e.Delta
		case "TOOL_CALL_RESULT":
			results[e.ToolCallID] = e.Content
		}
	}
	return names, args, results, order
}

// aguiOneCall is the ID of the run's one tool call, of tool.
func aguiOneCall(t *testing.T, name string, run aguiRun, tool string) string {
	t.Helper()
	names, _, _, order := aguiCalls(run)
	if len(order) != 1 || names[order[0]] != tool {
		t.Fatalf("%s: tool calls %q %v, want one %s", name, order, names, tool)
	}
	return order[0]
}

func checkAGUIBackendTool(t *testing.T, r aguiReport) {
	t.Helper()
	run := r.Runs["backendTool"]
	aguiSuccess(t, "backendTool", run)
	names, _, results, order := aguiCalls(run)
	var got []string
	for _, id := range order {
		got = append(got, names[id])
	}
	if !slices.Equal(got, []string{"glob", "todowrite"}) {
		t.Errorf("backendTool: TOOL_CALL_START names %q, want glob, todowrite", got)
	}
	for _, id := range order {
		if names[id] == "glob" && !strings.Contains(results[id], "README.md") {
			t.Errorf("backendTool: glob's TOOL_CALL_RESULT %q does not list README.md", results[id])
		}
		if _, ok := results[id]; !ok {
			t.Errorf("backendTool: no TOOL_CALL_RESULT for %s (%s)", id, names[id])
		}
	}
	if text := aguiAllText(run); !strings.Contains(text, "Done. listed-"+r.Tag) {
		t.Errorf("backendTool: streamed text %q lacks the step after the tools, %q", text, "Done. listed-"+r.Tag)
	}
	// Steps: one per model call (two: the calls, then the answer).
	var starts, ends []string
	for _, e := range run.Events {
		switch e.Type {
		case "STEP_STARTED":
			starts = append(starts, e.StepName)
		case "STEP_FINISHED":
			ends = append(ends, e.StepName)
		}
	}
	var assistants []string
	for _, m := range aguiNew(run.HTTPBefore, run.HTTPAfter) {
		if m.Role == "assistant" {
			assistants = append(assistants, m.ID)
		}
	}
	// A step is named by its model call's assistant message (README, AG-UI).
	if !slices.Equal(starts, assistants) || !slices.Equal(starts, ends) || len(assistants) < 2 {
		t.Errorf("backendTool: STEP_STARTED %q, STEP_FINISHED %q; want one pair a model call, named by its assistant message %q", starts, ends, assistants)
	}
	// The todo list in a STATE_SNAPSHOT.
	if !slices.ContainsFunc(run.Events, func(e aguiEvent) bool {
		return e.Type == "STATE_SNAPSHOT" && bytes.Contains(e.Snapshot, []byte("Read the files "+r.Tag))
	}) {
		t.Errorf("backendTool: no STATE_SNAPSHOT carries the todo list todowrite wrote")
	}
}

func checkAGUIFrontendTool(t *testing.T, r aguiReport, reqs []stubmodel.Request) {
	t.Helper()
	run := r.Runs["frontendTool"]
	call := aguiOneCall(t, "frontendTool", run, "confirm_choice")
	_, args, results, _ := aguiCalls(run)
	if want := `{"choice":"blue-` + r.Tag + `"}`; !jsonEqual(json.RawMessage(args[call]), json.RawMessage(want)) {
		t.Errorf("frontendTool: TOOL_CALL_ARGS %q, want %s", args[call], want)
	}
	if _, ok := results[call]; ok {
		t.Errorf("frontendTool: a TOOL_CALL_RESULT for the frontend tool %s: the client runs it, not the server", call)
	}
	f := aguiFinished(run)
	if f.Type != "RUN_FINISHED" || f.Outcome == nil || f.Outcome.Type != "success" || !slices.Equal(f.Outcome.PendingToolCallIDs, []string{call}) {
		t.Errorf("frontendTool: ends with %s %+v, want RUN_FINISHED success with pendingToolCallIds [%s]", f.Type, f.Outcome, call)
	}
	if !slices.ContainsFunc(reqs, func(q stubmodel.Request) bool {
		return slices.ContainsFunc(q.Tools, func(tl stubmodel.Tool) bool { return tl.Function.Name == "confirm_choice" })
	}) {
		t.Errorf("no model request offers the frontend tool confirm_choice")
	}

	res := r.Runs["frontendToolResult"]
	aguiSuccess(t, "frontendToolResult", res)
	if text := aguiAllText(res); !strings.Contains(text, "Done. confirmed-"+r.Tag) {
		t.Errorf("frontendToolResult: streamed text %q, want the turn going on after the result: %q", text, "Done. confirmed-"+r.Tag)
	}
	if n, m := len(aguiUsers(res.HTTPAfter)), len(aguiUsers(res.HTTPBefore)); n != m {
		t.Errorf("frontendToolResult: the tool message was admitted as user input (%d → %d user messages)", m, n)
	}
	// The result reached the model, as the call's answer.
	if !slices.ContainsFunc(reqs, func(q stubmodel.Request) bool {
		return slices.ContainsFunc(q.Messages, func(m stubmodel.Message) bool {
			return m.Role == "tool" && m.ToolCallID == call && strings.Contains(m.Content, r.FrontendToolResult)
		})
	}) {
		t.Errorf("no model request carries the frontend tool's result %q as the answer to %s", r.FrontendToolResult, call)
	}
	found := false
	for _, m := range res.HTTPAfter {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.CallID == call {
				found = true
				if p.Status != "completed" || p.Output != r.FrontendToolResult {
					t.Errorf("GET /session/%s/message: confirm_choice's tool part is %s with output %q, want completed with %q", r.ThreadID, p.Status, p.Output, r.FrontendToolResult)
				}
			}
		}
	}
	if !found {
		t.Errorf("GET /session/%s/message: no tool part for the call %s", r.ThreadID, call)
	}
}

func checkAGUIPermission(t *testing.T, r aguiReport) {
	t.Helper()
	run := r.Runs["permission"]
	call := aguiOneCall(t, "permission", run, "bash")
	f := aguiFinished(run)
	if f.Type != "RUN_FINISHED" || f.Outcome == nil || f.Outcome.Type != "interrupt" || len(f.Outcome.Interrupts) != 1 {
		t.Fatalf("permission: ends with %s %+v, want RUN_FINISHED outcome interrupt with one interrupt", f.Type, f.Outcome)
	}
	in := f.Outcome.Interrupts[0]
	if !isID("per_", in.ID) || in.Reason != "permission" || in.ToolCallID != call || len(in.ResponseSchema) == 0 {
		t.Errorf("permission: interrupt %+v, want a per_ ID, reason permission, toolCallId %s, a responseSchema", in, call)
	}
	if len(run.PendingInterrupt) != 1 || run.PendingInterrupt[0].ID != in.ID {
		t.Errorf("permission: HttpAgent.pendingInterrupts %+v, want the interrupt %s", run.PendingInterrupt, in.ID)
	}
	// Other input while the ask waits: RUN_ERROR, nothing admitted.
	w := r.Runs["whileInterrupted"]
	if last := aguiFinished(w); last.Type != "RUN_ERROR" || last.Code != "PENDING_INTERRUPT" {
		t.Errorf("whileInterrupted: ends with %s code %q, want RUN_ERROR code PENDING_INTERRUPT", last.Type, last.Code)
	}
	if got, want := aguiIDs(w.HTTPAfter), aguiIDs(w.HTTPBefore); !slices.Equal(got, want) {
		t.Errorf("whileInterrupted: admitted something while the ask waited: %q → %q", want, got)
	}
	// resume answers it: the command runs, the turn goes on.
	res := r.Runs["resume"]
	aguiSuccess(t, "resume", res)
	_, _, results, _ := aguiCalls(res)
	if !strings.Contains(results[call], "perm-42") {
		t.Errorf("resume: TOOL_CALL_RESULT of %s %q, want the command's output perm-42", call, results[call])
	}
	if text := aguiAllText(res); !strings.Contains(text, "Done. allowed-"+r.Tag) {
		t.Errorf("resume: streamed text %q lacks %q", text, "Done. allowed-"+r.Tag)
	}
	if n, m := len(aguiUsers(res.HTTPAfter)), len(aguiUsers(res.HTTPBefore)); n != m {
		t.Errorf("resume admitted user input (%d → %d user messages)", m, n)
	}
}

func checkAGUISteer(t *testing.T, r aguiReport) {
	t.Helper()
	if r.SteerWaitError != "" {
		t.Errorf("steer: %s", r.SteerWaitError)
	}
	slow, steer := r.Runs["slow"], r.Runs["steer"]
	aguiSuccess(t, "slow", slow)
	aguiSuccess(t, "steer", steer)
	if p := steer.Events[0].ParentRunID; p != slow.Request.Body.RunID {
		t.Errorf("steer: RUN_STARTED parentRunId %q, want the running run %s", p, slow.Request.Body.RunID)
	}
	answer := "You said: " + r.SteerText
	// Delivered into the running turn: the slow run (which ends with the
	// turn that delivered its message) streams the steer's answer too.
	if text := aguiAllText(slow); !strings.Contains(text, "You said: "+aguiSlowPrompt+" "+r.Tag) || !strings.Contains(text, answer) {
		t.Errorf("slow run: streamed text %q, want its reply and, in the same turn, the steer's %q", text, answer)
	}
	if text := aguiAllText(steer); !strings.Contains(text, answer) {
		t.Errorf("steer run: streamed text %q lacks the steer's answer %q", text, answer)
	}
	ms := steer.HTTPAfter
	if len(slow.HTTPAfter) > len(ms) {
		ms = slow.HTTPAfter
	}
	var steerID string
	for _, m := range ms {
		if m.Role == "user" && m.text() == r.SteerText {
			if steerID != "" {
				t.Errorf("steer: the steer's message is in the session twice (%s, %s)", steerID, m.ID)
			}
			steerID = m.ID
		}
	}
	if steerID == "" {
		t.Fatalf("steer: GET /session/%s/message has no user message %q", r.ThreadID, r.SteerText)
	}
	// The slow run streams the steer's user message, under its ID, before
	// the answer; the steer's own run has it in its snapshot.
	if got, want := aguiUserTexts(slow), []string{steerID + ": " + r.SteerText}; !slices.Equal(got, want) {
		t.Errorf("slow run: user text messages %q, want the steer delivered into the turn %q", got, want)
	}
	starts := func(id string) int {
		return slices.IndexFunc(slow.Events, func(e aguiEvent) bool { return e.Type == "TEXT_MESSAGE_START" && e.MessageID == id })
	}
	for _, m := range ms {
		if a := starts(m.ID); m.Role == "assistant" && m.text() == answer && a >= 0 && a < starts(steerID) {
			t.Errorf("slow run: the steer's answer %s streams before the steer %s", m.ID, steerID)
		}
	}
	if got := aguiSnapshotUsers(steer); !slices.Contains(got, steerID) {
		t.Errorf("steer: MESSAGES_SNAPSHOT user messages %q lack the steer %s", got, steerID)
	}
	checkAGUISnapshotUsers(t, "slow", slow, steerID)
}

func checkAGUIProto(t *testing.T, r aguiReport) {
	t.Helper()
	run := r.Runs["proto"]
	if run.ContentType != "application/vnd.ag-ui.event+proto" || !strings.Contains(run.Request.Accept, "application/vnd.ag-ui.event+proto") {
		t.Errorf("proto: Accept %q answered with Content-Type %q, want application/vnd.ag-ui.event+proto", run.Request.Accept, run.ContentType)
	}
	if !strings.HasSuffix(run.Request.URL, "/agui/"+r.ThreadID) {
		t.Errorf("proto: posted to %s, want the path form /agui/%s", run.Request.URL, r.ThreadID)
	}
	aguiSuccess(t, "proto", run)
	prompt := "proto agui prompt " + r.Tag
	if text := aguiAllText(run); !strings.Contains(text, "You said: "+prompt) {
		t.Errorf("proto: streamed text %q lacks the reply to %q", text, prompt)
	}
	checkAGUISnapshotUsers(t, "proto", run)
	// The same turn as SSE (the run sent again) carries the same text.
	replay := r.Runs["protoReplay"]
	if replay.ContentType != "text/event-stream" {
		t.Errorf("protoReplay: Content-Type %q, want text/event-stream", replay.ContentType)
	}
	text, ids := aguiText(run)
	rtext, rids := aguiText(replay)
	if !slices.Equal(ids, rids) || !maps.Equal(text, rtext) {
		t.Errorf("the protobuf run streamed %q %q, its SSE replay %q %q", ids, text, rids, rtext)
	}
}
