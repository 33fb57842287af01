package acp_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/acpstub"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestExternalAgentDoors: one session whose agent is external (this test
// binary as the acpstub agent) driven through ACP v2 and AG-UI. v2's
// "mode" option lists the agent; set to it, a session/prompt and a queue
// session/inject each reach the agent (its prompt carries our user message
// ID) and its answer streams as agent_message_chunk under our assistant
// msg_ IDs. Switched back to build, an AG-UI run on the same session picks
// the agent with forwardedProps.agent: the agent gets the run's message
// and its answer is the run's text, under our msg_ ID; an unknown agent
// is a 400 before anything is admitted.
func TestExternalAgentDoors(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.File{Agent: map[string]config.AgentConfig{"stub": {Description: "The ACP stub",
		ACP: &config.ACPConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: map[string]string{acpstub.Env: "1"}}}}}
	srv := testserver.Start(t, testserver.Options{Config: cfg, Directory: dir})
	c := startV2(t, srv)

	var ns struct {
		SessionID     string `json:"sessionId"`
		ConfigOptions []struct {
			ConfigID string `json:"configId"`
			Options  []struct {
				Value string `json:"value"`
			} `json:"options"`
		} `json:"configOptions"`
	}
	c.call("session/new", map[string]any{"cwd": dir, "mcpServers": []any{}}, &ns)
	sid := ns.SessionID
	var modes []string
	for _, o := range ns.ConfigOptions {
		if o.ConfigID == "mode" {
			for _, v := range o.Options {
				modes = append(modes, v.Value)
			}
		}
	}
	if !slices.Contains(modes, "stub") {
		t.Fatalf("the mode option's values %v lack the external agent", modes)
	}
	c.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "stub"}, nil)

	p := c.promptV2(sid, "over acp")
	q := c.injected(sid, "queue", "queued over acp")
	es := c.settled(srv, sid, func() int { return 2 })
	for _, u := range []struct{ id, text string }{{p, "over acp"}, {q, "queued over acp"}} {
		i := index(es, isUser(u.id))
		if i < 0 {
			t.Fatalf("no user_message %s: %+v", u.id, es)
		}
		var said string
		for _, e := range es[i+1:] {
			if e.Kind == "state_update" && e.State == "idle" {
				break
			}
			if e.Kind == "agent_message_chunk" {
				if !strings.HasPrefix(e.MessageID, "msg_") || e.MessageID == p || e.MessageID == q {
					t.Errorf("agent_message_chunk under %q, want our assistant msg_ ID", e.MessageID)
				}
				said += e.Text
			}
		}
		if said != "echo: "+u.text {
			t.Errorf("the turn of %s said %q, want the external agent's %q", u.id, said, "echo: "+u.text)
		}
	}
	ps := stubPrompts(t, dir)
	if len(ps) != 2 || ps[0].MessageID != p || ps[1].MessageID != q {
		t.Fatalf("the agent got %+v, want the prompt %s then the inject %s", ps, p, q)
	}

	c.call("session/set_config_option", map[string]any{"sessionId": sid, "configId": "mode", "value": "build"}, nil)
	run := func(agent string) (int, []map[string]any) {
		body := map[string]any{"threadId": sid, "runId": "run-" + agent, "state": map[string]any{},
			"messages": []any{map[string]any{"id": "agui-" + agent, "role": "user", "content": "over agui"}},
			"tools":    []any{}, "context": []any{}, "forwardedProps": map[string]any{"agent": agent}}
		req, _ := http.NewRequest("POST", srv.URL+"/agui/"+sid, strings.NewReader(string(mustJSON(body))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST /agui: %v", err)
		}
		defer res.Body.Close()
		var evs []map[string]any
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e map[string]any
				if json.Unmarshal([]byte(d), &e) == nil {
					evs = append(evs, e)
				}
			}
		}
		return res.StatusCode, evs
	}
	if status, _ := run("nope"); status != http.StatusBadRequest {
		t.Errorf("forwardedProps.agent nope: status %d, want 400", status)
	}
	status, evs := run("stub")
	var said, msgID, last string
	for _, e := range evs {
		last, _ = e["type"].(string)
		switch last {
		case "TEXT_MESSAGE_START":
			msgID, _ = e["messageId"].(string)
		case "TEXT_MESSAGE_CONTENT":
			d, _ := e["delta"].(string)
			said += d
		}
	}
	if status != http.StatusOK || last != "RUN_FINISHED" || said != "echo: over agui" || !strings.HasPrefix(msgID, "msg_") {
		t.Errorf("AG-UI run: status %d, last event %q, text %q under %q; want the external agent's answer under our msg_ ID: %v",
			status, last, said, msgID, evs)
	}
	ps = stubPrompts(t, dir)
	if len(ps) != 3 || !slices.Equal(ps[2].Texts, []string{"over agui"}) || !strings.HasPrefix(ps[2].MessageID, "msg_") {
		t.Errorf("the agent got %+v, want the AG-UI run's message third (the unknown agent's run admitted nothing)", ps)
	}
}

// stubPrompts are the prompts the stub agent started in dir got.
func stubPrompts(t *testing.T, dir string) []acpstub.Prompt {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(dir, acpstub.PromptsFile))
	var out []acpstub.Prompt
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p acpstub.Prompt
		if l != "" && json.Unmarshal([]byte(l), &p) == nil {
			out = append(out, p)
		}
	}
	return out
}
