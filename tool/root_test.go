package tool

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// staged splits a tool call into its check (resolve, as Run does first) and
// its use (the rest of Run, through the root), so a test can change the
// directory between the two.
type staged func(t *testing.T, c Call) func() (Result, error)

func stagedTools() map[string]staged {
	ctx := context.Background()
	return map[string]staged{
		"read": func(t *testing.T, c Call) func() (Result, error) {
			in, abs, rel, err := Read{}.input(c)
			must(t, err)
			return func() (Result, error) { return Read{}.run(ctx, c, in, abs, rel) }
		},
		"write": func(t *testing.T, c Call) func() (Result, error) {
			in, abs, rel, err := Write{}.input(c)
			must(t, err)
			return func() (Result, error) { return Write{}.run(ctx, c, in, abs, rel) }
		},
		"edit": func(t *testing.T, c Call) func() (Result, error) {
			in, abs, rel, err := Edit{}.input(c)
			must(t, err)
			return func() (Result, error) { return Edit{}.run(ctx, c, in, abs, rel) }
		},
		"glob": func(t *testing.T, c Call) func() (Result, error) {
			in, abs, rel, err := Glob{}.input(c)
			must(t, err)
			return func() (Result, error) { return Glob{}.run(ctx, c, in, abs, rel) }
		},
		"grep": func(t *testing.T, c Call) func() (Result, error) {
			in, _, rel, err := Grep{}.input(c)
			must(t, err)
			return func() (Result, error) { return Grep{}.run(ctx, c, in, rel) }
		},
	}
}

// swapSetup makes a session directory with sub/f.txt and an outside
// directory holding f.txt and sub/f.txt, each "secret\n".
func swapSetup(t *testing.T) (dir, outside string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "session")
	outside = filepath.Join(base, "outside")
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "other"), 0o755))
	must(t, os.MkdirAll(filepath.Join(outside, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "f.txt"), []byte("secret\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "sub", "f.txt"), []byte("secret\n"), 0o644))
	return dir, outside
}

// checkOutside fails if anything in outside changed: the two secret files
// are intact and nothing else was created.
func checkOutside(t *testing.T, outside string) {
	t.Helper()
	var got []string
	must(t, filepath.Walk(outside, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(outside, p)
		got = append(got, r)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if string(b) != "secret\n" {
				t.Errorf("outside %s changed: %q", r, b)
			}
		}
		return nil
	}))
	if strings.Join(got, " ") != ". f.txt sub sub/f.txt" {
		t.Errorf("outside holds %q", got)
	}
}

func wantEscape(t *testing.T, p string, res Result, err error) {
	t.Helper()
	if !errors.Is(err, ErrEscape) {
		t.Fatalf("got %+v, %v; want escape error", res, err)
	}
	if want := p + ": path escapes the session directory"; err.Error() != want {
		t.Fatalf("error %q; want %q", err, want)
	}
	if strings.Contains(res.Output, "secret") {
		t.Fatalf("output shows the outside: %q", res.Output)
	}
}

// TestRootSwapAfterResolve checks the race the root closes: the path is
// resolved while sub is a directory inside, then sub (or the file itself)
// is replaced by a symlink leading outside before the tool uses the path.
// The tool must refuse with the escape error and leave the outside as it
// was.
func TestRootSwapAfterResolve(t *testing.T) {
	type tc struct {
		tool  string
		input map[string]any
		p     string // the path given, named in the error
	}
	sub := func(p string) []tc {
		return []tc{
			{"read", map[string]any{"filePath": p}, p},
			{"write", map[string]any{"filePath": p, "content": "pwned"}, p},
			{"edit", map[string]any{"filePath": p, "oldString": "secret", "newString": "pwned"}, p},
			{"edit", map[string]any{"filePath": p, "oldString": "", "newString": "pwned"}, p},
		}
	}
	swaps := []struct {
		name  string
		cases []tc
		swap  func(t *testing.T, dir, outside string)
	}{
		{
			name: "dir to absolute link",
			cases: append(append(sub("sub/f.txt"), sub("sub/new/deeper/n.txt")...),
				tc{"glob", map[string]any{"pattern": "*", "path": "sub"}, "sub"},
				tc{"grep", map[string]any{"pattern": "secret", "path": "sub"}, "sub"},
				tc{"grep", map[string]any{"pattern": "secret", "path": "sub/f.txt"}, "sub/f.txt"},
			),
			swap: func(t *testing.T, dir, outside string) {
				must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub.orig")))
				must(t, os.Symlink(outside, filepath.Join(dir, "sub")))
			},
		},
		{
			name: "dir to relative link",
			cases: append(append(sub("sub/f.txt"), sub("sub/new/n.txt")...),
				tc{"glob", map[string]any{"pattern": "*", "path": "sub"}, "sub"},
				tc{"grep", map[string]any{"pattern": "secret", "path": "sub"}, "sub"},
			),
			swap: func(t *testing.T, dir, outside string) {
				must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub.orig")))
				must(t, os.Symlink(filepath.Join("..", "outside"), filepath.Join(dir, "sub")))
			},
		},
		{
			name:  "file to absolute link",
			cases: append(sub("sub/f.txt"), tc{"grep", map[string]any{"pattern": "secret", "path": "sub/f.txt"}, "sub/f.txt"}),
			swap: func(t *testing.T, dir, outside string) {
				must(t, os.Remove(filepath.Join(dir, "sub", "f.txt")))
				must(t, os.Symlink(filepath.Join(outside, "f.txt"), filepath.Join(dir, "sub", "f.txt")))
			},
		},
		{
			name:  "file to relative link",
			cases: sub("sub/f.txt"),
			swap: func(t *testing.T, dir, outside string) {
				must(t, os.Remove(filepath.Join(dir, "sub", "f.txt")))
				must(t, os.Symlink(filepath.Join("..", "..", "outside", "f.txt"), filepath.Join(dir, "sub", "f.txt")))
			},
		},
		{
			name:  "missing file to dangling link",
			cases: sub("sub/n.txt")[1:2], // write
			swap: func(t *testing.T, dir, outside string) {
				must(t, os.Symlink(filepath.Join(outside, "n.txt"), filepath.Join(dir, "sub", "n.txt")))
			},
		},
	}
	for _, sw := range swaps {
		for _, c := range sw.cases {
			t.Run(sw.name+"/"+c.tool+"_"+c.p, func(t *testing.T) {
				dir, outside := swapSetup(t)
				call := Call{Dir: dir, Input: in(t, c.input)}
				use := stagedTools()[c.tool](t, call)
				sw.swap(t, dir, outside)
				res, err := use()
				wantEscape(t, c.p, res, err)
				checkOutside(t, outside)
			})
		}
	}

	// A directory swapped for a relative link that stays inside is
	// followed: the root confines, it does not forbid links.
	t.Run("dir to inside link", func(t *testing.T) {
		dir, outside := swapSetup(t)
		call := Call{Dir: dir, Input: in(t, map[string]any{"filePath": "sub/f.txt", "content": "moved"})}
		use := stagedTools()["write"](t, call)
		must(t, os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "sub.orig")))
		must(t, os.Symlink("other", filepath.Join(dir, "sub")))
		_, err := use()
		must(t, err)
		b, err := os.ReadFile(filepath.Join(dir, "other", "f.txt"))
		must(t, err)
		if string(b) != "moved" {
			t.Fatalf("other/f.txt = %q", b)
		}
		checkOutside(t, outside)
	})
}

// TestRootLinksOut checks symlinks inside the directory that lead outside,
// relative ones too (os.Root and resolve see those differently from
// absolute ones), and ".." escapes: every tool refuses them with the escape
// error naming the given path.
func TestRootLinksOut(t *testing.T) {
	dir, outside := swapSetup(t)
	links := map[string]string{
		"rfile":  filepath.Join("..", "outside", "f.txt"),
		"rdir":   filepath.Join("..", "outside"),
		"rdang":  filepath.Join("..", "outside", "n.txt"),
		"rchain": filepath.Join("sub", "..", "..", "outside"),
		"afile":  filepath.Join(outside, "f.txt"),
		"adir":   outside,
		"adang":  filepath.Join(outside, "n.txt"),
		"hop":    "rdir", // a link inside to a link out
		"idang":  "missing",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	paths := []string{
		"rfile", "rdir/f.txt", "rdir/new.txt", "rdir/sub/f.txt", "rdang", "rchain/f.txt",
		"afile", "adir/f.txt", "adir/new/n.txt", "adang", "hop/f.txt", "hop/n.txt",
		"..", "../outside/f.txt", "sub/../../outside/f.txt", "./sub/../../outside/n.txt",
		filepath.Join(dir, "..", "outside", "f.txt"), filepath.Join(outside, "f.txt"),
	}
	for _, p := range paths {
		for _, c := range []struct {
			tool  string
			input map[string]any
		}{
			{"read", map[string]any{"filePath": p}},
			{"write", map[string]any{"filePath": p, "content": "pwned"}},
			{"edit", map[string]any{"filePath": p, "oldString": "secret", "newString": "pwned"}},
			{"edit", map[string]any{"filePath": p, "oldString": "", "newString": "pwned"}},
			{"glob", map[string]any{"pattern": "*", "path": p}},
			{"grep", map[string]any{"pattern": "secret", "path": p}},
		} {
			t.Run(c.tool+"_"+p, func(t *testing.T) {
				res, err := run(t, c.tool, dir, c.input)
				wantEscape(t, p, res, err)
			})
		}
	}
	for _, p := range []string{"rdir", "adir", "rchain", "hop"} {
		for _, name := range []string{"glob", "grep"} {
			res, err := run(t, name, dir, map[string]any{"path": p, "pattern": "*"})
			wantEscape(t, p, res, err)
		}
	}
	checkOutside(t, outside)

	// Walking tools neither follow nor report them.
	res, err := run(t, "grep", dir, map[string]any{"pattern": "secret"})
	must(t, err)
	if res.Output != "No files found" {
		t.Fatalf("grep followed a link out: %s", res.Output)
	}
	res, err = run(t, "glob", dir, map[string]any{"pattern": "**/*"})
	must(t, err)
	if got := strings.ReplaceAll(res.Output, dir+string(filepath.Separator), ""); got != "sub/f.txt" {
		t.Fatalf("glob: %q", got)
	}
}

// TestRootInside checks paths that stay inside keep working: relative and
// absolute ones (by the directory's given and real spelling), links inside
// (absolute ones too, which os.Root alone would refuse), new nested files.
func TestRootInside(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "session")
	must(t, os.MkdirAll(filepath.Join(real, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(real, "src", "a.txt"), []byte("alpha\n"), 0o600))
	must(t, os.Symlink(filepath.Join(real, "src"), filepath.Join(real, "abslink")))
	must(t, os.Symlink(filepath.Join(real, "src", "a.txt"), filepath.Join(real, "absfile")))
	must(t, os.Symlink("src", filepath.Join(real, "rellink")))
	dir := filepath.Join(base, "given") // the session directory, through a link
	must(t, os.Symlink(real, dir))

	for _, p := range []string{
		"src/a.txt", "./src/../src/a.txt", "abslink/a.txt", "absfile", "rellink/a.txt",
		filepath.Join(dir, "src", "a.txt"), filepath.Join(real, "src", "a.txt"), filepath.Join(dir, "abslink", "a.txt"),
	} {
		t.Run(p, func(t *testing.T) {
			res, err := run(t, "read", dir, map[string]any{"filePath": p})
			must(t, err)
			if res.Title != "src/a.txt" || !strings.Contains(res.Output, "1: alpha\n") ||
				!strings.Contains(res.Output, "<path>"+filepath.Join(real, "src", "a.txt")+"</path>") {
				t.Fatalf("read: %q\n%s", res.Title, res.Output)
			}
			res, err = run(t, "edit", dir, map[string]any{"filePath": p, "oldString": "alpha", "newString": "beta"})
			must(t, err)
			if res.Title != "src/a.txt" || res.Metadata["filepath"] != filepath.Join(real, "src", "a.txt") {
				t.Fatalf("edit: %q %v", res.Title, res.Metadata["filepath"])
			}
			res, err = run(t, "write", dir, map[string]any{"filePath": p, "content": "alpha\n"})
			must(t, err)
			if res.Metadata["exists"] != true {
				t.Fatalf("write: %v", res.Metadata)
			}
			fi, err := os.Stat(filepath.Join(real, "src", "a.txt"))
			must(t, err)
			if fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", fi.Mode())
			}
		})
	}

	// New files, nested, through an absolute link inside.
	_, err := run(t, "write", dir, map[string]any{"filePath": "abslink/x/y/new.txt", "content": "n"})
	must(t, err)
	_, err = run(t, "edit", dir, map[string]any{"filePath": filepath.Join(dir, "new", "e.txt"), "oldString": "", "newString": "e"})
	must(t, err)
	for p, want := range map[string]string{"src/x/y/new.txt": "n", "new/e.txt": "e"} {
		b, err := os.ReadFile(filepath.Join(real, p))
		must(t, err)
		if string(b) != want {
			t.Fatalf("%s = %q", p, b)
		}
		fi, err := os.Stat(filepath.Join(real, p))
		must(t, err)
		if fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s mode %v", p, fi.Mode())
		}
		fi, err = os.Stat(filepath.Dir(filepath.Join(real, p)))
		must(t, err)
		if fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s dir mode %v", p, fi.Mode())
		}
	}

	// The walking tools report a file link inside, absolute or not.
	res, err := run(t, "grep", dir, map[string]any{"pattern": "alpha"})
	must(t, err)
	if !strings.Contains(res.Output, "absfile:1: alpha") || !strings.Contains(res.Output, "src/a.txt:1: alpha") {
		t.Fatalf("grep: %s", res.Output)
	}
	res, err = run(t, "glob", dir, map[string]any{"pattern": "abs*"})
	must(t, err)
	if res.Output != filepath.Join(dir, "absfile") {
		t.Fatalf("glob: %s", res.Output)
	}

	// A missing file is still answered with suggestions, found through the
	// root.
	_, err = run(t, "read", dir, map[string]any{"filePath": "abslink/a.tx"})
	if err == nil || !strings.HasPrefix(err.Error(), "File not found: "+filepath.Join(real, "src/a.tx")+"\n\nDid you mean one of these?\n"+filepath.Join(real, "src/a.txt")+"\n") {
		t.Fatalf("missing: %v", err)
	}
}

// TestRootErrors checks errors other than escapes still name the file by
// its absolute path, as os.* calls did.
func TestRootErrors(t *testing.T) {
	dir := t.TempDir()
	s, err := openScope(dir)
	must(t, err)
	defer s.Close()
	_, err = s.root.Open("nope.txt")
	err = s.fail("nope.txt", err)
	real, _ := filepath.EvalSymlinks(dir)
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "open "+filepath.Join(real, "nope.txt")+": no such file or directory" {
		t.Fatalf("err = %v", err)
	}
	_, err = s.root.Open("../x")
	if err = s.fail("../x", err); !errors.Is(err, ErrEscape) {
		t.Fatalf("err = %v", err)
	}
	if _, err := openScope(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing session directory opened")
	}
}

// TestRootSwapConcurrent flips sub between a directory inside and a
// symlink to outside while write and edit calls run through their public
// entry point: whatever each call answers, nothing outside is ever written.
func TestRootSwapConcurrent(t *testing.T) {
	dir, outside := swapSetup(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	sub, orig := filepath.Join(dir, "sub"), filepath.Join(dir, "sub.orig")
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if os.Rename(sub, orig) != nil {
				continue
			}
			_ = os.Symlink(outside, sub)
			_ = os.Remove(sub)
			_ = os.Rename(orig, sub)
		}
	}()
	ok := 0
	for i := 0; i < 2000; i++ {
		input := map[string]any{"filePath": "sub/f.txt", "content": "pwned\n"}
		tl := "write"
		switch i % 3 {
		case 1:
			tl, input = "edit", map[string]any{"filePath": "sub/f.txt", "oldString": "", "newString": "pwned\n"}
		case 2:
			input["filePath"] = "sub/new/n.txt"
		}
		if _, err := run(t, tl, dir, input); err == nil {
			ok++
		}
	}
	close(stop)
	<-done
	checkOutside(t, outside)
	t.Logf("%d of 2000 calls succeeded inside", ok)
}

// TestRootNonUTF8Names checks names that are not UTF-8 (which io/fs paths,
// and so os.Root.FS, refuse) are still walked and suggested.
func TestRootNonUTF8Names(t *testing.T) {
	dir := t.TempDir()
	bad := "d\xff"
	must(t, os.MkdirAll(filepath.Join(dir, bad), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, bad, "f\xfe.txt"), []byte("needle\n"), 0o644))
	res, err := run(t, "grep", dir, map[string]any{"pattern": "needle"})
	must(t, err)
	if !strings.Contains(res.Output, bad+"/f\xfe.txt:1: needle") {
		t.Fatalf("grep: %q", res.Output)
	}
	res, err = run(t, "glob", dir, map[string]any{"pattern": "**/*.txt"})
	must(t, err)
	if res.Output != filepath.Join(dir, bad, "f\xfe.txt") {
		t.Fatalf("glob: %q", res.Output)
	}
	must(t, os.WriteFile(filepath.Join(dir, "g\xfe.txt"), nil, 0o644))
	_, err = run(t, "read", dir, map[string]any{"filePath": "g"})
	if err == nil || !strings.Contains(err.Error(), "Did you mean one of these?\n"+filepath.Join(dir, "g\xfe.txt")) {
		t.Fatalf("read: %v", err)
	}
}
