package wire

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/agent"
	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// refRequest is a model request as recorded in testdata/reference/prompt.
type refRequest struct {
	Body struct {
		MaxTokens int `json:"max_tokens"`
		Messages  []struct {
			Role             string          `json:"role"`
			Content          json.RawMessage `json:"content"`
			ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
			ToolCallID       string          `json:"tool_call_id,omitempty"`
			ReasoningContent string          `json:"reasoning_content,omitempty"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				Parameters  struct {
					Properties map[string]json.RawMessage `json:"properties"`
					Required   []string                   `json:"required"`
				} `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice string `json:"tool_choice"`
	} `json:"body"`
}

// text is a message's content as one string (a string, or the texts of an
// array of parts joined by newlines).
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

// params are each tool's parameter names and required ones.
func (r refRequest) params() map[string]string {
	out := map[string]string{}
	for _, t := range r.Body.Tools {
		var names []string
		for k := range t.Function.Parameters.Properties {
			names = append(names, k)
		}
		slices.Sort(names)
		req := slices.Clone(t.Function.Parameters.Required)
		slices.Sort(req)
		out[t.Function.Name] = strings.Join(names, ",") + " required " + strings.Join(req, ",")
	}
	return out
}

// subagents are the agent types the task tool's description lists.
func (r refRequest) subagents() []string {
	var out []string
	for _, t := range r.Body.Tools {
		if t.Function.Name != "task" {
			continue
		}
		for _, m := range regexp.MustCompile(`(?m)^- ([a-z][a-z0-9_-]*): `).FindAllStringSubmatch(t.Function.Description, -1) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

func (r refRequest) tools() []string {
	var out []string
	for _, t := range r.Body.Tools {
		out = append(out, t.Function.Name)
	}
	slices.Sort(out)
	return out
}

// promptRun is what our server sent to the model for a case, normalized as
// the reference is.
type promptRun struct {
	requests, titles []refRequest
}

var dateLine = regexp.MustCompile(`Today's date: [A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{4}`)

// refConfig is the reference's global opencode.json
// (../shared/reference/opencode.json), which a case's Config may rewrite.
const refConfig = `{
  "autoupdate": false,
  "share": "disabled",
  "model": "stub/stub-model",
  "small_model": "stub/stub-model",
  "provider": {
    "stub": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Stub",
      "options": { "baseURL": "MODEL_BASE_URL", "apiKey": "stub-key" },
      "models": { "stub-model": { "name": "Stub Model", "tool_call": true, "limit": { "context": 128000, "output": 4096 } } }
    }
  }
}
`

func runOurs(t *testing.T, pc promptCase) promptRun {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, home := filepath.Join(root, "project"), filepath.Join(root, "home")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	sessionDir := pc.Setup(t, dir, home)
	script := pc.Script
	if script == nil {
		script = stubmodel.Echo
	}
	stub := stubmodel.NewServer(t, script)
	raw := []byte(strings.ReplaceAll(refConfig, "MODEL_BASE_URL", stub.URL()))
	if pc.Config != nil {
		raw = pc.Config(raw)
	}
	cfg, err := config.Parse(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "opencode.json")); err == nil {
		var project struct{ Instructions []string }
		_ = json.Unmarshal(b, &project)
		cfg.Instructions = project.Instructions // what the binary reads from the project's opencode.json
	}
	srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: sessionDir})
	post := func(path, body string) []byte {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-opencode-directory", sessionDir)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	wait := func(id string) {
		wreq, _ := http.NewRequest("POST", srv.URL+"/api/session/"+id+"/wait", nil)
		if resp, err := http.DefaultClient.Do(wreq); err == nil {
			resp.Body.Close()
		}
	}
	var s struct{ ID string }
	_ = json.Unmarshal(post("/session", "{}"), &s)
	paths := strings.NewReplacer("<DIR>", dir, "<ROOT>", root, "<HOME>", home)
	for _, st := range pc.steps() {
		st.wait(t, srv.URL, sessionDir, s.ID)
		post("/session/"+s.ID+"/"+st.Route, paths.Replace(st.Body))
		if st.Route == "summarize" || st.Route == "abort" {
			// The summary runs as its own turn (queued): wait for it.
			wait(s.ID)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(stub.Titles()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	norm := strings.NewReplacer(dir, "<DIR>", home, "<HOME>", root, "<ROOT>")
	decode := func(raws []json.RawMessage) []refRequest {
		var out []refRequest
		for _, raw := range raws {
			b := []byte(dateLine.ReplaceAllString(norm.Replace(string(raw)), "Today's date: <DATE>"))
			// The paths inside JSON strings are escaped the same way on both sides.
			var r refRequest
			if err := json.Unmarshal([]byte(`{"body":`+string(b)+`}`), &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	return promptRun{requests: decode(stub.Requests()), titles: decode(stub.Titles())}
}

// callID is a tool call's ID: the stub's (call_<request>_<index>, whose
// request numbers count title requests too, which arrive in either order),
// or one a server made (a subtask's task call: OpenCode a bare ULID, ours
// call_<part ID>); sessionID a session's, as in a task's result.
var (
	callID    = regexp.MustCompile(`\bcall_[0-9A-Za-z_]+|\b[0-9A-HJKMNP-TV-Z]{26}\b|<ulid_\d+>`)
	sessionID = regexp.MustCompile(`\bses_[0-9A-Za-z]{8,}|<ses_\d+>`)
)

// conversation is a request's messages after the system prompt, each as
// role and canonical JSON content (tool calls and results included), with
// the stub's call IDs made alike.
func conversation(r refRequest) []string {
	var out []string
	for i, m := range r.Body.Messages {
		if i == 0 && m.Role == "system" {
			continue
		}
		var v any
		_ = json.Unmarshal(m.Content, &v)
		v = ownWords(v)
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]any{"role": m.Role, "content": v, "tool_calls": m.ToolCalls,
			"tool_call_id": m.ToolCallID, "reasoning_content": m.ReasoningContent})
		b := strings.TrimSuffix(buf.String(), "\n")
		out = append(out, sessionID.ReplaceAllString(callID.ReplaceAllString(b, "call_N"), "<ses>"))
	}
	return out
}

// ownWords replaces, in a message's content, the texts each server words
// its own way (README, "Differences": our own words) by what they are: the
// title question, the plan and build-switch reminders, the compaction
// instructions after the conversation.
func ownWords(v any) any {
	switch x := v.(type) {
	case string:
		switch {
		case x == agent.TitleQuestion || x == "Generate a title for this conversation:\n":
			return "<title question>"
		case strings.HasPrefix(x, "<system-reminder>") && strings.Contains(x, "lan mode"):
			return "<plan reminder>"
		case strings.HasPrefix(x, "<system-reminder>") && strings.Contains(x, "plan to build"):
			return "<build-switch reminder>"
		}
		if i := strings.Index(x, "</conversation>\n\n"); i >= 0 {
			return x[:i] + "</conversation>\n\n<compaction instructions>"
		}
		return x
	case []any:
		for i := range x {
			x[i] = ownWords(x[i])
		}
	case map[string]any:
		if t, ok := x["text"]; ok {
			x["text"] = ownWords(t)
		}
	}
	return v
}

// diffConversation reports the first difference between two conversations.
func diffConversation(t *testing.T, what string, ours, ref []string) {
	t.Helper()
	if len(ours) != len(ref) {
		t.Errorf("%s: %d messages, the reference %d\n ours %s\n  ref %s", what, len(ours), len(ref), strings.Join(ours, "\n      "), strings.Join(ref, "\n      "))
		return
	}
	for k := range ref {
		if ours[k] != ref[k] {
			at := 0
			for at < len(ours[k]) && at < len(ref[k]) && ours[k][at] == ref[k][at] {
				at++
			}
			t.Errorf("%s, message %d, from byte %d:\n ours %s\n  ref %s", what, k+1, at, clipDiff(ours[k], at), clipDiff(ref[k], at))
		}
	}
}

// clipDiff keeps a long message readable in a failure: its start, and
// where it differs.
func clipDiff(s string, at int) string {
	if len(s) <= 600 {
		return s
	}
	from, to := max(at-200, 0), min(at+400, len(s))
	return s[:min(200, from)] + " … " + s[from:to] + " …"
}

func loadRef(t *testing.T, name string) promptRun {
	b, err := os.ReadFile(filepath.Join(promptRefDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Requests []refRequest `json:"requests"`
		Titles   []refRequest `json:"titles"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return promptRun{requests: f.Requests, titles: f.Titles}
}

// sections cuts a system prompt at OpenCode's section headers: what is
// ours to word (the base prompt, the prose of the skills block, the
// built-in customize-opencode skill OpenCode ships) is left out; what
// carries facts is compared exactly.
func sections(sys string) (env string, instructions []string, skills []string, last string) {
	if i := strings.Index(sys, "You are powered by the model named"); i >= 0 {
		sys = sys[i:]
	}
	if j := strings.Index(sys, "</env>"); j >= 0 {
		env, sys = sys[:j+len("</env>")], sys[j+len("</env>"):]
	}
	for _, chunk := range strings.Split(sys, "Instructions from: ")[1:] {
		end := strings.Index(chunk, "\nSkills ")
		if end < 0 {
			end = len(chunk)
		}
		instructions = append(instructions, strings.TrimRight(chunk[:end], "\n"))
	}
	for _, m := range regexp.MustCompile(`(?s)<skill>\s*<name>([^<]*)</name>.*?<location>(.*?)</location>`).FindAllStringSubmatch(sys, -1) {
		if m[1] != "customize-opencode" {
			skills = append(skills, m[1]+" @ "+m[2])
		}
	}
	if k := strings.LastIndex(sys, "</available_skills>"); k >= 0 {
		last = strings.TrimSpace(sys[k+len("</available_skills>"):])
	}
	return
}

// TestPromptMatchesReference: for each recorded case, what our server
// sends to the model carries what the real opencode serve 1.18.33 sent
// (testdata/reference/prompt): the same environment block, the same
// instruction files in the same order, the same skills, the prompt's own
// system text last, the same tools with the same
// parameter names and required ones, the plan reminder on
// the last user message, the same max_tokens and tool_choice, and a title
// request of the same shape with the first message.
func TestPromptMatchesReference(t *testing.T) {
	for _, pc := range promptCases {
		t.Run(pc.Name, func(t *testing.T) {
			ref, ours := loadRef(t, pc.Name), runOurs(t, pc)
			if len(ours.requests) != len(ref.requests) || len(ours.titles) != len(ref.titles) {
				t.Fatalf("%d requests and %d titles, the reference %d and %d", len(ours.requests), len(ours.titles), len(ref.requests), len(ref.titles))
			}
			for i := range ref.requests {
				r, o := ref.requests[i].Body, ours.requests[i].Body
				if o.MaxTokens != r.MaxTokens || o.ToolChoice != r.ToolChoice {
					t.Errorf("max_tokens %d tool_choice %q, reference %d %q", o.MaxTokens, o.ToolChoice, r.MaxTokens, r.ToolChoice)
				}
				rs, os := text(r.Messages[0].Content), text(o.Messages[0].Content)
				if r.Messages[0].Role != "system" || o.Messages[0].Role != "system" {
					t.Fatalf("first messages %s/%s", r.Messages[0].Role, o.Messages[0].Role)
				}
				renv, rins, rsk, rlast := sections(rs)
				oenv, oins, osk, olast := sections(os)
				if oenv != renv {
					t.Errorf("environment block\n ours %q\n  ref %q", oenv, renv)
				}
				if !slices.Equal(oins, rins) {
					t.Errorf("instructions\n ours %q\n  ref %q", oins, rins)
				}
				if !slices.Equal(osk, rsk) {
					t.Errorf("skills ours %q, ref %q", osk, rsk)
				}
				if olast != rlast {
					t.Errorf("after the skills: ours %q, ref %q", olast, rlast)
				}
				otools := ours.requests[i].tools()
				if !slices.Equal(otools, ref.requests[i].tools()) {
					t.Errorf("tools\n ours %v\n  ref %v", otools, ref.requests[i].tools())
				}
				if o, r := ours.requests[i].subagents(), ref.requests[i].subagents(); !slices.Equal(o, r) {
					t.Errorf("task tool's subagents: ours %v, reference %v", o, r)
				}
				op := ours.requests[i].params()
				for name, want := range ref.requests[i].params() {
					if op[name] != want {
						t.Errorf("tool %s parameters: ours %q, reference %q", name, op[name], want)
					}
				}
				diffConversation(t, fmt.Sprintf("model call %d", i+1), conversation(ours.requests[i]), conversation(ref.requests[i]))
				rl, ol := text(r.Messages[len(r.Messages)-1].Content), text(o.Messages[len(o.Messages)-1].Content)
				if strings.Contains(rl, "<system-reminder>") != strings.Contains(ol, "<system-reminder>") {
					t.Errorf("last user message: reminder in the reference %v, in ours %v", strings.Contains(rl, "<system-reminder>"), strings.Contains(ol, "<system-reminder>"))
				}
			}
			if pc.Name == "compaction" {
				checkCompaction(t, ref, ours)
			}
			for i := range ref.titles {
				r, o := ref.titles[i].Body, ours.titles[i].Body
				if len(o.Messages) != len(r.Messages) || len(o.Tools) != 0 || o.MaxTokens != r.MaxTokens {
					t.Fatalf("title request: %d messages %d tools max_tokens %d, reference %d, 0, %d", len(o.Messages), len(o.Tools), o.MaxTokens, len(r.Messages), r.MaxTokens)
				}
				for k := range r.Messages {
					if o.Messages[k].Role != r.Messages[k].Role {
						t.Errorf("title message %d: %s, reference %s", k, o.Messages[k].Role, r.Messages[k].Role)
					}
				}
				diffConversation(t, "title request", conversation(ours.titles[i]), conversation(ref.titles[i]))
			}
		})
	}
}

// conversationOf is the <conversation> text of a compaction request.
func conversationOf(r refRequest) string {
	msgs := r.Body.Messages
	c := text(msgs[len(msgs)-1].Content)
	i, j := strings.Index(c, "<conversation>\n"), strings.Index(c, "\n</conversation>")
	if i < 0 || j < i {
		return ""
	}
	return c[i+len("<conversation>\n") : j]
}

// checkCompaction: the compaction call sends the conversation as text in
// one user message (no tools), as the reference does; the call after it
// starts over from "What did we do so far?" and the summary.
func checkCompaction(t *testing.T, ref, ours promptRun) {
	t.Helper()
	rc, oc := ref.requests[1], ours.requests[1]
	if len(oc.Body.Messages) != len(rc.Body.Messages) || len(oc.Body.Tools) != 0 {
		t.Errorf("compaction call: %d messages, %d tools; reference %d messages, none", len(oc.Body.Messages), len(oc.Body.Tools), len(rc.Body.Messages))
	}
	if conversationOf(oc) == "" || conversationOf(oc) != conversationOf(rc) {
		t.Errorf("compaction conversation\n ours %q\n  ref %q", conversationOf(oc), conversationOf(rc))
	}
	roles := func(r refRequest) []string {
		var out []string
		for _, m := range r.Body.Messages[1:] {
			out = append(out, m.Role+":"+strings.SplitN(text(m.Content), "\n", 2)[0])
		}
		return out
	}
	ra, oa := roles(ref.requests[2]), roles(ours.requests[2])
	// The summary is the stub's echo of each server's own instructions: its
	// first line is the same.
	if !slices.Equal(oa, ra) {
		t.Errorf("the call after the compaction\n ours %q\n  ref %q", oa, ra)
	}
}
