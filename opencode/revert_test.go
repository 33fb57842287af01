package opencode

import (
	"encoding/json"
	"testing"
)

// TestSessionRevertDiff: a tracked revert says its diff, "" when no file
// changes, as OpenCode; an untracked one has none.
func TestSessionRevertDiff(t *testing.T) {
	for _, tt := range []struct {
		r    SessionRevert
		want string
	}{
		{SessionRevert{MessageID: "msg_1"}, `{"messageID":"msg_1"}`},
		{SessionRevert{MessageID: "msg_1", Snapshot: "abc"}, `{"messageID":"msg_1","snapshot":"abc","diff":""}`},
		{SessionRevert{MessageID: "msg_1", PartID: "prt_1", Snapshot: "abc", Diff: "d"}, `{"messageID":"msg_1","partID":"prt_1","snapshot":"abc","diff":"d"}`},
	} {
		b, err := json.Marshal(tt.r)
		if err != nil || string(b) != tt.want {
			t.Errorf("%+v: %s %v, want %s", tt.r, b, err, tt.want)
		}
	}
}
