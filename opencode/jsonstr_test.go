package opencode

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// TestAppendJSONString: the same bytes as encoding/json for any string.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "\x00\x1f\b\f\n\r\t\\", "\u2028\u2029", "\xff\xfe ok", "é 世界 🎉"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune("<>&\"\\\n\t\u2028\u2029\x00\x7fa"))),
			rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "raw")) })).Draw(t, "s")
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// TestTextPartJSON: a text part encodes as encoding/json encodes its
// fields in OpenCode's order, whatever the optional fields hold.
func TestTextPartJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Part{ID: "prt_" + rapid.StringMatching(`[a-zA-Z0-9]{0,8}`).Draw(t, "id"), SessionID: rapid.String().Draw(t, "ses"),
			MessageID: "msg_x", Type: PartText, Text: string(rapid.SliceOf(rapid.Byte()).Draw(t, "text")),
			Synthetic: rapid.Bool().Draw(t, "synthetic"), Ignored: rapid.Bool().Draw(t, "ignored")}
		if rapid.Bool().Draw(t, "time") {
			p.Time = &PartTime{Start: rapid.Int64().Draw(t, "start")}
		}
		if rapid.Bool().Draw(t, "metadata") {
			p.Metadata = json.RawMessage(`{"k": "<v>" }`)
		}
		want, err := json.Marshal(struct {
			partHead
			Text      string          `json:"text"`
			Synthetic bool            `json:"synthetic,omitempty"`
			Ignored   bool            `json:"ignored,omitempty"`
			Time      *PartTime       `json:"time,omitempty"`
			Metadata  json.RawMessage `json:"metadata,omitempty"`
		}{partHead{p.ID, p.SessionID, p.MessageID, p.Type}, p.Text, p.Synthetic, p.Ignored, p.Time, p.Metadata})
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("got %s (%v), want %s", got, err, want)
		}
	})
}

// TestPartUpdatedJSON: message.part.updated encodes as encoding/json
// encodes its fields, for parts of every kind.
func TestPartUpdatedJSON(t *testing.T) {
	for _, p := range []Part{
		{ID: "prt_1", SessionID: "ses_1", MessageID: "msg_1", Type: PartText, Text: "<b>\n\u2028\xff", Synthetic: true},
		{ID: "prt_2", SessionID: "ses_1", MessageID: "msg_1", Type: PartReasoning, Text: "think"},
		{ID: "prt_3", SessionID: "ses_1", MessageID: "msg_1", Type: PartTool, CallID: "c", Tool: "bash", State: &ToolState{Status: "pending"}},
	} {
		e := PartUpdated{SessionID: "ses_<1>", Part: p, Time: 1234}
		type plain PartUpdated // the struct's fields, without the method
		want, err := json.Marshal(plain(e))
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.MarshalJSON()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %s (%v), want %s", p.Type, got, err, want)
		}
	}
}
