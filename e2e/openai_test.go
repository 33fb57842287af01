package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
)

// oaiDir is the Node project (relative to this package) that drives our
// OpenAI door with the official npm clients, openai and @openai/agents, on
// the node 22 they need (the npm package node@22, as e2e/agents):
// e2e/openai/client.mjs.
const oaiDir = "openai"

// oaiPackages are the packages the script runs, all pinned.
var oaiPackages = []string{"openai", "@openai/agents", "node", "zod"}

// oaiReport is what e2e/openai/client.mjs prints.
type oaiReport struct {
	Node     string            `json:"node"`
	Versions map[string]string `json:"versions"`
	Steps    struct {
		Create       oaiResponse `json:"create"`
		Stream       oaiStream   `json:"stream"`
		StreamHelper struct {
			Error string      `json:"error"`
			Types []string    `json:"types"`
			Final oaiResponse `json:"final"`
		} `json:"streamHelper"`
		Retrieve   oaiResponse `json:"retrieve"`
		InputItems struct {
			Error string `json:"error"`
			Items []struct {
				ID   string `json:"id"`
				Type string `json:"type"`
				Role string `json:"role"`
				Text string `json:"text"`
			} `json:"items"`
		} `json:"inputItems"`
		Errors map[string]struct {
			Class  string `json:"class"`
			Status int    `json:"status"`
			Type   string `json:"type"`
			Param  string `json:"param"`
		} `json:"errors"`
		Models struct {
			Error  string `json:"error"`
			Models []struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				OwnedBy string `json:"owned_by"`
			} `json:"models"`
		} `json:"models"`
		Chat struct {
			Error         string          `json:"error"`
			Session       string          `json:"session"`
			Chunks        int             `json:"chunks"`
			Content       string          `json:"content"`
			IDs           []string        `json:"ids"`
			Object        string          `json:"object"`
			FinishReasons []string        `json:"finishReasons"`
			Usage         json.RawMessage `json:"usage"`
		} `json:"chat"`
		Agent       oaiAgent `json:"agent"`
		AgentStream oaiAgent `json:"agentStream"`
		// The agents SDK's stateless mode: a run, and a next one given
		// the first's history.
		AgentStateless      oaiAgent `json:"agentStateless"`
		AgentStatelessAgain oaiAgent `json:"agentStatelessAgain"`
		// A function tool round trip through the openai package's
		// accumulator.
		ToolStreamHelper struct {
			Error     string      `json:"error"`
			CallTypes []string    `json:"callTypes"`
			Call      oaiResponse `json:"call"`
			FC        *struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				CallID    string `json:"call_id"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
				Status    string `json:"status"`
			} `json:"fc"`
			ToolOutput  string      `json:"toolOutput"`
			AnswerTypes []string    `json:"answerTypes"`
			Answer      oaiResponse `json:"answer"`
		} `json:"toolStreamHelper"`
	} `json:"steps"`
}

// oaiResponse is a response as the script reduced it.
type oaiResponse struct {
	Error              string          `json:"error"`
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	Status             string          `json:"status"`
	Conversation       string          `json:"conversation"`
	PreviousResponseID string          `json:"previousResponseId"`
	OutputText         string          `json:"outputText"`    // its output_text parts
	SDKOutputText      *string         `json:"sdkOutputText"` // the SDK's output_text
	OutputTypes        []string        `json:"outputTypes"`
	OutputIDs          []string        `json:"outputIds"`
	Usage              json.RawMessage `json:"usage"`
	Model              string          `json:"model"`
}

type oaiStream struct {
	Error  string `json:"error"`
	Events []struct {
		Type        string `json:"type"`
		Seq         *int   `json:"seq"`
		OutputIndex *int   `json:"outputIndex"`
		ItemID      string `json:"itemId"`
		HasError    bool   `json:"hasError"`
	} `json:"events"`
	Deltas    string      `json:"deltas"`
	DoneTexts []string    `json:"doneTexts"`
	Created   oaiResponse `json:"created"`
	Completed oaiResponse `json:"completed"`
}

// oaiAgent is a run of @openai/agents as the script saw it.
type oaiAgent struct {
	Error              string `json:"error"`
	Prompt             string `json:"prompt"`
	Instructions       string `json:"instructions"`
	City               string `json:"city"`
	PreviousResponseID string `json:"previousResponseId"` // the run's previousResponseId
	ConversationID     string `json:"conversationId"`     // or conversationId
	FinalOutput        string `json:"finalOutput"`
	LastResponseID     string `json:"lastResponseId"`
	RawResponses       []struct {
		ResponseID string `json:"responseId"`
		Output     []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			CallID    string `json:"callId"`
			Arguments string `json:"arguments"`
			ID        string `json:"id"`
		} `json:"output"`
	} `json:"rawResponses"`
	NewItems  []string `json:"newItems"`
	ToolCalls []struct {
		Args   map[string]string `json:"args"`
		Output string            `json:"output"`
	} `json:"toolCalls"`
	Last oaiResponse `json:"last"`
	// Streamed runs: the run items' names, the raw Responses events and the
	// text deltas the stream handed over.
	RunItems    []string `json:"runItems"`
	ModelEvents []string `json:"modelEvents"`
	TextDeltas  string   `json:"textDeltas"`
}

// oaiStreamEvents are the Responses stream events OpenAI's API defines that
// a turn of text (and client tool calls) may carry.
var oaiStreamEvents = []string{"response.created", "response.in_progress", "response.output_item.added",
	"response.content_part.added", "response.output_text.delta", "response.output_text.done",
	"response.content_part.done", "response.output_item.done", "response.function_call_arguments.delta",
	"response.function_call_arguments.done", "response.completed"}

// oaiScript is the stub's model: stubmodel.Directives (an echo, or the
// prompt's "call:NAME {args}"), and once the last message is a tool's
// result, an answer quoting it, so the final output shows that the output
// of the tool, run in node, reached the model.
func oaiScript(req stubmodel.Request) stubmodel.Response {
	if last := req.LastMessage(); last.Role == "tool" {
		return stubmodel.Response{Text: "The forecast says: " + last.Content}
	}
	return stubmodel.Directives(req)
}

// TestOpenAINPM drives the OpenAI door (/v1) with the official npm
// clients, pinned in e2e/openai/package-lock.json: the openai package
// (Responses JSON, streamed, continued by previous_response_id, through the
// SDK's stream accumulator, retrieved, its input items; refusals as the
// SDK's errors; models; a streamed chat completion;
// a function tool's call and output through the accumulator) and
// @openai/agents (an Agent with a function tool, run on the SDK's
// Responses model against our server: the model calls the tool, the tool
// runs in node with the model's arguments, and the model answers from its
// output), on a stub model; the session over GET /session/{id}/message
// holds the agent's turn with the tool call under the response IDs.
func TestOpenAINPM(t *testing.T) {
	t.Parallel()
	_, dir, pinned := nodeProject(t, oaiDir, oaiPackages...)
	node22 := filepath.Join(dir, "node_modules", "node", "bin", "node")
	if out, err := exec.Command(node22, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "v22.") {
		missing(t, "%s --version = %q (%v): the npm package node@22 did not install its binary (npm ci in e2e/openai)", node22, out, err)
	}

	stub := stubmodel.NewServer(t, oaiScript, stubmodel.WithChunks(3), stubmodel.WithDelay(10*time.Millisecond))
	model := "stub/" + stubmodel.ModelID
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	body := `{"model":"` + model + `","small_model":"` + model + `",` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"Stub","options":{"baseURL":"` + stub.URL() +
		`","apiKey":"k"},"models":{"stub-model":{"name":"Stub Model","tool_call":true,"limit":{"context":128000,"output":4096}}}}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	password := "oai-" + randomTag()
	srv := startServer(t, serverOptions{config: cfg, password: password})
	tag := strings.ToLower(randomTag())
	city := "Paris-" + strings.ToLower(randomTag())

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node22, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OAI_URL="+srv.URL, "OAI_PASSWORD="+password, "OAI_TAG="+tag,
		"OAI_AGENT=build", "OAI_MODEL="+model, "OAI_CITY="+city)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("node client.mjs (openai %s, @openai/agents %s): %v", pinned["openai"], pinned["@openai/agents"], time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("node client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var out struct {
		Report *oaiReport `json:"report"`
	}
	raw := []byte(lines[len(lines)-1])
	if err := json.Unmarshal(raw, &out); err != nil || out.Report == nil {
		t.Fatalf("client.mjs: the last line is no report (%v)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	defer func() {
		if t.Failed() {
			var pretty bytes.Buffer
			_ = json.Indent(&pretty, raw, "", "  ")
			t.Logf("report:\n%s\nclient stderr:\n%s", pretty.String(), stderr.String())
		}
	}()
	if s := stderr.String(); strings.TrimSpace(s) != "" {
		t.Errorf("client.mjs wrote to stderr (an SDK warning?):\n%s", s)
	}
	var reqs []stubmodel.Request
	for _, b := range stub.Requests() {
		var q stubmodel.Request
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatalf("stub request: %v", err)
		}
		if !q.IsTitle() {
			reqs = append(reqs, q)
		}
	}
	r := out.Report
	if !strings.HasPrefix(r.Node, "v22.") {
		t.Errorf("the script ran on node %s, want the pinned node 22", r.Node)
	}
	for _, p := range []string{"openai", "@openai/agents", "zod"} {
		if r.Versions[p] != pinned[p] {
			t.Errorf("the script ran %s %q, package-lock.json pins %q", p, r.Versions[p], pinned[p])
		}
	}
	checkOAIResponses(t, r, tag, reqs)
	checkOAIModelsChat(t, r, tag, model)
	ses := r.Steps.Create.Conversation
	checkOAIAgent(t, srv, "run", r.Steps.Agent, tag, city, r.Steps.StreamHelper.Final.ID, "", ses, reqs)
	checkOAIAgent(t, srv, "streamed run", r.Steps.AgentStream, tag, city+"-streamed", "", ses, ses, reqs)
	checkOAIStateless(t, srv, r, tag, city, reqs)
	checkOAIToolStreamHelper(t, r, tag, city)
	a := r.Steps.AgentStream
	if !slices.Equal(a.RunItems, []string{"tool_called", "tool_output", "message_output_created"}) ||
		a.TextDeltas != a.FinalOutput || slices.Index(a.ModelEvents, "response.function_call_arguments.done") < 0 ||
		slices.Index(a.ModelEvents, "response.output_text.delta") < 0 || oaiCountOf(a.ModelEvents, "response.completed") != 2 {
		t.Errorf("streamed run: run items %q, text deltas %q, Responses events %q", a.RunItems, a.TextDeltas, a.ModelEvents)
	}
}

func oaiCountOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// checkOAIResponses: the Responses calls of the openai package, JSON,
// streamed and through the SDK's stream helper, each a turn of one session
// whose model sees the earlier turns once.
func checkOAIResponses(t *testing.T, r *oaiReport, tag string, reqs []stubmodel.Request) {
	t.Helper()
	c := r.Steps.Create
	if c.Error != "" || c.Object != "response" || c.Status != "completed" || !isID("msg_", c.ID) || !isID("ses_", c.Conversation) ||
		c.OutputText != "You said: first "+tag || !slices.Equal(c.OutputTypes, []string{"message"}) || !isID("msg_", c.OutputIDs[0]) || len(c.Usage) == 0 {
		t.Errorf("responses.create: %+v", c)
	}
	s := r.Steps.Stream
	if s.Error != "" {
		t.Errorf("responses.create stream: %s", s.Error)
	}
	var types []string
	for i, e := range s.Events {
		types = append(types, e.Type)
		if e.Seq == nil || *e.Seq != i {
			t.Errorf("stream event %d %s: sequence_number %v", i, e.Type, e.Seq)
		}
		if !slices.Contains(oaiStreamEvents, e.Type) {
			t.Errorf("stream event %d: type %q is not one of a text turn's", i, e.Type)
		}
		if e.HasError {
			t.Errorf("stream event %d %s has an \"error\" key", i, e.Type)
		}
		if strings.HasPrefix(e.Type, "response.output_") && e.Type != "response.output_item.added" && e.Type != "response.output_item.done" &&
			(e.OutputIndex == nil || !isID("msg_", e.ItemID)) {
			t.Errorf("stream event %d %s: output_index %v item_id %q", i, e.Type, e.OutputIndex, e.ItemID)
		}
	}
	if len(types) < 4 || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != "response.completed" ||
		!slices.Contains(types, "response.output_text.delta") {
		t.Errorf("stream events %q: want response.created, response.in_progress, …, output_text deltas, …, response.completed", types)
	}
	want := "You said: second " + tag
	sc := s.Completed
	if s.Deltas != want || !slices.Equal(s.DoneTexts, []string{want}) || sc.OutputText != want || sc.Status != "completed" ||
		sc.ID != s.Created.ID || s.Created.Status != "in_progress" || sc.Conversation != c.Conversation || sc.PreviousResponseID != c.ID || !isID("msg_", sc.ID) || sc.ID == c.ID {
		t.Errorf("streamed continuation: deltas %q, done %q, created %+v, completed %+v; want %q after %s in %s", s.Deltas, s.DoneTexts, s.Created, sc, want, c.ID, c.Conversation)
	}
	h := r.Steps.StreamHelper
	hf := h.Final
	if h.Error != "" || hf.OutputText != "You said: third "+tag || hf.Status != "completed" || hf.Conversation != c.Conversation || hf.PreviousResponseID != sc.ID ||
		len(h.Types) == 0 || h.Types[len(h.Types)-1] != "response.completed" {
		t.Errorf("responses.stream (the SDK's accumulator): %s; final %+v; events %q", h.Error, hf, h.Types)
	}
	// The SDK's output_text of the responses it returns (not of those in
	// stream events) agrees.
	for name, x := range map[string]oaiResponse{"create": c, "stream helper": hf, "retrieve": r.Steps.Retrieve} {
		if x.SDKOutputText == nil || *x.SDKOutputText != x.OutputText {
			t.Errorf("%s: the SDK's output_text %v, the output's text %q", name, x.SDKOutputText, x.OutputText)
		}
	}
	if g := r.Steps.Retrieve; g.Error != "" || g.ID != sc.ID || g.OutputText != want || g.Status != "completed" || g.Conversation != c.Conversation {
		t.Errorf("responses.retrieve(%s): %+v", sc.ID, g)
	}

	if it := r.Steps.InputItems; it.Error != "" || len(it.Items) != 1 || it.Items[0].ID != c.ID || it.Items[0].Type != "message" ||
		it.Items[0].Role != "user" || it.Items[0].Text != "first "+tag {
		t.Errorf("responses.inputItems.list(%s): %+v", c.ID, it)
	}
	for name, want := range map[string]struct {
		class  string
		status int
		param  string
	}{"unknownModel": {"NotFoundError", 404, "model"}, "unknownModelStream": {"NotFoundError", 404, "model"}, "badKey": {"AuthenticationError", 401, ""}} {
		e := r.Steps.Errors[name]
		if e.Class != want.class || e.Status != want.status || e.Param != want.param || e.Type == "" {
			t.Errorf("error %s: the SDK threw %+v, want %s %d param %q with a type", name, e, want.class, want.status, want.param)
		}
	}

	// The model sees the earlier turns once: each continuation's request
	// holds each earlier prompt and answer exactly once.
	turns := []string{"first " + tag, "second " + tag, "third " + tag}
	for i, prompt := range turns {
		q, ok := oaiRequestFor(reqs, prompt)
		if !ok {
			t.Errorf("the stub was sent no request for %q", prompt)
			continue
		}
		for _, earlier := range turns[:i] {
			if n := oaiCount(q, "user", earlier); n != 1 {
				t.Errorf("the request for %q holds the earlier prompt %q %d times, want once", prompt, earlier, n)
			}
			if n := oaiCount(q, "assistant", "You said: "+earlier); n != 1 {
				t.Errorf("the request for %q holds the earlier answer to %q %d times, want once", prompt, earlier, n)
			}
		}
	}
}

// checkOAIModelsChat: models.list names the agents and the catalog's
// models; a streamed chat completion is a turn of a new session.
func checkOAIModelsChat(t *testing.T, r *oaiReport, tag, model string) {
	t.Helper()
	m := r.Steps.Models
	owners := map[string]string{}
	for _, x := range m.Models {
		owners[x.ID] = x.OwnedBy
		if x.Object != "model" {
			t.Errorf("models.list: %s is a %q", x.ID, x.Object)
		}
	}
	if m.Error != "" || owners["build"] != "agent" || owners[model] == "" || owners[model] == "agent" {
		t.Errorf("models.list: %s; %v (want build owned by agent and %s)", m.Error, owners, model)
	}
	ch := r.Steps.Chat
	if ch.Error != "" || ch.Content != "You said: chat "+tag || ch.Object != "chat.completion.chunk" || len(ch.IDs) != 1 || !isID("msg_", ch.IDs[0]) ||
		!slices.Equal(ch.FinishReasons, []string{"stop"}) || !isID("ses_", ch.Session) || ch.Session == r.Steps.Create.Conversation || len(ch.Usage) == 0 || ch.Chunks < 3 {
		t.Errorf("chat.completions.create stream: %+v", ch)
	}
}

// checkOAIAgent: a run of @openai/agents. Its first model call is a turn
// of the session (by previous_response_id or conversation) that ends with the
// model's call of get_weather; the tool runs in node with the model's
// arguments; the second call hands its output to the waiting call, and
// the model, sent it, answers from it. The session holds the one turn with
// the tool part, under the IDs the SDK saw.
func checkOAIAgent(t *testing.T, srv *server, name string, a oaiAgent, tag, city, prev, conv, session string, reqs []stubmodel.Request) {
	t.Helper()
	if a.Error != "" {
		t.Errorf("%s: %s", name, a.Error)
		return
	}
	if a.City != city || a.PreviousResponseID != prev || a.ConversationID != conv {
		t.Errorf("%s: for city %q after %q in %q, want %q after %q in %q", name, a.City, a.PreviousResponseID, a.ConversationID, city, prev, conv)
	}
	toolOut := city + ": 21C and sunny (" + tag + ")"
	if len(a.ToolCalls) != 1 || a.ToolCalls[0].Args["city"] != city || a.ToolCalls[0].Output != toolOut {
		t.Errorf("%s: get_weather ran %+v, want once with city %q", name, a.ToolCalls, city)
	}
	if a.FinalOutput != "The forecast says: "+toolOut {
		t.Errorf("%s: finalOutput %q, want the model's answer from the tool's output %q", name, a.FinalOutput, toolOut)
	}
	if !slices.Equal(a.NewItems, []string{"tool_call_item", "tool_call_output_item", "message_output_item"}) {
		t.Errorf("%s: new items %q", name, a.NewItems)
	}
	if len(a.RawResponses) != 2 {
		t.Errorf("%s: %d model calls, want 2 (the tool call, then the answer): %+v", name, len(a.RawResponses), a.RawResponses)
		return
	}
	first, second := a.RawResponses[0], a.RawResponses[1]
	var call struct{ ID, CallID, Arguments string }
	for _, it := range first.Output {
		if it.Type == "function_call" {
			if it.Name != "get_weather" || call.CallID != "" {
				t.Errorf("%s: first model call: output %+v", name, first.Output)
			}
			call.ID, call.CallID, call.Arguments = it.ID, it.CallID, it.Arguments
		}
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || args["city"] != city || !isID("prt_", call.ID) || call.CallID == "" {
		t.Errorf("%s: the function_call item %+v, want get_weather with city %q under a prt_ ID", name, call, city)
	}
	if !isID("msg_", first.ResponseID) || !isID("msg_", second.ResponseID) || second.ResponseID == first.ResponseID || a.LastResponseID != second.ResponseID {
		t.Errorf("%s: response IDs %q then %q, last %q", name, first.ResponseID, second.ResponseID, a.LastResponseID)
	}
	last := a.Last
	if last.Error != "" || last.ID != second.ResponseID || last.Status != "completed" || last.PreviousResponseID != first.ResponseID ||
		last.Conversation != session || last.OutputText != a.FinalOutput {
		t.Errorf("%s: responses.retrieve(%s) after the run: %+v, want the answer in %s", name, a.LastResponseID, last, session)
	}

	// The model's side: the agent's instructions are the turn's system
	// prompt, get_weather is offered with the agent's schema, and the
	// tool's output comes back to the call.
	if q, ok := oaiRequestFor(reqs, a.Prompt); !ok || len(q.Messages) == 0 || q.Messages[0].Role != "system" || !strings.Contains(q.Messages[0].Content, a.Instructions) || a.Instructions == "" {
		t.Errorf("%s: the stub's request for the agent's prompt (found: %v) does not open with the agent's instructions %q as its system prompt", name, ok, a.Instructions)
	} else if !slices.ContainsFunc(q.Tools, func(tl stubmodel.Tool) bool {
		return tl.Function.Name == "get_weather" && strings.Contains(string(tl.Function.Parameters), `"city"`)
	}) {
		t.Errorf("%s: the stub was not offered get_weather with a city parameter: %+v", name, q.Tools)
	}
	answered := false
	for _, q := range reqs {
		if m := q.LastMessage(); m.Role == "tool" && m.ToolCallID == call.CallID {
			answered = true
			if m.Content != toolOut {
				t.Errorf("%s: the stub was sent call %s's result %q, want %q", name, call.CallID, m.Content, toolOut)
			}
			if n := oaiCount(q, "user", a.Prompt); n != 1 {
				t.Errorf("%s: the tool result's request holds the agent's prompt %d times, want once", name, n)
			}
		}
	}
	if !answered {
		t.Errorf("%s: the stub was never sent call %s's result", name, call.CallID)
	}

	// The session: the prompt is a user message under the first response's
	// ID, the call a completed tool part (the function_call's prt_ ID and
	// call ID, the tool's input and output) of the assistant message the
	// second response is named by, and the answer follows: one turn.
	var ms []oaiSessionMessage
	if err := srv.getJSON("/session/"+session+"/message", &ms); err != nil {
		t.Error(err)
		return
	}
	at := slices.IndexFunc(ms, func(m oaiSessionMessage) bool { return m.Info.ID == first.ResponseID })
	if at < 0 || ms[at].Info.Role != "user" || ms[at].text() != a.Prompt || at+3 > len(ms) {
		t.Errorf("%s: GET /session/%s/message has no user message %s with the agent's prompt and two answers: %s", name, session, first.ResponseID, oaiDump(ms))
		return
	}
	turn := ms[at+1 : at+3]
	if turn[0].Info.ID != second.ResponseID || turn[0].Info.Role != "assistant" || turn[1].Info.Role != "assistant" ||
		turn[0].Info.ParentID != first.ResponseID || turn[1].Info.ParentID != first.ResponseID || turn[1].text() != a.FinalOutput ||
		(at+3 < len(ms) && ms[at+3].Info.Role != "user") {
		t.Errorf("%s: the turn in the session: %s; want the assistant message %s with the call, then the answer %q", name, oaiDump(ms[at:]), second.ResponseID, a.FinalOutput)
		return
	}
	var tp *oaiSessionPart
	for i, p := range turn[0].Parts {
		if p.Type == "tool" {
			tp = &turn[0].Parts[i]
		}
	}
	if tp == nil || tp.ID != call.ID || tp.CallID != call.CallID || tp.Tool != "get_weather" || tp.State.Status != "completed" ||
		tp.State.Output != toolOut || tp.State.Input["city"] != city {
		t.Errorf("%s: the tool part of %s: %+v; want %s (call %s) completed with input city %q and output %q", name, second.ResponseID, tp, call.ID, call.CallID, city, toolOut)
	}
}

// checkOAIStateless: the agents SDK's stateless runs (the whole
// conversation as input each call) are turns of one new session: the
// first run's second call hands the output to the call waiting there, the
// next run (given the first's history) is a second turn of it; the
// session holds the two turns and nothing twice, and the model is sent
// each earlier prompt and answer once.
func checkOAIStateless(t *testing.T, srv *server, r *oaiReport, tag, city string, reqs []stubmodel.Request) {
	t.Helper()
	a, b := r.Steps.AgentStateless, r.Steps.AgentStatelessAgain
	session := a.Last.Conversation
	if !isID("ses_", session) || session == r.Steps.Create.Conversation || b.Last.Conversation != session {
		t.Errorf("stateless runs in %q then %q; want one new session", session, b.Last.Conversation)
		return
	}
	checkOAIAgent(t, srv, "stateless run", a, tag, city+"-stateless", "", "", session, reqs)
	checkOAIAgent(t, srv, "stateless run again", b, tag, city+"-stateless-again", "", "", session, reqs)
	var ms []oaiSessionMessage
	if err := srv.getJSON("/session/"+session+"/message", &ms); err != nil {
		t.Error(err)
		return
	}
	var roles []string
	for _, m := range ms {
		roles = append(roles, m.Info.Role)
	}
	if want := []string{"user", "assistant", "assistant", "user", "assistant", "assistant"}; !slices.Equal(roles, want) ||
		ms[0].text() != a.Prompt || ms[3].text() != b.Prompt {
		t.Errorf("the stateless session holds %s; want the two turns once each", oaiDump(ms))
	}
	q, ok := oaiRequestFor(reqs, b.Prompt)
	if !ok {
		t.Errorf("the stub was sent no request for %q", b.Prompt)
		return
	}
	if n := oaiCount(q, "user", a.Prompt); n != 1 {
		t.Errorf("the second stateless run's request holds the first prompt %d times, want once", n)
	}
	if n := oaiCount(q, "assistant", a.FinalOutput); n != 1 {
		t.Errorf("the second stateless run's request holds the first answer %d times, want once", n)
	}
}

// checkOAIToolStreamHelper: the openai package's stream helper takes a
// function tool's call (its item and argument events) and the turn going on
// after the output, in the session the request named.
func checkOAIToolStreamHelper(t *testing.T, r *oaiReport, tag, city string) {
	t.Helper()
	h := r.Steps.ToolStreamHelper
	if h.Error != "" {
		t.Errorf("responses.stream with a function tool: %s (call events %q, answer events %q)", h.Error, h.CallTypes, h.AnswerTypes)
		return
	}
	ses := r.Steps.Create.Conversation
	if h.Call.Status != "completed" || h.Call.Conversation != ses || !slices.Equal(h.Call.OutputTypes, []string{"function_call"}) ||
		!slices.Contains(h.CallTypes, "response.function_call_arguments.done") {
		t.Errorf("responses.stream with a function tool: %+v; events %q", h.Call, h.CallTypes)
	}
	if h.FC == nil || h.FC.Name != "get_weather" || h.FC.Arguments != `{"city":"`+city+`-helper"}` || !isID("prt_", h.FC.ID) || h.FC.CallID == "" || h.FC.Status != "completed" {
		t.Errorf("the accumulated function_call: %+v", h.FC)
	}
	want := "The forecast says: " + city + "-helper: cloudy (" + tag + ")"
	if h.ToolOutput != city+"-helper: cloudy ("+tag+")" || h.Answer.Status != "completed" || h.Answer.OutputText != want ||
		h.Answer.PreviousResponseID != h.Call.ID || h.Answer.Conversation != ses || !isID("msg_", h.Answer.ID) || h.Answer.ID == h.Call.ID {
		t.Errorf("the turn after the output, through responses.stream: %+v; want %q after %s; events %q", h.Answer, want, h.Call.ID, h.AnswerTypes)
	}
}

// oaiSessionMessage is a message of GET /session/{id}/message.
type oaiSessionMessage struct {
	Info struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		ParentID string `json:"parentID"`
	} `json:"info"`
	Parts []oaiSessionPart `json:"parts"`
}

type oaiSessionPart struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Text   string `json:"text"`
	Tool   string `json:"tool"`
	CallID string `json:"callID"`
	State  struct {
		Status string         `json:"status"`
		Input  map[string]any `json:"input"`
		Output string         `json:"output"`
	} `json:"state"`
}

func (m oaiSessionMessage) text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func oaiDump(ms []oaiSessionMessage) string {
	b, _ := json.MarshalIndent(ms, "", "  ")
	return string(b)
}

// oaiRequestFor is the stub's request whose last message is the user's
// prompt.
func oaiRequestFor(reqs []stubmodel.Request, prompt string) (stubmodel.Request, bool) {
	for _, q := range reqs {
		if m := q.LastMessage(); m.Role == "user" && m.Content == prompt {
			return q, true
		}
	}
	return stubmodel.Request{}, false
}

// oaiCount counts q's messages of role whose content is text.
func oaiCount(q stubmodel.Request, role, text string) int {
	n := 0
	for _, m := range q.Messages {
		if m.Role == role && m.Content == text {
			n++
		}
	}
	return n
}
