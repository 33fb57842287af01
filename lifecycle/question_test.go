package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestQuestionTool: the question tool asks through question.asked and GET
// /question; the reply route answers it and the model gets OpenCode's
// answer text; the reject route dismisses it, the call fails and the turn
// ends with its step.
func TestQuestionTool(t *testing.T) {
	for _, reject := range []bool{false, true} {
		name := map[bool]string{false: "reply", true: "reject"}[reject]
		t.Run(name, func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.Directives)
			srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
			events := eventLog(t, srv.URL)
			sid := newSession(t, srv.URL)
			q := `{"questions":[{"question":"Which color?","header":"Color","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cool"}]}]}`
			prompt := `call:question ` + q + ` then: chosen`
			body, _ := json.Marshal(map[string]any{"parts": []any{map[string]any{"type": "text", "text": prompt}}})
			if code, b := post(t, srv.URL+"/session/"+sid+"/prompt_async", string(body)); code != 204 {
				t.Fatalf("prompt: %d %s", code, b)
			}
			var asked struct {
				ID        string `json:"id"`
				SessionID string `json:"sessionID"`
				Questions []struct{ Question string }
				Tool      struct{ MessageID, CallID string }
			}
			timeout := time.After(10 * time.Second)
			for asked.ID == "" {
				select {
				case f := <-events:
					if f.Type == "question.asked" {
						json.Unmarshal(f.Properties, &asked)
					}
				case <-timeout:
					t.Fatal("no question.asked")
				}
			}
			if asked.SessionID != sid || len(asked.Questions) != 1 || asked.Questions[0].Question != "Which color?" ||
				!strings.HasPrefix(asked.ID, "que_") || asked.Tool.CallID == "" {
				t.Errorf("question.asked %+v", asked)
			}
			r, err := http.Get(srv.URL + "/question")
			if err != nil {
				t.Fatal(err)
			}
			var pending []struct{ ID string }
			json.NewDecoder(r.Body).Decode(&pending)
			r.Body.Close()
			if len(pending) != 1 || pending[0].ID != asked.ID {
				t.Errorf("GET /question = %+v", pending)
			}
			path, reply := "/question/"+asked.ID+"/reply", `{"answers":[["Blue"]]}`
			if reject {
				path, reply = "/question/"+asked.ID+"/reject", ``
			}
			if code, b := post(t, srv.URL+path, reply); code != 200 || string(b) != "true" {
				t.Fatalf("%s: %d %s", path, code, b)
			}
			if code, _ := post(t, srv.URL+"/question/"+asked.ID+"/reply", `{"answers":[]}`); code != 404 {
				t.Errorf("a second reply: %d, want 404", code)
			}
			want := `User has answered your questions: "Which color?"="Blue". You can now continue with the user's answers in mind.`
			wantEvent := "question.replied"
			if reject {
				want, wantEvent = "The user dismissed this question", "question.rejected"
			}
			sawEvent := false
			for _, f := range collect(t, events, sid) {
				sawEvent = sawEvent || f.Type == wantEvent
			}
			if !sawEvent {
				t.Errorf("no %s", wantEvent)
			}
			reqs := decodeRequests(t, stub.Requests())
			if reject {
				// As OpenCode: a dismissed question ends the turn with its
				// step; the model is not called again.
				if len(reqs) != 1 {
					t.Fatalf("%d model calls, want 1", len(reqs))
				}
				r, err := http.Get(srv.URL + "/session/" + sid + "/message")
				if err != nil {
					t.Fatal(err)
				}
				defer r.Body.Close()
				var msgs []struct {
					Parts []struct {
						Type  string
						State struct{ Status, Error string }
					}
				}
				json.NewDecoder(r.Body).Decode(&msgs)
				if n := len(msgs); n != 2 || !strings.Contains(fmt.Sprint(msgs[n-1].Parts), "error "+want) {
					t.Errorf("messages %+v, want the user's and one whose question call failed %q", msgs, want)
				}
				return
			}
			if len(reqs) != 2 {
				t.Fatalf("%d model calls", len(reqs))
			}
			last := reqs[1].Messages[len(reqs[1].Messages)-1]
			if last.Role != "tool" || !strings.Contains(last.Content, want) {
				t.Errorf("tool result %+v, want %q", last, want)
			}
		})
	}
}
