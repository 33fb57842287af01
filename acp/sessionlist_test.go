package acp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/acp"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

type listPage struct {
	Sessions []struct {
		SessionID string `json:"sessionId"`
		Cwd       string `json:"cwd"`
	} `json:"sessions"`
	NextCursor *string `json:"nextCursor"`
}

// TestV2SessionListPaging: v2 session/list answers pages (here of 3) with
// a nextCursor until the last, which has none; following the cursors
// lists every session of the directory once, most recently updated first,
// also when a session is created while paging; a cursor that is not one
// of ours is -32602. v1 still lists them all in one answer.
func TestV2SessionListPaging(t *testing.T) {
	acp.SetPageSize(t, 3)
	srv := testserver.Start(t, testserver.Options{Scripted: scripted.Config{Chunks: 1}})
	other := filepath.Join(srv.Directory, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	c := startV2(t, srv)
	var made []string
	for i := 0; i < 7; i++ {
		made = append(made, c.newSessionV2(srv.Directory))
		time.Sleep(2 * time.Millisecond) // distinct update times
	}
	c.newSessionV2(other)

	seen := map[string]int{}
	var order []string
	var pages []int
	var cursor *string
	for n := 0; ; n++ {
		if n > 10 {
			t.Fatal("the cursors never end")
		}
		params := map[string]any{"cwd": srv.Directory}
		if cursor != nil {
			params["cursor"] = *cursor
		}
		c.checkRequest("session/list", params)
		var p listPage
		c.call("session/list", params, &p)
		pages = append(pages, len(p.Sessions))
		for _, s := range p.Sessions {
			seen[s.SessionID]++
			order = append(order, s.SessionID)
			if s.Cwd != srv.Directory {
				t.Errorf("session %s of %s listed under the cwd filter", s.SessionID, s.Cwd)
			}
		}
		if n == 0 {
			c.newSessionV2(srv.Directory) // newest: on the first page, not seen by the later ones
		}
		if p.NextCursor == nil {
			break
		}
		cursor = p.NextCursor
	}
	if len(pages) != 3 || pages[0] != 3 || pages[1] != 3 || pages[2] != 1 {
		t.Errorf("page sizes %v, want [3 3 1]", pages)
	}
	for _, id := range made {
		if seen[id] != 1 {
			t.Errorf("session %s listed %d times", id, seen[id])
		}
	}
	for i, id := range order {
		if want := made[len(made)-1-i]; id != want {
			t.Errorf("listed #%d %s, want %s (most recently updated first)", i, id, want)
		}
	}

	_, ch := c.request("session/list", map[string]any{"cursor": "not-a-cursor"})
	if m := c.wait(ch, "bad cursor"); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("bad cursor answered %+v", m)
	}

	v1 := start(t, srv)
	v1.handshake()
	var all listPage
	v1.call("session/list", map[string]any{}, &all)
	if len(all.Sessions) != 9 || all.NextCursor != nil {
		b, _ := json.Marshal(all)
		t.Errorf("v1 list: %d sessions, want all 9 in one answer: %s", len(all.Sessions), b)
	}
}
