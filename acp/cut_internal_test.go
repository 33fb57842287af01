package acp

import (
	"encoding/json"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
)

// TestMapperCut: the text of a stream cut off mid-text is made whole at
// the text's end and sent once, however the cut fell: deltas lost in the
// gap, a text begun (or begun and ended) in it, deltas still queued on
// the new subscription after the log said the text ended.
func TestMapperCut(t *testing.T) {
	ev := func(typ, data string) *opencode.Event {
		return &opencode.Event{Type: typ, Data: json.RawMessage(data)}
	}
	started := func(id string) *opencode.Event {
		return ev(opencode.EvTextStarted, `{"textID":"`+id+`"}`)
	}
	delta := func(id, d string) *opencode.Event {
		return ev(opencode.EvTextDelta, `{"textID":"`+id+`","delta":"`+d+`"}`)
	}
	ended := func(id, text string) *opencode.Event {
		return ev(opencode.EvTextEnded, `{"textID":"`+id+`","text":"`+text+`"}`)
	}
	type step struct {
		e       *opencode.Event
		catchUp bool // mapped from the log when the stream resumes
	}
	for _, tc := range []struct {
		name   string
		before []*opencode.Event // live before the cut
		after  []step
		want   string
	}{
		{"deltas lost in the gap", []*opencode.Event{started("t"), delta("t", "ab")},
			[]step{{ended("t", "abcdef"), true}, {delta("t", "ef"), false}}, "abcdef"},
		{"deltas go on after the gap", []*opencode.Event{started("t"), delta("t", "ab")},
			[]step{{delta("t", "ef"), false}, {ended("t", "abcdef"), false}}, "abcdef"},
		{"begun before the cut, nothing sent", []*opencode.Event{started("t")},
			[]step{{delta("t", "cd"), false}, {ended("t", "abcd"), false}}, "abcd"},
		{"begun in the gap", nil,
			[]step{{started("t"), true}, {delta("t", "cd"), false}, {ended("t", "abcd"), false}}, "abcd"},
		{"begun and ended in the gap", nil,
			[]step{{started("t"), true}, {ended("t", "abcd"), true}, {delta("t", "cd"), false}}, "abcd"},
		{"begun after the gap", nil,
			[]step{{started("t"), false}, {delta("t", "ab"), false}, {delta("t", "cd"), false}, {ended("t", "abcd"), false}}, "abcd"},
		{"ended before the cut", []*opencode.Event{started("t"), delta("t", "abcd"), ended("t", "abcd")}, nil, "abcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp := newMapper("")
			var got string
			say := func(us []map[string]any) {
				for _, u := range us {
					if u["sessionUpdate"] == "agent_message_chunk" {
						got += u["content"].(map[string]any)["text"].(string)
					}
				}
			}
			for _, e := range tc.before {
				say(mp.updates(e, false))
			}
			mp.cut()
			for _, s := range tc.after {
				mp.catchUp = s.catchUp
				say(mp.updates(s.e, false))
			}
			if got != tc.want {
				t.Errorf("sent %q, want %q", got, tc.want)
			}
		})
	}
}
