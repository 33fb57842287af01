package lifecycle_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestTaskTool: a task call runs the subagent in a child session (parentID,
// OpenCode's title, the subagent's agent), whose events stream like any
// session's; the tool part names the child; the subagent's answer comes
// back to the parent's model as OpenCode's <task> result; the child may
// neither keep todos nor start subagents.
func TestTaskTool(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
	events := eventLog(t, srv.URL)
	sid := newSession(t, srv.URL)
	prompt := `call:task {"description":"Find files","prompt":"list the files","subagent_type":"explore"} then: done`
	body, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": prompt}}})
	code, b := post(t, srv.URL+"/session/"+sid+"/message", string(body))
	if code != 200 {
		t.Fatalf("prompt: %d %s", code, b)
	}
	frames := collect(t, events, sid)

	// The child session.
	r, err := http.Get(srv.URL + "/session")
	if err != nil {
		t.Fatal(err)
	}
	var sessions []struct{ ID, ParentID, Title string }
	json.NewDecoder(r.Body).Decode(&sessions)
	r.Body.Close()
	var child string
	for _, s := range sessions {
		if s.ParentID == sid {
			child = s.ID
			if s.Title != "Find files (@explore subagent)" {
				t.Errorf("child title %q", s.Title)
			}
		}
	}
	if child == "" {
		t.Fatalf("no child session of %s in %+v", sid, sessions)
	}
	sawChild := false
	for _, f := range frames {
		if f.Type == "message.updated" && strings.Contains(string(f.Properties), `"sessionID":"`+child+`"`) {
			sawChild = true
		}
	}
	if !sawChild {
		t.Error("the child's messages were not streamed on /event")
	}
	var childMsgs []struct {
		Info struct{ Role, Agent string }
	}
	r, _ = http.Get(srv.URL + "/session/" + child + "/message")
	json.NewDecoder(r.Body).Decode(&childMsgs)
	r.Body.Close()
	if len(childMsgs) != 2 || childMsgs[1].Info.Agent != "explore" {
		t.Errorf("child messages %+v", childMsgs)
	}

	// The model calls: parent, child (explore: only looking tools), parent again.
	reqs := decodeRequests(t, stub.Requests())
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	childTools := strings.Join(reqs[1].tools(), ",")
	for _, no := range []string{"task", "todowrite", "write", "edit", "question"} {
		if strings.Contains(","+childTools+",", ","+no+",") {
			t.Errorf("the explore subagent was offered %s: %s", no, childTools)
		}
	}
	if !strings.Contains(reqs[1].Messages[0].Content, "file search specialist") {
		t.Error("the explore subagent did not get its own prompt")
	}
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	want := `<task id="` + child + `" state="completed">` + "\n<task_result>\nYou said: list the files\n</task_result>\n</task>"
	if last.Role != "tool" || last.Content != want {
		t.Errorf("task result %q\nwant %q", last.Content, want)
	}

	// The parent's tool part names the child.
	var msgs []struct {
		Parts []struct {
			Type, Tool string
			State      struct {
				Status   string
				Title    string
				Metadata map[string]any
			}
		}
	}
	r, _ = http.Get(srv.URL + "/session/" + sid + "/message")
	json.NewDecoder(r.Body).Decode(&msgs)
	r.Body.Close()
	found := false
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Tool == "task" {
				found = true
				if p.State.Status != "completed" || p.State.Title != "Find files" || p.State.Metadata["sessionId"] != child {
					t.Errorf("task part %+v", p.State)
				}
			}
		}
	}
	if !found {
		t.Error("no task tool part")
	}
}
