package routes_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/routes"
)

// wsProject is a git repository with one commit, and worktrees go under
// the test's own data directory.
func wsProject(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	w, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("XDG_DATA_HOME", filepath.Join(w, "data"))
	p := filepath.Join(w, "project")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", p}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return p
}

type syncEv struct {
	ID          string          `json:"id"`
	AggregateID string          `json:"aggregate_id"`
	Seq         int64           `json:"seq"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data"`
}

// TestSyncHistoryIsTheLog: a session's sync history is session.created.1
// at seq 0 (a stable event ID, the session as it is), then its durable log
// with the log's IDs and seqs, typed with their versions; a known seq
// leaves out what the client has; every session's events are ordered by
// seq.
func TestSyncHistoryIsTheLog(t *testing.T) {
	e := start(t, testserver.Options{})
	a, b := e.createSession(), e.createSession()
	e.prompt(a, "hello")
	history := func(known map[string]int64) []syncEv {
		t.Helper()
		body, _ := json.Marshal(known)
		var out []syncEv
		e.mustJSON("POST", "/sync/history", string(body), &out)
		return out
	}
	all := history(map[string]int64{})
	log, err := e.ts.Manager.Events(context.Background(), a, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) < 3 {
		t.Fatalf("the prompted session's log has %d events", len(log))
	}
	if len(all) != 2+len(log) {
		t.Fatalf("%d events, want %d (2 created + the log): %+v", len(all), 2+len(log), all)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq < all[i-1].Seq {
			t.Fatalf("event %d seq %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	created := map[string]syncEv{}
	var ofA []syncEv
	for _, ev := range all {
		if ev.Type == "session.created.1" {
			created[ev.AggregateID] = ev
		} else if ev.AggregateID == a {
			ofA = append(ofA, ev)
		}
	}
	for _, id := range []string{a, b} {
		c, ok := created[id]
		if !ok || c.Seq != 0 || !strings.HasPrefix(c.ID, "evt_") {
			t.Fatalf("session %s: created event %+v", id, c)
		}
		var d struct {
			SessionID string `json:"sessionID"`
			Info      struct {
				ID, Directory string
			} `json:"info"`
		}
		if err := json.Unmarshal(c.Data, &d); err != nil || d.SessionID != id || d.Info.ID != id || d.Info.Directory != e.dir {
			t.Fatalf("session %s: created data %s (%v)", id, c.Data, err)
		}
	}
	if len(ofA) != len(log) {
		t.Fatalf("%d log events of %s in the history, the log has %d", len(ofA), a, len(log))
	}
	for i, ev := range log {
		want := ev.Type + "." + strconv.Itoa(max(ev.Version, 1))
		if ofA[i].ID != ev.ID || ofA[i].Seq != ev.Seq || ofA[i].Type != want || string(ofA[i].Data) != string(ev.Data) {
			t.Fatalf("history event %+v, log event %s %d %s %s", ofA[i], ev.ID, ev.Seq, want, ev.Data)
		}
	}
	if again := history(map[string]int64{}); again[0].ID != all[0].ID || again[1].ID != all[1].ID {
		t.Fatalf("created event IDs change: %s %s, then %s %s", all[0].ID, all[1].ID, again[0].ID, again[1].ID)
	}
	// What the client knows is left out.
	past := history(map[string]int64{a: 2})
	for _, ev := range past {
		if ev.AggregateID == a && ev.Seq <= 2 {
			t.Fatalf("%s: seq %d returned past the known seq 2", a, ev.Seq)
		}
	}
	if len(past) != 1+len(log)-2 {
		t.Fatalf("%d events past seq 2 (and b's created), want %d", len(past), 1+len(log)-2)
	}
	if none := history(map[string]int64{a: log[len(log)-1].Seq, b: 0}); len(none) != 0 {
		t.Fatalf("a client that knows everything gets %+v", none)
	}
}

// TestWorkspaceLifecycle: with the flag, a worktree workspace is created
// (workspace.status connected and worktree.ready published), sessions are
// created in it, and removing it removes them (a child with its parent),
// the worktree and the branch made for it.
func TestWorkspaceLifecycle(t *testing.T) {
	p := wsProject(t)
	e := start(t, testserver.Options{Directory: p, Env: map[string]string{"OPENCODE_EXPERIMENTAL": "1"}})
	global := e.open("/global/event")
	global.header()
	var ws struct {
		ID, Name, Directory string
		Branch              *string
	}
	e.mustJSON("POST", "/experimental/workspace", `{"type":"worktree","branch":"ws-branch"}`, &ws)
	if ws.Branch == nil || *ws.Branch != "ws-branch" || !strings.HasPrefix(ws.ID, "wrk_") {
		t.Fatalf("workspace %+v", ws)
	}
	if out, err := exec.Command("git", "-C", ws.Directory, "branch", "--show-current").Output(); err != nil || strings.TrimSpace(string(out)) != "ws-branch" {
		t.Fatalf("the worktree's branch: %q %v", out, err)
	}
	global.waitFor("workspace.status", func(fs []string) bool {
		for _, f := range fs {
			if strings.Contains(f, `"type":"workspace.status"`) && strings.Contains(f, `"workspaceID":"`+ws.ID+`"`) &&
				strings.Contains(f, `"status":"connected"`) {
				return true
			}
		}
		return false
	})
	global.waitFor("worktree.ready", func(fs []string) bool {
		for _, f := range fs {
			if strings.Contains(f, `"type":"worktree.ready"`) && strings.Contains(f, `"name":"`+ws.Name+`"`) {
				return true
			}
		}
		return false
	})
	if st, b := e.do("POST", "/session", `{"workspaceID":"nope"}`); st != 400 {
		t.Fatalf("a session with a bad workspaceID: %d %s", st, b)
	}
	var parent, child, other struct{ ID, WorkspaceID string }
	e.mustJSON("POST", "/session", `{"workspaceID":"`+ws.ID+`"}`, &parent)
	e.mustJSON("POST", "/session", `{"workspaceID":"`+ws.ID+`","parentID":"`+parent.ID+`"}`, &child)
	e.mustJSON("POST", "/session", `{}`, &other)
	if parent.WorkspaceID != ws.ID || child.WorkspaceID != ws.ID || other.WorkspaceID != "" {
		t.Fatalf("sessions' workspaces: %+v %+v %+v", parent, child, other)
	}
	var removed struct{ ID string }
	e.mustJSON("DELETE", "/experimental/workspace/"+ws.ID, "", &removed)
	if removed.ID != ws.ID {
		t.Fatalf("removed %+v", removed)
	}
	for _, id := range []string{parent.ID, child.ID} {
		if st, _ := e.do("GET", "/session/"+id, ""); st != 404 {
			t.Fatalf("session %s of the removed workspace: %d", id, st)
		}
	}
	if st, _ := e.do("GET", "/session/"+other.ID, ""); st != 200 {
		t.Fatalf("a session of no workspace: %d", st)
	}
	if _, err := os.Stat(ws.Directory); !os.IsNotExist(err) {
		t.Fatalf("the worktree is still there: %v", err)
	}
	if out, _ := exec.Command("git", "-C", p, "branch", "--list", "ws-branch").Output(); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("the workspace's branch is still there: %s", out)
	}
	var list []any
	e.mustJSON("GET", "/experimental/workspace/status", "", &list)
	if len(list) != 0 {
		t.Fatalf("status after remove: %v", list)
	}
}

// TestMoveSessionIsDurable: a move is a session.next.moved in the
// session's log; the session's directory and workspace survive a restart.
func TestMoveSessionIsDurable(t *testing.T) {
	p := wsProject(t)
	sub := filepath.Join(p, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	opts := testserver.Options{SQLite: true, DataDir: data, Directory: p, Env: map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "true"}}
	e := start(t, opts)
	id := e.createSession()
	var ws struct{ ID string }
	e.mustJSON("POST", "/experimental/workspace", `{"type":"worktree"}`, &ws)
	if st, b := e.do("POST", "/experimental/workspace/warp", `{"id":"`+ws.ID+`","sessionID":"`+id+`"}`); st != 204 {
		t.Fatalf("warp: %d %s", st, b)
	}
	if st, b := e.do("POST", "/experimental/control-plane/move-session",
		`{"sessionID":"`+id+`","destination":{"directory":"`+sub+`"}}`); st != 204 {
		t.Fatalf("move: %d %s", st, b)
	}
	log, err := e.ts.Manager.Events(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(log); n == 0 || log[n-1].Type != "session.next.moved" {
		t.Fatalf("log after the move: %+v", log)
	}
	var moved struct {
		SessionID    string
		Location     struct{ Directory string }
		Subdirectory string
	}
	if err := json.Unmarshal(log[len(log)-1].Data, &moved); err != nil || moved.SessionID != id ||
		moved.Location.Directory != sub || moved.Subdirectory != "sub" {
		t.Fatalf("moved event %s (%v)", log[len(log)-1].Data, err)
	}
	e.ts.Stop()
	e2 := start(t, opts)
	var s struct{ Directory, WorkspaceID string }
	e2.mustJSON("GET", "/session/"+id, "", &s)
	if s.Directory != sub || s.WorkspaceID != ws.ID {
		t.Fatalf("after a restart the session is %+v", s)
	}
	var v2 struct {
		Data struct {
			Location struct{ Directory, WorkspaceID string }
		}
	}
	e2.mustJSON("GET", "/api/session/"+id+"?location%5Bdirectory%5D="+url.QueryEscape(sub), "", &v2)
	if v2.Data.Location.Directory != sub || v2.Data.Location.WorkspaceID != ws.ID {
		t.Fatalf("v2 session %+v", v2)
	}
}

func TestExperimentalFlag(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "true"}, true},
		{map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "1"}, true},
		{map[string]string{"OPENCODE_EXPERIMENTAL": "yes"}, true},
		{map[string]string{"OPENCODE_EXPERIMENTAL": "true", "OPENCODE_EXPERIMENTAL_WORKSPACES": "false"}, false},
		{map[string]string{"OPENCODE_EXPERIMENTAL": "on", "OPENCODE_EXPERIMENTAL_WORKSPACES": "maybe"}, true},
		{map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "maybe"}, false},
	} {
		env := c.env
		if got := routes.ExperimentalFlag(func(k string) string { return env[k] }, "OPENCODE_EXPERIMENTAL_WORKSPACES"); got != c.want {
			t.Errorf("%v: %v, want %v", c.env, got, c.want)
		}
	}
}

// TestWorkspaceRouting: a request that names a workspace is served in the
// workspace's directory (its files, its branch), whatever directory it
// names; an unknown workspace is a 400 in the route's family.
func TestWorkspaceRouting(t *testing.T) {
	p := wsProject(t)
	e := start(t, testserver.Options{Directory: p, Env: map[string]string{"OPENCODE_EXPERIMENTAL_WORKSPACES": "true"}})
	var ws struct{ ID, Directory string }
	e.mustJSON("POST", "/experimental/workspace", `{"type":"worktree","branch":"routed"}`, &ws)
	if err := os.WriteFile(filepath.Join(ws.Directory, "only-here.txt"), []byte("in the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var vcsInfo struct{ Branch string }
	e.mustJSON("GET", "/vcs?workspace="+ws.ID+"&directory="+url.QueryEscape(p), "", &vcsInfo)
	if vcsInfo.Branch != "routed" {
		t.Fatalf("GET /vcs in the workspace: branch %q", vcsInfo.Branch)
	}
	var content struct{ Content string }
	e.mustJSON("GET", "/file/content?path=only-here.txt&workspace="+ws.ID, "", &content)
	if strings.TrimSpace(content.Content) != "in the workspace" {
		t.Fatalf("a file of the workspace: %+v", content)
	}
	var status []struct{ File string }
	e.mustJSON("GET", "/vcs/status?workspace="+ws.ID, "", &status)
	if len(status) != 1 || status[0].File != "only-here.txt" {
		t.Fatalf("the workspace's changes: %+v", status)
	}
	// The workspace routes are served where the request is.
	var list []struct{ ID string }
	e.mustJSON("GET", "/experimental/workspace?workspace="+ws.ID, "", &list)
	if len(list) != 1 || list[0].ID != ws.ID {
		t.Fatalf("workspaces listed from the workspace: %+v", list)
	}
	if st, b := e.do("GET", "/vcs?workspace=wrk_nope", ""); st != 400 || !strings.Contains(string(b), `"name":"BadRequest"`) {
		t.Fatalf("an unknown workspace: %d %s", st, b)
	}
	if st, b := e.do("GET", "/api/session?location%5Bworkspace%5D=nope", ""); st != 400 || !strings.Contains(string(b), `"_tag":"InvalidRequestError"`) {
		t.Fatalf("a bad workspace ID on a v2 route: %d %s", st, b)
	}
}
