package acp

import "github.com/opencode-server/opencode-server/opencode"

// MapEvents maps a session's events as a followed session's stream does
// (replay: as session/load sends its log).
func MapEvents(events []*opencode.Event, replay bool) []map[string]any {
	mp := newMapper("")
	var out []map[string]any
	for _, e := range events {
		out = append(out, mp.updates(e, replay)...)
	}
	return out
}
