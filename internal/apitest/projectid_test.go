package apitest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestSessionProjectID: a session's projectID is its directory's project
// as the project routes name it (a git project's own ID), "global" outside
// git, as OpenCode has it.
func TestSessionProjectID(t *testing.T) {
	git := t.TempDir()
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "root"}} {
		if out, err := exec.Command("git", append([]string{"-C", git}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "a.txt"), []byte("x"), 0o644)
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL)
	project := field(t, c.do("GET", "/project/current?directory="+git, "", 200), "id")
	if project == "global" {
		t.Fatalf("the git project is named global")
	}
	sid := field(t, c.do("POST", "/session?directory="+git, `{}`, 200), "id")
	if got := field(t, c.do("GET", "/session/"+sid, "", 200), "projectID"); got != project {
		t.Errorf("a session in the git project has projectID %q, want %q", got, project)
	}
	sid = field(t, c.do("POST", "/session?directory="+plain, `{}`, 200), "id")
	if got := field(t, c.do("GET", "/session/"+sid, "", 200), "projectID"); got != "global" {
		t.Errorf("a session outside git has projectID %q, want global", got)
	}
}
