package lifecycle_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestV2Asks: a permission ask and a question are listed by the v2 routes
// (by location and by session, in the v2 shapes) and answered through them;
// an unknown request is OpenCode's PermissionNotFoundError or
// QuestionNotFoundError; a session that does not exist is
// SessionNotFoundError.
func TestV2Asks(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	srv := testserver.Start(t, testserver.Options{Config: stubConfig(stub.URL(), `{"bash":"ask","webfetch":"deny"}`), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()

	type permV2 struct {
		ID, SessionID, Action string
		Resources, Save       []string
		Source                struct{ Type, MessageID, CallID string }
	}
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(newID(), `call:bash {"command":"echo asked","description":"echo"} then: ran`, ""), 204)
	var perms struct{ Data []permV2 }
	checkFor(t, 10*time.Second, "the permission ask", func() bool {
		c.must("GET", "/api/session/"+sid+"/permission", nil, 200).json(t, &perms)
		return len(perms.Data) == 1
	})
	p := perms.Data[0]
	if p.SessionID != sid || p.Action != "bash" || len(p.Resources) != 1 || p.Resources[0] != "echo asked" ||
		p.Source.Type != "tool" || p.Source.CallID == "" {
		t.Errorf("v2 permission = %+v", p)
	}
	var byLoc struct{ Data []permV2 }
	c.must("GET", "/api/permission/request?location[directory]="+dir, nil, 200).json(t, &byLoc)
	if len(byLoc.Data) != 1 || byLoc.Data[0].ID != p.ID {
		t.Errorf("by location: %+v", byLoc)
	}
	c.must("GET", "/api/permission/request?location[directory]="+filepath.Join(dir, "elsewhere"), nil, 200).json(t, &byLoc)
	if len(byLoc.Data) != 0 {
		t.Errorf("another location lists %+v", byLoc)
	}
	var one struct{ Data permV2 }
	c.must("GET", "/api/session/"+sid+"/permission/"+p.ID, nil, 200).json(t, &one)
	if one.Data.ID != p.ID {
		t.Errorf("get = %+v", one)
	}
	var nf struct {
		Tag       string `json:"_tag"`
		RequestID string `json:"requestID"`
	}
	c.must("GET", "/api/session/"+sid+"/permission/per_0000000000000000000000000", nil, 404).json(t, &nf)
	if nf.Tag != "PermissionNotFoundError" || nf.RequestID != "per_0000000000000000000000000" {
		t.Errorf("unknown permission: %+v", nf)
	}
	c.must("POST", "/api/session/"+sid+"/permission/"+p.ID+"/reply", map[string]any{"reply": "sometimes"}, 400)
	c.must("POST", "/api/session/"+sid+"/permission/"+p.ID+"/reply", map[string]any{"reply": "once"}, 204)
	c.waitIdle(sid)
	c.must("GET", "/api/session/"+sid+"/permission", nil, 200).json(t, &perms)
	if len(perms.Data) != 0 {
		t.Errorf("answered ask still listed: %+v", perms)
	}

	q := `{"questions":[{"question":"Which?","header":"Pick","options":[{"label":"A","description":"a"},{"label":"B","description":"b"}]}]}`
	c.must("POST", "/session/"+sid+"/prompt_async", v1Body(newID(), "call:question "+q+" then: chosen", ""), 204)
	var qs struct {
		Data []struct {
			ID, SessionID string
			Questions     []struct{ Question string }
		}
	}
	checkFor(t, 10*time.Second, "the question", func() bool {
		c.must("GET", "/api/session/"+sid+"/question", nil, 200).json(t, &qs)
		return len(qs.Data) == 1
	})
	if qs.Data[0].Questions[0].Question != "Which?" {
		t.Errorf("question = %+v", qs)
	}
	c.must("GET", "/api/question/request?location[directory]="+dir, nil, 200).json(t, &qs)
	if len(qs.Data) != 1 {
		t.Errorf("by location: %+v", qs)
	}
	c.must("POST", "/api/session/"+sid+"/question/que_0000000000000000000000000/reply", map[string]any{"answers": [][]string{{"A"}}}, 404).json(t, &nf)
	if nf.Tag != "QuestionNotFoundError" {
		t.Errorf("unknown question: %+v", nf)
	}
	c.must("POST", "/api/session/"+sid+"/question/"+qs.Data[0].ID+"/reply", map[string]any{"answers": [][]string{{"A"}}}, 204)
	c.waitIdle(sid)

	// A client's own check: the session's rules decide; an ask waits in
	// the same lists and is answered the same way.
	var eff struct{ Data struct{ ID, Effect string } }
	for _, tc := range []struct{ body, effect string }{
		{`{"action":"read","resources":["a.go"]}`, "allow"},
		{`{"action":"webfetch","resources":["https://x"]}`, "deny"},
		{`{"id":"per_client1","action":"bash","resources":["make deploy"],"save":["make *"]}`, "ask"},
	} {
		c.must("POST", "/api/session/"+sid+"/permission", json.RawMessage(tc.body), 200).json(t, &eff)
		if eff.Data.Effect != tc.effect || eff.Data.ID == "" {
			t.Errorf("%s: %+v, want %s", tc.body, eff, tc.effect)
		}
	}
	c.must("GET", "/api/session/"+sid+"/permission/per_client1", nil, 200).json(t, &one)
	if one.Data.Action != "bash" || len(one.Data.Save) != 1 {
		t.Errorf("the client's ask = %+v", one)
	}
	c.must("POST", "/api/session/"+sid+"/permission", json.RawMessage(`{"id":"per_client1","action":"bash","resources":["x"]}`), 409)
	c.must("POST", "/api/session/"+sid+"/permission", json.RawMessage(`{"resources":["x"]}`), 400)
	c.must("POST", "/api/session/"+sid+"/permission/per_client1/reply", map[string]any{"reply": "reject"}, 204)
	c.must("GET", "/api/session/"+sid+"/permission/per_client1", nil, 404)

	c.must("GET", "/api/session/ses_0000000000000000000000000/permission", nil, 404)
	c.must("GET", "/api/permission/saved", nil, 200)
}
