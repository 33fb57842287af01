package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// sdkClient is openai-go on the test server, its password the API key.
func sdkClient(srv *testserver.Server, password string) oai.Client {
	return oai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(password), option.WithHTTPClient(client), option.WithMaxRetries(0))
}

// connect opens the Responses WebSocket with Responses.Connect.
func connect(t *testing.T, ctx context.Context, c oai.Client) *responses.ResponseConnection {
	t.Helper()
	conn, err := c.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("Responses.Connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// recvUntil receives events, each checked against the SDK's types, until
// done says stop; it returns them all.
func recvUntil(t *testing.T, ctx context.Context, conn *responses.ResponseConnection, done func(responses.ResponsesServerEventUnion) bool) []responses.ResponsesServerEventUnion {
	t.Helper()
	var evs []responses.ResponsesServerEventUnion
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv after %d events: %v", len(evs), err)
		}
		checkRequired(t, ev.Type, reflect.ValueOf(ev))
		if _, ok := ev.AsAny().(responses.ResponsesServerEventResponseWsError); ok && ev.Type != "error" {
			t.Errorf("an error event typed %s", ev.Type)
		}
		evs = append(evs, ev)
		if done(ev) {
			return evs
		}
	}
}

func terminal(id string) func(responses.ResponsesServerEventUnion) bool {
	return func(ev responses.ResponsesServerEventUnion) bool {
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			return id == "" || ev.AsResponseCompleted().Response.ID == id
		}
		return false
	}
}

func isType(typ string) func(responses.ResponsesServerEventUnion) bool {
	return func(ev responses.ResponsesServerEventUnion) bool { return ev.Type == typ }
}

func createParams(input, previous, lane string) responses.ResponsesClientEventResponseCreateParam {
	p := responses.ResponsesClientEventResponseCreateParam{Model: scriptedModel,
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: oai.String(input)}}
	if previous != "" {
		p.PreviousResponseID = oai.String(previous)
	}
	if lane != "" {
		p.StreamID = oai.String(lane)
	}
	return p
}

// TestWebSocketStream: openai-go's Responses.Connect streams responses
// over the socket as the server-sent events do (the same events, IDs
// and numbering, on the lane its stream_id names), one after another on
// one socket; bad frames get an error event and the socket goes on.
func TestWebSocketStream(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scriptedConfig(6)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := connect(t, ctx, sdkClient(srv, "none"))

	if err := conn.Create(ctx, createParams("hello socket", "", "lane-1")); err != nil {
		t.Fatal(err)
	}
	evs := recvUntil(t, ctx, conn, terminal(""))
	var deltas strings.Builder
	for i, ev := range evs {
		var head struct {
			Seq    int    `json:"sequence_number"`
			Stream string `json:"stream_id"`
		}
		_ = json.Unmarshal([]byte(ev.RawJSON()), &head)
		if head.Seq != i || head.Stream != "lane-1" {
			t.Errorf("event %d (%s): sequence_number %d, stream_id %q", i, ev.Type, head.Seq, head.Stream)
		}
		if ev.Type == "response.output_text.delta" {
			deltas.WriteString(ev.AsResponseOutputTextDelta().Delta)
		}
	}
	if evs[0].Type != "response.created" || evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("events %s … %s", evs[0].Type, evs[len(evs)-1].Type)
	}
	first := evs[len(evs)-1].AsResponseCompleted().Response
	if first.OutputText() != "You said: hello socket" || deltas.String() != first.OutputText() || !strings.HasPrefix(first.ID, "msg_") ||
		evs[0].AsResponseCreated().Response.ID != first.ID {
		t.Fatalf("streamed %q, final %s %q", deltas.String(), first.ID, first.OutputText())
	}
	if conv := messages(t, srv.URL, first.Conversation.ID); len(conv) != 2 || conv[0].Info.ID != first.ID || conv[1].Info.ID != first.Output[0].ID {
		t.Errorf("the session does not hold the response under its IDs")
	}

	// Bad frames: an error event each, in OpenAI's shape; nothing admitted.
	bad := []struct{ frame, code, param string }{
		{`not json`, "invalid_json", ""},
		{`{"input": "no type"}`, "missing_required_parameter", "type"},
		{`{"type": "response.nope"}`, "invalid_value", "type"},
		{`{"type": "response.create", "input": ""}`, "empty_string", "input"},
		{`{"type": "response.create", "input": "x", "model": "nobody/nothing"}`, "model_not_found", "model"},
		{`{"type": "response.create", "input": "x", "background": true}`, "unsupported_parameter", "background"},
		{`{"type": "response.create", "input": "x", "stream_id": "bad lane!"}`, "invalid_value", "stream_id"},
	}
	for _, b := range bad {
		if err := conn.SendRaw(ctx, json.RawMessage(b.frame)); err != nil {
			t.Fatal(err)
		}
		ev := recvUntil(t, ctx, conn, func(responses.ResponsesServerEventUnion) bool { return true })[0]
		e := ev.AsResponsesServerEventResponseWsError()
		if ev.Type != "error" || e.Status < 400 || e.Status >= 500 || e.Error.Code != b.code || e.Error.Param != b.param || e.Error.Type == "" {
			t.Errorf("frame %s: %s", b.frame, ev.RawJSON())
		}
	}
	if n := sessions(t, srv.URL); n != 1 {
		t.Errorf("%d sessions after the bad frames", n)
	}

	// The socket goes on: a continuation, without a lane.
	if err := conn.Create(ctx, createParams("and again", first.ID, "")); err != nil {
		t.Fatal(err)
	}
	evs = recvUntil(t, ctx, conn, terminal(""))
	next := evs[len(evs)-1].AsResponseCompleted().Response
	if evs[len(evs)-1].Type != "response.completed" || next.OutputText() != "You said: and again" || next.Conversation.ID != first.Conversation.ID ||
		next.PreviousResponseID != first.ID || strings.Contains(evs[0].RawJSON(), "stream_id") {
		t.Errorf("continued: %s", evs[len(evs)-1].RawJSON())
	}
}

// TestWebSocketSteer: response.steer into a running response (a slow
// model keeps its turn running) is accepted with the steer's msg_ ID once
// durable; the response ends incomplete ("steered") where the steer is
// delivered, and the successor response (the steer's ID) carries the rest
// of the turn, its model call sent the steer. A steer after the end, of
// an unknown response, or with bad input is refused with OpenAI's codes.
func TestWebSocketSteer(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: slowModel()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	conn := connect(t, ctx, sdkClient(srv, "none"))
	if err := conn.Create(ctx, createParams("first task", "", "")); err != nil {
		t.Fatal(err)
	}
	evs := recvUntil(t, ctx, conn, isType("response.output_text.delta"))
	aID := evs[0].AsResponseCreated().Response.ID
	if err := conn.Send(ctx, responses.ResponsesClientEventParamOfResponseSteer("change of plan", aID)); err != nil {
		t.Fatal(err)
	}
	evs = recvUntil(t, ctx, conn, func(ev responses.ResponsesServerEventUnion) bool {
		return ev.Type == "response.created" || ev.Type == "response.failed"
	})
	// While the successor runs, the steered response is no longer the
	// one to steer.
	if err := conn.Send(ctx, responses.ResponsesClientEventParamOfResponseSteer("steer the old one", aID)); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, recvUntil(t, ctx, conn, func(ev responses.ResponsesServerEventUnion) bool {
		return ev.Type == "response.completed" || ev.Type == "response.failed"
	})...)
	superseded := false
	at := map[string]int{}
	var steerID string
	for i, ev := range evs {
		switch ev.Type {
		case "response.steer.accepted":
			a := ev.AsResponseSteerAcceptedEvent()
			steerID = a.Steer.ID
			if a.Steer.PreviousResponseID != aID || !strings.HasPrefix(steerID, "msg_") || steerID == aID {
				t.Errorf("accepted %s", ev.RawJSON())
			}
			at["accepted"] = i
		case "response.incomplete":
			r := ev.AsResponseIncomplete().Response
			if r.ID != aID || r.IncompleteDetails.Reason != "steered" || r.OutputText() != "You said: first task" {
				t.Errorf("incomplete %s", ev.RawJSON())
			}
			at["incomplete"] = i
		case "response.steer.failed":
			f := ev.AsResponseSteerFailedEvent()
			superseded = f.Error.Code == "response_not_active" && f.Steer.PreviousResponseID == aID && f.Steer.ID == ""
		case "response.created":
			if ev.AsResponseCreated().Response.ID != steerID {
				t.Errorf("created %s; the successor is the steer %s", ev.RawJSON(), steerID)
			}
			at["created"] = i
		}
	}
	last := evs[len(evs)-1]
	succ := last.AsResponseCompleted().Response
	if last.Type != "response.completed" || succ.ID != steerID || succ.OutputText() != "You said: change of plan" || succ.PreviousResponseID != aID {
		t.Fatalf("the turn ends %s", last.RawJSON())
	}
	if !superseded {
		t.Errorf("a steer of the steered response while its successor ran was not refused response_not_active")
	}
	if _, ok := at["accepted"]; !ok || at["accepted"] > at["incomplete"] || at["incomplete"] > at["created"] {
		t.Errorf("order accepted %d, incomplete %d, successor created %d", at["accepted"], at["incomplete"], at["created"])
	}
	calls := srv.Model.Calls()
	if len(calls) != 2 || lastUser(calls[1]) != "change of plan" {
		t.Fatalf("%d model calls; the last was sent %q", len(calls), lastUser(calls[len(calls)-1]))
	}
	if r := getResponse(t, srv.URL, aID); r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "steered" {
		t.Errorf("GET the steered response: %+v", r)
	}

	refused := []struct {
		name, frame, code string
	}{
		{"after the end", `{"type": "response.steer", "previous_response_id": "` + aID + `", "input": "too late"}`, "response_already_completed"},
		{"the successor after the end", `{"type": "response.steer", "previous_response_id": "` + steerID + `", "input": "too late"}`, "response_already_completed"},
		{"not of this socket", `{"type": "response.steer", "previous_response_id": "msg_ffffffffffffffffffffffffff", "input": "x"}`, "response_not_found"},
		{"a system message", `{"type": "response.steer", "previous_response_id": "` + aID + `", "input": [{"type": "message", "role": "system", "content": "x"}]}`, "invalid_input"},
		{"empty input", `{"type": "response.steer", "previous_response_id": "` + aID + `", "input": ""}`, "invalid_input"},
		{"no input", `{"type": "response.steer", "previous_response_id": "` + aID + `"}`, "invalid_input"},
	}
	for _, c := range refused {
		if err := conn.SendRaw(ctx, json.RawMessage(c.frame)); err != nil {
			t.Fatal(err)
		}
		ev := recvUntil(t, ctx, conn, func(responses.ResponsesServerEventUnion) bool { return true })[0]
		f := ev.AsResponseSteerFailedEvent()
		if ev.Type != "response.steer.failed" || f.Error.Code != c.code || f.Steer.ID != "" || f.Error.Message == "" {
			t.Errorf("%s: %s", c.name, ev.RawJSON())
		}
	}
	if n := len(messages(t, srv.URL, succ.Conversation.ID)); n != 4 {
		t.Errorf("the session holds %d messages after the refused steers", n)
	}
}

// TestWebSocketSteerBeta: the same steer with openai-go's beta client
// (Beta.Responses.Connect), its events decoded by the beta types.
func TestWebSocketSteerBeta(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: slowModel()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := sdkClient(srv, "none")
	conn, err := c.Beta.Responses.Connect(ctx, oai.BetaResponseConnectionOptions{})
	if err != nil {
		t.Fatalf("Beta.Responses.Connect: %v", err)
	}
	defer conn.Close()
	recv := func(done func(oai.BetaResponsesServerEventUnion) bool) []oai.BetaResponsesServerEventUnion {
		var evs []oai.BetaResponsesServerEventUnion
		for {
			ev, err := conn.Recv(ctx)
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			checkRequired(t, ev.Type, reflect.ValueOf(ev))
			evs = append(evs, ev)
			if done(ev) {
				return evs
			}
		}
	}
	err = conn.Send(ctx, oai.BetaResponsesClientEventUnionParam{OfResponseCreate: &oai.BetaResponsesClientEventResponseCreateParam{
		Model: scriptedModel, Input: oai.BetaResponsesClientEventResponseCreateInputUnionParam{OfString: oai.String("beta task")}}})
	if err != nil {
		t.Fatal(err)
	}
	evs := recv(func(ev oai.BetaResponsesServerEventUnion) bool { return ev.Type == "response.output_text.delta" })
	aID := evs[0].AsResponseCreated().Response.ID
	if err := conn.Send(ctx, oai.BetaResponsesClientEventParamOfResponseSteer("beta steer", aID)); err != nil {
		t.Fatal(err)
	}
	evs = recv(func(ev oai.BetaResponsesServerEventUnion) bool { return ev.Type == "response.completed" })
	var accepted, steered bool
	for _, ev := range evs {
		switch ev.Type {
		case "response.steer.accepted":
			accepted = ev.AsBetaResponseSteerAcceptedEvent().Steer.PreviousResponseID == aID
		case "response.incomplete":
			r := ev.AsResponseIncomplete().Response
			steered = r.ID == aID && r.IncompleteDetails.Reason == "steered"
		}
	}
	final := evs[len(evs)-1].AsResponseCompleted().Response
	if !accepted || !steered || !strings.Contains(evs[len(evs)-1].RawJSON(), `"text":"You said: beta steer"`) || final.PreviousResponseID != aID {
		t.Fatalf("accepted %v, steered %v, final %s", accepted, steered, evs[len(evs)-1].RawJSON())
	}
	if calls := srv.Model.Calls(); len(calls) != 2 || lastUser(calls[1]) != "beta steer" {
		t.Fatalf("%d model calls", len(calls))
	}
}

// TestWebSocketSlowReader: a client that does not read its frames is cut
// off (its queue full, or a frame not taken in time), never waited for:
// its response's turn runs to the end all the same, the socket is
// closed, and the server keeps nothing of it (the leak check). The client
// is a bare TCP connection with a small receive buffer, so the test holds
// its reads' deadlines.
func TestWebSocketSlowReader(t *testing.T) {
	// 12000 delta frames, far more than the socket's queue (4096) and a
	// small receive window hold: mapped as fast as the runner makes them,
	// the queue is full (and the client cut off) long before the turn ends.
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Reply: strings.Repeat("abcdefghij", 240000), Chunks: 12000}})
	host := strings.TrimPrefix(srv.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	_, err = conn.Write([]byte("GET /v1/responses HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(status, " 101 ") {
		t.Fatalf("upgrade: %q %v", status, err)
	}
	for line := ""; line != "\r\n"; {
		if line, err = rd.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Write(clientFrame([]byte(`{"type": "response.create", "input": "flood me"}`))); err != nil {
		t.Fatal(err)
	}
	// Not reading, wait for the turn to end on the server.
	deadline := time.Now().Add(120 * time.Second)
	var sid string
	for sid == "" || !turnDone(t, srv.URL, sid) {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not end")
		}
		if sid == "" {
			sid = onlySession(t, srv.URL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The server has closed the socket: a frame the client sends now is
	// answered with a reset, and what the client reads ends in an error.
	// A server that kept waiting for the client would take the frames and
	// go on sending the stream, up to its terminal event.
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	var end error
	for end == nil && time.Now().Before(deadline) {
		if _, end = conn.Write(clientFrame([]byte(`{"type": "response.nothing"}`))); end != nil {
			break
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := rd.Read(buf)
		got.Write(buf[:n])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			continue
		}
		end = err
	}
	if end == nil || bytes.Contains(got.Bytes(), []byte(`"response.completed"`)) {
		t.Fatalf("the socket was not cut off: %v, %d bytes read", end, got.Len())
	}
}

// clientFrame is a masked text frame, as a client sends it.
func clientFrame(payload []byte) []byte {
	b := []byte{0x81}
	switch n := len(payload); {
	case n < 126:
		b = append(b, byte(0x80|n))
	default:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	}
	mask := [4]byte{7, 1, 3, 5}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// onlySession is the server's one session's ID, "" if none yet.
func onlySession(t *testing.T, url string) string {
	t.Helper()
	code, raw := do(t, http.MethodGet, url+"/session", nil, nil)
	var out []struct {
		ID string `json:"id"`
	}
	if code != 200 || json.Unmarshal(raw, &out) != nil || len(out) > 1 {
		t.Fatalf("GET /session: %d %s", code, raw)
	}
	if len(out) == 0 {
		return ""
	}
	return out[0].ID
}

// turnDone reports whether the session's turn has ended: its assistant
// message is completed and the session is idle.
func turnDone(t *testing.T, url, sid string) bool {
	t.Helper()
	for _, m := range messages(t, url, sid) {
		if m.Info.Role == "assistant" && m.Info.Time.Completed != nil {
			return true
		}
	}
	return false
}

// TestWebSocketRefusals: the upgrade is behind the same checks as every
// route and socket: the password (as the SDK's bearer API key), the Host,
// the Origin of a browser page; a GET that is no upgrade is a 400. All
// in OpenAI's error shape.
func TestWebSocketRefusals(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Password: "sekrit"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wrong := sdkClient(srv, "wrong")
	if _, err := wrong.Responses.Connect(ctx, responses.ResponseConnectionOptions{}); err == nil {
		t.Errorf("Connect with a wrong API key succeeded")
	}
	conn := connect(t, ctx, sdkClient(srv, "sekrit"))
	if err := conn.Create(ctx, createParams("authorized", "", "")); err != nil {
		t.Fatal(err)
	}
	if evs := recvUntil(t, ctx, conn, terminal("")); evs[len(evs)-1].Type != "response.completed" {
		t.Errorf("with the password: %s", evs[len(evs)-1].RawJSON())
	}
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/responses"
	auth := http.Header{"Authorization": {"Bearer sekrit"}}
	cases := []struct {
		name   string
		header http.Header
		host   string
		code   int
	}{
		{"no password", http.Header{}, "", 401},
		{"a foreign page", http.Header{"Authorization": {"Bearer sekrit"}, "Origin": {"https://evil.example"}}, "", 403},
		{"a foreign host", auth, "evil.example", 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: client, HTTPHeader: c.header, Host: c.host})
			if err == nil {
				ws.CloseNow()
				t.Fatalf("the upgrade succeeded")
			}
			if resp == nil || resp.StatusCode != c.code {
				t.Fatalf("%v %v; want %d", resp, err, c.code)
			}
		})
	}
	code, raw := do(t, http.MethodGet, srv.URL+"/v1/responses", nil, map[string]string{"Authorization": "Bearer sekrit"})
	var e apiError
	if code != 400 || json.Unmarshal(raw, &e) != nil || e.Error == nil || e.Error.Type != "invalid_request_error" {
		t.Errorf("GET without an upgrade: %d %s", code, raw)
	}
}

// TestWebSocketSteerRefused: a steer of a response still queued behind
// another turn is response_not_active; steers beyond the bound are
// too_many_pending_steers; accepted steers an abort takes back (the
// response's cancel) are answered response.steer.failed under their
// steering IDs, never left accepted and lost; the queued response runs
// after.
func TestWebSocketSteerRefused(t *testing.T) {
	// Each model call streams for about 10 s.
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 100, Delay: 100 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	conn := connect(t, ctx, sdkClient(srv, "none"))
	if err := conn.Create(ctx, createParams("running task", "", "a")); err != nil {
		t.Fatal(err)
	}
	evs := recvUntil(t, ctx, conn, isType("response.output_text.delta"))
	aID := evs[0].AsResponseCreated().Response.ID
	if err := conn.Create(ctx, createParams("queued task", aID, "b")); err != nil {
		t.Fatal(err)
	}
	evs = recvUntil(t, ctx, conn, func(ev responses.ResponsesServerEventUnion) bool {
		return ev.Type == "response.created" && ev.AsResponseCreated().Response.ID != aID
	})
	bID := evs[len(evs)-1].AsResponseCreated().Response.ID

	steer := func(target, text string) {
		t.Helper()
		if err := conn.Send(ctx, responses.ResponsesClientEventParamOfResponseSteer(text, target)); err != nil {
			t.Fatal(err)
		}
	}
	answer := func() responses.ResponsesServerEventUnion {
		t.Helper()
		evs := recvUntil(t, ctx, conn, func(ev responses.ResponsesServerEventUnion) bool {
			return strings.HasPrefix(ev.Type, "response.steer.")
		})
		return evs[len(evs)-1]
	}
	steer(bID, "not yet")
	if ev := answer(); ev.Type != "response.steer.failed" || ev.AsResponseSteerFailedEvent().Error.Code != "response_not_active" {
		t.Fatalf("a steer of the queued response: %s", ev.RawJSON())
	}
	accepted := map[string]bool{}
	for i := range 17 {
		steer(aID, "steer "+string(rune('a'+i)))
		ev := answer()
		if i < 16 {
			a := ev.AsResponseSteerAcceptedEvent()
			if ev.Type != "response.steer.accepted" || a.StreamID != "a" {
				t.Fatalf("steer %d: %s", i, ev.RawJSON())
			}
			accepted[a.Steer.ID] = true
			continue
		}
		if ev.Type != "response.steer.failed" || ev.AsResponseSteerFailedEvent().Error.Code != "too_many_pending_steers" {
			t.Fatalf("the 17th steer: %s", ev.RawJSON())
		}
	}
	if code, raw := do(t, http.MethodPost, srv.URL+"/v1/responses/"+aID+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d %s", code, raw)
	}
	// The cancelled response ends; each accepted steer is answered failed;
	// the queued response runs to its end.
	var cancelled, bDone bool
	for !(cancelled && bDone && len(accepted) == 0) {
		ev := recvUntil(t, ctx, conn, func(responses.ResponsesServerEventUnion) bool { return true })[0]
		switch ev.Type {
		case "response.failed":
			r := ev.AsResponseFailed().Response
			cancelled = cancelled || (r.ID == aID && r.Status == "cancelled")
		case "response.steer.failed":
			f := ev.AsResponseSteerFailedEvent()
			if !accepted[f.Steer.ID] || f.Error.Code != "response_not_active" || f.Steer.PreviousResponseID != aID {
				t.Fatalf("steer failed: %s", ev.RawJSON())
			}
			delete(accepted, f.Steer.ID)
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			if r.ID != bID || r.OutputText() != "You said: queued task" {
				t.Fatalf("completed: %s", ev.RawJSON())
			}
			bDone = true
		case "response.created":
			t.Fatalf("a successor after the cancel: %s", ev.RawJSON())
		}
	}
	if calls := srv.Model.Calls(); len(calls) != 2 || lastUser(calls[1]) != "queued task" {
		t.Errorf("%d model calls: the revoked steers reached the model", len(calls))
	}
}

// TestWebSocketShutdown: the server's shutdown closes a socket with
// 1001 while its response streams (the leak check then finds nothing of
// it left).
func TestWebSocketShutdown(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: slowModel()})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/responses", &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type": "response.create", "input": "long one"}`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("before the first delta: %v", err)
		}
		if strings.Contains(string(data), `"response.output_text.delta"`) {
			break
		}
	}
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != websocket.StatusGoingAway {
				t.Errorf("closed with %d (%v), want 1001", code, err)
			}
			break
		}
	}
	<-stopped
}

// TestWebSocketSteerRace: steers sent as a response's turn is ending
// (a fast model: its single model call is over in milliseconds) are
// either accepted and then delivered, streamed as the successor whose
// model call is sent the steer, or refused response_already_completed
// with nothing admitted: never accepted and lost, never refused and run.
func TestWebSocketSteerRace(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 3, Delay: 2 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	conn := connect(t, ctx, sdkClient(srv, "none"))
	prev, sid := "", ""
	outcomes := map[string]int{}
	for i := range 20 {
		if err := conn.Create(ctx, createParams("task "+strconv.Itoa(i), prev, "")); err != nil {
			t.Fatal(err)
		}
		first := recvUntil(t, ctx, conn, isType("response.created"))
		id := first[len(first)-1].AsResponseCreated().Response.ID
		text := "steer " + strconv.Itoa(i)
		if err := conn.Send(ctx, responses.ResponsesClientEventParamOfResponseSteer(text, id)); err != nil {
			t.Fatal(err)
		}
		answer, last := "", responses.Response{}
		var steerID string
		recvUntil(t, ctx, conn, func(ev responses.ResponsesServerEventUnion) bool {
			switch ev.Type {
			case "response.steer.accepted":
				answer, steerID = "accepted", ev.AsResponseSteerAcceptedEvent().Steer.ID
			case "response.steer.failed":
				answer = ev.AsResponseSteerFailedEvent().Error.Code
			case "response.completed":
				last = ev.AsResponseCompleted().Response
			}
			return answer != "" && last.ID != "" && (answer != "accepted" || last.ID == steerID)
		})
		outcomes[answer]++
		sid, prev = last.Conversation.ID, last.ID
		steered := false
		for _, m := range messages(t, srv.URL, sid) {
			for _, p := range m.Parts {
				steered = steered || (m.Info.Role == "user" && p.Text == text)
			}
		}
		switch answer {
		case "accepted":
			if last.OutputText() != "You said: "+text || !steered {
				t.Fatalf("round %d: accepted, the turn ended %s %q", i, last.ID, last.OutputText())
			}
		case "response_already_completed":
			if last.ID != id || steered {
				t.Fatalf("round %d: refused, yet the session holds the steer (or %s is not %s)", i, last.ID, id)
			}
		default:
			t.Fatalf("round %d: the steer was answered %s", i, answer)
		}
	}
	calls := srv.Model.Calls()
	if want := 20 + outcomes["accepted"]; len(calls) != want {
		t.Errorf("%d model calls; want %d (%v)", len(calls), want, outcomes)
	}
	t.Logf("outcomes: %v", outcomes)
}
