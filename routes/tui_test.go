package routes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/pgtest"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// tuiFrames are the tui.* events among a stream's frames.
func tuiFrames(t *testing.T, frames []string) []envelope {
	t.Helper()
	var out []envelope
	for _, f := range frames {
		if e := v1Envelope(t, f); strings.HasPrefix(e.Type, "tui.") {
			out = append(out, e)
		}
	}
	return out
}

// TestTUIRoutes: each /tui route answers true and puts exactly its event
// on /event and /global/event, as opencode serve 1.18.33 does
// (testdata/reference/tui): the type, the properties byte for byte (key
// order, defaults, no HTML escaping), in the request's directory; bad
// input and an unknown session publish nothing.
func TestTUIRoutes(t *testing.T) {
	e := start(t, testserver.Options{})
	other := t.TempDir()
	ev := e.open("/event")
	evOther := e.open("/event?directory=" + url.QueryEscape(other))
	global := e.open("/global/event")
	for _, s := range []*stream{ev, evOther, global} {
		s.waitFor("server.connected", func(fs []string) bool { return len(fs) > 0 })
	}
	ses := e.createSession()

	type tc struct {
		path, body string
		typ, props string // the event; "" for none
	}
	cases := []tc{
		{"/tui/append-prompt", `{"text":"hello from the IDE"}`, "tui.prompt.append", `{"text":"hello from the IDE"}`},
		{"/tui/append-prompt", `{"text":"a<b & \"c\" é \u0000","extra":1}`, "tui.prompt.append", `{"text":"a<b & \"c\" é \u0000"}`},
		{"/tui/submit-prompt", ``, "tui.command.execute", `{"command":"prompt.submit"}`},
		{"/tui/submit-prompt", `not json: the body is not read`, "tui.command.execute", `{"command":"prompt.submit"}`},
		{"/tui/clear-prompt", ``, "tui.command.execute", `{"command":"prompt.clear"}`},
		{"/tui/open-help", ``, "tui.command.execute", `{"command":"help.show"}`},
		{"/tui/open-sessions", ``, "tui.command.execute", `{"command":"session.list"}`},
		{"/tui/open-themes", ``, "tui.command.execute", `{"command":"theme.switch"}`},
		{"/tui/open-models", ``, "tui.command.execute", `{"command":"model.list"}`},
		{"/tui/execute-command", `{"command":"agent_cycle"}`, "tui.command.execute", `{"command":"agent.cycle"}`},
		{"/tui/execute-command", `{"command":"messages_half_page_down"}`, "tui.command.execute", `{"command":"session.half.page.down"}`},
		{"/tui/execute-command", `{"command":"session_new"}`, "tui.command.execute", `{"command":"session.new"}`},
		{"/tui/execute-command", `{"command":"prompt.submit"}`, "tui.command.execute", `{"command":"prompt.submit"}`},
		{"/tui/show-toast", `{"message":"hi","variant":"info"}`, "tui.toast.show", `{"message":"hi","variant":"info","duration":5000}`},
		{"/tui/show-toast", `{"variant":"success","duration":1500,"message":"hi","title":"T"}`, "tui.toast.show", `{"title":"T","message":"hi","variant":"success","duration":1500}`},
		{"/tui/show-toast", `{"message":"m","variant":"error","duration":null}`, "tui.toast.show", `{"message":"m","variant":"error","duration":5000}`},
		{"/tui/show-toast", `{"message":"m","variant":"warning","duration":99999999999999}`, "tui.toast.show", `{"message":"m","variant":"warning","duration":99999999999999}`},
		{"/tui/publish", `{"type":"tui.prompt.append","properties":{"text":"via publish"}}`, "tui.prompt.append", `{"text":"via publish"}`},
		{"/tui/publish", `{"type":"tui.command.execute","properties":{"command":"agent_cycle"}}`, "tui.command.execute", `{"command":"agent_cycle"}`},
		{"/tui/publish", `{"properties":{"message":"m","variant":"warning","x":1},"type":"tui.toast.show","more":2}`, "tui.toast.show", `{"message":"m","variant":"warning","duration":5000}`},
		{"/tui/publish", `{"type":"tui.session.select","properties":{"sessionID":"ses_notlookedup"}}`, "tui.session.select", `{"sessionID":"ses_notlookedup"}`},
		{"/tui/select-session", `{"sessionID":"` + ses + `"}`, "tui.session.select", `{"sessionID":"` + ses + `"}`},
		// Refused: nothing is published.
		{"/tui/select-session", `{"sessionID":"` + nosuch + `"}`, "", ""},
		{"/tui/append-prompt", `{}`, "", ""},
		{"/tui/show-toast", `{"message":"hi","variant":"loud"}`, "", ""},
		{"/tui/publish", `{"type":"tui.prompt.append","properties":{"text":1}}`, "", ""},
		{"/tui/append-prompt", `{"text":"last"}`, "tui.prompt.append", `{"text":"last"}`},
	}
	var want []tc
	for _, c := range cases {
		status, body := e.do("POST", c.path, c.body)
		switch {
		case c.typ == "" && status < 400:
			t.Errorf("POST %s %s = %d %s, want an error", c.path, c.body, status, body)
		case c.typ != "" && (status != http.StatusOK || string(body) != "true"):
			t.Errorf("POST %s %s = %d %s, want 200 true", c.path, c.body, status, body)
		}
		if c.typ != "" {
			want = append(want, c)
		}
	}
	// Another directory's event goes to that directory's /event only.
	if status, body := e.do("POST", "/tui/append-prompt?directory="+url.QueryEscape(other), `{"text":"elsewhere"}`); status != 200 {
		t.Fatalf("append-prompt in another directory: %d %s", status, body)
	}
	// A last one here: the other directory's must not come before it.
	last := tc{"/tui/append-prompt", `{"text":"after elsewhere"}`, "tui.prompt.append", `{"text":"after elsewhere"}`}
	if status, body := e.do("POST", last.path, last.body); status != 200 {
		t.Fatalf("append-prompt: %d %s", status, body)
	}
	want = append(want, last)

	got := tuiFrames(t, ev.waitFor(fmt.Sprintf("%d tui events", len(want)), func(fs []string) bool {
		return len(tuiFrames(t, fs)) >= len(want)
	}))
	ids := map[string]bool{}
	for i, g := range got {
		if i >= len(want) {
			t.Errorf("/event: unexpected %s %s", g.Type, g.Properties)
			continue
		}
		if g.Type != want[i].typ || string(g.Properties) != want[i].props {
			t.Errorf("/event event %d (POST %s %s):\n got %s %s\nwant %s %s", i, want[i].path, want[i].body, g.Type, g.Properties, want[i].typ, want[i].props)
		}
		if !strings.HasPrefix(g.ID, "evt_") || ids[g.ID] {
			t.Errorf("/event event %d: id %q is not a new evt_ ID", i, g.ID)
		}
		ids[g.ID] = true
	}

	o := tuiFrames(t, evOther.waitFor("the other directory's event", func(fs []string) bool { return len(tuiFrames(t, fs)) >= 1 }))
	if len(o) != 1 || o[0].Type != "tui.prompt.append" || string(o[0].Properties) != `{"text":"elsewhere"}` {
		t.Errorf("/event?directory=other: got %+v, want only the event published there", o)
	}

	// /global/event: {directory, project, payload}, the /event payload
	// as it is, and no workspace (the TUI drops an event of another
	// workspace than its own, which is none).
	gfs := global.waitFor("every tui event", func(fs []string) bool {
		n := 0
		for _, f := range fs {
			if strings.Contains(f, `"type":"tui.`) {
				n++
			}
		}
		return n >= len(want)+1
	})
	var gi int
	for _, f := range gfs {
		var g struct {
			Directory *string         `json:"directory"`
			Project   string          `json:"project"`
			Workspace *string         `json:"workspace"`
			Payload   json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(dataOf(t, f), &g); err != nil {
			t.Fatalf("/global/event frame %q: %v", f, err)
		}
		var p envelope
		_ = json.Unmarshal(g.Payload, &p)
		if !strings.HasPrefix(p.Type, "tui.") {
			continue
		}
		dir := e.dir
		if string(p.Properties) == `{"text":"elsewhere"}` {
			dir = other
		} else if gi < len(got) {
			if g1, _ := json.Marshal(got[gi]); p.ID != got[gi].ID || string(p.Properties) != string(got[gi].Properties) {
				t.Errorf("/global/event payload %s, /event has %s", g.Payload, g1)
			}
			gi++
		}
		if g.Directory == nil || *g.Directory != dir || g.Project != "global" || g.Workspace != nil {
			t.Errorf("/global/event frame %s: want directory %q, project global, no workspace", f, dir)
		}
	}
}

// TestTUIControl: GET /tui/control/next waits, as in OpenCode 1.18.33
// where nothing queues a request: no answer while the client waits, its
// handler gone when the client goes (the package's leak check), a 503
// when the server shuts down; POST /tui/control/response takes any JSON
// value.
func TestTUIControl(t *testing.T) {
	e := start(t, testserver.Options{})
	for _, body := range []string{`{"a":1}`, `null`, `5`, `"x"`, `[true]`} {
		if status, b := e.do("POST", "/tui/control/response", body); status != 200 || string(b) != "true" {
			t.Errorf("POST /tui/control/response %s = %d %s, want 200 true", body, status, b)
		}
	}

	// The client gives up: nothing was answered.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/tui/control/next", nil)
	if resp, err := e.c.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /tui/control/next answered %d %s; nothing was queued", resp.StatusCode, b)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET /tui/control/next: %v", err)
	}

	// The server shuts down while one waits: 503.
	streams := openStreams(t, e, 63)
	next := holdNext(context.Background(), e)
	waitFull(t, e)
	e.ts.Stop()
	closeStreams(streams)
	select {
	case a := <-next:
		if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "ServiceUnavailableError") {
			t.Errorf("GET /tui/control/next at shutdown = %d %s (%v), want 503 ServiceUnavailableError", a.status, a.body, a.err)
		}
	case <-time.After(waitBound):
		t.Fatal("GET /tui/control/next did not answer at shutdown")
	}
}

// TestTUIControlStreamCap: a waiting /tui/control/next holds one of the
// client's MaxStreams (64) slots: with 63 event streams and one waiting
// next, another next or event stream gets a 429; the slot is given back
// when the waiting client goes.
func TestTUIControlStreamCap(t *testing.T) {
	e := start(t, testserver.Options{})
	streams := openStreams(t, e, 63)
	defer closeStreams(streams)
	ctx, cancel := context.WithCancel(context.Background())
	next := holdNext(ctx, e)
	waitFull(t, e)
	for _, p := range []string{"/tui/control/next", "/event"} {
		r := limDo(t, e.c, "GET", e.ts.URL+p, "", nil)
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("GET %s with 64 slots held: %d %s, want 429", p, r.status, biClip(r.body))
		}
		for _, pr := range biErrorShape(p, r, "") {
			t.Errorf("%s 429: %s", p, pr)
		}
	}
	cancel()
	if a := <-next; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("GET /tui/control/next answered %d %s (%v) before its client went", a.status, a.body, a.err)
	}
	// Its slot is free once the server notices.
	checkEventually(t, func() error {
		resp, err := limStream(context.Background(), e.c, e.ts.URL+"/event")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /event = %d after the waiting next went", resp.StatusCode)
		}
		return nil
	})
}

type tuiAnswer struct {
	status int
	body   []byte
	err    error
}

// holdNext keeps one GET /tui/control/next waiting, sending it again while
// it is refused for want of a slot (a probe of waitFull may hold the last
// one a moment), and reports its first other outcome.
func holdNext(ctx context.Context, e *env) <-chan tuiAnswer {
	out := make(chan tuiAnswer, 1)
	go func() {
		for {
			resp, err := limStream(ctx, e.c, e.ts.URL+"/tui/control/next")
			if err != nil {
				out <- tuiAnswer{err: err}
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || err != nil {
				out <- tuiAnswer{resp.StatusCode, b, err}
				return
			}
			select {
			case <-ctx.Done():
				out <- tuiAnswer{err: ctx.Err()}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return out
}

type openStream struct {
	cancel context.CancelFunc
	resp   *http.Response
}

// openStreams opens n /event streams.
func openStreams(t *testing.T, e *env, n int) []openStream {
	t.Helper()
	var out []openStream
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := limStream(ctx, e.c, e.ts.URL+"/event")
		if err != nil || resp.StatusCode != http.StatusOK {
			cancel()
			closeStreams(out)
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
		out = append(out, openStream{cancel, resp})
	}
	return out
}

func closeStreams(ss []openStream) {
	for _, s := range ss {
		s.cancel()
		_ = s.resp.Body.Close()
	}
}

// waitFull waits until this client holds all its 64 stream slots: one
// more /event stream is refused.
func waitFull(t *testing.T, e *env) {
	t.Helper()
	checkEventually(t, func() error {
		resp, err := limStream(context.Background(), e.c, e.ts.URL+"/event")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			return fmt.Errorf("GET /event = %d: a slot is free", resp.StatusCode)
		}
		return nil
	})
}

// checkEventually polls fn until it returns nil, failing the test with its
// last error after waitBound.
func checkEventually(t *testing.T, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTUIAcrossInstances: in a cluster, a TUI event published through
// one instance reaches the event streams of another (the TUI may be
// attached to any instance, the IDE call land on any other).
func TestTUIAcrossInstances(t *testing.T) {
	pg := pgtest.StartFor(t)
	db := pg.URL(pg.FreshDB(t))
	a := start(t, testserver.Options{Postgres: db})
	b := start(t, testserver.Options{Postgres: db})
	// Before b's leak check: a's client connections are the test's, not b's.
	t.Cleanup(a.c.CloseIdleConnections)
	global := b.open("/global/event")
	global.waitFor("server.connected", func(fs []string) bool { return len(fs) > 0 })
	// An instance relays to the others once it knows of them: publish
	// until one arrives.
	var sent []string
	checkEventually(t, func() error {
		text := fmt.Sprintf("across-%d", len(sent))
		if status, body := a.do("POST", "/tui/append-prompt", `{"text":"`+text+`"}`); status != 200 {
			t.Fatalf("append-prompt: %d %s", status, body)
		}
		sent = append(sent, text)
		for _, f := range global.frames() {
			if strings.Contains(f, `"type":"tui.prompt.append"`) && strings.Contains(f, `"directory":`+jsonString(a.dir)) {
				return nil
			}
		}
		return fmt.Errorf("none of %v reached the other instance's /global/event", sent)
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
