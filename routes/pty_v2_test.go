package routes_test

import (
	"encoding/json"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestPTYV2: the /api/pty routes are the same terminals as /pty in the v2
// shapes: {location, data} answers, a 204 delete, errors in the v2 family
// (as the real server answered, testdata/reference/pty), and the websocket
// on its v2 path.
func TestPTYV2(t *testing.T) {
	needProc(t)
	e := start(t, testserver.Options{})
	var created struct {
		Location struct{ Directory string }
		Data     ptyInfo
	}
	e.mustJSON("POST", "/api/pty", `{"command":"/bin/sh","title":"v2"}`, &created)
	p := created.Data
	if p.Title != "v2" || p.Status != "running" || created.Location.Directory != e.dir {
		t.Fatalf("POST /api/pty = %+v", created)
	}
	var list struct{ Data []ptyInfo }
	e.mustJSON("GET", "/api/pty", "", &list)
	if len(list.Data) != 1 || list.Data[0].ID != p.ID {
		t.Errorf("GET /api/pty = %+v", list)
	}
	var one struct{ Data ptyInfo }
	e.mustJSON("PUT", "/api/pty/"+p.ID, `{"title":"renamed","size":{"rows":10,"cols":40}}`, &one)
	if one.Data.Title != "renamed" {
		t.Errorf("PUT /api/pty = %+v", one)
	}
	// The same terminal on either path.
	w, resp, err := e.ptyDial("/api/pty/"+p.ID+"/connect", nil)
	if err != nil {
		t.Fatalf("connect on /api/pty: %v (%v)", err, resp)
	}
	w.meta()
	w.send("echo v$((2))\n")
	w.until(`v2\r\n`)

	tag := func(method, path, body string, status int, want string) {
		t.Helper()
		st, b := e.do(method, path, body)
		var v struct {
			Tag string `json:"_tag"`
		}
		json.Unmarshal(b, &v)
		if st != status || v.Tag != want {
			t.Errorf("%s %s: %d %s, want %d %s", method, path, st, b, status, want)
		}
	}
	tag("GET", "/api/pty/pty_nope", "", 404, "PtyNotFoundError")
	tag("POST", "/api/pty", `{"command":5}`, 400, "InvalidRequestError")
	tag("POST", "/api/pty/"+p.ID+"/connect-token", "", 403, "ForbiddenError")
	if st, b := e.do("DELETE", "/api/pty/"+p.ID, ""); st != 204 || len(b) != 0 {
		t.Errorf("DELETE /api/pty = %d %s, want 204", st, b)
	}
	tag("GET", "/api/pty/"+p.ID, "", 404, "PtyNotFoundError")
}
