package vcs

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// FileStatus is one changed file of the work tree (VcsFileStatus).
type FileStatus struct {
	File      string `json:"file"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"` // added, deleted, modified
}

// FileDiff is one changed file with its unified diff (VcsFileDiff).
type FileDiff struct {
	File      string `json:"file"`
	Patch     string `json:"patch"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status"`
}

// FullContext is the context OpenCode's diffs have unless asked for
// less: the whole file.
const FullContext = 2147483647

// Caps on the diffs, OpenCode's: one file's patch, and all patches of one
// answer; a file beyond them gets an empty placeholder patch.
const (
	maxFilePatch  = 10_000_000
	maxTotalPatch = 10_000_000
)

// entry is one line of git status or git diff --name-status.
type entry struct {
	file, code, status string
}

// statusOf maps a porcelain or name-status code as OpenCode does.
func statusOf(code string) string {
	switch {
	case code == "??":
		return "added"
	case strings.Contains(code, "U"):
		return "modified"
	case strings.Contains(code, "A") && !strings.Contains(code, "D"):
		return "added"
	case strings.Contains(code, "D") && !strings.Contains(code, "A"):
		return "deleted"
	}
	return "modified"
}

// collator orders files as OpenCode does (JavaScript's localeCompare):
// by the Unicode collation, not by bytes ("README.md" after "old.txt").
var collator = sync.OnceValue(func() *collate.Collator { return collate.New(language.Und) })

var collatorMu sync.Mutex // a Collator is not safe for concurrent use

func localeSort[T any](s []T, key func(T) string) {
	collatorMu.Lock()
	defer collatorMu.Unlock()
	c := collator()
	slices.SortStableFunc(s, func(a, b T) int { return c.CompareString(key(a), key(b)) })
}

// repo is a git work tree a request is about: dir, the directory itself
// (git's pathspec "." limits the answers to it), in the work tree root.
type repo struct {
	dir, root string
}

func (r repo) hasHead(ctx context.Context) (bool, error) {
	res, err := git(ctx, r.dir, "rev-parse", "--verify", "--quiet", "HEAD")
	return err == nil && res.ok(), err
}

// status is git status of the directory, untracked files one by one.
func (r repo) status(ctx context.Context) ([]entry, error) {
	res, err := git(ctx, r.dir, "status", "--porcelain=v1", "--untracked-files=all", "--no-renames", "-z", "--", ".")
	if err != nil || !res.ok() {
		return nil, err
	}
	var out []entry
	for _, f := range fields0(res.text()) {
		if len(f) < 4 {
			continue
		}
		code := f[:2]
		out = append(out, entry{file: f[3:], code: code, status: statusOf(code)})
	}
	return out, nil
}

// names is git diff --name-status against ref: the tracked files that
// differ from it, staged or not.
func (r repo) names(ctx context.Context, ref string) ([]entry, error) {
	res, err := git(ctx, r.dir, "diff", "--no-ext-diff", "--no-renames", "--name-status", "-z", ref, "--", ".")
	if err != nil || !res.ok() {
		return nil, err
	}
	f := fields0(res.text())
	var out []entry
	for i := 0; i+1 < len(f); i += 2 {
		out = append(out, entry{file: f[i+1], code: f[i], status: statusOf(f[i])})
	}
	return out, nil
}

type counts struct{ add, del int }

// stats is git diff --numstat against ref, by file (a binary file counts
// 0 and 0).
func (r repo) stats(ctx context.Context, ref string) (map[string]counts, error) {
	res, err := git(ctx, r.dir, "diff", "--no-ext-diff", "--no-renames", "--numstat", "-z", ref, "--", ".")
	out := map[string]counts{}
	if err != nil || !res.ok() {
		return out, err
	}
	for _, f := range fields0(res.text()) {
		a, rest, ok1 := strings.Cut(f, "\t")
		d, file, ok2 := strings.Cut(rest, "\t")
		if !ok1 || !ok2 || file == "" {
			continue
		}
		out[file] = counts{num(a), num(d)}
	}
	return out, nil
}

func num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0 // "-": binary
	}
	return n
}

// statUntracked counts the lines of a file git does not track (all added).
func (r repo) statUntracked(ctx context.Context, file string) (counts, bool, error) {
	res, err := run(ctx, cmd{dir: r.root, args: []string{"diff", "--no-index", "--numstat", "--", "/dev/null", file}, maxOut: 4096})
	if err != nil || res.truncated {
		return counts{}, false, err
	}
	f := strings.Split(res.text(), "\t")
	if len(f) < 2 {
		return counts{}, false, nil
	}
	return counts{num(f[0]), num(f[1])}, true, nil
}

func unified(context int) string { return "--unified=" + strconv.Itoa(context) }

// patchAll is the unified diff of the directory against ref.
func (r repo) patchAll(ctx context.Context, ref string, context, maxOut int) (string, bool, error) {
	res, err := run(ctx, cmd{dir: r.dir, maxOut: maxOut,
		args: []string{"diff", "--patch", "--no-ext-diff", "--no-renames", unified(context), ref, "--", "."}})
	return res.text(), res.truncated, err
}

// patchFile is one tracked file's unified diff against ref ("" when too
// large).
func (r repo) patchFile(ctx context.Context, ref, file string, context int) (string, error) {
	res, err := run(ctx, cmd{dir: r.root, maxOut: maxFilePatch,
		args: []string{"diff", "--patch", "--no-ext-diff", "--no-renames", unified(context), ref, "--", file}})
	if res.truncated {
		return "", err
	}
	return res.text(), err
}

// patchUntracked is an untracked file's diff as a new file ("" when too
// large). git diff --no-index runs in the work tree root, where the
// status's paths are.
func (r repo) patchUntracked(ctx context.Context, file string, context, maxOut int) (string, error) {
	res, err := run(ctx, cmd{dir: r.root, maxOut: maxOut,
		args: []string{"diff", "--no-index", "--patch", "--no-ext-diff", "--no-renames", unified(context), "--", "/dev/null", file}})
	if res.truncated {
		return "", err
	}
	return res.text(), err
}

// placeholder is the patch OpenCode sends for a file whose diff is too
// large: headers without hunks (jsdiff's formatPatch of no change).
func placeholder(file string) string {
	return "Index: " + file + "\n" + strings.Repeat("=", 67) + "\n--- " + file + "\t\n+++ " + file + "\t\n"
}

var (
	diffStart = regexp.MustCompile(`(?:^|\n)diff --git `)
	plusLine  = regexp.MustCompile(`(?m)^\+\+\+ (.+)$`)
	minusLine = regexp.MustCompile(`(?m)^--- (.+)$`)
	gitLine   = regexp.MustCompile(`(?m)^diff --git (.+)$`)
)

// splitPatch cuts one diff into its files' patches (the last one dropped
// when the diff was truncated).
func splitPatch(text string, truncated bool) []string {
	var starts []int
	for _, m := range diffStart.FindAllStringIndex(text, -1) {
		i := m[0]
		if text[i] == '\n' {
			i++
		}
		starts = append(starts, i)
	}
	var out []string
	for k, s := range starts {
		end := len(text)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		out = append(out, text[s:end])
	}
	if truncated && len(out) > 0 {
		out = out[:len(out)-1]
	}
	return out
}

// unquote reads a C-quoted git path ("a\tb") at the start of s: the path
// and where it ends.
func unquote(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == '"' {
			return b.String(), i + 1, true
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, false
}

// headerPath is the path of a ---/+++ line's name ("" for /dev/null).
func headerPath(s string) string {
	if s == "" || s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, `"`) {
		if v, _, ok := unquote(s); ok {
			s = v
		}
	} else {
		s, _, _ = strings.Cut(s, "\t")
	}
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		return s[2:]
	}
	return s
}

// patchFileName is the file a patch is about: its +++ name, else its ---
// name, else the b/ side of its diff --git line.
func patchFileName(p string) string {
	if m := plusLine.FindStringSubmatch(p); m != nil {
		if f := headerPath(m[1]); f != "" {
			return f
		}
	}
	if m := minusLine.FindStringSubmatch(p); m != nil {
		if f := headerPath(m[1]); f != "" {
			return f
		}
	}
	m := gitLine.FindStringSubmatch(p)
	if m == nil {
		return ""
	}
	h := m[1]
	if strings.HasPrefix(h, `"`) {
		_, end, ok := unquote(h)
		if !ok {
			return ""
		}
		return headerPath(strings.TrimLeft(h[end:], " "))
	}
	i := strings.Index(h, " b/")
	if i < 0 {
		return ""
	}
	return headerPath(h[i+1:])
}
