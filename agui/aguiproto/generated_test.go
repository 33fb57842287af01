package aguiproto_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/opencode-server/opencode-server/agui/aguiproto"
	"github.com/opencode-server/opencode-server/agui/aguiproto/aguipbjson"
)

// matchesGenerated: Encode writes the bytes proto.Marshal writes for the
// generated message aguipbjson.Event makes of the same JSON, or both refuse
// it with the same kind of error.
func matchesGenerated(t *testing.T, data []byte) {
	t.Helper()
	got, err := Encode(json.RawMessage(data))
	ev, refErr := aguipbjson.Event(json.RawMessage(data))
	var want []byte
	if refErr == nil {
		want, refErr = aguipbjson.Frame(ev)
	}
	if (err == nil) != (refErr == nil) || errors.Is(err, ErrTooLarge) != errors.Is(refErr, ErrTooLarge) {
		t.Fatalf("Encode(%.200s): %v; the generated code: %v", data, err, refErr)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidEvent) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("untyped error: %v", err)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode(%.200s)\n got %x\nwant %x (proto.Marshal)", data, got, want)
	}
}

// TestMatchesGenerated: for every event of the golden table, and for the
// corners it does not reach (lengths of two and three varint bytes at
// several depths, zero values with and without presence, every part and
// source form, events refused), the direct encoder and the generated code
// agree byte for byte.
func TestMatchesGenerated(t *testing.T) {
	for _, c := range loadEvents(t) {
		t.Run(c.Name, func(t *testing.T) { matchesGenerated(t, c.Event) })
	}
	long := strings.Repeat("é", 100)      // 200 bytes: a 2-byte length
	longer := strings.Repeat("x", 20_000) // a 3-byte length
	deep := `{"a":` + strings.Repeat(`[{"k":"`+long+`","n":`, 20) + `1` + strings.Repeat("}]", 20) + `}`
	for name, ev := range map[string]string{
		"long delta":       `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + longer + `"}`,
		"deep long state":  `{"type":"STATE_SNAPSHOT","snapshot":` + deep + `}`,
		"nested at max":    `{"type":"STATE_SNAPSHOT","snapshot":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`,
		"numbers":          `{"type":"CUSTOM","name":"n","value":[0,-0,1e308,5e-324,-1.5,9007199254740993,1E2,true,false,null,"",{}]}`,
		"empty key":        `{"type":"CUSTOM","name":"","value":{"":{"":""},"b":[],"a":null}}`,
		"negative time":    `{"type":"STEP_STARTED","stepName":"s","timestamp":-5,"metadata":{},"rawEvent":null}`,
		"zero time":        `{"type":"STEP_STARTED","stepName":"","timestamp":0,"rawEvent":0}`,
		"float time":       `{"type":"STEP_STARTED","stepName":"s","timestamp":1e3}`,
		"empty optionals":  `{"type":"TEXT_MESSAGE_CHUNK","messageId":"","role":"","delta":"","name":"","subagentRunId":""}`,
		"replace false":    `{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"a","content":{},"replace":false}`,
		"nulls":            `{"type":"TEXT_MESSAGE_START","messageId":"m","role":null,"name":null,"timestamp":null,"metadata":null}`,
		"ignored keys":     `{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":"","baseEvent":1,"contentParts":5,"x":{}}`,
		"patch values":     `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":null},{"op":"remove","path":"/b"},{"op":"move","path":"/c","from":"/d"},{"op":"copy","path":"","from":""},{"op":"test","path":"/e","value":{"x":[1]}},{"op":"replace","path":"/f","value":"` + long + `"}]}`,
		"activity delta":   `{"type":"ACTIVITY_DELTA","messageId":"m","activityType":"a","patch":[],"subagentRunId":"s"}`,
		"outcome kinds":    `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","pendingToolCallIds":["ignored"],"interrupts":[{"id":"i","reason":"r","metadata":null,"responseSchema":{"type":"object"},"expiresAt":"x"}]},"interrupts":[{"id":"top"}],"usage":[{"provider":"p","inputTokens":0,"totalTokens":12}]}`,
		"outcome success":  `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","pendingToolCallIds":["a",""],"interrupts":[{"id":"ignored"}]},"result":null}`,
		"outcome no type":  `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":5}}`,
		"outcome null":     `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":null,"result":{"a":1}}`,
		"subagent":         `{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"suspended","interruptIds":["i1","i2"]},"result":[1]}`,
		"subagent done":    `{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"completed","interruptIds":["ignored"]}}`,
		"raw":              `{"type":"RAW","event":null,"source":""}`,
		"custom no value":  `{"type":"CUSTOM","name":"n"}`,
		"run error":        `{"type":"RUN_ERROR","message":"m","code":"","usage":[{},{"model":"x","cacheWriteInputTokens":-3}]}`,
		"subagent started": `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","description":"","parentSubagentRunId":"p","parentToolCallId":"c","parentMessageId":"m"}`,
		"encrypted":        `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"` + long + `"}`,
		"messages": `{"type":"MESSAGES_SNAPSHOT","messages":[
			{"id":"a","role":"activity","activityType":"x"},
			{"id":"b","role":"activity","activityType":"x","content":{"k":[1,2]}},
			{"id":"c","role":"stranger","content":[{"type":"text","text":"t"}]},
			{"id":"d","role":"stranger","content":"s","activityContent":{"ignored":1}},
			{"id":"e","role":"assistant","content":"` + long + `","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"metadata":{"m":1},"encryptedValue":""},{"id":"c2","function":{}}]},
			{"id":"f","role":"tool","toolCallId":"c1","content":[],"error":""},
			{"id":"g","role":"user","content":null,"name":"n","metadata":{},"subagentRunId":"s","encryptedValue":"e"},
			{"id":"h","role":"reasoning","content":"r"},
			{"id":"i","role":"user","content":[
				{"type":"text","text":"","id":"","metadata":null},
				{"type":"text","id":"t2","metadata":{"a":[null]}},
				{"type":"image","source":{"type":"data","value":"aGk=","mimeType":null}},
				{"type":"image","source":{"type":"data","value":"aGk="}},
				{"type":"audio","source":{"type":"url","value":"https://x/a","mimeType":"audio/wav"},"id":"p"},
				{"type":"video","source":{"type":"file","value":"file_1","provider":"openai","mimeType":""}},
				{"type":"document","metadata":3},
				{"type":"image"},
				{"type":"binary","mimeType":"image/png","data":"aGk=","url":"https://ignored","filename":{"n":["x"]},"id":"b1","metadata":{"ignored":true}},
				{"type":"binary","mimeType":"image/png","url":"https://x/y.png","filename":null},
				{"type":"binary","id":"file_2"},
				{"type":"binary","id":"file_3","mimeType":"text/plain","data":""}
			]}]}`,
		"run input": `{"type":"RUN_STARTED","threadId":"t","runId":"r","parentRunId":"","protocolVersion":"1.0","input":{"threadId":"t","runId":"r","state":null,"forwardedProps":{"a":"` + long + `"},
			"tools":[{"name":"x","description":"","parameters":null,"metadata":{}}],"context":[{"description":"d","value":"v"},{}],
			"resume":[{"interruptId":"i","status":"resolved","payload":false},{"interruptId":"j","status":"cancelled","metadata":{"z":1}}],
			"messages":[{"id":"u","role":"user","content":[{"type":"document","source":{"type":"url","value":"u"}}]}]}}`,
		"empty input": `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{}}`,

		// Refused by both.
		"too large":        `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("x", MaxFrame) + `"}`,
		"too deep":         `{"type":"STATE_SNAPSHOT","snapshot":{"a":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}}`,
		"op case":          `{"type":"STATE_DELTA","delta":[{"op":"teſt","path":"/a"}]}`,
		"op upper":         `{"type":"STATE_DELTA","delta":[{"op":"ADD","path":"/a"}]}`,
		"binary bad meta":  `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":"binary","data":"aGk=","metadata":1e999}]}]}`,
		"binary no bytes":  `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":"binary","data":"","url":""}]}]}`,
		"text null":        `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":"text","text":null}]}]}`,
		"source value":     `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":"image","source":{"type":"url","value":null}}]}]}`,
		"part type":        `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":[{"type":5}]}]}`,
		"activity string":  `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"activity","content":"s"}]}`,
		"content number":   `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":5}]}`,
		"role number":      `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":5,"content":[]}]}`,
		"usage float":      `{"type":"RUN_ERROR","message":"m","usage":[{"inputTokens":1.5}]}`,
		"replace string":   `{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"a","content":{},"replace":"yes"}`,
		"pending not list": `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","pendingToolCallIds":"a"}}`,
		"function string":  `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","function":"f"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) { matchesGenerated(t, []byte(ev)) })
	}
}

// TestServerLinksNoProtobufRuntime: the server binary's packages take
// nothing of google.golang.org/protobuf but encoding/protowire (and what
// that imports), and neither aguipb nor aguipbjson: the registry, protoimpl
// and the generated descriptors cost up to 3 MB of RSS at start.
func TestServerLinksNoProtobufRuntime(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		if gobin, err = exec.LookPath("go"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no go command to list the server's packages")
			}
			t.Skip("no go command")
		}
	}
	out, err := exec.Command(gobin, "list", "-deps", "../../cmd/opencode-server").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"google.golang.org/protobuf/encoding/protowire": true,
		"google.golang.org/protobuf/internal/errors":    true,
		"google.golang.org/protobuf/internal/detrand":   true,
	}
	var found bool
	for _, pkg := range strings.Fields(string(out)) {
		found = found || pkg == "github.com/opencode-server/opencode-server/agui/aguiproto"
		if strings.HasPrefix(pkg, "google.golang.org/protobuf/") && !allowed[pkg] ||
			strings.HasPrefix(pkg, "github.com/opencode-server/opencode-server/agui/aguiproto/") {
			t.Errorf("the server links %s", pkg)
		}
	}
	if !found {
		t.Error("the server no longer links aguiproto: is this the right binary?")
	}
}
