package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup makes a session directory with some files and an "outside"
// directory next to it, plus symlinks from inside to outside.
func setup(t *testing.T) (dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "session")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{dir, outside, filepath.Join(dir, "src", "pkg"), filepath.Join(dir, ".git"), filepath.Join(dir, "node_modules", "m")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"hello.txt":             "line one\nline two\nline three\n",
		"src/main.go":           "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n",
		"src/pkg/util.go":       "package pkg\n\n// Helper does things.\nfunc Helper() int { return 42 }\n",
		"src/pkg/util_test.txt": "Helper is tested\n",
		".git/config":           "[core]\nHelper = true\n",
		"node_modules/m/i.js":   "module.exports = 1 // Helper\n",
	}
	for p, s := range files {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(outside, filepath.Join(dir, "outlink")))                                 // dir link out
	must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "secretlink"))) // file link out
	must(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(dir, "danglink")))      // dangling link out
	must(t, os.Symlink("src", filepath.Join(dir, "srclink")))                                   // link inside
	return dir, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func in(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return b
}

func run(t *testing.T, name, dir string, input any) (Result, error) {
	t.Helper()
	tl := Lookup(Builtin(), name)
	if tl == nil {
		t.Fatalf("no tool %q", name)
	}
	return tl.Run(context.Background(), Call{Dir: dir, Input: in(t, input)})
}

func TestResolve(t *testing.T) {
	dir, outside := setup(t)
	real, err := filepath.EvalSymlinks(dir)
	must(t, err)
	tests := []struct {
		p      string
		want   string // relative to real dir
		escape bool
	}{
		{p: "", want: "."},
		{p: ".", want: "."},
		{p: "hello.txt", want: "hello.txt"},
		{p: "src/../hello.txt", want: "hello.txt"},
		{p: filepath.Join(dir, "src", "main.go"), want: "src/main.go"},
		{p: "newdir/deeper/new.txt", want: "newdir/deeper/new.txt"},
		{p: "src/new.go", want: "src/new.go"},
		{p: "srclink/main.go", want: "src/main.go"},
		{p: "../x", escape: true},
		{p: "src/../../x", escape: true},
		{p: "..", escape: true},
		{p: "/etc/passwd", escape: true},
		{p: filepath.Join(outside, "secret.txt"), escape: true},
		{p: "outlink/secret.txt", escape: true},
		{p: "outlink/newfile", escape: true},
		{p: "outlink", escape: true},
		{p: "secretlink", escape: true},
		{p: "danglink", escape: true},
	}
	for _, tt := range tests {
		t.Run(tt.p, func(t *testing.T) {
			got, err := Resolve(dir, tt.p)
			if tt.escape {
				if !errors.Is(err, ErrEscape) || !strings.Contains(err.Error(), "path escapes the session directory") {
					t.Fatalf("Resolve(%q) = %q, %v; want escape error", tt.p, got, err)
				}
				return
			}
			must(t, err)
			if want := filepath.Join(real, tt.want); got != want {
				t.Fatalf("Resolve(%q) = %q; want %q", tt.p, got, want)
			}
		})
	}
}

func TestBuiltinSchemas(t *testing.T) {
	want := []string{"bash", "read", "glob", "grep", "edit", "write", "todowrite", "webfetch", "question", "task", "apply_patch"}
	tools := Builtin()
	if len(tools) != len(want) {
		t.Fatalf("got %d tools", len(tools))
	}
	for _, name := range want {
		tl := Lookup(tools, name)
		if tl == nil {
			t.Fatalf("Lookup(%q) = nil", name)
		}
		if tl.Description() == "" {
			t.Errorf("%s: empty description", name)
		}
		var s struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
		}
		if err := json.Unmarshal(tl.Parameters(), &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Type != "object" || len(s.Properties) == 0 || s.Required == nil {
			t.Errorf("%s: bad schema %s", name, tl.Parameters())
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("%s: required %q not a property", name, r)
			}
		}
	}
	if Lookup(tools, "nope") != nil {
		t.Error("Lookup(nope) != nil")
	}
}

func TestPermission(t *testing.T) {
	dir, _ := setup(t)
	tests := []struct {
		tool     string
		input    any
		perm     string
		patterns []string
		wantErr  bool
	}{
		{"read", map[string]any{"filePath": "hello.txt"}, "read", []string{"hello.txt"}, false},
		{"read", map[string]any{"filePath": filepath.Join(dir, "src/main.go")}, "read", []string{"src/main.go"}, false},
		{"write", map[string]any{"filePath": "a/b.txt", "content": "x"}, "edit", []string{"a/b.txt"}, false},
		{"edit", map[string]any{"filePath": "hello.txt", "oldString": "a", "newString": "b"}, "edit", []string{"hello.txt"}, false},
		{"glob", map[string]any{"pattern": "**/*.go"}, "glob", []string{"**/*.go"}, false},
		{"grep", map[string]any{"pattern": "Helper", "include": "*.go"}, "grep", []string{"Helper"}, false},
		{"bash", map[string]any{"command": "ls -la", "description": "list"}, "bash", []string{"ls -la"}, false},
		{"read", map[string]any{"filePath": "../x"}, "", nil, true},
		{"read", map[string]any{}, "", nil, true},
		{"bash", map[string]any{"command": ""}, "", nil, true},
		{"edit", map[string]any{"filePath": "hello.txt"}, "", nil, true},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d_%s", i, tt.tool), func(t *testing.T) {
			perm, pats, err := Lookup(Builtin(), tt.tool).Permission(Call{Dir: dir, Input: in(t, tt.input)})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want error, got %q %q", perm, pats)
				}
				return
			}
			must(t, err)
			if perm != tt.perm || strings.Join(pats, "|") != strings.Join(tt.patterns, "|") {
				t.Fatalf("got %q %q; want %q %q", perm, pats, tt.perm, tt.patterns)
			}
		})
	}
	// Undecodable input.
	if _, _, err := (Read{}).Permission(Call{Dir: dir, Input: json.RawMessage(`{"filePath":3}`)}); err == nil {
		t.Fatal("want decode error")
	}
}

// TestEscapes checks every path-taking tool refuses paths leaving the
// session directory and leaves the outside untouched.
func TestEscapes(t *testing.T) {
	dir, outside := setup(t)
	paths := []string{
		"../x",
		"../outside/secret.txt",
		filepath.Join(outside, "secret.txt"),
		"/etc/passwd",
		"outlink/secret.txt",
		"outlink/created.txt",
		"secretlink",
		"danglink",
	}
	for _, p := range paths {
		cases := []struct {
			tool  string
			input map[string]any
		}{
			{"read", map[string]any{"filePath": p}},
			{"write", map[string]any{"filePath": p, "content": "pwned"}},
			{"edit", map[string]any{"filePath": p, "oldString": "secret", "newString": "pwned"}},
			{"edit", map[string]any{"filePath": p, "oldString": "", "newString": "pwned"}},
			{"glob", map[string]any{"pattern": "*", "path": p}},
			{"grep", map[string]any{"pattern": "secret", "path": p}},
		}
		for _, c := range cases {
			t.Run(c.tool+"_"+p, func(t *testing.T) {
				res, err := run(t, c.tool, dir, c.input)
				if !errors.Is(err, ErrEscape) {
					t.Fatalf("got %+v, %v; want escape error", res, err)
				}
			})
		}
	}
	// "outlink" itself (a symlinked directory) for glob, grep.
	for _, name := range []string{"glob", "grep"} {
		input := map[string]any{"path": "outlink", "pattern": "*"}
		if _, err := run(t, name, dir, input); !errors.Is(err, ErrEscape) {
			t.Fatalf("%s outlink: %v", name, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(outside, "secret.txt"))
	must(t, err)
	if string(b) != "secret\n" {
		t.Fatalf("outside file changed: %q", b)
	}
	for _, n := range []string{"new.txt", "created.txt"} {
		if _, err := os.Stat(filepath.Join(outside, n)); !os.IsNotExist(err) {
			t.Fatalf("outside file %s created", n)
		}
	}
	// Walking tools do not follow links out either.
	res, err := run(t, "grep", dir, map[string]any{"pattern": "secret"})
	must(t, err)
	if strings.Contains(res.Output, "secret") {
		t.Fatalf("grep followed a link out: %s", res.Output)
	}
	res, err = run(t, "glob", dir, map[string]any{"pattern": "**/secret*"})
	must(t, err)
	if res.Output != "No files found" {
		t.Fatalf("glob followed a link out: %s", res.Output)
	}
}

func TestRead(t *testing.T) {
	dir, _ := setup(t)
	var long strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	must(t, os.WriteFile(filepath.Join(dir, "long.txt"), []byte(long.String()), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "wide.txt"), []byte(strings.Repeat("x", 10000)+"\nshort\n"), 0o644))
	// 20 MB file of 1 KB lines: output capped at 50 KB.
	must(t, os.WriteFile(filepath.Join(dir, "huge.txt"), []byte(strings.Repeat(strings.Repeat("y", 1023)+"\n", 20*1024)), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "blob.dat"), []byte("abc"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "nul.txt"), []byte("abc\x00def"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "empty.txt"), nil, 0o644))

	tests := []struct {
		name    string
		input   map[string]any
		title   string
		has     []string
		hasNot  []string
		maxLen  int
		wantErr string
	}{
		{name: "simple", input: map[string]any{"filePath": "hello.txt"}, title: "hello.txt",
			has: []string{"1: line one\n2: line two\n3: line three", "End of file - total 3 lines"}},
		{name: "via symlink inside", input: map[string]any{"filePath": "srclink/main.go"}, title: "src/main.go",
			has: []string{"1: package main"}},
		{name: "offset limit", input: map[string]any{"filePath": "long.txt", "offset": 10, "limit": 3}, title: "long.txt",
			has: []string{"10: line 10\n11: line 11\n12: line 12\n", "offset=13"}, hasNot: []string{"13: line 13", "9: line 9"}},
		{name: "default limit", input: map[string]any{"filePath": "long.txt"},
			has: []string{"2000: line 2000", "offset=2001"}, hasNot: []string{"2001: line 2001"}},
		{name: "long line", input: map[string]any{"filePath": "wide.txt"},
			has: []string{"line truncated to 2000 chars", "2: short"}, maxLen: 4000},
		{name: "huge capped", input: map[string]any{"filePath": "huge.txt"},
			has: []string{"Output capped at 50 KB"}, maxLen: 52 * 1024},
		{name: "empty", input: map[string]any{"filePath": "empty.txt"}, has: []string{"total 0 lines"}},
		{name: "directory", input: map[string]any{"filePath": "src"}, has: []string{"<type>directory</type>\n<entries>\n", "entries)\n</entries>"}},
		{name: "binary ext", input: map[string]any{"filePath": "blob.dat"}, wantErr: "binary file"},
		{name: "binary content", input: map[string]any{"filePath": "nul.txt"}, wantErr: "binary file"},
		{name: "missing", input: map[string]any{"filePath": "hello.tx"}, wantErr: "Did you mean"},
		{name: "offset out of range", input: map[string]any{"filePath": "hello.txt", "offset": 10}, wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, "read", dir, tt.input)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
				return
			}
			must(t, err)
			if tt.title != "" && res.Title != tt.title {
				t.Errorf("title = %q; want %q", res.Title, tt.title)
			}
			for _, s := range tt.has {
				if !strings.Contains(res.Output, s) {
					t.Errorf("output lacks %q:\n%.500s", s, res.Output)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(res.Output, s) {
					t.Errorf("output has %q", s)
				}
			}
			if tt.maxLen > 0 && len(res.Output) > tt.maxLen {
				t.Errorf("output is %d bytes; want <= %d", len(res.Output), tt.maxLen)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	dir, _ := setup(t)
	tests := []struct {
		name    string
		path    string
		content string
		exists  bool
		wantErr string
	}{
		{name: "new nested", path: "a/b/c.txt", content: "hello\n"},
		{name: "overwrite", path: "hello.txt", content: "replaced", exists: true},
		{name: "absolute inside", path: filepath.Join(dir, "abs.txt"), content: "x"},
		{name: "empty content", path: "empty.txt", content: ""},
		{name: "directory", path: "src", content: "x", wantErr: "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := run(t, "write", dir, map[string]any{"filePath": tt.path, "content": tt.content})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
				return
			}
			must(t, err)
			if res.Metadata["exists"] != tt.exists {
				t.Errorf("exists = %v; want %v", res.Metadata["exists"], tt.exists)
			}
			fp, _ := res.Metadata["filepath"].(string)
			b, err := os.ReadFile(fp)
			must(t, err)
			if string(b) != tt.content {
				t.Errorf("content = %q", b)
			}
		})
	}
	if _, err := run(t, "write", dir, map[string]any{"filePath": "x.txt"}); err == nil {
		t.Error("missing content accepted")
	}
}

func TestEdit(t *testing.T) {
	tests := []struct {
		name    string
		input   map[string]any
		want    string // file content after
		wantErr string
		diff    []string
	}{
		{name: "single", input: map[string]any{"oldString": "two", "newString": "2"},
			want: "line one\nline 2\nline three\nline two two\n", diff: []string{"-line two\n", "+line 2\n", "@@ -2,1 +2,1 @@"}},
		{name: "replaceAll", input: map[string]any{"oldString": "line", "newString": "L", "replaceAll": true},
			want: "L one\nL two\nL three\nL two two\n"},
		{name: "multiline", input: map[string]any{"oldString": "one\nline two\n", "newString": "one\nline TWO\nextra\n"},
			want: "line one\nline TWO\nextra\nline three\nline two two\n", diff: []string{"-line two\n", "+line TWO\n+extra\n"}},
		{name: "not found", input: map[string]any{"oldString": "four", "newString": "4"}, wantErr: "not found"},
		{name: "multiple", input: map[string]any{"oldString": "two", "newString": "2", "replaceAll": false}, wantErr: "found 3 matches"},
		{name: "same", input: map[string]any{"oldString": "one", "newString": "one"}, wantErr: "must be different"},
		{name: "whole file", input: map[string]any{"oldString": "", "newString": "fresh\n"}, want: "fresh\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			const orig = "line one\nline two\nline three\nline two two\n"
			p := filepath.Join(dir, "f.txt")
			must(t, os.WriteFile(p, []byte(orig), 0o600))
			input := map[string]any{"filePath": "f.txt"}
			for k, v := range tt.input {
				input[k] = v
			}
			if tt.name == "single" {
				input["oldString"] = "line two\n"
				input["newString"] = "line 2\n"
			}
			res, err := run(t, "edit", dir, input)
			got, rerr := os.ReadFile(p)
			must(t, rerr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v; want %q", err, tt.wantErr)
				}
				if string(got) != orig {
					t.Fatalf("file changed on error: %q", got)
				}
				return
			}
			must(t, err)
			if string(got) != tt.want {
				t.Fatalf("content = %q; want %q", got, tt.want)
			}
			if res.Title != "f.txt" {
				t.Errorf("title = %q", res.Title)
			}
			diff, _ := res.Metadata["diff"].(string)
			for _, d := range tt.diff {
				if !strings.Contains(diff, d) {
					t.Errorf("diff lacks %q:\n%s", d, diff)
				}
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
				t.Errorf("mode changed to %v", fi.Mode())
			}
		})
	}
	dir := t.TempDir()
	if _, err := run(t, "edit", dir, map[string]any{"filePath": "nope.txt", "oldString": "a", "newString": "b"}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing file: %v", err)
	}
	// Empty oldString creates a file.
	if _, err := run(t, "edit", dir, map[string]any{"filePath": "new/n.txt", "oldString": "", "newString": "hi"}); err != nil {
		t.Fatal(err)
	}
	// CRLF files match LF oldString.
	must(t, os.WriteFile(filepath.Join(dir, "crlf.txt"), []byte("a\r\nb\r\n"), 0o644))
	if _, err := run(t, "edit", dir, map[string]any{"filePath": "crlf.txt", "oldString": "a\nb", "newString": "a\nc"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "crlf.txt")); string(b) != "a\r\nc\r\n" {
		t.Fatalf("crlf = %q", b)
	}
}

func TestGlob(t *testing.T) {
	dir, _ := setup(t)
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(filepath.Join(dir, "src/pkg/util.go"), old, old))
	tests := []struct {
		pattern, path string
		want          string
	}{
		{"**/*.go", "", "src/main.go\nsrc/pkg/util.go"},
		{"*.go", "", "src/main.go\nsrc/pkg/util.go"}, // no slash: any depth
		{"src/*.go", "", "src/main.go"},
		{"src/**/*.go", "", "src/main.go\nsrc/pkg/util.go"},
		{"*.go", "src/pkg", "src/pkg/util.go"},
		{"**/*.{go,txt}", "src", "src/main.go\nsrc/pkg/util_test.txt\nsrc/pkg/util.go"},
		{"**/*.rs", "", "No files found"},
		{"**/config", "", "No files found"}, // .git skipped
	}
	for _, tt := range tests {
		t.Run(tt.pattern+"@"+tt.path, func(t *testing.T) {
			res, err := run(t, "glob", dir, map[string]any{"pattern": tt.pattern, "path": tt.path})
			must(t, err)
			// Sort order is mtime desc: util.go is the oldest file; others
			// are compared as sets. Paths are absolute, as OpenCode's.
			got := strings.Split(strings.ReplaceAll(res.Output, dir+string(filepath.Separator), ""), "\n")
			if strings.HasSuffix(tt.want, "util.go") && got[len(got)-1] != "src/pkg/util.go" {
				t.Fatalf("not sorted by mtime:\n%s", res.Output)
			}
			want := strings.Split(tt.want, "\n")
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", res.Output, tt.want)
			}
		})
	}
	for i := 0; i < 150; i++ {
		must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("g%03d.go", i)), nil, 0o644))
	}
	res, err := run(t, "glob", dir, map[string]any{"pattern": "**/*.go"})
	must(t, err)
	if res.Metadata["truncated"] != true || res.Metadata["count"] != globLimit {
		t.Errorf("not capped: %v", res.Metadata)
	}
	if _, err := run(t, "glob", dir, map[string]any{"pattern": "[", "path": ""}); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestGrep(t *testing.T) {
	dir, _ := setup(t)
	must(t, os.WriteFile(filepath.Join(dir, "bin.txt"), []byte("Helper\x00\x01"), 0o644))
	tests := []struct {
		input  map[string]any
		has    []string
		hasNot []string
	}{
		{map[string]any{"pattern": "Helper"},
			[]string{"src/pkg/util.go:3: // Helper does things.", "src/pkg/util.go:4: func Helper() int { return 42 }", "src/pkg/util_test.txt:1: Helper is tested", "node_modules/m/i.js:1:"},
			[]string{".git", "bin.txt"}},
		{map[string]any{"pattern": `func\s+\w+\(`, "include": "*.go"},
			[]string{"src/main.go:3: func main() {", "src/pkg/util.go:4:"}, []string{"util_test"}},
		{map[string]any{"pattern": "Helper", "path": "src", "include": "*.{txt}"},
			[]string{"src/pkg/util_test.txt:1:"}, []string{"util.go"}},
		{map[string]any{"pattern": "line", "path": "hello.txt"},
			[]string{"hello.txt:1: line one", "hello.txt:3: line three"}, nil},
		{map[string]any{"pattern": "zzz_nothing"}, []string{"No files found"}, nil},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			res, err := run(t, "grep", dir, tt.input)
			must(t, err)
			for _, s := range tt.has {
				if !strings.Contains(res.Output, s) {
					t.Errorf("output lacks %q:\n%s", s, res.Output)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(res.Output, s) {
					t.Errorf("output has %q:\n%s", s, res.Output)
				}
			}
		})
	}
	must(t, os.WriteFile(filepath.Join(dir, "many.txt"), []byte(strings.Repeat("match\n", 1000)), 0o644))
	res, err := run(t, "grep", dir, map[string]any{"pattern": "^match$"})
	must(t, err)
	if res.Metadata["truncated"] != true || strings.Count(res.Output, "many.txt:") != grepLimit {
		t.Errorf("not capped: %v", res.Metadata)
	}
	if _, err := run(t, "grep", dir, map[string]any{"pattern": "("}); err == nil {
		t.Error("bad regexp accepted")
	}
}
