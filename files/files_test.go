package files

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// project makes a git work tree with an ignored directory and one commit.
func project(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed (the picker honours .gitignore through git)")
	}
	dir := t.TempDir()
	for p, body := range map[string]string{
		"README.md": "# Demo\nhello world\n", "src/main.go": "package main\n\nfunc main() {}\n",
		".gitignore": "ignored/\n", "ignored/secret.txt": "hello secret\n", "notes.txt": "one\ntwo\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

func TestFind(t *testing.T) {
	dir := project(t)
	ctx := context.Background()
	tests := []struct {
		query string
		dirs  bool
		kind  string
		want  []string
	}{
		{"READ", true, "", []string{"README.md"}},
		{"main", false, "", []string{"src/main.go"}},
		{"src", true, "", []string{"src/", "src/main.go"}},
		{"src", true, "directory", []string{"src/"}},
		{"secret", true, "", []string{}}, // ignored by .gitignore
		{"zzz", true, "", []string{}},
	}
	for _, tt := range tests {
		if got := Find(ctx, dir, tt.query, tt.dirs, tt.kind, 10); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Find(%q, dirs=%v, %q) = %q, want %q", tt.query, tt.dirs, tt.kind, got, tt.want)
		}
	}
	// A new untracked file is found too.
	os.WriteFile(filepath.Join(dir, "fresh.txt"), nil, 0o644)
	if got := Find(ctx, dir, "fresh", false, "", 10); !reflect.DeepEqual(got, []string{"fresh.txt"}) {
		t.Errorf("untracked: %q", got)
	}
}

func TestSearchListReadStatus(t *testing.T) {
	dir := project(t)
	ctx := context.Background()
	ms, err := Search(ctx, dir, "hello")
	if err != nil || len(ms) != 1 || ms[0].Path.Text != "README.md" || ms[0].LineNumber != 2 ||
		ms[0].AbsoluteOffset != 7 || ms[0].Submatches[0] != (Submatch{Text{"hello"}, 0, 5}) {
		t.Errorf("Search = %+v, %v", ms, err)
	}
	if _, err := Search(ctx, dir, "("); err == nil {
		t.Error("a bad pattern was accepted")
	}

	nodes, err := List(ctx, dir, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ignored := map[string]bool{}
	for _, n := range nodes {
		names = append(names, n.Path)
		ignored[n.Path] = n.Ignored
	}
	if want := []string{".git/", "ignored/", "src/", ".gitignore", "README.md", "notes.txt"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List = %q, want %q", names, want)
	}
	if !ignored["ignored/"] || ignored["src/"] {
		t.Errorf("ignored flags = %v", ignored)
	}
	if _, err := List(ctx, dir, "../.."); !errors.Is(err, ErrOutside) {
		t.Errorf("List outside = %v", err)
	}

	for _, tc := range []struct {
		path string
		want Content
		err  error
	}{
		{"README.md", Content{"text", "# Demo\nhello world"}, nil},
		{"missing.txt", Content{"text", ""}, nil},
		{filepath.Join(dir, "notes.txt"), Content{"text", "one\ntwo"}, nil},
		{"/etc/passwd", Content{}, ErrOutside},
		{"../x", Content{}, ErrOutside},
	} {
		got, err := Read(dir, tc.path)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Read(%q) = %+v, %v", tc.path, got, err)
		}
	}
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	if _, err := Read(dir, "etc/passwd"); !errors.Is(err, ErrOutside) {
		t.Errorf("Read through a symlink out = %v", err)
	}

	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("one\nTWO\nthree\n"), 0o644)
	os.Remove(filepath.Join(dir, "README.md"))
	os.Remove(filepath.Join(dir, "etc"))
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("a\nb\n"), 0o644)
	got := Status(ctx, dir)
	want := []Change{{"README.md", 0, 2, "deleted"}, {"notes.txt", 2, 1, "modified"}, {"new.txt", 2, 0, "added"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Status = %+v, want %+v", got, want)
	}
	if got := Status(ctx, t.TempDir()); len(got) != 0 {
		t.Errorf("Status outside a repo = %+v", got)
	}
}

// TestSearchNoSymlinkOut: a symlink in the project that points outside it
// (a secret file) is not read by the text search; one that stays inside is.
func TestSearchNoSymlinkOut(t *testing.T) {
	dir := project(t)
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("root:x:0:0 topsecret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("README.md", filepath.Join(dir, "inner.md")); err != nil {
		t.Fatal(err)
	}
	ms, err := Search(context.Background(), dir, "topsecret|hello")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range ms {
		if m.Path.Text == "link.txt" {
			t.Errorf("read through a symlink out of the project: %+v", m)
		}
		paths = append(paths, m.Path.Text)
	}
	if len(paths) == 0 {
		t.Errorf("nothing found: %v", paths)
	}
}
