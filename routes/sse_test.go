package routes_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// v1Props are the properties of the v1 events a turn is made of.
type v1Props struct {
	SessionID string `json:"sessionID"`
	Info      *struct {
		ID       string `json:"id"`
		Role     string `json:"role"`
		ParentID string `json:"parentID"`
		Finish   string `json:"finish"`
		Time     struct {
			Created   int64 `json:"created"`
			Completed int64 `json:"completed"`
		} `json:"time"`
	} `json:"info"`
	Part *struct {
		ID        string `json:"id"`
		MessageID string `json:"messageID"`
		SessionID string `json:"sessionID"`
		Type      string `json:"type"`
		Text      string `json:"text"`
		Time      *struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"time"`
	} `json:"part"`
	Status *struct {
		Type string `json:"type"`
	} `json:"status"`
	MessageID string `json:"messageID"`
	PartID    string `json:"partID"`
	Field     string `json:"field"`
	Delta     string `json:"delta"`
}

// label describes a v1 event the way the expected sequence is written.
func label(ev envelope, p v1Props) string {
	switch ev.Type {
	case "message.updated":
		s := "message.updated(" + p.Info.Role
		if p.Info.Role == "assistant" && p.Info.Time.Completed != 0 {
			s += " completed"
		}
		return s + ")"
	case "message.part.updated":
		s := "part(" + p.Part.Type
		if p.Part.Type == "text" {
			switch {
			case p.Part.Time != nil && p.Part.Time.End != 0:
				s += " end"
			case p.Part.Text == "":
				s += ` ""`
			}
		}
		return s + ")"
	case "message.part.delta":
		return "delta"
	case "session.status":
		return "status " + p.Status.Type
	}
	return ev.Type
}

// TestV1TurnEventSequence: the v1 events of one turn on /event, in order,
// with the ID relations the TUI relies on.
func TestV1TurnEventSequence(t *testing.T) {
	tr := recordTurn(t)
	relevant := map[string]bool{"message.updated": true, "message.part.updated": true,
		"message.part.delta": true, "session.status": true, "session.idle": true}
	var labels []string
	var evs []envelope
	var props []v1Props
	for _, f := range tr.event[1:] {
		ev := v1Envelope(t, f)
		if !relevant[ev.Type] {
			continue
		}
		var p v1Props
		if err := json.Unmarshal(ev.Properties, &p); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		if p.SessionID != tr.session {
			t.Errorf("%s has sessionID %q, want %q", ev.Type, p.SessionID, tr.session)
		}
		labels = append(labels, label(ev, p))
		evs = append(evs, ev)
		props = append(props, p)
	}
	want := []string{
		"message.updated(user)", "part(text)", "status busy", "message.updated(assistant)",
		"part(step-start)", `part(text "")`, "delta", "delta", "delta", "part(text end)",
		"part(step-finish)", "message.updated(assistant completed)",
		// The step's diff summary on the user message, as OpenCode adds it.
		"message.updated(user)", "status idle", "session.idle",
	}
	if strings.Join(labels, "\n") != strings.Join(want, "\n") {
		t.Fatalf("v1 event sequence:\n got %q\nwant %q", labels, want)
	}

	userID := props[0].Info.ID
	asstID := props[3].Info.ID
	if props[1].Part.MessageID != userID {
		t.Errorf("user text part messageID %q, want %q", props[1].Part.MessageID, userID)
	}
	if props[3].Info.ParentID != userID || props[11].Info.ParentID != userID {
		t.Errorf("assistant parentID %q/%q, want the user message %q", props[3].Info.ParentID, props[11].Info.ParentID, userID)
	}
	if props[11].Info.ID != asstID || props[11].Info.Finish != "stop" {
		t.Errorf("completed assistant message %q finish %q, want %q finish stop", props[11].Info.ID, props[11].Info.Finish, asstID)
	}
	if tr.assistant.Info["id"] != asstID {
		t.Errorf("POST /message returned %v, the stream's assistant message is %q", tr.assistant.Info["id"], asstID)
	}
	if !(userID < asstID) {
		t.Errorf("message IDs not ascending: user %q, assistant %q", userID, asstID)
	}
	textID := props[5].Part.ID
	var deltas strings.Builder
	for i := 4; i <= 10; i++ {
		p := props[i]
		if p.Part != nil {
			if p.Part.MessageID != asstID {
				t.Errorf("%s part %s: messageID %q, want the assistant's %q", labels[i], p.Part.ID, p.Part.MessageID, asstID)
			}
			if p.Part.SessionID != tr.session {
				t.Errorf("%s part: sessionID %q", labels[i], p.Part.SessionID)
			}
		}
		if evs[i].Type == "message.part.delta" {
			if p.PartID != textID || p.MessageID != asstID || p.Field != "text" {
				t.Errorf("delta partID %q messageID %q field %q, want the text part %q of %q, field text", p.PartID, p.MessageID, p.Field, textID, asstID)
			}
			deltas.WriteString(p.Delta)
		}
	}
	if props[9].Part.ID != textID || props[9].Part.Text != reply {
		t.Errorf("closing text part %q %q, want %q %q", props[9].Part.ID, props[9].Part.Text, textID, reply)
	}
	if deltas.String() != reply {
		t.Errorf("deltas add up to %q, want %q", deltas.String(), reply)
	}
	// Part IDs ascend in creation order.
	if !(props[4].Part.ID < props[5].Part.ID && props[5].Part.ID < props[10].Part.ID) {
		t.Errorf("part IDs not ascending: %s %s %s", props[4].Part.ID, props[5].Part.ID, props[10].Part.ID)
	}

	// The same relations hold in GET /session/{id}/message and in the POST answer.
	var msgs []messageWithParts
	tr.e.mustJSON("GET", "/session/"+tr.session+"/message", "", &msgs)
	if len(msgs) != 2 {
		t.Fatalf("GET /session/{id}/message: %d messages, want 2", len(msgs))
	}
	if msgs[0].Info["id"] != userID || msgs[1].Info["id"] != asstID {
		t.Errorf("messages %v, %v; want user %s then assistant %s", msgs[0].Info["id"], msgs[1].Info["id"], userID, asstID)
	}
	for _, src := range []struct {
		name string
		m    messageWithParts
	}{{"GET /session/{id}/message", msgs[1]}, {"POST /session/{id}/message", tr.assistant}} {
		var types []string
		for _, p := range src.m.Parts {
			types = append(types, fmt.Sprint(p["type"]))
			if p["messageID"] != asstID {
				t.Errorf("%s: %s part %v has messageID %v, want %s", src.name, p["type"], p["id"], p["messageID"], asstID)
			}
			if p["type"] == "text" && (p["id"] != textID || p["text"] != reply) {
				t.Errorf("%s: text part %v %q, want %s %q", src.name, p["id"], p["text"], textID, reply)
			}
		}
		if strings.Join(types, ",") != "step-start,text,step-finish" {
			t.Errorf("%s: part types %v", src.name, types)
		}
	}
}

// TestEventFramingDataOnly: /event and /global/event never send id: or
// event: fields.
func TestEventFramingDataOnly(t *testing.T) {
	tr := recordTurn(t)
	for name, s := range map[string]*stream{"/event": tr.eventS, "/global/event": tr.globalS} {
		raw := string(s.raw())
		for _, line := range strings.Split(raw, "\n") {
			if line != "" && !strings.HasPrefix(line, "data: ") {
				t.Errorf("%s: line %q is not a data: line", name, line)
			}
		}
		if !strings.HasSuffix(raw, "\n\n") {
			t.Errorf("%s: stream does not end on a frame boundary", name)
		}
	}
}

// TestHeartbeat: with a small heartbeat interval /event and /global/event
// emit server.heartbeat frames (wrapped without directory on /global/event).
func TestHeartbeat(t *testing.T) {
	e := start(t, testserver.Options{Heartbeat: 20 * time.Millisecond})
	ev := e.open("/event")
	gl := e.open("/global/event")
	fs := ev.waitFor("3 heartbeats", hasType("server.heartbeat", 3))
	seen := map[string]bool{}
	for i, f := range fs {
		env := v1Envelope(t, f)
		if i == 0 && env.Type != "server.connected" {
			t.Errorf("first frame %q", f)
		}
		if i > 0 && (env.Type != "server.heartbeat" || string(env.Properties) != "{}") {
			t.Errorf("frame %d %q, want a heartbeat with {}", i, f)
		}
		if seen[env.ID] || !strings.HasPrefix(env.ID, "evt_") {
			t.Errorf("frame %d: event id %q repeated or malformed", i, env.ID)
		}
		seen[env.ID] = true
	}
	for i, f := range gl.waitFor("3 heartbeats", hasType("server.heartbeat", 3)) {
		g, env := globalOf(t, f)
		if g.Directory != nil {
			t.Errorf("/global/event frame %d %q has a directory", i, f)
		}
		if i > 0 && env.Type != "server.heartbeat" {
			t.Errorf("/global/event frame %d %q", i, f)
		}
	}
}
