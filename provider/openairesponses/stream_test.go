package openairesponses

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// sse turns recorded event data lines (one JSON per line, as the AI
// SDK's __fixtures__/*.chunks.txt keep them) into an SSE body with event
// names.
func sse(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(l), &ev)
		b.WriteString("event: " + ev.Type + "\ndata: " + l + "\n\n")
	}
	return b.String()
}

// Events in the shape of the AI SDK's recorded fixtures
// (openai-reasoning-encrypted-content.1, openai-error.1, openai-phase.1),
// trimmed.
const (
	evCreated    = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_01","object":"response","created_at":1765552659,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-5.1-codex-max","output":[],"parallel_tool_calls":true,"reasoning":{"effort":"high","summary":"detailed"},"service_tier":"auto","store":false,"temperature":1,"usage":null}}`
	evInProgress = `{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_01","object":"response","created_at":1765552659,"status":"in_progress","model":"gpt-5.1-codex-max","output":[],"usage":null}}`
	evUsage      = `"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":90,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":1290}`
	evCompleted  = `{"type":"response.completed","sequence_number":99,"response":{"id":"resp_01","object":"response","created_at":1765552659,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-5.1-codex-max","output":[],"service_tier":"default",` + evUsage + `}}`

	evMsgAdded  = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_01","type":"message","status":"in_progress","content":[],"role":"assistant"}}`
	evPartAdded = `{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_01","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`
	evText1     = `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_01","output_index":0,"content_index":0,"delta":"The final result","logprobs":[],"obfuscation":"o6siFnnjPfOpq"}`
	evText2     = `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_01","output_index":0,"content_index":0,"delta":" is **570**.","logprobs":[],"obfuscation":"XVAoDXXbkE"}`
	evTextDone  = `{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_01","output_index":0,"content_index":0,"text":"The final result is **570**.","logprobs":[]}`
	evMsgDone   = `{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_01","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"The final result is **570**."}],"role":"assistant"}}`

	evRsAdded   = `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_01","type":"reasoning","encrypted_content":"gAAAAABpPDIUph8c","summary":[]}}`
	evSumAdded0 = `{"type":"response.reasoning_summary_part.added","sequence_number":3,"item_id":"rs_01","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`
	evSum0a     = `{"type":"response.reasoning_summary_text.delta","sequence_number":4,"item_id":"rs_01","output_index":0,"summary_index":0,"delta":"**Calcul","obfuscation":"2ajSAGID"}`
	evSum0b     = `{"type":"response.reasoning_summary_text.delta","sequence_number":5,"item_id":"rs_01","output_index":0,"summary_index":0,"delta":"ating**\n\nI'll compute 12 plus 7.","obfuscation":"xXxv2CE8Q5J"}`
	evSumDone0  = `{"type":"response.reasoning_summary_part.done","sequence_number":7,"item_id":"rs_01","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":"**Calculating**\n\nI'll compute 12 plus 7."}}`
	evRsDone    = `{"type":"response.output_item.done","sequence_number":38,"output_index":0,"item":{"id":"rs_01","type":"reasoning","encrypted_content":"gAAAAABpPDIVOKrs","summary":[{"type":"summary_text","text":"**Calculating**\n\nI'll compute 12 plus 7."}]}}`

	evFcAdded = `{"type":"response.output_item.added","sequence_number":39,"output_index":1,"item":{"id":"fc_01","type":"function_call","status":"in_progress","arguments":"","call_id":"call_AB6A","name":"calculator"}}`
	evFc1     = `{"type":"response.function_call_arguments.delta","sequence_number":40,"item_id":"fc_01","output_index":1,"delta":"{\"a\":12,","obfuscation":"hKtg6o5cWUSdCa"}`
	evFc2     = `{"type":"response.function_call_arguments.delta","sequence_number":41,"item_id":"fc_01","output_index":1,"delta":"\"b\":7}","obfuscation":"HKZ10wAgZXjkicL"}`
	evFcArgs  = `{"type":"response.function_call_arguments.done","sequence_number":53,"item_id":"fc_01","output_index":1,"arguments":"{\"a\":12,\"b\":7}"}`
	evFcDone  = `{"type":"response.output_item.done","sequence_number":54,"output_index":1,"item":{"id":"fc_01","type":"function_call","status":"completed","arguments":"{\"a\":12,\"b\":7}","call_id":"call_AB6A","name":"calculator"}}`

	evQuota = `{"type":"error","sequence_number":2,"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"You exceeded your current quota, please check your plan and billing details.","param":null}}`
	evFail  = `{"type":"response.failed","sequence_number":3,"response":{"id":"resp_01","object":"response","created_at":1763474589,"status":"failed","error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"output":[],"usage":null}}`
)

func decode(t testing.TB, body io.Reader) ([]provider.Chunk, error) {
	t.Helper()
	var got []provider.Chunk
	s := &streamState{emit: func(c provider.Chunk) { got = append(got, c) }, status: 200}
	err := s.read(context.Background(), body)
	if s.emitted != (len(got) > 0) {
		t.Errorf("emitted %v with %d chunks", s.emitted, len(got))
	}
	return got, err
}

// show renders chunks compactly for comparison.
func show(cs []provider.Chunk) []string {
	var out []string
	for _, c := range cs {
		switch c.Kind {
		case provider.TextDelta:
			out = append(out, "text:"+c.Text+string(c.Metadata))
		case provider.ReasoningDelta:
			out = append(out, "reasoning:"+c.Text+string(c.Metadata))
		case provider.ReasoningEnd:
			out = append(out, "end:"+string(c.Metadata))
		case provider.ToolInputStart:
			out = append(out, "start:"+c.ToolCall.ID+"/"+c.ToolCall.Name)
		case provider.ToolInputDelta:
			out = append(out, "delta:"+c.ToolCall.ID+":"+c.Text)
		case provider.ToolCallChunk:
			out = append(out, "call:"+c.ToolCall.ID+"/"+c.ToolCall.Name+":"+string(c.ToolCall.Arguments)+string(c.ToolCall.Metadata))
		case provider.Finish:
			u := c.Usage
			out = append(out, "finish:"+c.Reason+":"+strings.Join([]string{itoa(u.Input), itoa(u.Output), itoa(u.Reasoning), itoa(u.CacheRead), itoa(u.CacheWrite)}, ","))
		default:
			out = append(out, "?")
		}
	}
	return out
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestDecode(t *testing.T) {
	const rsMeta = `{"openai":{"itemId":"rs_01","reasoningEncryptedContent":"gAAAAABpPDIVOKrs"}}`
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"text", sse(evCreated, evInProgress, evMsgAdded, evPartAdded, evText1, evText2, evTextDone, evMsgDone, evCompleted),
			// Input is input_tokens, cached ones included.
			[]string{`text:The final result{"openai":{"itemId":"msg_01"}}`, "text: is **570**.", "finish:stop:1200,90,64,1024,0"}},
		{"reasoning and a function call", sse(evCreated, evInProgress, evRsAdded, evSumAdded0, evSum0a, evSum0b, evSumDone0, evRsDone,
			evFcAdded, evFc1, evFc2, evFcArgs, evFcDone, evCompleted),
			[]string{"reasoning:**Calcul", "reasoning:ating**\n\nI'll compute 12 plus 7.", "end:" + rsMeta,
				"start:call_AB6A/calculator", `delta:call_AB6A:{"a":12,`, `delta:call_AB6A:"b":7}`,
				`call:call_AB6A/calculator:{"a":12,"b":7}{"openai":{"itemId":"fc_01"}}`, "finish:tool-calls:1200,90,64,1024,0"}},
		{"summary parts are parts of their own", sse(evCreated, evRsAdded, evSumAdded0, evSum0a, evSumDone0,
			strings.ReplaceAll(evSumAdded0, `"summary_index":0`, `"summary_index":1`),
			strings.ReplaceAll(evSum0b, `"summary_index":0`, `"summary_index":1`), evRsDone, evCompleted),
			// The first ends without the encrypted content, as the AI SDK
			// ends it with store false (it is not sent back).
			[]string{"reasoning:**Calcul", `end:{"openai":{"itemId":"rs_01"}}`, "reasoning:ating**\n\nI'll compute 12 plus 7.", "end:" + rsMeta,
				"finish:stop:1200,90,64,1024,0"}},
		{"reasoning without a summary still makes a part", sse(evCreated, evRsAdded, evRsDone, evMsgAdded, evText1, evMsgDone, evCompleted),
			[]string{"reasoning:" + rsMeta, "end:" + rsMeta, `text:The final result{"openai":{"itemId":"msg_01"}}`, "finish:stop:1200,90,64,1024,0"}},
		{"reasoning without encrypted content", sse(evCreated,
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_02","type":"reasoning","summary":[]}}`, evCompleted),
			[]string{`reasoning:{"openai":{"itemId":"rs_02","reasoningEncryptedContent":null}}`, `end:{"openai":{"itemId":"rs_02","reasoningEncryptedContent":null}}`,
				"finish:stop:1200,90,64,1024,0"}},
		{"two message items with phases", sse(evCreated,
			`{"type":"response.output_item.added","item":{"id":"msg_a","type":"message","status":"in_progress","content":[],"phase":"commentary","role":"assistant"},"output_index":0,"sequence_number":2}`,
			`{"type":"response.output_text.delta","content_index":0,"delta":"Got it.","item_id":"msg_a","output_index":0,"sequence_number":4}`,
			`{"type":"response.output_item.added","item":{"id":"msg_b","type":"message","status":"in_progress","content":[],"phase":"final_answer","role":"assistant"},"output_index":2,"sequence_number":49}`,
			`{"type":"response.output_text.delta","content_index":0,"delta":"Here:","item_id":"msg_b","output_index":2,"sequence_number":51}`,
			evCompleted),
			[]string{`text:Got it.{"openai":{"itemId":"msg_a","phase":"commentary"}}`, "text:\n\nHere:" + `{"openai":{"itemId":"msg_b","phase":"final_answer"}}`,
				"finish:stop:1200,90,64,1024,0"}},
		{"incomplete: max_output_tokens is length", sse(evCreated, evMsgAdded, evText1,
			`{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_01","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},`+evUsage+`}}`),
			[]string{`text:The final result{"openai":{"itemId":"msg_01"}}`, "finish:length:1200,90,64,1024,0"}},
		{"incomplete: content_filter", sse(evCreated,
			`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"content_filter"},"usage":{"input_tokens":5,"output_tokens":0,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":3}}}}`),
			[]string{"finish:content-filter:5,0,0,0,3"}},
		{"a call's finish reason with an unknown incomplete reason", sse(evCreated, evFcAdded, evFcDone,
			`{"type":"response.incomplete","response":{"incomplete_details":{"reason":"something_new"},`+evUsage+`}}`),
			[]string{"start:call_AB6A/calculator", `call:call_AB6A/calculator:{"a":12,"b":7}{"openai":{"itemId":"fc_01"}}`, "finish:tool-calls:1200,90,64,1024,0"}},
		{"failed without an error", sse(evCreated, `{"type":"response.failed","sequence_number":3,"response":{"error":null,"usage":null}}`),
			[]string{"finish:error:0,0,0,0,0"}},
		{"call completed without its start; arguments from the pieces", sse(evCreated, evFc1, evFc2,
			`{"type":"response.output_item.done","output_index":1,"item":{"id":"fc_9","type":"function_call","status":"completed","arguments":"","call_id":"call_9","name":"bash"}}`,
			evCompleted),
			[]string{"start:call_9/bash", `call:call_9/bash:{}{"openai":{"itemId":"fc_9"}}`, "finish:tool-calls:1200,90,64,1024,0"}},
		{"unknown events and [DONE] skipped", sse(evCreated, `{"type":"response.queued"}`, `{"type":"response.web_search_call.searching","output_index":0}`,
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"ws_1","type":"web_search_call","status":"in_progress"}}`, evCompleted) +
			"data: [DONE]\n\n",
			[]string{"finish:stop:1200,90,64,1024,0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decode(t, strings.NewReader(c.body))
			if err != nil {
				t.Fatalf("error %v after %v", err, show(got))
			}
			if !reflect.DeepEqual(show(got), c.want) {
				t.Errorf("chunks\n%q\nwant\n%q", show(got), c.want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	retryable := func(t *testing.T, err error, status int, msg string) {
		t.Helper()
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || rt.Err.StatusCode != status || rt.Err.Message != msg || !rt.Err.Retryable || rt.Err.ResponseBody == "" {
			t.Fatalf("%#v, want a retryable %d %q", err, status, msg)
		}
	}
	final := func(t *testing.T, err error, status int, msg string) {
		t.Helper()
		var ae *provider.APIError
		var rt *httpsse.Retryable
		if errors.As(err, &rt) || !errors.As(err, &ae) || ae.StatusCode != status || !strings.Contains(ae.Message, msg) {
			t.Fatalf("%#v, want a final %d %q", err, status, msg)
		}
	}
	t.Run("quota error before output is a retryable 429", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(evCreated, evInProgress, evQuota, evFail)))
		retryable(t, err, 429, "You exceeded your current quota, please check your plan and billing details.")
		if len(got) != 0 {
			t.Errorf("chunks %v", show(got))
		}
	})
	t.Run("flat error event before output", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evCreated, `{"type":"error","sequence_number":2,"code":"server_error","message":"Something went wrong","param":null}`)))
		retryable(t, err, 500, "Something went wrong")
	})
	t.Run("failed response before output", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evCreated, evInProgress, evFail)))
		retryable(t, err, 500, "The model failed to generate a response.")
	})
	t.Run("bad request error is not retried", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evCreated,
			`{"type":"error","sequence_number":2,"error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"Your input exceeds the context window of this model.","param":"input"}}`)))
		final(t, err, 400, "Your input exceeds the context window")
	})
	t.Run("numeric code is the status", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(`{"type":"error","code":"503","message":"busy"}`)))
		retryable(t, err, 503, "busy")
	})
	t.Run("error after output is final", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(evCreated, evMsgAdded, evText1, evFail)))
		final(t, err, 500, "The model failed to generate a response.")
		if len(got) != 1 {
			t.Errorf("chunks %v", show(got))
		}
	})
	t.Run("error after an item began, before any chunk, is final", func(t *testing.T) {
		// The AI SDK counts output_item.added as output.
		got, err := decode(t, strings.NewReader(sse(evCreated, evRsAdded, evQuota)))
		final(t, err, 429, "You exceeded your current quota")
		if len(got) != 0 {
			t.Errorf("chunks %v", show(got))
		}
	})
	t.Run("chat completions stream", func(t *testing.T) {
		_, err := decode(t, strings.NewReader("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n"))
		final(t, err, 200, "Received a Chat Completions stream while using the OpenAI Responses API.")
	})
	t.Run("malformed", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evCreated)+"data: {\"type\":\"response.output_text.delta\n\n"))
		final(t, err, 200, "malformed stream event")
	})
	t.Run("ended early", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(evCreated, evMsgAdded, evText1)))
		final(t, err, 200, "no response.completed")
		if len(got) != 1 {
			t.Errorf("chunks %v", show(got))
		}
	})
	t.Run("cut connection is retryable", func(t *testing.T) {
		_, err := decode(t, iotest.TimeoutReader(strings.NewReader(sse(evCreated))))
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || !strings.Contains(rt.Err.Message, "stream interrupted") {
			t.Fatalf("%v", err)
		}
	})
}

func TestStreamErrorStatus(t *testing.T) {
	for _, c := range []struct {
		code, typ string
		want      int
	}{
		{`"rate_limit_exceeded"`, "", 429}, {`"insufficient_quota"`, "", 429}, {`null`, "authentication_error", 401},
		{`"permission_denied"`, "", 403}, {`"model_not_found"`, "", 404}, {`"invalid_prompt"`, "response.failed", 400},
		{`"server_is_overloaded"`, "", 503}, {`"request_timeout"`, "", 504}, {`"server_error"`, "", 500},
		{`429`, "", 429}, {`200`, "", 500}, {`"4000"`, "", 500}, {``, "", 500},
	} {
		if got := streamErrorStatus(json.RawMessage(c.code), c.typ); got != c.want {
			t.Errorf("code %s type %q: %d, want %d", c.code, c.typ, got, c.want)
		}
	}
}

// FuzzStream feeds arbitrary bytes to the decoder: it must not panic,
// end with at most one Finish (last, and only on success), and complete
// only tool calls it started.
func FuzzStream(f *testing.F) {
	f.Add(sse(evCreated, evInProgress, evMsgAdded, evPartAdded, evText1, evText2, evTextDone, evMsgDone, evCompleted))
	f.Add(sse(evCreated, evRsAdded, evSumAdded0, evSum0a, evSumDone0, evRsDone, evFcAdded, evFc1, evFc2, evFcArgs, evFcDone, evCompleted))
	f.Add(sse(evCreated, evInProgress, evQuota, evFail))
	f.Add(sse(evCreated, evMsgAdded, evText1, `{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}`))
	f.Add("event: keepalive\ndata: {\"type\":\"keepalive\"}\n\n: comment\r\ndata: {\"type\":\"response.completed\",\"response\":{}}")
	f.Fuzz(func(t *testing.T, body string) {
		got, err := decode(t, strings.NewReader(body))
		started := map[string]bool{}
		for i, c := range got {
			switch c.Kind {
			case provider.Finish:
				if i != len(got)-1 || err != nil {
					t.Fatalf("Finish at %d of %d, err %v", i, len(got), err)
				}
			case provider.ToolInputStart:
				started[c.ToolCall.ID] = true
			case provider.ToolInputDelta, provider.ToolCallChunk:
				if c.ToolCall == nil || !started[c.ToolCall.ID] {
					t.Fatalf("chunk %d for a call not started: %+v", i, c)
				}
			}
		}
		if err == nil && (len(got) == 0 || got[len(got)-1].Kind != provider.Finish) {
			t.Fatalf("success without Finish: %v", show(got))
		}
	})
}
