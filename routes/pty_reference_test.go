//go:build !windows

package routes_test

// TestPTYReference replays what real opencode serve 1.18.33 answered on the
// /pty routes (testdata/reference/pty, recorded by its record.py) against
// this server: the same status codes, the same JSON shapes, and on the
// websocket the same replays and control frames for the same cursors,
// except the differences README lists.

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

type ptyRefCase struct {
	Name      string            `json:"name"`
	Method    string            `json:"method"`
	Path      string            `json:"path"`
	Headers   map[string]string `json:"headers"`
	Body      *string           `json:"body"`
	Auth      *bool             `json:"auth"`
	Status    int               `json:"status"`
	Response  json.RawMessage   `json:"response"`
	Websocket bool              `json:"websocket"`
	Inputs    []string          `json:"inputs"`
	Frames    []struct {
		Ev     string `json:"ev"`
		Text   string `json:"text"`
		Binary []int  `json:"binary"`
		Rest   string `json:"rest"`
		Code   int    `json:"code"`
	} `json:"frames"`
}

func readPTYRef(t *testing.T, name string) []ptyRefCase {
	t.Helper()
	f, err := os.Open("../testdata/reference/pty/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ptyRefCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c ptyRefCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return out
}

// ptyRefDiffers are the intended differences (README): our status.
var ptyRefDiffers = map[string]int{
	"bad/create malformed JSON":            400, // OpenCode: 500
	"bad/update malformed JSON":            400,
	"auth/auth_token on GET /pty":          401, // only the websocket takes auth_token
	"connect/not a websocket":              400, // the same status, a JSON body
	"connect/unknown id":                   404,
	"exited/connect":                       404,
	"auth/no password":                     401,
	"auth/no password get":                 401,
	"auth/wrong auth_token":                401,
	"auth/no credentials on the websocket": 401,
	"ticket/unknown":                       403,
	"ticket/other route":                   401,
	"connect-token/foreign origin":         403, // our CORS rule's ForbiddenError, before the route
	"ticket/no password":                   401,
}

// jsonShape is a value's keys and kinds (arrays: their first element's).
func jsonShape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = jsonShape(x)
		}
		return m
	case []any:
		if len(v) == 0 {
			return []any{}
		}
		return []any{jsonShape(v[0])}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

func sameShape(want, got json.RawMessage) bool {
	var w, g any
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil {
		return false
	}
	ws, gs := jsonShape(w), jsonShape(g)
	if wa, ok := ws.([]any); ok {
		ga, ok := gs.([]any)
		return ok && (len(wa) == 0 || len(ga) == 0 || reflect.DeepEqual(wa, ga))
	}
	return reflect.DeepEqual(ws, gs)
}

func TestPTYReference(t *testing.T) {
	e := start(t, testserver.Options{})
	running := func() string { return e.ptyCreate(`{"command":"/bin/sh"}`).ID }
	deleted := func() string {
		id := running()
		if st, _ := e.do("DELETE", "/pty/"+id, ""); st != 200 {
			e.t.Fatalf("DELETE = %d", st)
		}
		return id
	}
	exited := func() string {
		id := e.ptyCreate(`{"command":"/bin/sh","args":["-c","exit 3"]}`).ID
		deadline := time.Now().Add(waitBound)
		for {
			if st, _ := e.do("GET", "/pty/"+id, ""); st == 404 {
				return id
			}
			if time.Now().After(deadline) {
				e.t.Fatal("the terminal did not exit")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var echo, utf string // the terminals of the websocket cases
	for _, c := range readPTYRef(t, "cases.jsonl") {
		t.Run(c.Name, func(t *testing.T) {
			parent := e.t
			e.t = t
			defer func() { e.t = parent }()
			if c.Websocket {
				switch {
				case c.Name == "websocket/echo hi":
					echo = running()
					w := e.ptyConnect(echo, "")
					w.until(`^# $`)
					w.send(c.Inputs[0])
					w.until(`^# echo hi\r\nhi\r\n# $`)
				case strings.HasPrefix(c.Name, "websocket/reconnect"):
					ptyRefReplay(t, e, echo, c)
				case strings.HasPrefix(c.Name, "websocket/utf-16"):
					if utf == "" {
						utf = e.ptyCreate(`{"command":"/bin/sh","args":["-c","printf '\\303\\251\\360\\237\\230\\200'; read x"]}`).ID
						e.ptyConnect(utf, "").until(`😀`)
					}
					ptyRefReplay(t, e, utf, c)
				case c.Name == "websocket/process exits":
					id := e.ptyCreate(`{"command":"/bin/sh","args":["-c","read x; echo bye; exit 3"]}`).ID
					w := e.ptyConnect(id, "")
					w.send("\n")
					if code := w.end(); code != websocket.StatusCode(c.Frames[len(c.Frames)-1].Code) {
						t.Errorf("closed with %d, want %d", code, c.Frames[len(c.Frames)-1].Code)
					}
					if !strings.HasSuffix(w.text.String(), "bye\r\n") {
						t.Errorf("output %q", w.text.String())
					}
				default:
					t.Fatalf("no replay for websocket case %q", c.Name)
				}
				return
			}
			var id string
			if strings.Contains(c.Path, "{id}") {
				switch {
				case c.Name == "delete/again" || c.Name == "get/deleted":
					id = deleted()
				case strings.HasPrefix(c.Name, "exited/"):
					id = exited()
				default:
					id = running()
				}
			}
			ptyRefCheck(t, e, c, id, nil)
		})
	}
}

// ptyRefCheck sends c's request and compares status and shape.
func ptyRefCheck(t *testing.T, e *env, c ptyRefCase, id string, hdr map[string]string) {
	t.Helper()
	var body string
	if c.Body != nil {
		body = *c.Body
	}
	req, _ := http.NewRequest(c.Method, e.ts.URL+strings.ReplaceAll(c.Path, "{id}", id), strings.NewReader(body))
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&got)
	want, differs := ptyRefDiffers[c.Name]
	if !differs {
		want = c.Status
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d (opencode serve: %d %s)", c.Method, c.Path, resp.StatusCode, got, want, c.Status, c.Response)
	}
	if !differs && !sameShape(c.Response, got) {
		t.Errorf("%s %s: shape of %s differs from opencode serve's %s", c.Method, c.Path, got, c.Response)
	}
}

// ptyRefReplay connects as c did and compares the replay and the cursor.
func ptyRefReplay(t *testing.T, e *env, id string, c ptyRefCase) {
	t.Helper()
	var want strings.Builder
	var meta string
	for _, f := range c.Frames {
		switch {
		case f.Ev != "":
		case f.Binary != nil:
			meta = f.Rest
		case meta == "":
			want.WriteString(f.Text)
		}
	}
	_, query, _ := strings.Cut(c.Path, "?")
	w, resp, err := e.ptyDial("/pty/"+id+"/connect?"+query, nil)
	if err != nil {
		t.Fatalf("connect: %v %v", err, resp)
	}
	w.meta()
	if got := w.text.String(); got != want.String() {
		t.Errorf("replay %q, opencode serve's %q", got, want.String())
	}
	if got := `{"cursor":` + strconv.FormatInt(w.metas[0], 10) + `}`; got != meta {
		t.Errorf("control frame %s, opencode serve's %s", got, meta)
	}
}

// TestPTYReferenceAuth: the recorded auth cases, on a server with a password.
func TestPTYReferenceAuth(t *testing.T) {
	e := start(t, testserver.Options{Password: "secret"})
	basic := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("opencode:secret"))}
	st, b := func() (int, []byte) {
		req, _ := http.NewRequest("POST", e.ts.URL+"/pty", strings.NewReader(`{"command":"/bin/sh"}`))
		req.Header.Set("Authorization", basic["Authorization"])
		resp, err := e.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		return resp.StatusCode, raw
	}()
	var p ptyInfo
	if st != 200 || json.Unmarshal(b, &p) != nil {
		t.Fatalf("POST /pty = %d %s", st, b)
	}
	var ticket string
	var seen []string
	for _, c := range readPTYRef(t, "auth.jsonl") {
		seen = append(seen, c.Name)
		t.Run(c.Name, func(t *testing.T) {
			parent := e.t
			e.t = t
			defer func() { e.t = parent }()
			if c.Websocket {
				path := strings.ReplaceAll(c.Path, "{id}", p.ID)
				if strings.HasPrefix(c.Name, "ticket/") {
					path = "/pty/" + p.ID + "/connect?ticket=" + ticket
				}
				opened := c.Frames[0].Ev == "open"
				w, resp, err := e.ptyDial(path, nil)
				if opened != (err == nil) {
					t.Fatalf("websocket %s: %v %v; opencode serve opened it: %v", c.Name, err, resp, opened)
				}
				if opened {
					w.meta()
				}
				return
			}
			var hdr map[string]string
			if c.Auth == nil || *c.Auth {
				hdr = basic
			}
			if c.Name == "ticket/issue" {
				req, _ := http.NewRequest("POST", e.ts.URL+"/pty/"+p.ID+"/connect-token", nil)
				req.Header.Set("Authorization", basic["Authorization"])
				req.Header.Set("x-opencode-ticket", "1")
				resp, err := e.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var tk struct{ Ticket string }
				if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&tk) != nil {
					t.Fatalf("connect-token = %d", resp.StatusCode)
				}
				ticket = tk.Ticket
				return
			}
			ptyRefCheck(t, e, c, p.ID, hdr)
		})
	}
	sort.Strings(seen)
	if len(seen) < 10 {
		t.Errorf("only %d auth cases", len(seen))
	}
}
