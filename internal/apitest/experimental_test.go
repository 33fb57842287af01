package apitest_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/provider/scripted"
)

// TestSessionsConfigInit: /experimental/session lists every project's
// sessions, newest first, with their project, a cursor for the next page
// and OpenCode's filters; PATCH /config merges into the directory's
// config.json and answers the patch; /session/{id}/init runs the init
// command under the client's message ID; background answers false
// (subagents run in the foreground here).
func TestSessionsConfigInit(t *testing.T) {
	var tick atomic.Int64
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	srv := testserver.Start(t, testserver.Options{Clock: func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Second) }})
	c := newClient(t, srv.URL)
	a, b := t.TempDir(), t.TempDir()
	var ids []string
	for _, d := range []string{a, b, b} {
		ids = append(ids, field(t, c.do("POST", "/session?directory="+d, `{}`, 200), "id"))
	}
	type gs struct {
		ID, Directory string
		Project       struct{ ID, Worktree string }
	}
	var all []gs
	json.Unmarshal(c.do("GET", "/experimental/session", "", 200), &all)
	if len(all) != 3 || all[0].ID != ids[2] || all[2].ID != ids[0] || all[0].Project.Worktree != b {
		t.Errorf("all sessions = %+v", all)
	}
	resp, err := c.hc.Do(c.request("GET", "/experimental/session?limit=2", ""))
	if err != nil {
		t.Fatal(err)
	}
	var page []gs
	json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	next := resp.Header.Get("x-next-cursor")
	if len(page) != 2 || next == "" {
		t.Fatalf("page = %+v, next %q", page, next)
	}
	json.Unmarshal(c.do("GET", "/experimental/session?cursor="+next, "", 200), &page)
	if len(page) != 1 || page[0].ID != ids[0] {
		t.Errorf("next page = %+v", page)
	}
	json.Unmarshal(c.do("GET", "/experimental/session?directory="+a, "", 200), &page)
	if len(page) != 1 || page[0].ID != ids[0] {
		t.Errorf("directory %s = %+v", a, page)
	}
	c.do("GET", "/experimental/session?roots=maybe", "", 400)
	if got := string(c.do("POST", "/experimental/session/"+ids[0]+"/background", "", 200)); got != "false" {
		t.Errorf("background = %s", got)
	}

	c.do("PATCH", "/config?directory="+a, `{"username":"bob"}`, 200)
	if got := string(c.do("PATCH", "/config?directory="+a, `{"autoupdate":false}`, 200)); !strings.Contains(got, `"autoupdate":false`) || strings.Contains(got, "bob") {
		t.Errorf("PATCH /config answered %s, want the patch", got)
	}
	raw, err := os.ReadFile(filepath.Join(a, "config.json"))
	if err != nil || !strings.Contains(string(raw), "bob") || !strings.Contains(string(raw), "autoupdate") {
		t.Errorf("config.json = %s %v", raw, err)
	}

	mid := identifier.NewMessage()
	body := `{"providerID":"` + scripted.ProviderID + `","modelID":"` + scripted.ModelID + `","messageID":"` + mid + `"}`
	if got := string(c.do("POST", "/session/"+ids[0]+"/init", body, 200)); got != "true" {
		t.Errorf("init = %s", got)
	}
	var msgs []struct {
		Info  struct{ ID string }
		Parts []struct{ Text string }
	}
	json.Unmarshal(c.do("GET", "/session/"+ids[0]+"/message", "", 200), &msgs)
	if len(msgs) == 0 || msgs[0].Info.ID != mid || len(msgs[0].Parts) == 0 || !strings.Contains(msgs[0].Parts[0].Text, "AGENTS.md") {
		t.Errorf("init's prompt = %+v", msgs)
	}
	c.do("POST", "/session/"+ids[0]+"/init", `{"providerID":"x"}`, http.StatusBadRequest)
}
