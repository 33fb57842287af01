package tool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gone marks a file a case expects not to exist.
const gone = "<gone>"

func patchText(lines ...string) string {
	return "*** Begin Patch\n" + strings.Join(lines, "\n") + "\n*** End Patch"
}

func readOr(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return gone
	}
	must(t, err)
	return string(b)
}

func TestApplyPatch(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // written before the patch
		patch string
		// want: the output (or, with wantErr, the error text; "$" is the
		// session directory's real path).
		want    string
		wantErr bool
		after   map[string]string // file contents afterwards (gone: missing)
	}{
		{
			name:  "add",
			patch: patchText("*** Add File: nested/new.txt", "+created", "+second"),
			want:  "Success. Updated the following files:\nA nested/new.txt",
			after: map[string]string{"nested/new.txt": "created\nsecond\n"},
		},
		{
			name:  "add empty file",
			patch: patchText("*** Add File: empty.txt"),
			want:  "Success. Updated the following files:\nA empty.txt",
			after: map[string]string{"empty.txt": ""},
		},
		{
			name:  "add overwrites",
			patch: patchText("*** Add File: hello.txt", "+new content"),
			want:  "Success. Updated the following files:\nA hello.txt",
			after: map[string]string{"hello.txt": "new content\n"},
		},
		{
			name:  "update with context",
			files: map[string]string{"ctx.txt": "fn a\nx=10\ny=2\nfn b\nx=10\ny=20\n"},
			patch: patchText("*** Update File: ctx.txt", "@@ fn b", "-x=10", "+x=11"),
			want:  "Success. Updated the following files:\nM ctx.txt",
			after: map[string]string{"ctx.txt": "fn a\nx=10\ny=2\nfn b\nx=11\ny=20\n"},
		},
		{
			name:  "update with context lines",
			patch: patchText("*** Update File: hello.txt", "@@", " line one", "-line two", "+line 2", " line three"),
			want:  "Success. Updated the following files:\nM hello.txt",
			after: map[string]string{"hello.txt": "line one\nline 2\nline three\n"},
		},
		{
			name:  "multiple hunks",
			files: map[string]string{"multi.txt": "line1\nline2\nline3\nline4\n"},
			patch: patchText("*** Update File: multi.txt", "@@", "-line2", "+changed2", "@@", "-line4", "+changed4"),
			want:  "Success. Updated the following files:\nM multi.txt",
			after: map[string]string{"multi.txt": "line1\nchanged2\nline3\nchanged4\n"},
		},
		{
			name:  "insert only hunk appends",
			patch: patchText("*** Update File: hello.txt", "@@", "+line four"),
			want:  "Success. Updated the following files:\nM hello.txt",
			after: map[string]string{"hello.txt": "line one\nline two\nline three\nline four\n"},
		},
		{
			name:  "no newline at end gains one",
			files: map[string]string{"nonl.txt": "no newline at end"},
			patch: patchText("*** Update File: nonl.txt", "@@", "-no newline at end", "+first line", "+second line"),
			want:  "Success. Updated the following files:\nM nonl.txt",
			after: map[string]string{"nonl.txt": "first line\nsecond line\n"},
		},
		{
			name:  "end of file marker",
			files: map[string]string{"tail.txt": "alpha\nlast\n"},
			patch: patchText("*** Update File: tail.txt", "@@", "-last", "+end", "*** End of File"),
			want:  "Success. Updated the following files:\nM tail.txt",
			after: map[string]string{"tail.txt": "alpha\nend\n"},
		},
		{
			name:  "move",
			files: map[string]string{"old/name.txt": "old content\n"},
			patch: patchText("*** Update File: old/name.txt", "*** Move to: renamed/dir/name.txt", "@@", "-old content", "+new content"),
			want:  "Success. Updated the following files:\nM renamed/dir/name.txt",
			after: map[string]string{"old/name.txt": gone, "renamed/dir/name.txt": "new content\n"},
		},
		{
			name:  "move over an existing file",
			files: map[string]string{"from.txt": "from\n", "to.txt": "existing\n"},
			patch: patchText("*** Update File: from.txt", "*** Move to: to.txt", "@@", "-from", "+new"),
			want:  "Success. Updated the following files:\nM to.txt",
			after: map[string]string{"from.txt": gone, "to.txt": "new\n"},
		},
		{
			name:  "move onto itself keeps the file",
			patch: patchText("*** Update File: hello.txt", "*** Move to: ./hello.txt", "@@", "-line one", "+line 1"),
			want:  "Success. Updated the following files:\nM hello.txt",
			after: map[string]string{"hello.txt": "line 1\nline two\nline three\n"},
		},
		{
			name:  "delete",
			patch: patchText("*** Delete File: hello.txt"),
			want:  "Success. Updated the following files:\nD hello.txt",
			after: map[string]string{"hello.txt": gone},
		},
		{
			name:  "add, delete and update in one patch",
			files: map[string]string{"modify.txt": "line1\nline2\n", "delete.txt": "obsolete\n"},
			patch: patchText("*** Add File: nested/new.txt", "+created", "*** Delete File: delete.txt",
				"*** Update File: modify.txt", "@@", "-line2", "+changed"),
			want:  "Success. Updated the following files:\nA nested/new.txt\nD delete.txt\nM modify.txt",
			after: map[string]string{"nested/new.txt": "created\n", "delete.txt": gone, "modify.txt": "line1\nchanged\n"},
		},
		{
			name:  "trailing whitespace tolerated",
			files: map[string]string{"ws.txt": "line1  \nline2   \nline3\n"},
			patch: patchText("*** Update File: ws.txt", "@@", " line1", "-line2", "+changed"),
			want:  "Success. Updated the following files:\nM ws.txt",
			after: map[string]string{"ws.txt": "line1\nchanged\nline3\n"},
		},
		{
			name:  "leading whitespace tolerated",
			files: map[string]string{"lead.txt": "  line1\n\tline2\n"},
			patch: patchText("*** Update File: lead.txt", "@@", "-line2", "+\tchanged"),
			want:  "Success. Updated the following files:\nM lead.txt",
			after: map[string]string{"lead.txt": "  line1\n\tchanged\n"},
		},
		{
			name:  "unicode punctuation tolerated",
			files: map[string]string{"uni.txt": "say \u201chi\u201d \u2014 it\u2019s fine\u2026\n"},
			patch: patchText("*** Update File: uni.txt", "@@", `-say "hi" - it's fine...`, `+say "bye"`),
			want:  "Success. Updated the following files:\nM uni.txt",
			after: map[string]string{"uni.txt": "say \"bye\"\n"},
		},
		{
			name:  "CRLF file keeps CRLF",
			files: map[string]string{"crlf.txt": "a\r\nb\r\nc\r\n"},
			patch: patchText("*** Update File: crlf.txt", "@@", " a", "-b", "+B", "+B2"),
			want:  "Success. Updated the following files:\nM crlf.txt",
			after: map[string]string{"crlf.txt": "a\r\nB\r\nB2\r\nc\r\n"},
		},
		{
			name:  "CRLF patch text",
			files: map[string]string{"crlf.txt": "a\r\nb\r\n"},
			patch: "*** Begin Patch\r\n*** Update File: crlf.txt\r\n@@\r\n-b\r\n+B\r\n*** End Patch\r\n",
			want:  "Success. Updated the following files:\nM crlf.txt",
			after: map[string]string{"crlf.txt": "a\r\nB\r\n"},
		},
		{
			name:  "BOM kept",
			files: map[string]string{"bom.txt": "\ufeffa\nb\n"},
			patch: patchText("*** Update File: bom.txt", "@@", "-a", "+A"),
			want:  "Success. Updated the following files:\nM bom.txt",
			after: map[string]string{"bom.txt": "\ufeffA\nb\n"},
		},
		{
			name:  "BOM added file",
			patch: patchText("*** Add File: bom.txt", "+\ufeffx"),
			want:  "Success. Updated the following files:\nA bom.txt",
			after: map[string]string{"bom.txt": "\ufeffx\n"},
		},
		{
			name:  "heredoc",
			patch: "cat <<'EOF'\n" + patchText("*** Add File: here.txt", "+heredoc content") + "\nEOF",
			want:  "Success. Updated the following files:\nA here.txt",
			after: map[string]string{"here.txt": "heredoc content\n"},
		},
		{
			name:  "symlink inside is followed for update",
			patch: patchText("*** Update File: srclink/main.go", "@@", "-\tprintln(\"hi\")", "+\tprintln(\"bye\")"),
			want:  "Success. Updated the following files:\nM src/main.go",
			after: map[string]string{"src/main.go": "package main\n\nfunc main() {\n\tprintln(\"bye\")\n}\n"},
		},

		// Refusals: OpenCode's texts, and nothing changed.
		{name: "empty patchText", patch: "", want: "patchText is required", wantErr: true},
		{name: "not a patch", patch: "invalid patch", wantErr: true,
			want: "apply_patch verification failed: Error: Invalid patch format: missing Begin/End markers"},
		{name: "empty patch", patch: "*** Begin Patch\n*** End Patch", want: "patch rejected: empty patch", wantErr: true},
		{name: "empty patch CRLF", patch: "*** Begin Patch\r\n*** End Patch\r\n", want: "patch rejected: empty patch", wantErr: true},
		{name: "no hunks", patch: patchText("*** Frobnicate File: foo"), want: "apply_patch verification failed: no hunks found", wantErr: true},
		{
			name:    "failing hunk",
			patch:   patchText("*** Add File: created.txt", "+hello", "*** Update File: hello.txt", "@@", "-missing", "-lines", "+changed"),
			want:    "apply_patch verification failed: Error: Failed to find expected lines in $/hello.txt:\nmissing\nlines",
			wantErr: true,
			after:   map[string]string{"created.txt": gone, "hello.txt": "line one\nline two\nline three\n"},
		},
		{
			name:    "failing context",
			patch:   patchText("*** Update File: hello.txt", "@@ nowhere", "-line one", "+x"),
			want:    "apply_patch verification failed: Error: Failed to find context 'nowhere' in $/hello.txt",
			wantErr: true,
			after:   map[string]string{"hello.txt": "line one\nline two\nline three\n"},
		},
		{
			name:    "second chunk must follow the first",
			files:   map[string]string{"two.txt": "a\nb\nc\nd\n"},
			patch:   patchText("*** Update File: two.txt", "@@", "-c", "+C", "@@", "-b", "+B"),
			want:    "apply_patch verification failed: Error: Failed to find expected lines in $/two.txt:\nb",
			wantErr: true,
			after:   map[string]string{"two.txt": "a\nb\nc\nd\n"},
		},
		{
			name:    "update of a missing file",
			patch:   patchText("*** Update File: missing.txt", "@@", "-nope", "+better"),
			want:    "apply_patch verification failed: Failed to read file to update: $/missing.txt",
			wantErr: true,
			after:   map[string]string{"missing.txt": gone},
		},
		{
			name:    "update of a directory",
			patch:   patchText("*** Update File: src", "@@", "-x", "+y"),
			want:    "apply_patch verification failed: Failed to read file to update: $/src",
			wantErr: true,
		},
		{
			name:    "delete of a missing file",
			patch:   patchText("*** Add File: created.txt", "+x", "*** Delete File: missing.txt"),
			want:    "apply_patch verification failed: ENOENT: no such file or directory, open '$/missing.txt'",
			wantErr: true,
			after:   map[string]string{"created.txt": gone},
		},
		{
			name:    "delete of a directory",
			patch:   patchText("*** Delete File: src"),
			want:    "apply_patch verification failed: EISDIR: illegal operation on a directory, read",
			wantErr: true,
			after:   map[string]string{"src/main.go": "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := setup(t) // its .git makes the session directory the worktree
			real, err := filepath.EvalSymlinks(dir)
			must(t, err)
			for p, s := range tt.files {
				must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644))
			}
			res, err := run(t, "apply_patch", dir, map[string]any{"patchText": tt.patch})
			want := strings.ReplaceAll(tt.want, "$", real)
			if tt.wantErr {
				if err == nil || err.Error() != want {
					t.Fatalf("error = %v\nwant %q", err, want)
				}
			} else {
				must(t, err)
				if res.Output != want || res.Title != want {
					t.Fatalf("output = %q, title %q\nwant %q", res.Output, res.Title, want)
				}
			}
			for p, s := range tt.after {
				if got := readOr(t, filepath.Join(dir, p)); got != s {
					t.Errorf("%s = %q, want %q", p, got, s)
				}
			}
		})
	}
}

// TestApplyPatchEscape: no path of a patch leaves the session directory,
// by "..", an absolute path or a symlink, and a refused patch changes
// nothing.
func TestApplyPatchEscape(t *testing.T) {
	dir, outside := setup(t)
	base := filepath.Dir(dir)
	for _, patch := range []string{
		patchText("*** Add File: ../escaped.txt", "+x"),
		patchText("*** Add File: "+filepath.Join(base, "escaped.txt"), "+x"),
		patchText("*** Add File: outlink/escaped.txt", "+x"),
		patchText("*** Add File: danglink", "+x"),
		patchText("*** Add File: ok.txt", "+x", "*** Update File: secretlink", "@@", "-secret", "+stolen"),
		patchText("*** Add File: ok.txt", "+x", "*** Update File: outlink/secret.txt", "@@", "-secret", "+stolen"),
		patchText("*** Add File: ok.txt", "+x", "*** Delete File: ../outside/secret.txt"),
		patchText("*** Update File: hello.txt", "*** Move to: ../escaped.txt", "@@", "-line one", "+x"),
		patchText("*** Update File: hello.txt", "*** Move to: outlink/escaped.txt", "@@", "-line one", "+x"),
		patchText("*** Update File: "+filepath.Join(outside, "secret.txt"), "@@", "-secret", "+stolen"),
	} {
		_, err := run(t, "apply_patch", dir, map[string]any{"patchText": patch})
		if !errors.Is(err, ErrEscape) {
			t.Errorf("%q: err = %v, want an escape", patch, err)
		}
		if _, _, err := (ApplyPatch{}).Permission(Call{Dir: dir, Input: in(t, map[string]any{"patchText": patch})}); !errors.Is(err, ErrEscape) {
			t.Errorf("%q: Permission err = %v, want an escape", patch, err)
		}
	}
	if got := readOr(t, filepath.Join(outside, "secret.txt")); got != "secret\n" {
		t.Errorf("outside secret = %q", got)
	}
	for _, p := range []string{filepath.Join(base, "escaped.txt"), filepath.Join(outside, "escaped.txt"), filepath.Join(outside, "new.txt"),
		filepath.Join(dir, "ok.txt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	if got := readOr(t, filepath.Join(dir, "hello.txt")); got != "line one\nline two\nline three\n" {
		t.Errorf("hello.txt = %q", got)
	}
}

// TestApplyPatchDeleteSymlink: deleting a symlink removes the link, not
// the file it names (as OpenCode removes the path it is given).
func TestApplyPatchDeleteSymlink(t *testing.T) {
	dir, _ := setup(t)
	must(t, os.Symlink("hello.txt", filepath.Join(dir, "alias.txt")))
	_, err := run(t, "apply_patch", dir, map[string]any{"patchText": patchText("*** Delete File: alias.txt")})
	must(t, err)
	if _, err := os.Lstat(filepath.Join(dir, "alias.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alias.txt still there: %v", err)
	}
	if got := readOr(t, filepath.Join(dir, "hello.txt")); got != "line one\nline two\nline three\n" {
		t.Errorf("hello.txt = %q", got)
	}
}

// TestApplyPatchPermission: "edit" for every file touched, named
// relative to the session directory, move destinations included; a patch
// that cannot apply fails before anyone is asked.
func TestApplyPatchPermission(t *testing.T) {
	dir, _ := setup(t)
	patch := patchText("*** Add File: a/new.txt", "+x", "*** Update File: hello.txt", "*** Move to: moved/hello.txt", "@@",
		"-line one", "+1", "*** Delete File: src/pkg/util_test.txt", "*** Update File: srclink/main.go", "@@", "-package main", "+package x")
	perm, pats, err := (ApplyPatch{}).Permission(Call{Dir: dir, Input: in(t, map[string]any{"patchText": patch})})
	must(t, err)
	if want := "a/new.txt|hello.txt|moved/hello.txt|src/pkg/util_test.txt|src/main.go"; perm != "edit" || strings.Join(pats, "|") != want {
		t.Errorf("Permission = %q %q, want edit %q", perm, pats, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Error("Permission changed files")
	}
	_, _, err = (ApplyPatch{}).Permission(Call{Dir: dir, Input: in(t, map[string]any{"patchText": patchText("*** Update File: hello.txt", "@@", "-nope", "+x")})})
	if err == nil || !strings.HasPrefix(err.Error(), "apply_patch verification failed: Error: Failed to find expected lines in ") {
		t.Errorf("Permission of a failing patch: %v", err)
	}
}

// TestApplyPatchMetadata: the diff and files the TUI shows, as OpenCode's
// apply_patch returns them.
func TestApplyPatchMetadata(t *testing.T) {
	dir, _ := setup(t)
	real, err := filepath.EvalSymlinks(dir)
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(dir, "old"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "old", "n.txt"), []byte("    keep\n    from\n"), 0o755))
	patch := patchText("*** Add File: add.txt", "+one", "+two",
		"*** Update File: hello.txt", "@@", "-line two", "+line 2",
		"*** Update File: old/n.txt", "*** Move to: new/n.txt", "@@", "-    from", "+    to",
		"*** Delete File: src/pkg/util_test.txt")
	res, err := run(t, "apply_patch", dir, map[string]any{"patchText": patch})
	must(t, err)
	abs := func(p string) string { return filepath.Join(real, p) }
	head := func(p string) string {
		return "Index: " + abs(p) + "\n===================================================================\n--- " + abs(p) + "\n+++ " + abs(p) + "\n"
	}
	diffs := []string{
		head("add.txt") + "@@ -0,0 +1,2 @@\n+one\n+two\n",
		head("hello.txt") + "@@ -1,3 +1,3 @@\n line one\n-line two\n+line 2\n line three\n",
		// OpenCode's trimDiff cuts the indentation all lines share.
		head("old/n.txt") + "@@ -1,2 +1,2 @@\n keep\n-from\n+to\n",
		head("src/pkg/util_test.txt") + "@@ -1,1 +0,0 @@\n-Helper is tested\n",
	}
	if got, want := res.Metadata["diff"], strings.Join(diffs, "\n")+"\n"; got != want {
		t.Errorf("diff =\n%s\nwant\n%s", got, want)
	}
	files, _ := res.Metadata["files"].([]map[string]any)
	want := []map[string]any{
		{"filePath": abs("add.txt"), "relativePath": "add.txt", "type": "add", "patch": diffs[0], "additions": 2, "deletions": 0},
		{"filePath": abs("hello.txt"), "relativePath": "hello.txt", "type": "update", "patch": diffs[1], "additions": 1, "deletions": 1},
		{"filePath": abs("old/n.txt"), "relativePath": "new/n.txt", "type": "move", "patch": diffs[2], "additions": 1, "deletions": 1,
			"movePath": abs("new/n.txt")},
		// OpenCode counts a deleted file's lines by splitting on "\n".
		{"filePath": abs("src/pkg/util_test.txt"), "relativePath": "src/pkg/util_test.txt", "type": "delete", "patch": diffs[3],
			"additions": 0, "deletions": 2},
	}
	if len(files) != len(want) {
		t.Fatalf("files = %v", res.Metadata["files"])
	}
	for i := range want {
		for k, v := range want[i] {
			if files[i][k] != v {
				t.Errorf("files[%d][%s] = %#v, want %#v", i, k, files[i][k], v)
			}
		}
		if len(files[i]) != len(want[i]) {
			t.Errorf("files[%d] = %v, want the keys of %v", i, files[i], want[i])
		}
	}
	if _, ok := res.Metadata["diagnostics"]; !ok {
		t.Error("no diagnostics")
	}
	// A moved file keeps its mode.
	if fi, err := os.Stat(filepath.Join(dir, "new", "n.txt")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("moved file: %v %v", fi, err)
	}
}

// TestApplyPatchNonGit: outside a git work tree OpenCode's worktree is "/",
// so the output names files by their path from it.
func TestApplyPatchNonGit(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	must(t, err)
	if findGit(real) != "" {
		t.Skip("the temporary directory is in a git work tree")
	}
	res, err := run(t, "apply_patch", dir, map[string]any{"patchText": patchText("*** Add File: x.txt", "+x")})
	must(t, err)
	if want := "Success. Updated the following files:\nA " + strings.TrimPrefix(filepath.ToSlash(filepath.Join(real, "x.txt")), "/"); res.Output != want {
		t.Errorf("output = %q, want %q", res.Output, want)
	}
}

// findGit is the nearest directory at or above p holding a .git, or "".
func findGit(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

func TestApplyPatchCanceled(t *testing.T) {
	dir, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ApplyPatch{}.Run(ctx, Call{Dir: dir, Input: in(t, map[string]any{"patchText": patchText("*** Add File: c.txt", "+x")})})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err == nil {
		t.Error("canceled call wrote")
	}
}

func TestStripHeredoc(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"cat <<'EOF'\nbody\nEOF", "body"},
		{"<<EOF\nbody\nEOF", "body"},
		{"cat <<\"X_1\"\na\nb\nX_1  ", "a\nb"},
		{"<<EOF\n\n\nEOF", ""},
		{"<<EOF\nEOF", "<<EOF\nEOF"},
		{"cat<<EOF\nbody\nEOF", "cat<<EOF\nbody\nEOF"},
		{"<<EOF\nbody\nEOFX", "<<EOF\nbody\nEOFX"},
		{"<<EOF \t\n  body\nEOF", "  body"},
		{"plain", "plain"},
	} {
		if got := stripHeredoc(tt.in); got != tt.want {
			t.Errorf("stripHeredoc(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzApplyPatch: parsing and applying any patch to any file never
// panics; the result ends in a newline; the line diff is a true diff of
// the two texts, its counts those of the unified diff; and a patch run
// in a session directory never touches anything outside it.
func FuzzApplyPatch(f *testing.F) {
	f.Add(patchText("*** Update File: a.txt", "@@", "-a", "+b"), "a\n")
	f.Add(patchText("*** Update File: a.txt", "*** Move to: ../b.txt", "@@ x", " x", "-a", "+b", "*** End of File"), "x\na\r\n")
	f.Add(patchText("*** Add File: ../../etc/x", "+a", "*** Delete File: a.txt"), "\ufeffa")
	f.Add("cat <<'EOF'\n"+patchText("*** Update File: a.txt", "@@", "+tail")+"\nEOF", "")
	f.Add(patchText("*** Update File: link/a.txt", "@@", "-\u201ca\u201d", "+b"), "\"a\"\n\n")
	root := filepath.Join(f.TempDir(), "run")
	f.Fuzz(func(t *testing.T, patch, content string) {
		hunks, err := parsePatch(patch)
		if err == nil {
			for _, h := range hunks {
				if h.kind != "update" {
					continue
				}
				out, _, err := derivePatched("f", h.chunks, content)
				if err == nil && out != "" && !strings.HasSuffix(out, "\n") {
					t.Fatalf("derived %q lacks a final newline", out)
				}
			}
		}
		parts := lineDiff(content, patch)
		var oldB, newB strings.Builder
		for _, p := range parts {
			for _, l := range p.lines {
				if !p.added {
					oldB.WriteString(l)
				}
				if !p.removed {
					newB.WriteString(l)
				}
			}
		}
		if oldB.String() != content || newB.String() != patch {
			t.Fatalf("lineDiff does not rebuild its texts")
		}
		adds, dels := diffCounts(parts)
		plus, minus := 0, 0
		for _, h := range structuredPatch(parts, 4) {
			for _, l := range h.lines {
				switch {
				case strings.HasPrefix(l, "+"):
					plus++
				case strings.HasPrefix(l, "-"):
					minus++
				}
			}
		}
		if plus != adds || minus != dels {
			t.Fatalf("counts %d/%d, unified diff %d/%d", adds, dels, plus, minus)
		}

		// The tool itself, in a fresh session directory next to a file
		// and a directory it must not touch.
		must(t, os.RemoveAll(root))
		dir, outside := filepath.Join(root, "session"), filepath.Join(root, "outside")
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.MkdirAll(outside, 0o755))
		must(t, os.WriteFile(filepath.Join(outside, "a.txt"), []byte("secret\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte(content), 0o644))
		must(t, os.Symlink(outside, filepath.Join(dir, "link")))
		_, _ = ApplyPatch{}.Run(context.Background(), Call{Dir: dir, Input: in(t, map[string]any{"patchText": patch})})
		ents, err := os.ReadDir(root)
		must(t, err)
		if len(ents) != 2 {
			t.Fatalf("patch %q created %v next to the session", patch, ents)
		}
		ents, err = os.ReadDir(outside)
		must(t, err)
		if len(ents) != 1 || readOr(t, filepath.Join(outside, "a.txt")) != "secret\n" {
			t.Fatalf("patch %q touched the outside directory", patch)
		}
		_ = os.RemoveAll(root)
	})
}
