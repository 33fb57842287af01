package google

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opencode-server/opencode-server/provider"
	"github.com/opencode-server/opencode-server/provider/httpsse"
)

// sse turns recorded chunks (one GenerateContentResponse JSON per line,
// as the AI SDK's fixtures keep them) into an SSE body framed as the API
// frames it.
func sse(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("data: " + l + "\r\n\r\n")
	}
	return b.String()
}

func decode(t testing.TB, body io.Reader) ([]provider.Chunk, error) {
	t.Helper()
	var got []provider.Chunk
	n := 0
	s := &streamState{emit: func(c provider.Chunk) { got = append(got, c) }, status: 200,
		genID: func() string { n++; return "id" + strconv.Itoa(n) }}
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

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Chunks in the shape the API streams them (from the AI SDK's fixtures
// and a recorded gemini-2.5-flash reply).
const (
	chThought = `{"candidates": [{"content": {"parts": [{"text": "**Considering the request**\n\nThe user wants","thought": true}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1200,"totalTokenCount": 1200,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 1200}]},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
	chText1   = `{"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 1200,"totalTokenCount": 1200},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
	chText2   = `{"candidates": [{"content": {"parts": [{"text": ", world!"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": 1200,"candidatesTokenCount": 4,"totalTokenCount": 1254,"cachedContentTokenCount": 1000,"thoughtsTokenCount": 50},"modelVersion": "gemini-2.5-flash","responseId": "r1"}`
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string
	}{
		{"thought then text", sse(chThought, chText1, chText2),
			// Input is promptTokenCount (cached included), Output
			// candidates + thoughts.
			[]string{"reasoning:**Considering the request**\n\nThe user wants", "text:Hello", "text:, world!", "finish:stop:1200,54,50,1000,0"}},
		{"signed thought and text, empty signed part dropped", sse(
			`{"candidates":[{"content":{"parts":[{"text":"think","thought":true,"thoughtSignature":"c2ln"}],"role":"model"}}]}`,
			`{"candidates":[{"content":{"parts":[{"text":"Answer.","thoughtSignature":"dHh0"}],"role":"model"}}]}`,
			`{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"ZW1wdHk="}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2}}`),
			[]string{`reasoning:think{"google":{"thoughtSignature":"c2ln"}}`, `text:Answer.{"google":{"thoughtSignature":"dHh0"}}`, "finish:stop:5,2,0,0,0"}},
		{"parallel function calls, texts first", sse(
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"read","args":{"filePath":"/a.go","limit":10}},"thoughtSignature":"Q2FsbA=="},{"functionCall":{"name":"todoread"}},{"functionCall":{"name":"glob","args":{}}},{"text":"Reading."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":20,"totalTokenCount":30}}`),
			[]string{"text:Reading.", "start:id1/read", `delta:id1:{"filePath":"/a.go","limit":10}`,
				`call:id1/read:{"filePath":"/a.go","limit":10}{"google":{"thoughtSignature":"Q2FsbA=="}}`,
				"start:id2/todoread", "call:id2/todoread:{}", "start:id3/glob", "delta:id3:{}", "call:id3/glob:{}",
				"finish:tool-calls:10,20,0,0,0"}},
		{"string args", sse(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"bash","args":"{\"command\": \"ls\"}"}}]},"finishReason":"STOP"}]}`),
			[]string{"start:id1/bash", `delta:id1:{"command":"ls"}`, `call:id1/bash:{"command":"ls"}`, "finish:tool-calls:0,0,0,0,0"}},
		{"max tokens", sse(chText1, `{"candidates":[{"content":{"parts":[{"text":" and"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":9}}`),
			[]string{"text:Hello", "text: and", "finish:length:3,9,0,0,0"}},
		{"safety, no content", sse(`{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`),
			[]string{"finish:content-filter:8,0,0,0,0"}},
		{"malformed call, other reasons", sse(`{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}`, `{"candidates":[],"usageMetadata":{"promptTokenCount":1}}`),
			[]string{"finish:error:1,0,0,0,0"}},
		{"unknown reason", sse(`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"LANGUAGE"}]}`),
			[]string{"text:x", "finish:other:0,0,0,0,0"}},
		{"blocked prompt", sse(`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash"}`),
			[]string{"finish:other:12,0,0,0,0"}},
		{"streamed call pieces, files and server tools skipped", sse(
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"x","willContinue":true}},{"functionCall":{"partialArgs":[{"jsonPath":"$.a","stringValue":"b"}]}},{"inlineData":{"mimeType":"image/png","data":"AA=="}},{"executableCode":{"language":"PYTHON","code":"1"}},{"text":"ok"}]},"finishReason":"STOP"}]}`),
			[]string{"text:ok", "finish:stop:0,0,0,0,0"}},
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
	overloaded := `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	t.Run("error object before output is retryable", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(overloaded)))
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || rt.Err.StatusCode != 503 || rt.Err.Message != "The model is overloaded. Please try again later." ||
			!rt.Err.Retryable || rt.Err.ResponseBody != overloaded {
			t.Fatalf("%#v", err)
		}
	})
	t.Run("error object after output is final", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(chText1, overloaded)))
		var ae *provider.APIError
		var rt *httpsse.Retryable
		if errors.As(err, &rt) || !errors.As(err, &ae) || ae.StatusCode != 503 || len(got) != 1 {
			t.Fatalf("%#v after %v", err, show(got))
		}
	})
	t.Run("bad request error object", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(`{"error":{"code":400,"message":"","status":"INVALID_ARGUMENT"}}`)))
		var ae *provider.APIError
		var rt *httpsse.Retryable
		if errors.As(err, &rt) || !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Message != "stream error: INVALID_ARGUMENT" {
			t.Fatalf("%#v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, err := decode(t, strings.NewReader(sse(chText1)+"data: {\"candidates\":[\r\n\r\n"))
		if err == nil || !strings.Contains(err.Error(), "malformed stream event") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("ended without finishReason", func(t *testing.T) {
		got, err := decode(t, strings.NewReader(sse(chThought, chText1)))
		if err == nil || !strings.Contains(err.Error(), "no finishReason") || len(got) != 2 {
			t.Fatalf("%v %v", err, show(got))
		}
	})
	t.Run("empty body", func(t *testing.T) {
		if _, err := decode(t, strings.NewReader("")); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("cut connection is retryable", func(t *testing.T) {
		_, err := decode(t, iotest.TimeoutReader(strings.NewReader(sse(chText1))))
		var rt *httpsse.Retryable
		if !errors.As(err, &rt) || !strings.Contains(rt.Err.Message, "stream interrupted") {
			t.Fatalf("%v", err)
		}
	})
}

func TestGenerateID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := GenerateID()
		if len(id) != 16 || strings.Trim(id, idAlphabet) != "" || seen[id] {
			t.Fatalf("id %q", id)
		}
		seen[id] = true
	}
}

// FuzzStream feeds arbitrary bytes to the decoder: it must not panic,
// end with at most one Finish (last, and only on success), complete only
// tool calls it started, with JSON arguments.
func FuzzStream(f *testing.F) {
	f.Add(sse(chThought, chText1, chText2))
	f.Add(sse(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"read","args":{"a":1}},"thoughtSignature":"s"},{"functionCall":{"name":"b","args":"x"}}]},"finishReason":"STOP"}]}`))
	f.Add(sse(`{"promptFeedback":{"blockReason":"SAFETY"}}`, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	f.Add("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\",\"thoughtSignature\":\"x\"}]},\"finishReason\":\"STOP\"}]}\n\n: keep-alive\r\ndata: {}")
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
				if c.Kind == provider.ToolCallChunk && !json.Valid(c.ToolCall.Arguments) {
					t.Fatalf("arguments %q", c.ToolCall.Arguments)
				}
			}
			if len(c.Metadata) > 0 && !json.Valid(c.Metadata) {
				t.Fatalf("metadata %q", c.Metadata)
			}
		}
		if err == nil && (len(got) == 0 || got[len(got)-1].Kind != provider.Finish) {
			t.Fatalf("success without Finish: %v", show(got))
		}
	})
}
