package routes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// replayStubConfig points the server's default model at a stub model.
func replayStubConfig(baseURL string) *config.File {
	return &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: baseURL, APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}}
}

func (c *biClient) json(method, path, body string, want int, v any) {
	c.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	r := c.must(method, path, "application/json", b)
	if r.status != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, biClip(r.body), want)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, biClip(r.body))
		}
	}
}

// replayBodies groups a /sync/history answer into one replay body per
// session, as a control plane posts them.
func replayBodies(t *testing.T, history []map[string]any) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, e := range history {
		id, _ := e["aggregate_id"].(string)
		out[id] = append(out[id], map[string]any{"id": e["id"], "aggregateID": id, "seq": e["seq"], "type": e["type"], "data": e["data"]})
	}
	return out
}

func replayBody(t *testing.T, events []map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"directory": "/elsewhere", "events": events})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// views are what a client reads of a session: v1, its v1 messages, its v2
// messages, and the server's sync history of it.
type replayViews struct {
	session, messages, v2 any
	history               []map[string]any
}

func readViews(c *biClient, id string) replayViews {
	c.t.Helper()
	var v replayViews
	c.json("GET", "/session/"+id, "", http.StatusOK, &v.session)
	c.json("GET", "/session/"+id+"/message", "", http.StatusOK, &v.messages)
	c.json("GET", "/api/session/"+id+"/message", "", http.StatusOK, &v.v2)
	var all []map[string]any
	c.json("POST", "/sync/history", "{}", http.StatusOK, &all)
	for _, e := range all {
		if e["aggregate_id"] == id {
			v.history = append(v.history, e)
		}
	}
	return v
}

// TestSyncReplayRoundTrip: sessions of one of our servers (a v1 one with
// reasoning, a tool call and a second prompt; a v2 one), exported with
// POST /sync/history and replayed into another: the replayed sessions read
// the same there, over v1 and v2 with the same IDs, and the other server's
// history of them is the first one's. The same replay again changes
// nothing; the history in two pieces (the cut inside an assistant
// message) gives the same as in one.
func TestSyncReplayRoundTrip(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One instant for the source's every time: the replayed messages carry
	// the times of the events, which the source's runner reads from its
	// clock separately from the messages' own.
	at := time.UnixMilli(1796150000000)
	src := biStart(t, testserver.Options{Config: replayStubConfig(stub.URL()), Directory: dir, Clock: func() time.Time { return at }})

	var s1 struct{ ID string }
	src.json("POST", "/session", "{}", http.StatusOK, &s1)
	prompt, _ := json.Marshal("think:pondering\ncall:read {\"filePath\":\"" + filepath.Join(dir, "x.txt") + "\"}\nthen: finished")
	src.json("POST", "/session/"+s1.ID+"/message", `{"parts":[{"type":"text","text":`+string(prompt)+`}]}`, http.StatusOK, nil)
	src.json("POST", "/session/"+s1.ID+"/message", `{"parts":[{"type":"text","text":"hello there"}]}`, http.StatusOK, nil)
	var s2 struct{ Data struct{ ID string } }
	src.json("POST", "/api/session", "{}", http.StatusOK, &s2)
	src.json("POST", "/api/session/"+s2.Data.ID+"/prompt", `{"prompt":{"text":"hi v2"}}`, http.StatusOK, nil)
	src.json("POST", "/api/session/"+s2.Data.ID+"/wait", "{}", http.StatusNoContent, nil)

	var history []map[string]any
	src.json("POST", "/sync/history", "{}", http.StatusOK, &history)
	bodies := replayBodies(t, history)
	ids := []string{s1.ID, s2.Data.ID}

	dst := biStart(t, testserver.Options{})
	for _, id := range ids {
		want := readViews(src, id)
		if n := len(want.history); n < 5 {
			t.Fatalf("%s: history of %d events: %v", id, n, want.history)
		}
		for round := range 2 { // the second time: nothing new
			var ans map[string]string
			dst.json("POST", "/sync/replay", replayBody(t, bodies[id]), http.StatusOK, &ans)
			if ans["sessionID"] != id {
				t.Fatalf("replay answered %v, want sessionID %s", ans, id)
			}
			compareViews(t, id, round, readViews(dst, id), want)
		}
	}
	// The tool turn's tool part is there with its output.
	var msgs []struct {
		Parts []struct {
			Type, Tool string
			State      struct{ Status, Output string }
		}
	}
	dst.json("GET", "/session/"+s1.ID+"/message", "", http.StatusOK, &msgs)
	tools := 0
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.Tool == "read" && p.State.Status == "completed" && strings.Contains(p.State.Output, "hello") {
				tools++
			}
		}
	}
	if tools != 1 {
		t.Errorf("replayed messages have %d completed read calls with the file's text, want 1: %+v", tools, msgs)
	}

	// In two pieces, overlapping, cut inside the tool turn's assistant
	// message (after its tool call, before its step ends).
	events := bodies[s1.ID]
	cut := 0
	for i, e := range events {
		if strings.HasPrefix(e["type"].(string), "session.next.tool.called") {
			cut = i + 1
			break
		}
	}
	if cut == 0 {
		t.Fatalf("no tool call in %v", events)
	}
	third := biStart(t, testserver.Options{})
	third.json("POST", "/sync/replay", replayBody(t, events[:cut]), http.StatusOK, nil)
	third.json("POST", "/sync/replay", replayBody(t, events[cut-2:]), http.StatusOK, nil)
	compareViews(t, s1.ID, 0, readViews(third, s1.ID), readViews(src, s1.ID))
}

// compareViews wants got to read as want: all of it the same, but what
// the v2 events do not carry: a user message's system prompt, tools and
// diff summary, a tool call's title, and the IDs of the parts they do not
// name (step starts and finishes, tool calls, a prompt's text), whose
// number, order, types and content are the same.
func compareViews(t *testing.T, id string, round int, got, want replayViews) {
	t.Helper()
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"GET /session/{id}", got.session, want.session},
		{"GET /api/session/{id}/message", got.v2, want.v2},
		{"POST /sync/history", got.history, want.history},
		{"GET /session/{id}/message", v1Comparable(got.messages), v1Comparable(want.messages)},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s (replay %d): %s differs\n replayed: %s\n source:   %s", id, round+1, c.what, mustJSON(c.got), mustJSON(c.want))
		}
	}
}

func v1Comparable(v any) any {
	b, _ := json.Marshal(v)
	var msgs []map[string]any
	_ = json.Unmarshal(b, &msgs)
	for _, m := range msgs {
		info, _ := m["info"].(map[string]any)
		delete(info, "system")
		delete(info, "tools")
		delete(info, "summary")
		parts, _ := m["parts"].([]any)
		for _, p := range parts {
			part, _ := p.(map[string]any)
			if st, ok := part["state"].(map[string]any); ok {
				delete(st, "title")
			}
			if part["type"] != "text" && part["type"] != "reasoning" || info["role"] == "user" {
				part["id"] = "<derived>"
			}
		}
	}
	return msgs
}

// TestSyncReplayV2Log: a session replayed from OpenCode's v1 history (its
// log holds only v1 snapshots) and then prompted here: the v2 event stream
// and history show the log's v2 events alone, from the prompt's on, with
// their seqs after the replayed ones.
func TestSyncReplayV2Log(t *testing.T) {
	rec := loadReplayRecording(t)
	var source []map[string]any
	for _, e := range rec.Source {
		var m map[string]any
		_ = json.Unmarshal(e, &m)
		source = append(source, m)
	}
	id := rec.Sessions.V1
	events := replayBodies(t, source)[id]
	c := biStart(t, testserver.Options{})
	c.json("POST", "/sync/replay", replayBody(t, events), http.StatusOK, nil)
	c.json("POST", "/session/"+id+"/message", `{"parts":[{"type":"text","text":"more"}]}`, http.StatusOK, nil)
	next := len(events) // the replayed seqs are 0..len-1

	req, _ := http.NewRequest("GET", c.ts.URL+"/api/session/"+id+"/event", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.c.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var first, data string
	for sc.Scan() && data == "" {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok && first == "" {
			first = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = v
		}
	}
	var frame struct{ Type string }
	_ = json.Unmarshal([]byte(data), &frame)
	if first != strconv.Itoa(next) || !strings.HasPrefix(frame.Type, "session.next.") {
		t.Errorf("the event stream starts with seq %s %s, want %d (the prompt's first v2 event)", first, biClip([]byte(data)), next)
	}

	var hist struct {
		Data []struct {
			Type    string
			Durable struct{ Seq int }
		}
	}
	c.json("GET", "/api/session/"+id+"/history", "", http.StatusOK, &hist)
	if len(hist.Data) == 0 || hist.Data[0].Durable.Seq != next {
		t.Fatalf("v2 history %+v, want the prompt's events from seq %d", hist.Data, next)
	}
	for _, e := range hist.Data {
		if !strings.HasPrefix(e.Type, "session.next.") && !strings.HasPrefix(e.Type, "session.inbox.") {
			t.Errorf("v2 history has %s", e.Type)
		}
	}
}
