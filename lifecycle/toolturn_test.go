package lifecycle_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// stubConfig is an opencode.json pointing at a stub OpenAI-compatible model.
func stubConfig(baseURL, permission string) *config.File {
	f := &config.File{Model: "stub/" + stubmodel.ModelID, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: baseURL, APIKey: "k"},
			Models: map[string]config.ModelConfig{stubmodel.ModelID: {Name: "Stub Model"}}},
	}}
	if permission != "" {
		f.Permission = json.RawMessage(permission)
	}
	return f
}

type frame struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// eventLog reads /event into a channel of frames.
func eventLog(t *testing.T, url string) <-chan frame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/event", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan frame, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var f frame
			if json.Unmarshal([]byte(line), &f) == nil {
				out <- f
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		<-done
	})
	first := <-out
	if first.Type != "server.connected" {
		t.Fatalf("first frame %q, want server.connected", first.Type)
	}
	return out
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func newSession(t *testing.T, base string) string {
	t.Helper()
	code, b := post(t, base+"/session", `{}`)
	if code != 200 {
		t.Fatalf("create session: %d %s", code, b)
	}
	var s struct{ ID string }
	json.Unmarshal(b, &s)
	return s.ID
}

type toolPart struct {
	ID        string `json:"id"`
	MessageID string `json:"messageID"`
	Type      string `json:"type"`
	CallID    string `json:"callID"`
	Tool      string `json:"tool"`
	Text      string `json:"text"`
	Reason    string `json:"reason"`
	State     struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
		Title  string          `json:"title"`
		Time   *struct {
			Start int64  `json:"start"`
			End   *int64 `json:"end"`
		} `json:"time"`
	} `json:"state"`
}

// collect reads frames until session.idle of sessionID.
func collect(t *testing.T, ch <-chan frame, sessionID string) []frame {
	t.Helper()
	var out []frame
	timeout := time.After(20 * time.Second)
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				t.Fatal("event stream ended")
			}
			out = append(out, f)
			if f.Type == "session.idle" && bytes.Contains(f.Properties, []byte(sessionID)) {
				return out
			}
		case <-timeout:
			t.Fatalf("no session.idle; got %d frames", len(out))
		}
	}
}

// TestToolTurnMatchesTrace drives a v1 turn in which the model calls bash,
// gets the result and answers, and checks the sequence and shapes against
// traces/h-v1-tool-turn and what the model's second request contains.
func TestToolTurnMatchesTrace(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.ToolThenAnswer("bash", `{"command":"echo tool-done","description":"echo"}`, "All done."))
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), `{"bash":"allow"}`)})
	events := eventLog(t, srv.URL)
	sid := newSession(t, srv.URL)
	code, body := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"turn with a tool (h)"}]}`)
	if code != 200 {
		t.Fatalf("prompt: %d %s", code, body)
	}
	frames := collect(t, events, sid)

	// The sequence of part states, as in the trace: tool pending -> running
	// -> completed, step-finish tool-calls, then a new assistant message
	// with the final text and step-finish stop.
	var seq []string
	msgOf := map[string]string{}
	var userID string
	for _, f := range frames {
		switch f.Type {
		case "message.part.updated":
			var p struct{ Part toolPart }
			json.Unmarshal(f.Properties, &p)
			pt := p.Part
			if prev, ok := msgOf[pt.ID]; ok && prev != pt.MessageID {
				t.Errorf("part %s moved from message %s to %s", pt.ID, prev, pt.MessageID)
			}
			msgOf[pt.ID] = pt.MessageID
			switch pt.Type {
			case "tool":
				seq = append(seq, "tool:"+pt.State.Status)
				if pt.CallID == "" || pt.Tool != "bash" {
					t.Errorf("tool part without callID/tool: %+v", pt)
				}
				if pt.State.Status == "completed" {
					if pt.State.Output != "tool-done\n" || pt.State.Title == "" || pt.State.Time == nil || pt.State.Time.End == nil {
						t.Errorf("completed tool state = %+v", pt.State)
					}
					var in struct{ Command string }
					json.Unmarshal(pt.State.Input, &in)
					if in.Command != "echo tool-done" {
						t.Errorf("tool input = %s", pt.State.Input)
					}
				}
			case "step-finish":
				seq = append(seq, "finish:"+pt.Reason)
			case "step-start":
				seq = append(seq, "start")
			}
		case "message.updated":
			var m struct {
				Info struct {
					ID, Role, ParentID string
					Time               struct{ Completed *int64 }
				}
			}
			json.Unmarshal(f.Properties, &m)
			if m.Info.Role == "user" {
				userID = m.Info.ID
			} else if m.Info.ParentID != userID {
				t.Errorf("assistant %s parentID %s, want %s", m.Info.ID, m.Info.ParentID, userID)
			}
		}
	}
	// running three times: started, then bash's output so far ("" and
	// "tool-done\n"), as the trace streams it.
	want := []string{"start", "tool:pending", "tool:running", "tool:running", "tool:running", "tool:completed", "finish:tool-calls", "start", "finish:stop"}
	if strings.Join(seq, " ") != strings.Join(want, " ") {
		t.Errorf("part sequence\n got %v\nwant %v", seq, want)
	}

	// Two model calls; the second carries the assistant tool call and the
	// tool result.
	reqs := stub.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	var second struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []any `json:"tools"`
	}
	if err := json.Unmarshal(reqs[1], &second); err != nil {
		t.Fatal(err)
	}
	n := len(second.Messages)
	if n < 3 {
		t.Fatalf("second request has %d messages", n)
	}
	call, result := second.Messages[n-2], second.Messages[n-1]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].Function.Name != "bash" {
		t.Errorf("second request's assistant message = %+v", call)
	}
	if result.Role != "tool" || result.Content != "tool-done\n" || result.ToolCallID != call.ToolCalls[0].ID {
		t.Errorf("second request's tool result = %+v", result)
	}
	if len(second.Tools) == 0 {
		t.Error("tools were not offered to the model")
	}

	// The blocking POST answered with the final assistant message.
	var res struct {
		Info  struct{ ID, Finish string }
		Parts []toolPart
	}
	json.Unmarshal(body, &res)
	if res.Info.Finish != "stop" {
		t.Errorf("POST answer finish = %q", res.Info.Finish)
	}
	for _, p := range res.Parts {
		if p.MessageID != res.Info.ID {
			t.Errorf("part %s has messageID %s, want %s", p.ID, p.MessageID, res.Info.ID)
		}
	}
}

// TestToolPermissionAsk: with config saying bash asks (OpenCode's defaults
// ask for nothing a project-confined tool does), the ask is
// listed, answered over HTTP, and the tool then runs. A rejection turns into
// a tool error the model sees.
func TestToolPermissionAsk(t *testing.T) {
	for _, tc := range []struct {
		reply      string
		wantStatus string
	}{{"once", "completed"}, {"reject", "error"}} {
		t.Run(tc.reply, func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.ToolThenAnswer("bash", `{"command":"echo asked"}`, "ok"))
			srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), `{"bash":"ask"}`)})
			events := eventLog(t, srv.URL)
			sid := newSession(t, srv.URL)
			if code, b := post(t, srv.URL+"/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"go"}]}`); code != 204 {
				t.Fatalf("prompt_async: %d %s", code, b)
			}
			var askID string
			for askID == "" {
				select {
				case f := <-events:
					if f.Type == "permission.asked" {
						var p struct {
							ID, Permission string
							Patterns       []string
							Tool           struct{ MessageID, CallID string }
						}
						json.Unmarshal(f.Properties, &p)
						if p.Permission != "bash" || len(p.Patterns) != 1 || p.Patterns[0] != "echo asked" || p.Tool.CallID == "" {
							t.Errorf("permission.asked = %s", f.Properties)
						}
						askID = p.ID
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no permission.asked")
				}
			}
			resp, err := http.Get(srv.URL + "/permission")
			if err != nil {
				t.Fatal(err)
			}
			lb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(lb, []byte(askID)) {
				t.Errorf("GET /permission = %s, want %s listed", lb, askID)
			}
			if code, b := post(t, srv.URL+"/permission/"+askID+"/reply", `{"reply":"`+tc.reply+`"}`); code != 200 || string(b) != "true" {
				t.Fatalf("reply: %d %s", code, b)
			}
			frames := collect(t, events, sid)
			final := ""
			for _, f := range frames {
				if f.Type == "message.part.updated" {
					var p struct{ Part toolPart }
					json.Unmarshal(f.Properties, &p)
					if p.Part.Type == "tool" {
						final = p.Part.State.Status
					}
				}
			}
			if final != tc.wantStatus {
				t.Errorf("tool ended %q, want %q", final, tc.wantStatus)
			}
			if code, _ := post(t, srv.URL+"/permission/"+askID+"/reply", `{"reply":"once"}`); code != 404 {
				t.Errorf("second reply: %d, want 404", code)
			}
		})
	}
}

// TestProviderErrors: a non-retryable error ends the step with APIError and
// session.error, the session returns to idle; a 429 is retried and shown as
// session.status retry.
func TestProviderErrors(t *testing.T) {
	t.Run("500", func(t *testing.T) {
		stub := stubmodel.NewServer(t, stubmodel.Fixed(stubmodel.Response{Status: 400, ErrorMessage: "bad model request"}))
		srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
		events := eventLog(t, srv.URL)
		sid := newSession(t, srv.URL)
		code, b := post(t, srv.URL+"/session/"+sid+"/message", `{"parts":[{"type":"text","text":"x"}]}`)
		if code != 200 {
			t.Fatalf("prompt: %d %s", code, b)
		}
		var res struct {
			Info struct {
				Error *struct {
					Name string
					Data map[string]any
				}
			}
		}
		json.Unmarshal(b, &res)
		if res.Info.Error == nil || res.Info.Error.Name != "APIError" || res.Info.Error.Data["message"] != "bad model request" {
			t.Errorf("assistant error = %s", b)
		}
		sawError := false
		for _, f := range collect(t, events, sid) {
			if f.Type == "session.error" && bytes.Contains(f.Properties, []byte("APIError")) {
				sawError = true
			}
		}
		if !sawError {
			t.Error("no session.error")
		}
	})
	t.Run("429", func(t *testing.T) {
		stub := stubmodel.NewServer(t, stubmodel.Sequence(
			stubmodel.Response{Status: 429, ErrorMessage: "slow down", Headers: map[string]string{"Retry-After": "0"}},
			stubmodel.Response{Text: "after retry", FinishReason: "stop"}))
		srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), "")})
		events := eventLog(t, srv.URL)
		sid := newSession(t, srv.URL)
		if code, b := post(t, srv.URL+"/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"x"}]}`); code != 204 {
			t.Fatalf("prompt: %d %s", code, b)
		}
		sawRetry, text := false, ""
		for _, f := range collect(t, events, sid) {
			if f.Type == "session.status" && bytes.Contains(f.Properties, []byte(`"retry"`)) {
				sawRetry = true
			}
			if f.Type == "message.part.delta" {
				var d struct{ Delta string }
				json.Unmarshal(f.Properties, &d)
				text += d.Delta
			}
		}
		if !sawRetry || text != "after retry" {
			t.Errorf("retry seen %v, text %q", sawRetry, text)
		}
	})
}
