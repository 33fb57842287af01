package vcs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProjectsSaveAndLoad(t *testing.T) {
	dir := repoWith(t, map[string]string{"a.txt": "a\n"})
	path := filepath.Join(t.TempDir(), "data", ProjectsFile)
	ps, err := LoadProjects(path)
	if err != nil {
		t.Fatalf("LoadProjects with no file: %v", err)
	}
	p, _, err := ps.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	name, url, color, start := "Demo", "https://x/icon.png", "blue", "make dev"
	if _, ok, err := ps.Update(p.ID, Update{Name: &name, Icon: &Icon{URL: &url, Color: &color},
		Commands: &Commands{Start: &start}}); !ok || err != nil {
		t.Fatalf("Update: %v %v", ok, err)
	}
	if _, err := ps.SetDirectory(p.ID, filepath.Join(dir, "copy"), "git_worktree"); err != nil {
		t.Fatal(err)
	}
	want, _ := ps.Get(p.ID)

	again, err := LoadProjects(path)
	if err != nil {
		t.Fatalf("LoadProjects: %v", err)
	}
	got, ok := again.Get(p.ID)
	if !ok || got.Name == nil || *got.Name != name || got.Icon == nil || *got.Icon.URL != url ||
		*got.Icon.Color != color || got.Commands == nil || *got.Commands.Start != start ||
		got.Worktree != want.Worktree || got.Time != want.Time {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	if ds := again.Directories(p.ID); len(ds) != 2 || ds[0].Strategy != "git_worktree" || ds[1].Directory != dir {
		t.Errorf("loaded directories %+v", ds)
	}
	// A directory added after the load is the most recent still.
	if _, err := again.SetDirectory(p.ID, filepath.Join(dir, "other"), ""); err != nil {
		t.Fatal(err)
	}
	if ds := again.Directories(p.ID); ds[0].Directory != filepath.Join(dir, "other") {
		t.Errorf("directories after the load %+v", ds)
	}
}

func TestProjectsLoadCorrupt(t *testing.T) {
	for name, body := range map[string]string{
		"truncated": `{"version":1,"projects":[{"project":{"id":"a"`,
		"not json":  "garbage",
		"version":   `{"version":7,"projects":[]}`,
		"no id":     `{"version":1,"projects":[{"project":{"worktree":"/x"}}]}`,
		"duplicate": `{"version":1,"projects":[{"project":{"id":"a"}},{"project":{"id":"a"}}]}`,
	} {
		path := filepath.Join(t.TempDir(), ProjectsFile)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ps, err := LoadProjects(path)
		if err == nil || ps != nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: LoadProjects = %v, %v; want an error naming the file", name, ps, err)
		}
	}
}

func TestProjectsSaveFailureChangesNothing(t *testing.T) {
	dir := repoWith(t, map[string]string{"a.txt": "a\n"})
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ps := &Projects{}
	p, _, err := ps.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	notified := 0
	ps.Notify = func(Project) { notified++ }
	ps.Path = filepath.Join(blocker, ProjectsFile) // a directory that is a file: every write fails
	name := "Demo"
	_, ok, err := ps.Update(p.ID, Update{Name: &name})
	var se *SaveError
	if !ok || !errors.As(err, &se) {
		t.Fatalf("Update = %v, %v; want a SaveError", ok, err)
	}
	if got, _ := ps.Get(p.ID); got.Name != nil || got.Time != p.Time {
		t.Errorf("after a failed save: %+v, want %+v", got, p)
	}
	if changed, err := ps.SetDirectory(p.ID, filepath.Join(dir, "copy"), "git_worktree"); changed || !errors.As(err, &se) {
		t.Errorf("SetDirectory = %v, %v", changed, err)
	}
	if ds := ps.Directories(p.ID); len(ds) != 1 {
		t.Errorf("directories after a failed save: %+v", ds)
	}
	if err := ps.AddSandbox(p.ID, filepath.Join(dir, "sb")); !errors.As(err, &se) {
		t.Errorf("AddSandbox = %v", err)
	}
	if got, _ := ps.Get(p.ID); len(got.Sandboxes) != 0 {
		t.Errorf("sandboxes after a failed save: %+v", got.Sandboxes)
	}
	if notified != 0 {
		t.Errorf("%d notifications of changes that were not made", notified)
	}
}
