package openai_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// notOurs are fields openai-go v3.98.0 marks required that OpenAI's API
// reference does not list and this server has nothing to say in.
var notOurs = map[string]bool{"AccessPrograms": true}

// checkRequired fails for any field the SDK's type marks required that
// the JSON lacks, or holds in a form the SDK could not decode; unions are
// checked as the variant their type names.
func checkRequired(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if m := v.MethodByName("AsAny"); m.IsValid() && m.Type().NumIn() == 0 {
		out := m.Call(nil)[0]
		if out.Kind() == reflect.Interface {
			if out.IsNil() {
				t.Errorf("%s: a variant the SDK does not know", path)
				return
			}
			out = out.Elem()
		}
		checkRequired(t, path, out)
		return
	}
	switch v.Kind() {
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			checkRequired(t, path+"[]", v.Index(i))
		}
		return
	case reflect.Struct:
	default:
		return
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if f.Name == "JSON" || notOurs[f.Name] {
			continue
		}
		jf := meta.FieldByName(f.Name)
		if !jf.IsValid() {
			continue
		}
		j, _ := jf.Interface().(respjson.Field)
		raw := j.Raw()
		switch required := strings.Contains(f.Tag.Get("api"), "required"); {
		case required && raw == "":
			t.Errorf("%s.%s: missing", path, f.Name)
		case raw != "" && raw != "null" && !j.Valid():
			t.Errorf("%s.%s: %s does not decode", path, f.Name, raw)
		}
		if raw != "" && raw != "null" {
			checkRequired(t, path+"."+f.Name, v.Field(i)) // what is there, checked in turn
		}
	}
}

// TestOpenAISDK: the official Go SDK (openai-go v3.98.0) drives the door
// with the password as its API key: Responses.New, a continuation by
// PreviousResponseID, Responses.Get, InputItems.List and NewStreaming,
// every response and
// event decoded into the SDK's types with their required fields.
func TestOpenAISDK(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Password: "sekrit", Scripted: scriptedConfig(6)})
	c := oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sekrit"), option.WithHTTPClient(client), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: scriptedModel,
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("hello sdk")}})
	if err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	checkRequired(t, "response", reflect.ValueOf(*r))
	if r.OutputText() != "You said: hello sdk" || r.Status != responses.ResponseStatusCompleted || !strings.HasPrefix(r.ID, "msg_") {
		t.Fatalf("response %s %s %q", r.ID, r.Status, r.OutputText())
	}

	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: scriptedModel, PreviousResponseID: oai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("and again", responses.EasyInputMessageRoleUser)}}})
	if err != nil {
		t.Fatalf("Responses.New with PreviousResponseID: %v", err)
	}
	if next.OutputText() != "You said: and again" || next.Conversation.ID != r.Conversation.ID || next.PreviousResponseID != r.ID {
		t.Errorf("continued: %q in %s after %s", next.OutputText(), next.Conversation.ID, next.PreviousResponseID)
	}
	got, err := c.Responses.Get(ctx, next.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != next.ID || got.OutputText() != next.OutputText() {
		t.Errorf("Responses.Get: %v %+v", err, got)
	}

	items, err := c.Responses.InputItems.List(ctx, next.ID, responses.InputItemListParams{})
	if err != nil || len(items.Data) != 1 || items.HasMore {
		t.Fatalf("InputItems.List: %v %+v", err, items)
	}
	// The union's AsAny reads any "message" as an output message; an
	// input item is its input variant.
	checkRequired(t, "input item", reflect.ValueOf(items.Data[0].AsMessage()))
	if m := items.Data[0].AsMessage(); m.ID != next.ID || m.Role != "user" || len(m.Content) != 1 || m.Content[0].Text != "and again" {
		t.Errorf("input item %+v", m)
	}

	st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: scriptedModel, PreviousResponseID: oai.String(next.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: oai.String("stream it")}})
	var deltas strings.Builder
	var done, types []string
	var final responses.Response
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		checkRequired(t, ev.Type, reflect.ValueOf(ev))
		switch e := ev.AsAny().(type) {
		case responses.ResponseTextDeltaEvent:
			deltas.WriteString(e.Delta)
		case responses.ResponseTextDoneEvent:
			done = append(done, e.Text)
		case responses.ResponseCompletedEvent:
			final = e.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v (after %v)", err, types)
	}
	if deltas.String() != "You said: stream it" || len(done) != 1 || done[0] != deltas.String() || final.OutputText() != deltas.String() {
		t.Errorf("streamed %q, done %q, final %q; events %v", deltas.String(), done, final.OutputText(), types)
	}
	if final.Conversation.ID != r.Conversation.ID {
		t.Errorf("the streamed response is in %s, not the conversation %s", final.Conversation.ID, r.Conversation.ID)
	}
}
