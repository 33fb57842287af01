package routes_test

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// gitProject makes a committed git work tree with an ignored directory.
func gitProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
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

// TestFileRoutes: the TUI's project routes answer from the directory the
// request addresses (server default, ?directory= or the URL-encoded
// x-opencode-directory header), in OpenCode's shapes (checked against
// api/openapi.yaml by the test server), and refuse paths outside it.
func TestFileRoutes(t *testing.T) {
	dir := gitProject(t, map[string]string{"README.md": "# Demo\nhello world\n", "src/main.go": "package main\n",
		".gitignore": "ignored/\n", "ignored/secret.txt": "hello\n"})
	other := gitProject(t, map[string]string{"OTHER.md": "other hello\n"})
	c := biStart(t, testserver.Options{Directory: dir})
	tests := []struct {
		name, path string
		hdr        map[string]string
		status     int
		has, lacks string
	}{
		{"picker", "/find/file?query=READ", nil, 200, `"README.md"`, "secret"},
		{"picker dirs", "/find/file?query=src&dirs=true", nil, 200, `"src/"`, ""},
		{"picker no dirs", "/find/file?query=src&dirs=false", nil, 200, `"src/main.go"`, `"src/"`},
		{"picker other dir by query", "/find/file?query=oth&directory=" + url.QueryEscape(other), nil, 200, `"OTHER.md"`, "README"},
		{"picker other dir by header", "/find/file?query=oth", map[string]string{"x-opencode-directory": url.PathEscape(other)}, 200, `"OTHER.md"`, "README"},
		{"picker bad type", "/find/file?query=x&type=socket", nil, 400, "type", ""},
		{"text search", "/find?pattern=hello", nil, 200, `"line_number":2`, "secret"},
		{"text search bad regexp", "/find?pattern=%28", nil, 400, "pattern", ""},
		{"symbols", "/find/symbol?query=main", nil, 200, "[]", ""},
		{"list", "/file?path=.", nil, 200, `"ignored":true`, ""},
		{"list src", "/file?path=src", nil, 200, `"path":"src/main.go"`, ""},
		{"list outside", "/file?path=..", nil, 400, "outside", ""},
		{"content", "/file/content?path=README.md", nil, 200, `"content":"# Demo\nhello world"`, ""},
		{"content missing", "/file/content?path=nope.txt", nil, 200, `"content":""`, ""},
		{"content outside", "/file/content?path=/etc/passwd", nil, 400, "outside", ""},
		{"status clean", "/file/status", nil, 200, "[]", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.send("GET", tc.path, "", nil, tc.hdr)
			if err != nil {
				t.Fatal(err)
			}
			body := string(r.body)
			if r.status != tc.status || !strings.Contains(body, tc.has) || (tc.lacks != "" && strings.Contains(body, tc.lacks)) {
				t.Errorf("GET %s = %d %s; want %d with %q without %q", tc.path, r.status, body, tc.status, tc.has, tc.lacks)
			}
		})
	}
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("changed\n"), 0o644)
	if r := c.must("GET", "/file/status", "", nil); !strings.Contains(string(r.body), `{"path":"README.md","added":1,"removed":2,"status":"modified"}`) {
		t.Errorf("status after a change = %s", r.body)
	}
}

// TestDirectoryScoping: GET /session lists the sessions of the project the
// request addresses (its git work tree), or of exactly ?directory=; a
// session is created in the URL-encoded header's directory.
func TestDirectoryScoping(t *testing.T) {
	a := gitProject(t, map[string]string{"a.txt": "a\n"})
	b := gitProject(t, map[string]string{"b.txt": "b\n"})
	os.MkdirAll(filepath.Join(a, "sub"), 0o755)
	c := biStart(t, testserver.Options{Directory: a})
	create := func(dir string) string {
		r, _ := c.send("POST", "/session", "application/json", []byte(`{}`), map[string]string{"x-opencode-directory": url.PathEscape(dir)})
		var s struct{ ID, Directory string }
		json.Unmarshal(r.body, &s)
		if s.Directory != dir {
			t.Fatalf("session created in %q, want %q", s.Directory, dir)
		}
		return s.ID
	}
	inA, inSub, inB := create(a), create(filepath.Join(a, "sub")), create(b)
	list := func(path string, hdr map[string]string) string {
		r, _ := c.send("GET", path, "", nil, hdr)
		var ss []struct{ ID string }
		json.Unmarshal(r.body, &ss)
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		sort.Strings(ids)
		return strings.Join(ids, ",")
	}
	sorted := func(ids ...string) string { sort.Strings(ids); return strings.Join(ids, ",") }
	for _, tc := range []struct {
		path string
		hdr  map[string]string
		want string
	}{
		{"/session", nil, sorted(inA, inSub)},
		{"/session", map[string]string{"x-opencode-directory": url.PathEscape(b)}, sorted(inB)},
		{"/session?directory=" + url.QueryEscape(filepath.Join(a, "sub")), nil, sorted(inSub)},
		{"/session?directory=" + url.QueryEscape(b), nil, sorted(inB)},
	} {
		if got := list(tc.path, tc.hdr); got != tc.want {
			t.Errorf("GET %s %v = %s, want %s", tc.path, tc.hdr, got, tc.want)
		}
	}
}
