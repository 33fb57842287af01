package routes_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestCommandRoutes: GET /command lists built-ins, config and project
// commands; POST /session/{id}/command runs the expanded template as a
// prompt; sharing answers as a server with sharing disabled; /api/health;
// the global config is read and patched in $XDG_CONFIG_HOME/opencode.
func TestCommandRoutes(t *testing.T) {
	cfgHome := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgHome)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".opencode", "command"), 0o755)
	os.WriteFile(filepath.Join(dir, ".opencode", "command", "hello.md"), []byte("---\ndescription: Say hello\n---\nSay hello to $ARGUMENTS\n"), 0o644)
	c := biStart(t, testserver.Options{Directory: dir})
	ses := c.newSession()

	r := c.must("GET", "/command", "", nil)
	var cmds []struct{ Name, Description, Template string }
	json.Unmarshal(r.body, &cmds)
	var names []string
	for _, cmd := range cmds {
		names = append(names, cmd.Name)
	}
	if strings.Join(names, ",") != "init,review,hello" {
		t.Errorf("GET /command names = %v", names)
	}

	r = c.must("POST", "/session/"+ses+"/command", "application/json", []byte(`{"command":"hello","arguments":"Bob"}`))
	var ans struct {
		Info  struct{ Role, ParentID string }
		Parts []struct{ Type, Text string }
	}
	if json.Unmarshal(r.body, &ans); r.status != 200 || ans.Info.Role != "assistant" {
		t.Fatalf("command = %d %s", r.status, r.body)
	}
	r = c.must("GET", "/session/"+ses+"/message/"+ans.Info.ParentID, "", nil)
	if !strings.Contains(string(r.body), `"text":"Say hello to Bob"`) {
		t.Errorf("the user message is not the expanded template: %s", r.body)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		has                string
	}{
		{"POST", "/session/" + ses + "/command", `{"command":"nope","arguments":""}`, 400, "Command not found"},
		{"POST", "/session/" + ses + "/command", `{"command":"hello"}`, 400, "arguments"},
		{"POST", "/session/" + ses + "/command", `{"arguments":"x"}`, 400, "command"},
		{"POST", "/session/" + ses + "/share", ``, 400, "Sharing is disabled in configuration"},
		{"DELETE", "/session/" + ses + "/share", ``, 200, `"id":"` + ses + `"`},
		{"POST", "/session/" + nosuch + "/share", ``, 404, nosuch},
		{"GET", "/api/health", ``, 200, `{"healthy":true}`},
		{"GET", "/global/config", ``, 200, `{}`},
		{"PATCH", "/global/config", `{"username":"x","provider":{"a":{"name":"A"}}}`, 200, `"username":"x"`},
		{"PATCH", "/global/config", `{"provider":{"b":{"name":"B"}}}`, 200, `"a":{"name":"A"}`},
		{"GET", "/global/config", ``, 200, `"b":{"name":"B"}`},
		{"PATCH", "/global/config", `[1]`, 400, ""},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		r, err := c.send(tc.method, tc.path, "application/json", body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != tc.status || !strings.Contains(string(r.body), tc.has) {
			t.Errorf("%s %s %s = %d %s; want %d with %q", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.has)
		}
	}
	if b, err := os.ReadFile(filepath.Join(cfgHome, "opencode", "opencode.json")); err != nil || !strings.Contains(string(b), `"username": "x"`) {
		t.Errorf("global opencode.json = %s, %v", b, err)
	}
}

// TestShellRoute: `!cmd` runs in the session directory and is stored as
// OpenCode stores it: a synthetic user message and an assistant message
// with one completed bash part, which the route answers.
func TestShellRoute(t *testing.T) {
	dir := t.TempDir()
	c := biStart(t, testserver.Options{Directory: dir})
	ses := c.newSession()
	r := c.must("POST", "/session/"+ses+"/shell", "application/json", []byte(`{"agent":"build","command":"echo hi; pwd"}`))
	var ans struct {
		Info struct {
			ID, Role, ParentID string
			Time               struct{ Completed int64 }
		}
		Parts []struct {
			Type, Tool string
			State      struct {
				Status, Output string
				Input          map[string]string
			}
		}
	}
	if err := json.Unmarshal(r.body, &ans); err != nil || r.status != 200 {
		t.Fatalf("shell = %d %s", r.status, r.body)
	}
	if ans.Info.Role != "assistant" || ans.Info.Time.Completed == 0 || len(ans.Parts) != 1 {
		t.Fatalf("shell answer = %s", r.body)
	}
	p := ans.Parts[0]
	if p.Type != "tool" || p.Tool != "bash" || p.State.Status != "completed" || p.State.Output != "hi\n"+dir+"\n" ||
		p.State.Input["command"] != "echo hi; pwd" {
		t.Errorf("shell part = %+v", p)
	}
	r = c.must("GET", "/session/"+ses+"/message/"+ans.Info.ParentID, "", nil)
	if !strings.Contains(string(r.body), `"text":"The following tool was executed by the user","synthetic":true`) {
		t.Errorf("shell user message = %s", r.body)
	}
	for _, tc := range []struct {
		body   string
		status int
	}{{`{"command":"ls"}`, 400}, {`{"agent":"build"}`, 400}, {`{"agent":"nope","command":"ls"}`, 400}} {
		if r := c.must("POST", "/session/"+ses+"/shell", "application/json", []byte(tc.body)); r.status != tc.status {
			t.Errorf("shell %s = %d %s", tc.body, r.status, r.body)
		}
	}
}

// TestHeadAndAllow: HEAD answers wherever GET does, without a body, and a
// 405's Allow lists the methods that really work there, HEAD included.
func TestHeadAndAllow(t *testing.T) {
	c := biStart(t, testserver.Options{})
	ses := c.newSession()
	for _, p := range []string{"/session", "/global/health", "/session/" + ses, "/api/session/" + ses + "/message", "/find/file?query=x"} {
		r, err := c.send("HEAD", p, "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 200 || len(r.body) != 0 {
			t.Errorf("HEAD %s = %d %q", p, r.status, r.body)
		}
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"POST", "/global/health", "GET, HEAD"},
		{"PUT", "/session/" + ses, "GET, HEAD, PATCH, DELETE"},
		{"GET", "/session/" + ses + "/abort", "POST"},
	} {
		r, _ := c.send(tc.method, tc.path, "application/json", []byte("{}"), nil)
		if r.status != 405 || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s = %d Allow %q, want 405 Allow %q", tc.method, tc.path, r.status, r.header.Get("Allow"), tc.allow)
		}
	}
}

// TestFork: a fork copies the messages before the given one (all without
// one) under new IDs, parents remapped, titled "(fork #N)".
func TestFork(t *testing.T) {
	c := biStart(t, testserver.Options{})
	ses := c.newSession()
	var first, second struct{ Info struct{ ID, ParentID string } }
	json.Unmarshal(c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"one"}]}`)).body, &first)
	json.Unmarshal(c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"two"}]}`)).body, &second)
	type msg struct {
		Info  struct{ ID, SessionID, ParentID, Role string }
		Parts []struct{ ID, MessageID, Text string }
	}
	fork := func(body string) (string, string, []msg) {
		r := c.must("POST", "/session/"+ses+"/fork", "application/json", []byte(body))
		var s struct{ ID, Title string }
		if json.Unmarshal(r.body, &s); r.status != 200 || s.ID == ses {
			t.Fatalf("fork %s = %d %s", body, r.status, r.body)
		}
		var ms []msg
		json.Unmarshal(c.must("GET", "/session/"+s.ID+"/message", "", nil).body, &ms)
		return s.ID, s.Title, ms
	}
	all, title, ms := fork(`{}`)
	if len(ms) != 4 || !strings.HasSuffix(title, " (fork #1)") {
		t.Fatalf("fork of all: %d messages, title %q", len(ms), title)
	}
	for i, m := range ms {
		if m.Info.SessionID != all || m.Info.ID == first.Info.ID || m.Info.ID == second.Info.ParentID {
			t.Errorf("copied message %d = %+v", i, m.Info)
		}
		if m.Info.Role == "assistant" && m.Info.ParentID != ms[i-1].Info.ID {
			t.Errorf("assistant %s parent %s, want %s", m.Info.ID, m.Info.ParentID, ms[i-1].Info.ID)
		}
		for _, p := range m.Parts {
			if p.MessageID != m.Info.ID {
				t.Errorf("part %s of %s says message %s", p.ID, m.Info.ID, p.MessageID)
			}
		}
	}
	_, _, ms = fork(`{"messageID":"` + second.Info.ParentID + `"}`)
	if len(ms) != 2 || ms[0].Parts[0].Text != "one" {
		t.Errorf("fork before the second prompt: %d messages", len(ms))
	}
	r := c.must("POST", "/session/"+all+"/fork", "application/json", nil)
	if !strings.Contains(string(r.body), `(fork #2)"`) {
		t.Errorf("fork of a fork = %s", r.body)
	}
	if r := c.must("POST", "/session/"+nosuch+"/fork", "application/json", nil); r.status != 404 {
		t.Errorf("fork of an unknown session = %d", r.status)
	}
}

// TestV2SwitchAndContext: agent and model switches answer 204, change the
// session's defaults and appear in the v2 context with the messages.
func TestV2SwitchAndContext(t *testing.T) {
	c := biStart(t, testserver.Options{})
	ses := c.newSession()
	c.must("POST", "/session/"+ses+"/message", "application/json", []byte(`{"parts":[{"type":"text","text":"one"}]}`))
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/agent", `{"agent":"plan"}`, 204},
		{"/agent", `{"agent":"nope"}`, 400},
		{"/agent", `{}`, 400},
		{"/model", `{"model":{"id":"scripted-model","providerID":"scripted"}}`, 204},
		{"/model", `{"providerID":"scripted","modelID":"scripted-model"}`, 400},
		{"/model", `{"model":{"id":"x","providerID":"y"}}`, 400},
	} {
		if r := c.must("POST", "/api/session/"+ses+tc.path, "application/json", []byte(tc.body)); r.status != tc.status {
			t.Errorf("POST %s %s = %d %s", tc.path, tc.body, r.status, r.body)
		}
	}
	r := c.must("GET", "/session/"+ses, "", nil)
	if !strings.Contains(string(r.body), `"agent":"plan"`) {
		t.Errorf("session after the switch = %s", r.body)
	}
	var ctx struct {
		Data []struct{ ID, Type, Agent string }
	}
	json.Unmarshal(c.must("GET", "/api/session/"+ses+"/context", "", nil).body, &ctx)
	var types []string
	for _, e := range ctx.Data {
		types = append(types, e.Type)
	}
	// The scripted model is the session's already: that switch is a no-op.
	if strings.Join(types, ",") != "user,assistant,agent-switched" {
		t.Errorf("context types = %v", types)
	}
}
