package routes_test

// POST /sync/replay against the real server's answers
// (testdata/reference/replay: record.py made two sessions on one opencode
// serve 1.18.33, a v1 one with a tool call and reasoning and a v2 one,
// exported them with /sync/history and sent every step to a second, fresh
// one). The same requests go to ours in the same order and each answer is
// compared with the recorded one, status and body: "exact", "session" and
// "messages" as they are; "v2messages" with OpenCode's text IDs where they
// are not part IDs ("text-0") as the part IDs ours become, and without the
// zero cost and tokens our v2 view shows of a step that has not ended;
// "history" event by event. "ours" are the answers we give on purpose
// instead of OpenCode's (replayOurs says what and why).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

type replayEntry struct {
	Name     string          `json:"name"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Body     *string         `json:"body"`
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response"`
	Compare  string          `json:"compare"`
	// Error is what OpenCode's log says of a 500.
	Error string `json:"error"`
}

type replayRecording struct {
	Source   []json.RawMessage `json:"source"`
	Sessions struct{ V1, V2 string }
	Entries  []replayEntry `json:"entries"`
}

// replayOur is an answer of ours that differs on purpose: its status, a
// text its message has, and why.
type replayOur struct {
	status int
	has    string
	why    string
}

func replayOurs(rec replayRecording) map[string]replayOur {
	logged := func(name string) string {
		for _, e := range rec.Entries {
			if e.Name == name {
				return strings.TrimPrefix(e.Error, "EventV2.InvalidDurableEvent: ")
			}
		}
		return "?"
	}
	const internal = "OpenCode answers 500 UnknownError (its log has the words ours answers with)"
	return map[string]replayOur{
		"bad_garbage":             {400, "JSON", "OpenCode answers 500 to a body that is not JSON"},
		"unknown_type":            {400, logged("unknown_type"), internal},
		"unknown_type_extra_keys": {400, logged("unknown_type_extra_keys"), internal},
		"mixed_aggregates":        {400, logged("mixed_aggregates"), internal},
		"seq_gap":                 {400, logged("seq_gap"), internal},
		"deleted_without_info":    {400, "Missing key\n  at [\"events\"][0][\"data\"][\"info\"]", internal + ": its SchemaError, here with the whole path"},
		"new_session_from_seq_1":  {409, logged("new_session_from_seq_1"), internal + "; the history does not follow on what the session has: a conflict"},
		"data_without_session":    {400, "Missing key\n  at [\"events\"][0][\"data\"][\"sessionID\"]", internal},
		"message_before_session":  {400, "starts with session.created.1", "OpenCode fails inserting the message (500); ours keeps no history without its session"},
		"partial":                 {400, "Missing key\n  at [\"events\"][1][\"data\"][\"sessionID\"]", internal + "; OpenCode commits event by event"},
		"partial_get":             {404, "Session not found", "OpenCode kept the first event of the failed replay; ours wrote nothing"},
		"diverged_data":           {409, logged("diverged_data"), internal},
		"diverged_id":             {409, logged("diverged_id"), internal},
		"aggregate_mismatch":      {400, logged("aggregate_mismatch"), internal},
		"v1_messages_v2":          {200, "", "OpenCode keeps v2 messages apart (only session.next.* events make them); ours has one message store, which the v2 routes show"},
		"v2_messages_v1":          {200, "", "the same: the v2 events' messages are ours on the v1 route too"},
	}
}

func loadReplayRecording(t *testing.T) replayRecording {
	var rec replayRecording
	loadReference(t, "replay/answers.json", &rec)
	return rec
}

func TestSyncReplayReference(t *testing.T) {
	rec := loadReplayRecording(t)
	for _, sqlite := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "sqlite"}[sqlite], func(t *testing.T) {
			c := biStart(t, testserver.Options{SQLite: sqlite})
			ours := replayOurs(rec)
			for _, e := range rec.Entries {
				var body []byte
				if e.Body != nil {
					body = []byte(*e.Body)
				}
				r, err := c.send(e.Method, e.Path, "application/json", body, nil)
				if err != nil {
					t.Fatalf("%s: %v", e.Name, err)
				}
				if e.Compare == "ours" {
					checkReplayOurs(t, e, ours[e.Name], r, rec)
					continue
				}
				if r.status != e.Status {
					t.Errorf("%s: %s %s = %d %s, OpenCode %d %s", e.Name, e.Method, e.Path, r.status, biClip(r.body), e.Status, biClip(e.Response))
					continue
				}
				got, want := decodeAny(t, e.Name, r.body), decodeAny(t, e.Name+" (recorded)", e.Response)
				switch e.Compare {
				case "v2messages":
					want, got = asOurTextIDs(want, got), withoutRunningUsage(got)
				case "history":
					checkReplayHistory(t, got, rec)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %s %s\n ours:     %s\n OpenCode: %s", e.Name, e.Method, e.Path, mustJSON(got), mustJSON(want))
				}
			}
		})
	}
}

func checkReplayOurs(t *testing.T, e replayEntry, o replayOur, r biResp, rec replayRecording) {
	t.Helper()
	if o.status == 0 {
		t.Fatalf("%s: no expectation of ours", e.Name)
	}
	if r.status != o.status {
		t.Errorf("%s: %d %s, want %d (%s)", e.Name, r.status, biClip(r.body), o.status, o.why)
		return
	}
	if o.status != 200 {
		var b struct {
			Data struct{ Message string } `json:"data"`
		}
		if json.Unmarshal(r.body, &b) != nil || !strings.Contains(b.Data.Message, o.has) {
			t.Errorf("%s: %s, want a message with %q (%s)", e.Name, r.body, o.has, o.why)
		}
		return
	}
	// The other route's messages: the same ones (IDs) as the route OpenCode
	// shows them on.
	var ids []string
	switch e.Name {
	case "v1_messages_v2":
		var v2 struct {
			Data []struct{ ID string } `json:"data"`
		}
		_ = json.Unmarshal(r.body, &v2)
		for i := len(v2.Data) - 1; i >= 0; i-- { // newest first
			ids = append(ids, v2.Data[i].ID)
		}
		if want := replayV1IDs(rec, "v1_messages"); !reflect.DeepEqual(ids, want) {
			t.Errorf("%s: messages %v, want those of GET /session/{id}/message %v (%s)", e.Name, ids, want, o.why)
		}
	case "v2_messages_v1":
		var v1 []struct {
			Info struct{ ID string } `json:"info"`
		}
		_ = json.Unmarshal(r.body, &v1)
		for _, m := range v1 {
			ids = append(ids, m.Info.ID)
		}
		var v2 struct {
			Data []struct{ ID string } `json:"data"`
		}
		for _, x := range rec.Entries {
			if x.Name == "v2_messages" {
				_ = json.Unmarshal(x.Response, &v2)
			}
		}
		var want []string
		for i := len(v2.Data) - 1; i >= 0; i-- {
			want = append(want, v2.Data[i].ID)
		}
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("%s: messages %v, want those of the v2 route %v (%s)", e.Name, ids, want, o.why)
		}
	}
}

func replayV1IDs(rec replayRecording, name string) []string {
	for _, e := range rec.Entries {
		if e.Name != name {
			continue
		}
		var v1 []struct {
			Info struct{ ID string } `json:"info"`
		}
		_ = json.Unmarshal(e.Response, &v1)
		var ids []string
		for _, m := range v1 {
			ids = append(ids, m.Info.ID)
		}
		return ids
	}
	return nil
}

// checkReplayHistory compares our /sync/history after the replays with
// the history the replayed sessions came with: every event from seq 1 as
// it was, seq 0 its type and session (ours is the session as it is now,
// under an ID of ours).
func checkReplayHistory(t *testing.T, got any, rec replayRecording) {
	t.Helper()
	key := func(e map[string]any) string { return fmt.Sprintf("%v/%v", e["aggregate_id"], e["seq"]) }
	// What the replays OpenCode took brought: the exported sessions and
	// the event appended to one.
	want := map[string]map[string]any{}
	for _, x := range rec.Entries {
		if x.Path != "/sync/replay" || x.Status != http.StatusOK {
			continue
		}
		var body struct{ Events []map[string]any }
		_ = json.Unmarshal([]byte(*x.Body), &body)
		for _, e := range body.Events {
			e["aggregate_id"] = e["aggregateID"]
			delete(e, "aggregateID")
			want[key(e)] = e
		}
	}
	list, _ := got.([]any)
	seen := 0
	for _, x := range list {
		e, _ := x.(map[string]any)
		w, ok := want[key(e)]
		if !ok {
			t.Errorf("history: %s, which no replay brought", mustJSON(e))
			continue
		}
		seen++
		if e["seq"] == float64(0) {
			if e["type"] != w["type"] || dig(e, "data", "info", "id") != dig(w, "data", "info", "id") {
				t.Errorf("history: %s\n want the session of %s", mustJSON(e), mustJSON(w))
			}
			continue
		}
		if !reflect.DeepEqual(e, w) {
			t.Errorf("history:\n ours:     %s\n replayed: %s", mustJSON(e), mustJSON(w))
		}
	}
	if seen != len(want) {
		t.Errorf("history has %d of the %d replayed events", seen, len(want))
	}
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// asOurTextIDs gives want's text and reasoning content the IDs ours has
// where OpenCode's are not part IDs ("text-0"): ours become parts.
func asOurTextIDs(want, got any) any {
	w, _ := want.(map[string]any)
	g, _ := got.(map[string]any)
	wd, _ := w["data"].([]any)
	gd, _ := g["data"].([]any)
	for i := range wd {
		if i >= len(gd) {
			break
		}
		wc, _ := wd[i].(map[string]any)["content"].([]any)
		gc, _ := gd[i].(map[string]any)["content"].([]any)
		for j := range wc {
			item, _ := wc[j].(map[string]any)
			id, _ := item["id"].(string)
			if j < len(gc) && (item["type"] == "text" || item["type"] == "reasoning") && !strings.HasPrefix(id, "prt_") {
				item["id"] = gc[j].(map[string]any)["id"]
			}
		}
	}
	return want
}

// withoutRunningUsage drops the cost and tokens ours shows (zero) of an
// assistant message whose step has not ended: OpenCode's v2 message has
// none until then. (Our v2 view of a running step, replayed or not.)
func withoutRunningUsage(v any) any {
	m, _ := v.(map[string]any)
	data, _ := m["data"].([]any)
	for _, x := range data {
		msg, _ := x.(map[string]any)
		if msg["type"] == "assistant" && dig(msg, "time", "completed") == nil {
			delete(msg, "cost")
			delete(msg, "tokens")
		}
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
