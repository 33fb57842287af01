// Package files answers the project questions the TUI asks about the
// session directory: the `@` file picker (fuzzy search honouring
// .gitignore), text search, directory listings, file content and git
// status. Paths are relative to the directory and never leave it.
package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrOutside is a path that leaves the project directory.
var ErrOutside = errors.New("path is outside the project directory")

// maxFiles bounds how many paths one listing of the project reads.
const maxFiles = 50000

// Paths lists the project's files (relative, slash-separated), honouring
// .gitignore: git's own view in a git work tree, else a walk that skips
// .git and node_modules.
func Paths(ctx context.Context, root string) []string {
	if out, err := git(ctx, root, "ls-files", "--cached", "--others", "--exclude-standard", "-z"); err == nil {
		var paths []string
		seen := map[string]bool{}
		for _, p := range strings.Split(string(out), "\x00") {
			if p == "" || seen[p] {
				continue
			}
			if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
				continue // deleted but still in the index
			}
			seen[p] = true
			paths = append(paths, p)
			if len(paths) == maxFiles {
				break
			}
		}
		sort.Strings(paths)
		return paths
	}
	var paths []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || ctx.Err() != nil || len(paths) >= maxFiles {
			return filepath.SkipDir
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	return paths
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	return cmd.Output()
}

// Find is the `@` picker: the project's files (and, with dirs, their
// directories, ending in "/") that contain the query's characters in
// order, best matches first, at most limit. An empty query lists the first
// paths.
func Find(ctx context.Context, root, query string, dirs bool, kind string, limit int) []string {
	if limit <= 0 {
		limit = 10
	}
	var cands []string
	seenDir := map[string]bool{}
	for _, p := range Paths(ctx, root) {
		if kind != "directory" {
			cands = append(cands, p)
		}
		if dirs || kind == "directory" {
			for d := filepath.ToSlash(filepath.Dir(p)); d != "." && d != "/" && !seenDir[d]; d = filepath.ToSlash(filepath.Dir(d)) {
				seenDir[d] = true
				cands = append(cands, d+"/")
			}
		}
	}
	type hit struct {
		p     string
		score int
	}
	var hits []hit
	q := strings.ToLower(query)
	for _, c := range cands {
		if s, ok := fuzzy(q, strings.ToLower(c)); ok {
			hits = append(hits, hit{c, s})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		if len(hits[i].p) != len(hits[j].p) {
			return len(hits[i].p) < len(hits[j].p)
		}
		return hits[i].p < hits[j].p
	})
	out := []string{}
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		out = append(out, h.p)
	}
	return out
}

// fuzzy reports whether q's characters appear in s in order, scoring
// consecutive runs, matches at word starts and in the base name higher.
func fuzzy(q, s string) (int, bool) {
	if q == "" {
		return 0, true
	}
	base := strings.LastIndexByte(strings.TrimSuffix(s, "/"), '/') + 1
	score, qi, run := 0, 0, 0
	for i := 0; i < len(s) && qi < len(q); i++ {
		if s[i] != q[qi] {
			run = 0
			continue
		}
		run++
		score += run * 2
		if i == 0 || strings.ContainsRune("/._- ", rune(s[i-1])) {
			score += 3
		}
		if i >= base {
			score++
		}
		qi++
	}
	if qi < len(q) {
		return 0, false
	}
	if strings.Contains(s[base:], q) {
		score += 10
	}
	return score, true
}

// Match is one text search hit, in ripgrep's JSON shape as OpenCode
// returns it.
type Match struct {
	Path           Text       `json:"path"`
	Lines          Text       `json:"lines"`
	LineNumber     int        `json:"line_number"`
	AbsoluteOffset int        `json:"absolute_offset"`
	Submatches     []Submatch `json:"submatches"`
}

// Text is ripgrep's {text} wrapper.
type Text struct {
	Text string `json:"text"`
}

// Submatch is one match within a line.
type Submatch struct {
	Match Text `json:"match"`
	Start int  `json:"start"`
	End   int  `json:"end"`
}

// maxMatches bounds one text search.
const maxMatches = 200

// Search finds lines matching the regular expression pattern in the
// project's text files.
func Search(ctx context.Context, root, pattern string) ([]Match, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	out := []Match{}
	// Read through os.Root: a symlink that leads out of the project is not
	// followed, as every other file route and tool refuses it.
	fsys, err := os.OpenRoot(root)
	if err != nil {
		return out, nil
	}
	defer fsys.Close()
	for _, p := range Paths(ctx, root) {
		if ctx.Err() != nil || len(out) >= maxMatches {
			break
		}
		b, err := fsys.ReadFile(filepath.FromSlash(p))
		if err != nil || len(b) > 1<<20 || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		offset, n := 0, 0
		for sc.Scan() && len(out) < maxMatches {
			n++
			line := sc.Text()
			if locs := re.FindAllStringIndex(line, -1); len(locs) > 0 {
				m := Match{Path: Text{p}, Lines: Text{line + "\n"}, LineNumber: n, AbsoluteOffset: offset}
				for _, l := range locs {
					m.Submatches = append(m.Submatches, Submatch{Match: Text{line[l[0]:l[1]]}, Start: l[0], End: l[1]})
				}
				out = append(out, m)
			}
			offset += len(line) + 1
		}
	}
	return out, nil
}

// Node is one entry of a directory listing.
type Node struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Absolute string `json:"absolute"`
	Type     string `json:"type"`
	Ignored  bool   `json:"ignored"`
}

// resolve joins a project-relative (or absolute, inside the project) path
// onto root, refusing anything that leaves it, symlinks included.
func resolve(root, p string) (string, error) {
	root = filepath.Clean(root)
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(root, p)
	}
	full = filepath.Clean(full)
	if !inside(root, full) {
		return "", ErrOutside
	}
	if real, err := filepath.EvalSymlinks(full); err == nil {
		rroot, err := filepath.EvalSymlinks(root)
		if err == nil && !inside(rroot, real) {
			return "", ErrOutside
		}
	}
	return full, nil
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// List lists one directory of the project: directories first, then files,
// each by name; ignored says whether .gitignore excludes it.
func List(ctx context.Context, root, dir string) ([]Node, error) {
	full, err := resolve(root, dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(entries))
	var rels []string
	for _, e := range entries {
		abs := filepath.Join(full, e.Name())
		rel, _ := filepath.Rel(filepath.Clean(root), abs)
		rel = filepath.ToSlash(rel)
		n := Node{Name: e.Name(), Path: rel, Absolute: abs, Type: "file"}
		if e.IsDir() {
			n.Type, n.Path = "directory", rel+"/"
		}
		out = append(out, n)
		rels = append(rels, rel)
	}
	if ignored := checkIgnore(ctx, root, rels); len(ignored) > 0 {
		for i := range out {
			out[i].Ignored = ignored[strings.TrimSuffix(out[i].Path, "/")]
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Type == "directory") != (out[j].Type == "directory") {
			return out[i].Type == "directory"
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// checkIgnore asks git which of the paths .gitignore excludes.
func checkIgnore(ctx context.Context, root string, rels []string) map[string]bool {
	if len(rels) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "git", "-C", root, "check-ignore", "--stdin", "-z")
	cmd.Stdin = strings.NewReader(strings.Join(rels, "\x00") + "\x00")
	out, _ := cmd.Output() // exit 1: nothing ignored; not a repo: nothing known
	ignored := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			ignored[p] = true
		}
	}
	return ignored
}

// Content is a file's content as /file/content answers it.
type Content struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

// maxRead bounds a file read for /file/content.
const maxRead = 10 << 20

// Read returns a project file's text ("" for a missing file, as OpenCode
// answers); binary files are "binary" with no content.
func Read(root, p string) (Content, error) {
	full, err := resolve(root, p)
	if err != nil {
		return Content{}, err
	}
	f, err := os.Open(full)
	if errors.Is(err, fs.ErrNotExist) {
		return Content{Type: "text", Content: ""}, nil
	}
	if err != nil {
		return Content{}, err
	}
	defer f.Close()
	b := make([]byte, maxRead)
	n, _ := f.Read(b)
	b = b[:n]
	if bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return Content{Type: "binary", Content: ""}, nil
	}
	return Content{Type: "text", Content: strings.TrimRight(string(b), "\n")}, nil
}

// ReadBytes returns a project file's bytes (at most maxRead).
func ReadBytes(root, p string) ([]byte, error) {
	full, err := resolve(root, p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, errors.New("is a directory")
	}
	b := make([]byte, maxRead)
	n, err := f.Read(b)
	if err != nil && n == 0 && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// Change is one changed file, as /file/status answers.
type Change struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
	Status  string `json:"status"` // added, deleted, modified
}

// Status lists the work tree's changes against HEAD: modified and deleted
// tracked files with their line counts, and untracked files as added.
// Outside a git repository it is empty.
func Status(ctx context.Context, root string) []Change {
	out := []Change{}
	num, err := git(ctx, root, "diff", "--numstat", "HEAD", "--")
	if err != nil {
		return out
	}
	deleted := map[string]bool{}
	if del, err := git(ctx, root, "diff", "--name-only", "--diff-filter=D", "HEAD", "--"); err == nil {
		for _, p := range strings.Split(strings.TrimSpace(string(del)), "\n") {
			deleted[p] = p != ""
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(num)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			continue
		}
		a, _ := strconv.Atoi(f[0])
		r, _ := strconv.Atoi(f[1])
		st := "modified"
		if deleted[f[2]] {
			st = "deleted"
		}
		out = append(out, Change{Path: f[2], Added: a, Removed: r, Status: st})
	}
	if un, err := git(ctx, root, "ls-files", "--others", "--exclude-standard", "-z"); err == nil {
		for _, p := range strings.Split(string(un), "\x00") {
			if p == "" {
				continue
			}
			lines := 0
			if b, err := os.ReadFile(filepath.Join(root, p)); err == nil {
				lines = bytes.Count(b, []byte("\n"))
			}
			out = append(out, Change{Path: p, Added: lines, Status: "added"})
		}
	}
	return out
}
