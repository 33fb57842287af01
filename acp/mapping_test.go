package acp_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/opencode-server/opencode-server/acp"
	"github.com/opencode-server/opencode-server/opencode"
)

var rewrite = flag.Bool("update", false, "rewrite testdata/updates.golden.jsonl")

// mappingEvents is a turn as the core logs and streams it: a prompt, a
// thought, streamed text, an edit that succeeds, a command that fails,
// the step's usage, a mode switch, a todo list, a new title and the
// end of the work.
func mappingEvents() []*opencode.Event {
	seq := int64(0)
	ev := func(typ string, durable bool, data string) *opencode.Event {
		e := &opencode.Event{ID: "evt_" + typ, Type: typ, SessionID: "ses_1", Durable: durable, Data: json.RawMessage(data)}
		if durable {
			seq++
			e.Seq = seq
		}
		return e
	}
	return []*opencode.Event{
		ev(opencode.EvPrompted, true, `{"messageID":"msg_u1","prompt":{"text":"fix the bug"},"delivery":"queue"}`),
		ev(opencode.EvStepStarted, true, `{"assistantMessageID":"msg_a1"}`),
		ev(opencode.EvReasoningStarted, true, `{"assistantMessageID":"msg_a1","reasoningID":"prt_r1"}`),
		ev(opencode.EvReasoningDelta, false, `{"assistantMessageID":"msg_a1","reasoningID":"prt_r1","delta":"thinking"}`),
		ev(opencode.EvReasoningEnded, true, `{"assistantMessageID":"msg_a1","reasoningID":"prt_r1","text":"thinking"}`),
		ev(opencode.EvTextStarted, true, `{"assistantMessageID":"msg_a1","textID":"prt_t1"}`),
		ev(opencode.EvTextDelta, false, `{"assistantMessageID":"msg_a1","textID":"prt_t1","delta":"On "}`),
		ev(opencode.EvTextDelta, false, `{"assistantMessageID":"msg_a1","textID":"prt_t1","delta":"it."}`),
		ev(opencode.EvTextEnded, true, `{"assistantMessageID":"msg_a1","textID":"prt_t1","text":"On it."}`),
		ev(opencode.EvToolCalled, true, `{"assistantMessageID":"msg_a1","callID":"call_1","tool":"edit","input":{"filePath":"/p/a.go","oldString":"x := 1","newString":"x := 2"}}`),
		ev(opencode.EvToolSuccess, true, `{"assistantMessageID":"msg_a1","callID":"call_1","structured":{},"content":[{"type":"text","text":"Edit applied successfully."}]}`),
		ev(opencode.EvToolCalled, true, `{"assistantMessageID":"msg_a1","callID":"call_2","tool":"bash","input":{"command":"go test","description":"Run tests"}}`),
		ev(opencode.EvToolFailed, true, `{"assistantMessageID":"msg_a1","callID":"call_2","error":{"type":"unknown","message":"exit status 1"}}`),
		ev(opencode.EvStepEnded, true, `{"assistantMessageID":"msg_a1","finish":"tool-calls","cost":0.0021,"tokens":{"input":1200,"output":80,"reasoning":10,"cache":{"read":300,"write":0}}}`),
		ev(opencode.EvAgentSwitched, true, `{"messageID":"msg_s1","agent":"plan"}`),
		ev(opencode.EvTodoUpdated, false, `{"sessionID":"ses_1","todos":[{"id":"1","content":"write test","status":"in_progress","priority":"high"},{"id":"2","content":"drop it","status":"cancelled","priority":"low"}]}`),
		ev(opencode.EvSessionUpdated, false, `{"sessionID":"ses_1","info":{"id":"ses_1","title":"Fix the bug","time":{"created":1796000000000,"updated":1796000001000}}}`),
		ev(opencode.EvSessionStatus, false, `{"sessionID":"ses_1","status":{"type":"idle"}}`),
	}
}

// TestMappingGolden: the event-to-update mapping, live and replayed, in
// v1's encoding is testdata/updates.golden.jsonl and in v2's
// testdata/updates.v2.golden.jsonl (one mapping, two encodings), and every
// update is a valid SessionUpdate of its version's schema.
func TestMappingGolden(t *testing.T) {
	for _, v := range []struct {
		v2     bool
		golden string
		schema *schemaSet
	}{{false, "testdata/updates.golden.jsonl", v1Schema}, {true, "testdata/updates.v2.golden.jsonl", v2Schema}} {
		var b bytes.Buffer
		for _, replay := range []bool{false, true} {
			for _, u := range acp.MapEvents(mappingEvents(), replay, v.v2) {
				raw, err := json.Marshal(u)
				if err != nil {
					t.Fatal(err)
				}
				if err := validateIn(t, v.schema, "SessionUpdate", raw); err != nil {
					t.Errorf("update %s is not a valid SessionUpdate (v2 %v): %v", raw, v.v2, err)
				}
				line, _ := json.Marshal(map[string]any{"replay": replay, "update": json.RawMessage(raw)})
				b.Write(line)
				b.WriteByte('\n')
			}
		}
		if *rewrite {
			if err := os.WriteFile(v.golden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(v.golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(want, b.Bytes()) {
			t.Errorf("mapping differs from %s (run with -update after checking):\n%s", v.golden, b.String())
		}
	}
}
