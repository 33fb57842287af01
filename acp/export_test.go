package acp

import (
	"strings"

	"github.com/opencode-server/opencode-server/opencode"
)

// MapEvents maps a session's events as a followed session's stream does
// (replay: as session/load sends its log), in v1's or v2's encoding.
func MapEvents(events []*opencode.Event, replay, v2 bool) []map[string]any {
	mp := newMapper("")
	var out []map[string]any
	for _, e := range events {
		for _, u := range mp.updates(e, replay) {
			if u = encodeUpdate(u, v2, func() []map[string]any {
				return []map[string]any{{"configId": "mode", "name": "Mode", "type": "select", "currentValue": "plan",
					"options": []map[string]any{{"value": "plan", "name": "plan"}}}}
			}); u != nil {
				out = append(out, u)
			}
		}
	}
	return out
}

// Askers is how many permission-ask goroutines run now.
func Askers() int {
	n := 0
	for _, s := range stacks() {
		if strings.Contains(s, "acp.(*Agent).askPermission.func") {
			n++
		}
	}
	return n
}

// SetPageSize sets how many sessions a v2 session/list page holds, until
// the test ends.
func SetPageSize(t interface{ Cleanup(func()) }, n int) {
	old := pageSize
	pageSize = n
	t.Cleanup(func() { pageSize = old })
}
