package anthropic

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
// SDK's fixtures keep them) into an SSE body with event names.
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

const (
	evStart = `{"type":"message_start","message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`
	evPing  = `{"type":"ping"}`
	evStop  = `{"type":"message_stop"}`
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
			out = append(out, "text:"+c.Text)
		case provider.ReasoningDelta:
			out = append(out, "reasoning:"+c.Text+string(c.Metadata))
		case provider.ReasoningEnd:
			out = append(out, "reasoning-end")
		case provider.ToolInputStart:
			out = append(out, "start:"+c.ToolCall.ID+"/"+c.ToolCall.Name)
		case provider.ToolInputDelta:
			out = append(out, "delta:"+c.ToolCall.ID+":"+c.Text)
		case provider.ToolCallChunk:
			out = append(out, "call:"+c.ToolCall.ID+"/"+c.ToolCall.Name+":"+string(c.ToolCall.Arguments))
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
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"text", sse(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, evPing,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"! I'm fine."}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":30}}`,
			evStop),
			// Input is the AI SDK's inputTokens.total: 12 + 2000 + 100.
			[]string{"text:Hello", "text:! I'm fine.", "finish:stop:2112,30,0,2000,100"}},
		{"tool use with streamed JSON", sse(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading."}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"read","input":{}}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"filePath\": "}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"/a.go\"}"}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"todoread","input":{}}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
			`{"type":"content_block_stop","index":2}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":48}}`,
			evStop),
			[]string{"text:Reading.", "start:toolu_01/read", `delta:toolu_01:{"filePath": `, `delta:toolu_01:"/a.go"}`,
				`call:toolu_01/read:{"filePath": "/a.go"}`, "start:toolu_02/todoread", "call:toolu_02/todoread:{}",
				"finish:tool-calls:2112,48,0,2000,100"}},
		{"thinking with signature", sse(evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" it over."}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIB"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"EmwKAhgB"}}`,
			`{"type":"content_block_stop","index":1}`,
			`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"ignored on text"}}`,
			`{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"42"}}`,
			`{"type":"content_block_stop","index":2}`,
			`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":90,"output_tokens_details":{"thinking_tokens":60}}}`,
			evStop),
			[]string{"reasoning:Let me think", "reasoning: it over.", `reasoning:{"anthropic":{"signature":"EqQBCkYIB"}}`,
				"reasoning-end", `reasoning:{"anthropic":{"redactedData":"EmwKAhgB"}}`, "reasoning-end", "text:42", "finish:length:2112,90,60,2000,100"}},
		{"duplicate message_start ignored, unknown events skipped", sse(evStart, evStart,
			`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"future_event","x":1}`,
			`{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":1}}`, evStop),
			[]string{"finish:content-filter:2112,1,0,2000,100"}},
		{"message_delta without message_stop", sse(evStart,
			`{"type":"message_delta","delta":{"stop_reason":"stop_sequence"},"usage":{"output_tokens":3}}`),
			[]string{"finish:stop:2112,3,0,2000,100"}},
		{"tool use whole in message_start", sse(
			`{"type":"message_start","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_9","name":"bash","input":{"command":"ls"}}],"usage":{"input_tokens":5}}}`,
			`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}`, evStop),
			[]string{"start:toolu_9/bash", `delta:toolu_9:{"command":"ls"}`, `call:toolu_9/bash:{"command":"ls"}`, "finish:tool-calls:5,7,0,0,0"}},
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
	text := `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n"
	delta := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`
	overloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	t.Run("overloaded before output is retryable 529", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evStart, evPing, overloaded)))
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || rt.Err.StatusCode != 529 || rt.Err.Message != "Overloaded" || !rt.Err.Retryable ||
			rt.Err.ResponseBody != `{"type":"overloaded_error","message":"Overloaded"}` {
			t.Fatalf("%#v", err)
		}
	})
	t.Run("mid-stream error is final", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(evStart, strings.TrimSpace(text), delta, overloaded)))
		var ae *provider.APIError
		var rt *httpsse.Retryable
		if errors.As(err, &rt) || !errors.As(err, &ae) || ae.Message != "Overloaded" || ae.StatusCode != 529 || len(got) != 1 {
			t.Fatalf("%#v after %v", err, show(got))
		}
	})
	t.Run("other error type is 500", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)))
		var ae *provider.APIError
		var rt *httpsse.Retryable
		if errors.As(err, &rt) || !errors.As(err, &ae) || ae.StatusCode != 500 || ae.Retryable || ae.Message != "Internal server error" {
			t.Fatalf("%#v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evStart)+"data: {\"type\":\"content_block_delta\n\n"))
		if err == nil || !strings.Contains(err.Error(), "malformed stream event") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("ended early", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(evStart, strings.TrimSpace(text), delta)))
		if err == nil || !strings.Contains(err.Error(), "no message_stop") || len(got) != 1 {
			t.Fatalf("%v %v", err, show(got))
		}
	})
	t.Run("cut connection is retryable", func(t *testing.T) {
		_, err := decode(t, iotest.TimeoutReader(strings.NewReader(sse(evStart))))
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || !strings.Contains(rt.Err.Message, "stream interrupted") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("second message while open", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(evStart, strings.Replace(evStart, "msg_01", "msg_02", 1))))
		if err == nil || !strings.Contains(err.Error(), `Received message_start for message "msg_02"`) {
			t.Fatalf("%v", err)
		}
	})
}

// FuzzStream feeds arbitrary bytes to the decoder: it must not panic,
// end with at most one Finish (last, and only on success), and complete
// only tool calls it started.
func FuzzStream(f *testing.F) {
	f.Add(sse(evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, `{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`, evStop))
	f.Add(sse(evStart, `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`{"type":"content_block_stop","index":1}`, `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`, evStop))
	f.Add(sse(evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"d"}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add("event: ping\ndata: {\"type\":\"ping\"}\n\n: comment\r\ndata: {\"type\":\"message_stop\"}")
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
