package apitest_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// client sends requests to a test server; the server's middleware validates
// every answer against api/openapi.yaml, this only checks statuses.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
	auth bool
}

func newClient(t *testing.T, base string) *client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: base, hc: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

func (c *client) request(method, path, body string) *http.Request {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends a request and checks the status; it returns the body.
func (c *client) do(method, path, body string, want int) []byte {
	c.t.Helper()
	resp, err := c.hc.Do(c.request(method, path, body))
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	if resp.StatusCode != want {
		c.t.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	return b
}

// stream opens an SSE route, checks the status and reads the first frame.
func (c *client) stream(path string) string {
	c.t.Helper()
	resp, err := c.hc.Do(c.request("GET", path, ""))
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		c.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	var frame strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("GET %s: read: %v", path, err)
		}
		if line == "\n" {
			return frame.String()
		}
		frame.WriteString(line)
	}
}

func field(t *testing.T, b []byte, path ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: no %q in %s", strings.Join(path, "."), p, b)
		}
		v = m[p]
	}
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s: not a string in %s", strings.Join(path, "."), b)
	}
	return s
}

// TestSmoke drives the main routes of a whole server; the validating
// middleware of testserver fails the test on any answer that does not match
// api/openapi.yaml.
func TestSmoke(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Delay: 100 * time.Millisecond}})
	c := newClient(t, srv.URL)

	t.Run("catalog", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		for _, p := range []string{"/global/health", "/doc", "/config", "/config/providers", "/provider", "/agent", "/path",
			"/project/current", "/vcs", "/experimental/capabilities", "/experimental/console", "/command", "/lsp",
			"/formatter", "/experimental/workspace", "/experimental/workspace/status", "/project/global/directories",
			"/permission", "/question", "/find/file", "/find/symbol", "/mcp", "/experimental/resource", "/provider/auth",
			"/api/location", "/api/agent", "/api/integration", "/api/reference", "/api/command", "/api/skill",
			"/api/provider", "/api/model", "/session/status", "/api/session/active"} {
			c.do("GET", p, "", 200)
		}
	})

	t.Run("v1", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		sid := field(t, c.do("POST", "/session", `{"title":"smoke"}`, 200), "id")
		c.do("POST", "/session", "", 200)
		c.do("GET", "/session", "", 200)
		c.do("GET", "/session?roots=true&limit=5", "", 200)
		c.do("GET", "/session/"+sid, "", 200)
		c.do("PATCH", "/session/"+sid, `{"title":"renamed"}`, 200)
		c.do("GET", "/session/"+sid+"/children", "", 200)
		c.do("GET", "/session/"+sid+"/todo", "", 200)
		c.do("GET", "/session/"+sid+"/diff", "", 200)
		reply := c.do("POST", "/session/"+sid+"/message", `{"parts":[{"type":"text","text":"hello"}]}`, 200)
		aid := field(t, reply, "info", "id")
		if role := field(t, c.do("POST", "/session/"+sid+"/message", `{"parts":[{"type":"text","text":"note"}],"noReply":true}`, 200), "info", "role"); role != "user" {
			t.Errorf("noReply answered a %s message, want the stored user message", role)
		}
		c.do("POST", "/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"again"}],"delivery":"queue"}`, 204)
		c.do("POST", "/api/session/"+sid+"/wait", "", 204)
		c.do("GET", "/session/status", "", 200)
		msgs := c.do("GET", "/session/"+sid+"/message", "", 200)
		var list []struct {
			Info struct{ ID string } `json:"info"`
		}
		if err := json.Unmarshal(msgs, &list); err != nil || len(list) < 4 {
			t.Fatalf("messages: %v %s", err, msgs)
		}
		c.do("GET", "/session/"+sid+"/message?limit=2", "", 200)
		c.do("GET", "/session/"+sid+"/message/"+list[0].Info.ID, "", 200)
		c.do("GET", "/session/"+sid+"/message/"+aid, "", 200)
		c.do("POST", "/session/"+sid+"/abort", "", 200)
		// v2 views of a v1 session
		c.do("GET", "/api/session/"+sid+"/message", "", 200)
		c.do("GET", "/api/session/"+sid+"/message/"+aid, "", 200)
		c.do("GET", "/api/session/"+sid+"/history", "", 200)
		c.do("DELETE", "/session/"+sid, "", 200)
		c.do("GET", "/session/"+sid, "", 404)
	})

	t.Run("v2", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		sid := field(t, c.do("POST", "/api/session", `{}`, 200), "data", "id")
		c.do("GET", "/api/session", "", 200)
		c.do("GET", "/api/session?order=asc&limit=1", "", 200)
		c.do("GET", "/api/session/"+sid, "", 200)
		mid := identifier.NewMessage()
		c.do("POST", "/api/session/"+sid+"/prompt", `{"id":"`+mid+`","prompt":{"text":"hi","files":[{"uri":"file:///tmp/a.txt"}],"agents":[{"name":"general"}]}}`, 200)
		c.do("POST", "/api/session/"+sid+"/prompt", `{"id":"`+mid+`","prompt":{"text":"hi","files":[{"uri":"file:///tmp/a.txt"}],"agents":[{"name":"general"}]}}`, 200)
		c.do("POST", "/api/session/"+sid+"/prompt", `{"id":"`+mid+`","prompt":{"text":"different"}}`, 409)
		c.do("GET", "/api/session/active", "", 200)
		c.do("POST", "/api/session/"+sid+"/wait", "", 204)
		c.do("GET", "/api/session/"+sid+"/message", "", 200)
		c.do("GET", "/api/session/"+sid+"/message?order=asc&limit=1", "", 200)
		c.do("GET", "/api/session/"+sid+"/message/"+mid, "", 200)
		c.do("GET", "/api/session/"+sid+"/history", "", 200)
		c.do("GET", "/api/session/"+sid+"/history?after=1&limit=2", "", 200)
		c.do("GET", "/session/"+sid+"/message", "", 200)
		c.do("POST", "/api/session/"+sid+"/interrupt", "", 204)
		if f := c.stream("/api/session/" + sid + "/event"); !strings.HasPrefix(f, "id: 1\ndata: ") {
			t.Errorf("first session event frame: %q", f)
		}
	})

	t.Run("inbox", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		sid := field(t, c.do("POST", "/api/session", `{}`, 200), "data", "id")
		c.do("POST", "/api/session/"+sid+"/prompt", `{"prompt":{"text":"busy"}}`, 200)
		q := field(t, c.do("POST", "/api/session/"+sid+"/prompt", `{"prompt":{"text":"queued"},"delivery":"queue"}`, 200), "data", "id")
		// A blocking v1 prompt whose input is revoked answers 409.
		blocked := identifier.NewMessage()
		done := make(chan []byte)
		go func() {
			resp, err := c.hc.Do(c.request("POST", "/session/"+sid+"/message",
				`{"messageID":"`+blocked+`","parts":[{"type":"text","text":"revoke me"}],"delivery":"queue"}`))
			if err != nil {
				done <- []byte(err.Error())
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			done <- append([]byte(resp.Status+" "), b...)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(string(c.do("GET", "/session/"+sid+"/inbox", "", 200)), blocked) {
			if time.Now().After(deadline) {
				t.Fatal("the blocking prompt never reached the inbox")
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.do("GET", "/api/session/"+sid+"/inbox", "", 200)
		c.do("PATCH", "/session/"+sid+"/inbox/"+q, `{"delivery":"steer"}`, 200)
		c.do("PATCH", "/api/session/"+sid+"/inbox/"+q, `{"prompt":{"text":"changed","files":[{"uri":"data:text/plain;base64,aGk="}]}}`, 200)
		c.do("PATCH", "/api/session/"+sid+"/inbox/"+q, `{}`, 400)
		c.do("DELETE", "/api/session/"+sid+"/inbox/"+blocked, "", 200)
		if got := string(<-done); !strings.HasPrefix(got, "409 ") || !strings.Contains(got, "MessageRevokedError") {
			t.Errorf("blocking prompt of a revoked input: %s", got)
		}
		c.do("DELETE", "/session/"+sid+"/inbox/"+blocked, "", 200)
		c.do("DELETE", "/session/"+sid+"/inbox/"+identifier.NewMessage(), "", 200) // never known: revoked
		c.do("DELETE", "/session/ses_"+strings.Repeat("0", 26)+"/inbox/"+blocked, "", 404)
		c.do("DELETE", "/api/session/ses_"+strings.Repeat("0", 26)+"/inbox/"+blocked, "", 404)
		c.do("PATCH", "/api/session/"+sid+"/inbox/"+identifier.NewMessage(), `{"delivery":"queue"}`, 404)
		c.do("POST", "/api/session/"+sid+"/wait", "", 204)
		c.do("PATCH", "/api/session/"+sid+"/inbox/"+q, `{"delivery":"queue"}`, 409)
		c.do("PATCH", "/session/"+sid+"/inbox/"+q, `{"delivery":"queue"}`, 409)
	})

	t.Run("permission", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		sid := field(t, c.do("POST", "/session", `{}`, 200), "id")
		c.do("GET", "/permission", "", 200)
		c.do("POST", "/permission/per_0000000000000000000000000/reply", `{"reply":"once"}`, 404)
		c.do("POST", "/permission/per_0000000000000000000000000/reply", `{"reply":"maybe"}`, 400)
		c.do("POST", "/permission/bogus/reply", `{"reply":"once"}`, 400)
		c.do("POST", "/session/"+sid+"/permissions/per_0000000000000000000000000", `{"response":"always"}`, 404)
		c.do("POST", "/session/"+sid+"/permissions/per_0000000000000000000000000", `{}`, 400)
	})

	t.Run("errors", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		unknown := "ses_" + strings.Repeat("0", 26)
		sid := field(t, c.do("POST", "/session", `{}`, 200), "id")
		for _, p := range []string{"", "/children", "/message", "/todo", "/diff", "/inbox", "/message/" + identifier.NewMessage()} {
			c.do("GET", "/session/"+unknown+p, "", 404)
		}
		c.do("GET", "/session/"+sid+"/message/"+identifier.NewMessage(), "", 404)
		c.do("POST", "/session/"+unknown+"/message", `{"parts":[{"type":"text","text":"x"}]}`, 404)
		c.do("POST", "/session/"+unknown+"/prompt_async", `{"parts":[{"type":"text","text":"x"}]}`, 404)
		c.do("PATCH", "/session/"+unknown, `{"title":"x"}`, 404)
		c.do("DELETE", "/session/"+unknown, "", 404)
		for _, p := range []string{"", "/message", "/history", "/event", "/inbox", "/message/" + identifier.NewMessage()} {
			c.do("GET", "/api/session/"+unknown+p, "", 404)
		}
		c.do("GET", "/api/session/"+sid+"/message/"+identifier.NewMessage(), "", 404)
		c.do("POST", "/api/session/"+unknown+"/prompt", `{"prompt":{"text":"x"}}`, 404)
		c.do("POST", "/api/session/"+unknown+"/wait", "", 404)
		c.do("POST", "/api/session/"+unknown+"/interrupt", "", 404)

		c.do("GET", "/session/bogus", "", 400)
		c.do("GET", "/api/session/bogus", "", 400)
		c.do("POST", "/session", `{"title":`, 400)
		c.do("POST", "/session/"+sid+"/message", `{"parts":[`, 400)
		c.do("POST", "/session/"+sid+"/message", `{"parts":[{"type":"text"}]}`, 400)
		c.do("POST", "/session/"+sid+"/prompt_async", `{"parts":[],"bogus":1}`, 400)
		c.do("POST", "/session/"+sid+"/prompt_async", `{"parts":[{"type":"text","text":"x"}],"delivery":"later"}`, 400)
		c.do("PATCH", "/session/"+sid, `not json`, 400)
		c.do("GET", "/session?limit=-1", "", 400)
		c.do("POST", "/api/session", `{"id":`, 400)
		c.do("POST", "/api/session", `{"id":"msg_x"}`, 400)
		c.do("POST", "/api/session/"+sid+"/prompt", `{"prompt":`, 400)
		c.do("POST", "/api/session/"+sid+"/prompt", `{}`, 400)
		c.do("GET", "/api/session?cursor=x", "", 400)
		c.do("GET", "/api/session/"+sid+"/message?cursor=x", "", 400)
		c.do("GET", "/api/session/"+sid+"/history?after=x", "", 400)
		c.do("GET", "/api/session/"+sid+"/event?after=-1", "", 400)
		c.do("PATCH", "/session/"+sid+"/inbox/"+identifier.NewMessage(), `{"delivery":"x"}`, 400)
		big := `{"title":"` + strings.Repeat("x", 17<<20) + `"}`
		c.do("POST", "/session", big, 413)
		c.do("POST", "/api/session/"+sid+"/prompt", `{"prompt":{"text":"`+strings.Repeat("x", 17<<20)+`"}}`, 413)

		c.do("GET", "/nowhere", "", 404)
		c.do("GET", "/api/nowhere", "", 404)
		c.do("GET", "/session/"+sid+"/nowhere", "", 404)
		c.do("PUT", "/session", "", 405)
		c.do("DELETE", "/api/session", "", 405)
	})

	t.Run("cors", func(t *testing.T) {
		req := c.request("OPTIONS", "/api/session", "")
		req.Header.Set("Origin", "http://localhost:3000")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("preflight: %d", resp.StatusCode)
		}
	})

	t.Run("events", func(t *testing.T) {
		c := &client{t: t, base: c.base, hc: c.hc}
		for _, p := range []string{"/event", "/global/event", "/api/event"} {
			if f := c.stream(p); !strings.Contains(f, "server.connected") {
				t.Errorf("%s: first frame %q", p, f)
			}
		}
	})
}

// TestSmokeAuth: with a password every route family answers 401 in its
// shape, unknown routes included.
func TestSmokeAuth(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{Password: "secret"})
	c := newClient(t, srv.URL)
	for _, p := range []string{"/session", "/api/session", "/config", "/api/model", "/event", "/api/event", "/nowhere", "/api/nowhere", "/doc"} {
		c.do("GET", p, "", 401)
	}
	c.do("POST", "/session", `{}`, 401)
	req := c.request("GET", "/session", "")
	req.SetBasicAuth("opencode", "secret")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with auth: %d", resp.StatusCode)
	}
}
