package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/opencode"
)

// TestWebSocketSteerPending: a steer aimed at a response that ends with
// a client call while its turn waits for the output (sent once the
// response ended, or while it still streamed) is accepted, then answered
// response.steer.pending (waiting_for_required_input, the call as the
// required input) after the response's response.completed; the
// function_call_output sent over the socket continues the turn, the
// model call after it is sent the output and the steer, the
// continuation ends steered and the steer's response follows on the
// lane to the end of the turn: the steer is delivered once, never both
// pending and lost. A cancel of the waiting response instead takes the
// pending steer back, answered response.steer.failed under its ID. A
// steer that makes the model call the client tool again ends its own
// response with the function_call (it carries the turn's tools), and
// that call's output ends the turn.
func TestWebSocketSteerPending(t *testing.T) {
	for _, c := range []struct {
		name   string
		early  bool // steer at response.created, not after the end
		cancel bool // cancel the response instead of sending the output
		again  bool // the steer makes the model call the client tool again
	}{{"after the end", false, false, false}, {"while streaming", true, false, false}, {"cancelled", false, true, false},
		{"calling again", false, false, true}} {
		t.Run(c.name, func(t *testing.T) {
			srv, stub := stubServer(t, stubmodel.WithChunks(4), stubmodel.WithDelay(20*time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn := connect(t, ctx, sdkClient(srv, "none"))
			err := conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{StreamID: oai.String("lane-p"),
				Tools: []responses.ToolUnionParam{weatherTool()},
				Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: oai.String(weatherPrompt)}})
			if err != nil {
				t.Fatal(err)
			}
			evs := recvUntil(t, ctx, conn, isType("response.created"))
			aID := evs[0].AsResponseCreated().Response.ID
			steerText := "use celsius"
			if c.again {
				steerText = `call:get_weather {"city":"Lyon"} then: cold`
			}
			steer := func() {
				if err := conn.Send(ctx, responses.ResponsesClientEventParamOfResponseSteer(steerText, aID)); err != nil {
					t.Fatal(err)
				}
			}
			if c.early {
				steer()
			}
			evs = append(evs, recvUntil(t, ctx, conn, terminal(aID))...)
			if !c.early {
				steer()
			}
			evs = append(evs, recvUntil(t, ctx, conn, isType("response.steer.pending"))...)
			at := map[string]int{}
			var call responses.ResponseFunctionToolCall
			var steerID string
			for i, ev := range evs {
				switch ev.Type {
				case "response.completed":
					r := ev.AsResponseCompleted().Response
					for _, it := range r.Output {
						if it.Type == "function_call" {
							call = it.AsFunctionCall()
						}
					}
					at["completed"] = i
				case "response.steer.accepted":
					steerID = ev.AsResponseSteerAcceptedEvent().Steer.ID
					at["accepted"] = i
				case "response.steer.pending":
					p := ev.AsResponseSteerPendingEvent()
					if p.Reason != "waiting_for_required_input" || p.Steer.ID != steerID || p.Steer.PreviousResponseID != aID || p.StreamID != "lane-p" ||
						len(p.RequiredInput) != 1 || p.RequiredInput[0].Type != "function_call_output" ||
						p.RequiredInput[0].AsResponseSteerRequiredInputFunctionCallOutput().CallID != call.CallID ||
						p.RequiredInput[0].AsResponseSteerRequiredInputFunctionCallOutput().Name != "get_weather" {
						t.Errorf("pending %s; the call %s, the steer %s", ev.RawJSON(), call.CallID, steerID)
					}
					at["pending"] = i
				case "response.steer.failed", "error":
					t.Errorf("%s", ev.RawJSON())
				}
			}
			if call.CallID == "" || steerID == "" {
				t.Fatalf("no call or no accepted steer in %d events", len(evs))
			}
			if at["pending"] < at["completed"] || at["pending"] < at["accepted"] {
				t.Errorf("order: completed %d, accepted %d, pending %d", at["completed"], at["accepted"], at["pending"])
			}
			if in := inbox(t, srv.URL, aID); in != 1 {
				t.Errorf("%d steers wait in the inbox while the call waits; want 1", in)
			}

			if c.cancel {
				// The cancel takes the pending steer back: it is answered
				// failed under its ID, never delivered.
				if code, raw := do(t, "POST", srv.URL+"/v1/responses/"+aID+"/cancel", nil, nil); code != 200 {
					t.Fatalf("cancel: %d %s", code, raw)
				}
				ev := recvUntil(t, ctx, conn, isType("response.steer.failed"))
				f := ev[len(ev)-1].AsResponseSteerFailedEvent()
				if f.Steer.ID != steerID || f.Error.Code != "response_not_active" || f.StreamID != "lane-p" {
					t.Errorf("the cancelled pending steer: %s", ev[len(ev)-1].RawJSON())
				}
				if n := countSteer(stub, steerText); n != 0 {
					t.Errorf("the model was sent the taken-back steer %d times", n)
				}
				return
			}

			// The output, over the socket, on the lane.
			err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{StreamID: oai.String("lane-p"), PreviousResponseID: oai.String(aID),
				Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &responses.ResponseInputParam{
					{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String(call.CallID),
						Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String("22C")}}}}}})
			if err != nil {
				t.Fatal(err)
			}
			evs = recvUntil(t, ctx, conn, terminal(steerID))
			var steered, final *responses.Response
			for _, ev := range evs {
				switch ev.Type {
				case "response.incomplete":
					r := ev.AsResponseIncomplete().Response
					steered = &r
				case "response.completed":
					r := ev.AsResponseCompleted().Response
					final = &r
				case "response.steer.failed", "response.steer.pending", "error":
					t.Errorf("%s", ev.RawJSON())
				}
			}
			if steered == nil || steered.IncompleteDetails.Reason != "steered" || steered.PreviousResponseID != aID {
				t.Errorf("the continuation: %+v", steered)
			}
			// The model call after the output was sent it and the steer.
			sentBoth := 0
			for _, raw := range stub.Requests() {
				var req stubmodel.Request
				if err := json.Unmarshal(raw, &req); err != nil {
					t.Fatal(err)
				}
				var seen []string
				for _, m := range req.Messages {
					if m.Role == "tool" || m.Role == "user" {
						seen = append(seen, m.Role+": "+m.Content)
					}
				}
				if strings.HasSuffix(strings.Join(seen, "|"), "tool: 22C|user: "+steerText) {
					sentBoth++
				}
			}
			if sentBoth != 1 {
				t.Errorf("%d model calls were sent the output and then the steer; want 1", sentBoth)
			}
			if c.again {
				// The steer's response carries the turn's tools: the
				// model's call of one ends it with a function_call, and
				// its output continues it.
				var again responses.ResponseFunctionToolCall
				for _, it := range final.Output {
					if it.Type == "function_call" {
						again = it.AsFunctionCall()
					}
				}
				if final.ID != steerID || again.Name != "get_weather" || again.Arguments != `{"city":"Lyon"}` {
					t.Fatalf("the steer's response: %s", final.RawJSON())
				}
				err = conn.Create(ctx, responses.ResponsesClientEventResponseCreateParam{StreamID: oai.String("lane-p"), PreviousResponseID: oai.String(steerID),
					Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &responses.ResponseInputParam{
						{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String(again.CallID),
							Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String("9C")}}}}}})
				if err != nil {
					t.Fatal(err)
				}
				evs = recvUntil(t, ctx, conn, terminal(""))
				end := evs[len(evs)-1].AsResponseCompleted().Response
				if evs[len(evs)-1].Type != "response.completed" || end.OutputText() != "Done. cold" || end.PreviousResponseID != steerID {
					t.Fatalf("the turn ends %s", evs[len(evs)-1].RawJSON())
				}
				return
			}
			if final == nil || final.ID != steerID || final.OutputText() != "You said: use celsius" {
				t.Fatalf("the steer's response: %+v", final)
			}

			steers := 0
			for _, m := range messages(t, srv.URL, final.Conversation.ID) {
				if m.Info.ID == steerID && m.Info.Role == opencode.User {
					steers++
				}
			}
			if steers != 1 || countSteer(stub, "use celsius") != 1 {
				t.Errorf("the steer is in the session %d times, sent to the model %d times", steers, countSteer(stub, "use celsius"))
			}
		})
	}
}

// inbox counts the inputs waiting in the session of response id.
func inbox(t *testing.T, url, id string) int {
	t.Helper()
	r := getResponse(t, url, id)
	code, raw := do(t, "GET", url+"/api/session/"+r.Conversation.ID+"/inbox", nil, nil)
	var ins struct {
		Data []json.RawMessage `json:"data"`
	}
	if code != 200 || json.Unmarshal(raw, &ins) != nil {
		t.Fatalf("GET inbox: %d %s", code, raw)
	}
	return len(ins.Data)
}

// countSteer counts the stub's requests whose last user message is text.
func countSteer(stub *stubmodel.Server, text string) int {
	n := 0
	for _, raw := range stub.Requests() {
		var req stubmodel.Request
		if json.Unmarshal(raw, &req) == nil && req.LastUserText() == text && !strings.Contains(string(raw), "Generate a title") {
			n++
		}
	}
	return n
}
