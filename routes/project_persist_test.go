package routes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/vcs"
)

type savedProject struct {
	ID   string  `json:"id"`
	Name *string `json:"name"`
	Icon *struct {
		URL   *string `json:"url"`
		Color *string `json:"color"`
	} `json:"icon"`
	Commands *struct {
		Start *string `json:"start"`
	} `json:"commands"`
}

func (p savedProject) patched() bool {
	return p.Name != nil && *p.Name == "Demo" && p.Icon != nil && p.Icon.URL != nil && *p.Icon.URL == "https://x/i.png" &&
		p.Icon.Color != nil && *p.Icon.Color == "blue" && p.Commands != nil && p.Commands.Start != nil &&
		*p.Commands.Start == "make dev"
}

// A project's name, icon and start command set with PATCH are there again
// after a restart on the same data directory, as OpenCode keeps them in
// its database.
func TestProjectPatchSurvivesRestart(t *testing.T) {
	p := wsProject(t)
	opts := testserver.Options{SQLite: true, DataDir: t.TempDir(), Directory: p}
	e := start(t, opts)
	var cur savedProject
	e.mustJSON("GET", "/project/current", "", &cur)
	if cur.ID == "" || cur.ID == "global" {
		t.Fatalf("current project %+v", cur)
	}
	var patched savedProject
	e.mustJSON("PATCH", "/project/"+cur.ID,
		`{"name":"Demo","icon":{"url":"https://x/i.png","color":"blue"},"commands":{"start":"make dev"}}`, &patched)
	if !patched.patched() {
		t.Fatalf("PATCH answered %+v", patched)
	}
	e.ts.Stop()

	e = start(t, opts)
	var list []savedProject
	e.mustJSON("GET", "/project", "", &list)
	found := false
	for _, q := range list {
		if q.ID == cur.ID {
			found = true
			if !q.patched() {
				t.Errorf("GET /project after the restart: %+v", q)
			}
		}
	}
	if !found {
		t.Errorf("GET /project after the restart lacks %s: %+v", cur.ID, list)
	}
	var again savedProject
	e.mustJSON("GET", "/project/current", "", &again)
	if again.ID != cur.ID || !again.patched() {
		t.Errorf("GET /project/current after the restart: %+v", again)
	}
}

// A PATCH the registry cannot save answers 503 and changes nothing.
func TestProjectPatchSaveFailure(t *testing.T) {
	p := wsProject(t)
	data := t.TempDir()
	e := start(t, testserver.Options{SQLite: true, DataDir: data, Directory: p})
	var cur savedProject
	e.mustJSON("GET", "/project/current", "", &cur)
	// The registry's file replaced by a directory: a rename onto it fails.
	file := filepath.Join(data, vcs.ProjectsFile)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(file, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if st, b := e.do("PATCH", "/project/"+cur.ID, `{"name":"Demo"}`); st != 503 {
		t.Fatalf("PATCH with the registry unwritable = %d %s, want 503", st, b)
	}
	var after savedProject
	e.mustJSON("GET", "/project/current", "", &after)
	if after.Name != nil {
		t.Errorf("the failed PATCH changed the project: %+v", after)
	}
}
