package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/opencode-server/opencode-server/internal/pgtest"
)

// TestScaleOutOpenAI: OpenAI door requests sent to an instance that does
// not run the session are answered by the one that does: a response
// following another (previous_response_id, the session found from the
// response's ID) streamed and as JSON, one naming its conversation, a
// live re-stream and a cancel of a response. The session stays with its
// owner, which admits each input once.
func TestScaleOutOpenAI(t *testing.T) {
	pg := pgtest.Need(t)
	db := pg.FreshDB(t)
	url := pg.URL(db)
	dir, project := clusterDirs(t)
	// Turns of a second (10 chunks 100 ms apart), to steer into.
	srvs, cls := startInstances(t, dir, project, url, []string{"a", "b"}, "--scripted-chunks", "10", "--scripted-delay", "100ms")
	urls := []string{srvs[0].url, srvs[1].url}
	a, b := cls[0], cls[1]
	type response struct {
		ID           string `json:"id"`
		Status       string `json:"status"`
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	text := func(r response) string {
		var s strings.Builder
		for _, o := range r.Output {
			for _, c := range o.Content {
				s.WriteString(c.Text)
			}
		}
		return s.String()
	}
	post := func(c *client, body map[string]any) response {
		t.Helper()
		st, out, err := c.do("POST", "/v1/responses", mustJSON(body))
		var r response
		if err != nil || st != 200 || json.Unmarshal(out, &r) != nil {
			t.Fatalf("POST /v1/responses %v: %d %v %s", body, st, err, out)
		}
		return r
	}
	first := post(a, map[string]any{"input": "first on A"})
	sid := first.Conversation.ID
	conn, err := pgx.Connect(t.Context(), pg.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	checkOwner := func(what string) {
		t.Helper()
		if owner := ownerOf(t, conn, sid); owner != urls[0] {
			t.Errorf("after %s the session is owned by %q, want A (%s)", what, owner, urls[0])
		}
	}
	checkOwner("the first response")

	// Streamed through B after A's response.
	st, body, err := b.do("POST", "/v1/responses", mustJSON(map[string]any{"input": "second through B",
		"previous_response_id": first.ID, "stream": true}))
	if err != nil || st != 200 {
		t.Fatalf("streamed POST on B: %d %v %s", st, err, body)
	}
	var deltas strings.Builder
	var last map[string]any
	for _, line := range bytes.Split(body, []byte("\n")) {
		d, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal(d, &e); err != nil {
			t.Fatalf("event %s: %v", d, err)
		}
		if e["type"] == "response.output_text.delta" {
			deltas.WriteString(e["delta"].(string))
		}
		last = e
	}
	if !strings.Contains(deltas.String(), "second through B") || last["type"] != "response.completed" {
		t.Fatalf("B streamed %q, ending %v\n%s", deltas.String(), last, body)
	}
	second, _ := last["response"].(map[string]any)
	secondID, _ := second["id"].(string)
	checkOwner("a streamed response through B")

	// As JSON through B, after the streamed one, and naming the conversation.
	third := post(b, map[string]any{"input": "third through B", "previous_response_id": secondID})
	fourth := post(b, map[string]any{"input": "fourth through B", "conversation": sid})
	for _, r := range []response{third, fourth} {
		if r.Conversation.ID != sid || r.Status != "completed" || !strings.Contains(text(r), "through B") {
			t.Errorf("response through B: %+v", r)
		}
	}
	checkOwner("JSON responses through B")

	// The live re-stream and the cancel of a response are the owner's.
	st, body, err = b.do("GET", "/v1/responses/"+fourth.ID+"?stream=true", nil)
	if err != nil || st != 200 || !bytes.Contains(body, []byte("event: response.completed")) || !bytes.Contains(body, []byte(fourth.ID)) {
		t.Errorf("GET ?stream=true on B: %d %v %s", st, err, body)
	}
	st, body, err = b.do("POST", "/v1/responses/"+fourth.ID+"/cancel", nil)
	if err != nil || st != 200 {
		t.Errorf("cancel on B: %d %v %s", st, err, body)
	}
	checkOwner("a re-stream and a cancel through B")

	// A WebSocket on B: a response after A's, steered while it runs; the
	// frames come from A's runner through B.
	ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(b.base, "http")+"/v1/responses", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(32 << 20)
	send := func(v any) {
		t.Helper()
		if err := ws.Write(t.Context(), websocket.MessageText, mustJSON(v)); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, b, err := ws.Read(ctx)
		var e map[string]any
		if err != nil || json.Unmarshal(b, &e) != nil {
			t.Fatalf("websocket read: %v %s", err, b)
		}
		return e
	}
	send(map[string]any{"type": "response.create", "input": "fifth over the socket", "previous_response_id": fourth.ID})
	var running string
	for running == "" {
		e := next()
		switch e["type"] {
		case "response.created":
			running, _ = e["response"].(map[string]any)["id"].(string)
		case "error":
			t.Fatalf("response.create through B: %v", e)
		}
	}
	for e := next(); e["type"] != "response.output_text.delta"; e = next() {
	}
	send(map[string]any{"type": "response.steer", "previous_response_id": running, "input": "steered over the socket"})
	var seen []string
	var successor, done string
	for done == "" {
		e := next()
		typ, _ := e["type"].(string)
		seen = append(seen, typ)
		switch typ {
		case "response.steer.accepted":
			successor, _ = e["steer"].(map[string]any)["id"].(string)
		case "response.steer.failed", "error", "response.failed":
			t.Fatalf("the steer through B: %v (after %v)", e, seen)
		case "response.completed":
			r, _ := e["response"].(map[string]any)
			if id, _ := r["id"].(string); id == successor && successor != "" {
				done = id
			}
		}
	}
	if !slices.Contains(seen, "response.incomplete") {
		t.Errorf("the steered response did not end incomplete: %v", seen)
	}
	checkOwner("a steered response over B's socket")

	var msgs []json.RawMessage
	if err := a.getJSON("/session/"+sid+"/message", &msgs); err != nil || len(msgs) != 12 {
		t.Errorf("A has %d messages (%v), want 12: four responses, an input and a reply each, then an input and its step, the steer and the step after it", len(msgs), err)
	}
	// B ran none of it: it forwarded.
	if lb := tail(filepath.Join(dir, "b.log"), 400); strings.Contains(lb, "run by another instance") {
		t.Errorf("B tried to run A's session:\n%s", lb)
	}
}
