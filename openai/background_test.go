package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// rawEvents reads a stream's events as the server sent them, up to n of
// them (0: all), checking each decodes into the SDK's types.
func rawEvents(t *testing.T, st *ssestream.Stream[responses.ResponseStreamEventUnion], n int) []string {
	t.Helper()
	var out []string
	for (n == 0 || len(out) < n) && st.Next() {
		ev := st.Current()
		checkRequired(t, ev.Type, reflect.ValueOf(ev))
		out = append(out, ev.RawJSON())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v (after %d events)", err, len(out))
	}
	return out
}

// seqOf is an event's sequence number.
func seqOf(t *testing.T, raw string) int64 {
	t.Helper()
	var e struct {
		SequenceNumber int64 `json:"sequence_number"`
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatal(err)
	}
	return e.SequenceNumber
}

// TestBackground: with openai-go, a background response is answered at
// once (in_progress while the slow model runs, queued behind another
// turn), Get polls it to completed; Cancel cancels one; a background
// stream left after N events and re-attached with starting_after N gets
// exactly the events after N (those a whole re-stream holds after N).
func TestBackground(t *testing.T) {
	// Each turn streams for 2.5 s: the second response is admitted while
	// the first runs, and cancelled while it runs, on a loaded machine.
	reply := strings.TrimSpace(strings.Repeat("slow ", 50))
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Reply: reply, Chunks: 50, Delay: 50 * time.Millisecond}})
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bg := func(input, conv string) *responses.Response {
		t.Helper()
		p := responses.ResponseNewParams{Background: oai.Bool(true), Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(input)}}
		if conv != "" {
			p.Conversation = responses.ResponseNewParamsConversationUnion{OfString: oai.String(conv)}
		}
		r, err := c.Responses.New(ctx, p)
		if err != nil {
			t.Fatalf("Responses.New background: %v", err)
		}
		checkRequired(t, "response", reflect.ValueOf(*r))
		if !r.Background {
			t.Errorf("background not answered back: %s", r.RawJSON())
		}
		return r
	}
	get := func(id string) *responses.Response {
		t.Helper()
		r, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		return r
	}

	a := bg("first", "")
	if a.Status != responses.ResponseStatusInProgress && a.Status != responses.ResponseStatusQueued {
		t.Fatalf("a background response is answered %s; want it at once, queued or in_progress", a.Status)
	}
	sid := a.Conversation.ID
	b := bg("second", sid)
	if b.Status != responses.ResponseStatusQueued {
		t.Errorf("a background response behind a running turn is %s; want queued", b.Status)
	}
	var done *responses.Response
	checkFor(t, 30*time.Second, "the background response to complete", func() bool {
		done = get(a.ID)
		return done.Status == responses.ResponseStatusCompleted
	})
	if done.OutputText() != reply || !done.Background {
		t.Errorf("completed %q background %v", done.OutputText(), done.Background)
	}

	// b runs once a is over; cancel it while it runs.
	checkFor(t, 30*time.Second, "the queued response to run", func() bool { return get(b.ID).Status == responses.ResponseStatusInProgress })
	cancelled, err := c.Responses.Cancel(ctx, b.ID)
	if err != nil || cancelled.Status != responses.ResponseStatusCancelled {
		t.Fatalf("Cancel: %v %+v", err, cancelled)
	}
	if r := get(b.ID); r.Status != responses.ResponseStatusCancelled {
		t.Errorf("Get after cancel: %s", r.Status)
	}

	// A background stream, left after n events, re-attached after the
	// last it got.
	const n = 6
	sctx, leave := context.WithCancel(ctx)
	st := c.Responses.NewStreaming(sctx, responses.ResponseNewParams{Background: oai.Bool(true), Conversation: responses.ResponseNewParamsConversationUnion{OfString: oai.String(sid)},
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("third")}})
	first := rawEvents(t, st, n)
	leave()
	_ = st.Close()
	if len(first) != n {
		t.Fatalf("%d events before leaving", len(first))
	}
	var created struct {
		Response struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"response"`
	}
	_ = json.Unmarshal([]byte(first[0]), &created)
	id := created.Response.ID
	if r := get(id); r.Status == responses.ResponseStatusCancelled || r.Status == responses.ResponseStatusFailed {
		t.Fatalf("the client left and the response is %s", r.Status)
	}
	rest := rawEvents(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: oai.Int(n - 1)}), 0)
	if len(rest) == 0 || seqOf(t, rest[0]) != n {
		t.Fatalf("the re-attached stream starts at %v; want sequence number %d", rest, n)
	}
	whole := rawEvents(t, c.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), 0)
	if got := append(append([]string{}, first...), rest...); !reflect.DeepEqual(got, whole) {
		t.Errorf("left and re-attached: %d+%d events; the whole stream %d:\n%s\n---\n%s", len(first), len(rest), len(whole),
			strings.Join(got, "\n"), strings.Join(whole, "\n"))
	}
	var last struct {
		Type     string `json:"type"`
		Response struct {
			Status string `json:"status"`
		} `json:"response"`
	}
	_ = json.Unmarshal([]byte(whole[len(whole)-1]), &last)
	if last.Type != "response.completed" || last.Response.Status != "completed" {
		t.Errorf("the stream ends %s", whole[len(whole)-1])
	}
	for i, raw := range whole {
		if seqOf(t, raw) != int64(i) {
			t.Errorf("event %d has sequence number %d", i, seqOf(t, raw))
		}
	}
}

// TestRestream: GET /v1/responses/{id}?stream=true streams any response
// again from the session's log, the same events each time; starting_after
// leaves out those up to it; bad parameters are 400s naming them.
func TestRestream(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(5)})
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("again please")}})
	if err != nil {
		t.Fatal(err)
	}
	whole := rawEvents(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{}), 0)
	var final struct {
		Type     string             `json:"type"`
		Response responses.Response `json:"response"`
	}
	if err := json.Unmarshal([]byte(whole[len(whole)-1]), &final); err != nil || final.Type != "response.completed" ||
		final.Response.OutputText() != r.OutputText() || final.Response.ID != r.ID {
		t.Fatalf("re-streamed: %s", whole[len(whole)-1])
	}
	after := rawEvents(t, c.Responses.GetStreaming(ctx, r.ID, responses.ResponseGetParams{StartingAfter: oai.Int(2)}), 0)
	if !reflect.DeepEqual(after, whole[3:]) {
		t.Errorf("after 2: %d events; want the %d after 2 of the whole", len(after), len(whole)-3)
	}
	for _, c := range []struct{ query, param string }{
		{"?stream=true&starting_after=-1", "starting_after"},
		{"?stream=true&starting_after=x", "starting_after"},
		{"?starting_after=2", "starting_after"},
		{"?stream=maybe", "stream"},
	} {
		code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses/"+r.ID+c.query, nil, nil)
		var e apiError
		if code != 400 || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Param == nil || *e.Error.Param != c.param {
			t.Errorf("GET %s: %d %s; want a 400 naming %s", c.query, code, raw, c.param)
		}
	}
}

// TestBackgroundFunctionTool: a background response with a function tool
// is polled to completed with its function_call item; the background
// request of its output is answered at once and polled to the end of the
// turn, the model having been sent the output.
func TestBackgroundFunctionTool(t *testing.T) {
	srv, stub := stubServer(t, stubmodel.WithChunks(4), stubmodel.WithDelay(10*time.Millisecond))
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	poll := func(id string) *responses.Response {
		t.Helper()
		var r *responses.Response
		checkFor(t, 30*time.Second, "response "+id+" to complete", func() bool {
			var err error
			if r, err = c.Responses.Get(ctx, id, responses.ResponseGetParams{}); err != nil {
				t.Fatalf("Get: %v", err)
			}
			return r.Status != responses.ResponseStatusQueued && r.Status != responses.ResponseStatusInProgress
		})
		checkRequired(t, "response", reflect.ValueOf(*r))
		return r
	}
	a, err := c.Responses.New(ctx, responses.ResponseNewParams{Background: oai.Bool(true), Tools: []responses.ToolUnionParam{weatherTool()},
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String(weatherPrompt)}})
	if err != nil || !a.Background {
		t.Fatalf("New: %v %+v", err, a)
	}
	done := poll(a.ID)
	var call responses.ResponseFunctionToolCall
	for _, it := range done.Output {
		if it.Type == "function_call" {
			call = it.AsFunctionCall()
		}
	}
	if done.Status != responses.ResponseStatusCompleted || call.Name != "get_weather" {
		t.Fatalf("the first response: %s", done.RawJSON())
	}
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Background: oai.Bool(true), PreviousResponseID: oai.String(a.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{CallID: oai.String(call.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: oai.String("22C and sunny")}}}}}})
	if err != nil || !next.Background || next.PreviousResponseID != a.ID {
		t.Fatalf("New with the output: %v %+v", err, next)
	}
	end := poll(next.ID)
	if end.Status != responses.ResponseStatusCompleted || end.OutputText() != "Done. sunny" {
		t.Errorf("the continuation: %s", end.RawJSON())
	}
	if results := toolMessages(t, stub); len(results) != 1 || results[0].Content != "22C and sunny" {
		t.Errorf("the model was sent %+v", results)
	}
	// Its recorded stream re-streams whole.
	evs := rawEvents(t, c.Responses.GetStreaming(ctx, next.ID, responses.ResponseGetParams{}), 0)
	if !strings.Contains(evs[len(evs)-1], `"type":"response.completed"`) || !strings.Contains(evs[len(evs)-1], "Done. sunny") {
		t.Errorf("re-streamed: %s", evs[len(evs)-1])
	}
}
