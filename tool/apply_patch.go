package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/opencode-server/opencode-server/agent"
)

// ApplyPatch applies a patch in OpenCode's (and Codex's) "*** Begin
// Patch" format: files added, deleted, updated in place and moved, with
// OpenCode's tolerant matching of the lines a hunk replaces. OpenCode
// offers it instead of edit and write to GPT models (lifecycle decides).
//
// As OpenCode, every file operation of the patch is checked and computed
// against the files as they are before any is applied (a failing hunk
// changes nothing), then the operations are applied in order.
type ApplyPatch struct{}

type applyPatchInput struct {
	PatchText string `json:"patchText"`
}

func (ApplyPatch) Name() string { return "apply_patch" }

// Description is OpenCode's, word for word.
func (ApplyPatch) Description() string {
	return "Use the `apply_patch` tool to edit files. Your patch language is a stripped\u2011down, file\u2011oriented diff format designed to be easy to parse and safe to apply. You can think of it as a high\u2011level envelope:\n" +
		"\n" +
		"*** Begin Patch\n" +
		"[ one or more file sections ]\n" +
		"*** End Patch\n" +
		"\n" +
		"Within that envelope, you get a sequence of file operations.\n" +
		"You MUST include a header to specify the action you are taking.\n" +
		"Each operation starts with one of three headers:\n" +
		"\n" +
		"*** Add File: <path> - create a new file. Every following line is a + line (the initial contents).\n" +
		"*** Delete File: <path> - remove an existing file. Nothing follows.\n" +
		"*** Update File: <path> - patch an existing file in place (optionally with a rename).\n" +
		"\n" +
		"Example patch:\n" +
		"\n" +
		"```\n" +
		"*** Begin Patch\n" +
		"*** Add File: hello.txt\n" +
		"+Hello world\n" +
		"*** Update File: src/app.py\n" +
		"*** Move to: src/main.py\n" +
		"@@ def greet():\n" +
		"-print(\"Hi\")\n" +
		"+print(\"Hello, world!\")\n" +
		"*** Delete File: obsolete.txt\n" +
		"*** End Patch\n" +
		"```\n" +
		"\n" +
		"It is important to remember:\n" +
		"\n" +
		"- You must include a header with your intended action (Add/Delete/Update)\n" +
		"- You must prefix new lines with `+` even when creating a new file\n"
}

func (ApplyPatch) Parameters() json.RawMessage {
	return schema([]string{"patchText"},
		str("patchText", "The full patch text that describes all changes to be made"),
	)
}

// Permission is "edit" for every file the patch touches (relative to the
// session directory, as edit and write name them): the files it adds,
// deletes and updates, and where it moves them. The patch is verified
// first, as OpenCode does before it asks: a patch that cannot apply fails
// without asking.
func (t ApplyPatch) Permission(c Call) (string, []string, error) {
	s, changes, err := t.plan(c, false)
	if err != nil {
		return "", nil, err
	}
	s.Close()
	var patterns []string
	for _, ch := range changes {
		for _, rel := range []string{ch.rel, ch.moveRel} {
			if rel != "" && !slices.Contains(patterns, rel) {
				patterns = append(patterns, rel)
			}
		}
	}
	return "edit", patterns, nil
}

func (t ApplyPatch) Run(ctx context.Context, c Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	// Verified again: the files may have changed while the user was asked.
	s, changes, err := t.plan(c, true)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	for _, ch := range changes {
		if err := s.applyChange(ch); err != nil {
			return Result{}, err
		}
	}

	// OpenCode names the files relative to the worktree (the git work
	// tree holding the directory, or "/").
	wt, _ := agent.Worktree(s.real)
	wtRel := func(abs string) string {
		r, err := filepath.Rel(wt, abs)
		if err != nil {
			return filepath.ToSlash(abs)
		}
		return filepath.ToSlash(r)
	}
	var diff strings.Builder
	files := make([]map[string]any, 0, len(changes))
	lines := make([]string, 0, len(changes))
	for _, ch := range changes {
		diff.WriteString(ch.diff + "\n")
		shown := ch.abs
		if ch.moveAbs != "" {
			shown = ch.moveAbs
		}
		f := map[string]any{
			"filePath":     ch.abs,
			"relativePath": wtRel(shown),
			"type":         ch.kind,
			"patch":        ch.diff,
			"additions":    ch.additions,
			"deletions":    ch.deletions,
		}
		if ch.moveAbs != "" {
			f["movePath"] = ch.moveAbs
		}
		files = append(files, f)
		switch ch.kind {
		case "add":
			lines = append(lines, "A "+wtRel(ch.abs))
		case "delete":
			lines = append(lines, "D "+wtRel(ch.abs))
		default:
			lines = append(lines, "M "+wtRel(shown))
		}
	}
	// OpenCode appends the LSP errors of the changed files; there is no
	// LSP here.
	out := "Success. Updated the following files:\n" + strings.Join(lines, "\n")
	return Result{
		Title:  out,
		Output: out,
		Metadata: map[string]any{
			"diff":        diff.String(),
			"files":       files,
			"diagnostics": map[string]any{},
		},
	}, nil
}

// patchChange is one file operation of a verified patch, ready to apply.
type patchChange struct {
	kind     string // add, update, move, delete
	abs, rel string // the file (resolve's names)
	// unlink is the name to remove for a delete or a move: the file, or
	// the symlink naming it.
	unlink           string
	moveAbs, moveRel string // a move's destination
	content          string // the new content, without BOM
	bom              bool
	mode             fs.FileMode
	diff             string
	additions        int
	deletions        int
}

// errVerify is OpenCode's prefix of a patch that does not apply.
const errVerify = "apply_patch verification failed: "

// plan parses the patch and verifies every operation against the files,
// computing the new contents (and, with diffs, the diffs), through a root
// on c.Dir (returned open).
func (t ApplyPatch) plan(c Call, diffs bool) (*scope, []patchChange, error) {
	var in applyPatchInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return nil, nil, err
	}
	if in.PatchText == "" {
		return nil, nil, errors.New("patchText is required")
	}
	hunks, err := parsePatch(in.PatchText)
	if err != nil {
		// JavaScript's `${err}`: "Error: message".
		return nil, nil, errors.New(errVerify + "Error: " + err.Error())
	}
	if len(hunks) == 0 {
		norm := strings.ReplaceAll(strings.ReplaceAll(in.PatchText, "\r\n", "\n"), "\r", "\n")
		if jsTrim(norm) == "*** Begin Patch\n*** End Patch" {
			return nil, nil, errors.New("patch rejected: empty patch")
		}
		return nil, nil, errors.New(errVerify + "no hunks found")
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return nil, nil, err
	}
	changes := make([]patchChange, 0, len(hunks))
	for _, h := range hunks {
		ch, err := s.planHunk(c.Dir, h, diffs)
		if err != nil {
			s.Close()
			return nil, nil, err
		}
		changes = append(changes, ch)
	}
	return s, changes, nil
}

// planHunk verifies one file operation.
func (s *scope) planHunk(dir string, h patchHunk, diffs bool) (patchChange, error) {
	abs, rel, err := resolve(dir, h.path)
	if err != nil {
		return patchChange{}, err
	}
	ch := patchChange{kind: h.kind, abs: abs, rel: rel}
	switch h.kind {
	case "add":
		text := h.contents
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		ch.bom, ch.content = splitBOM(text)
		_, mode, err := fileState(s, h.path, rel)
		if err != nil {
			return patchChange{}, err
		}
		ch.mode = mode
		if diffs {
			var parts []diffPart
			ch.diff, parts = twoFilesPatch(abs, "", ch.content)
			ch.additions, ch.deletions = diffCounts(parts)
		}
		return ch, nil

	case "update":
		fi, err := s.root.Stat(s.name(rel))
		switch {
		case err == nil && fi.Mode().IsRegular():
		case err != nil && rootEscaped(err):
			return patchChange{}, s.fail(h.path, err)
		default: // missing, a directory, not a file
			return patchChange{}, errors.New(errVerify + "Failed to read file to update: " + abs)
		}
		ch.mode = fi.Mode().Perm()
		b, err := s.root.ReadFile(s.name(rel))
		if err != nil {
			return patchChange{}, s.fail(h.path, err)
		}
		bom, old := splitBOM(string(b))
		content, nbom, err := derivePatched(abs, h.chunks, old)
		if err != nil {
			return patchChange{}, errors.New(errVerify + "Error: " + err.Error())
		}
		ch.content, ch.bom = content, bom || nbom
		if diffs {
			var parts []diffPart
			ch.diff, parts = twoFilesPatch(abs, old, content)
			ch.additions, ch.deletions = diffCounts(parts)
		}
		if h.movePath != "" {
			mabs, mrel, err := resolve(dir, h.movePath)
			if err != nil {
				return patchChange{}, err
			}
			if _, _, err := fileState(s, h.movePath, mrel); err != nil {
				return patchChange{}, err
			}
			ch.kind, ch.moveAbs, ch.moveRel = "move", mabs, mrel
			if ch.unlink, err = s.unlinkName(dir, h.path, rel); err != nil {
				return patchChange{}, err
			}
		}
		return ch, nil

	default: // delete
		fi, err := s.root.Stat(s.name(rel))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The texts of Node's errors, which OpenCode passes on.
			return patchChange{}, errors.New(errVerify + "ENOENT: no such file or directory, open '" + abs + "'")
		case err != nil:
			return patchChange{}, s.fail(h.path, err)
		case fi.IsDir():
			return patchChange{}, errors.New(errVerify + "EISDIR: illegal operation on a directory, read")
		case !fi.Mode().IsRegular():
			return patchChange{}, errors.New(errVerify + rel + " is not a regular file")
		}
		b, err := s.root.ReadFile(s.name(rel))
		if err != nil {
			return patchChange{}, s.fail(h.path, err)
		}
		_, old := splitBOM(string(b))
		if diffs {
			ch.diff, _ = twoFilesPatch(abs, old, "")
			ch.deletions = strings.Count(old, "\n") + 1 // OpenCode's split("\n").length
		}
		if ch.unlink, err = s.unlinkName(dir, h.path, rel); err != nil {
			return patchChange{}, err
		}
		return ch, nil
	}
}

// unlinkName is the name to remove for the file p (resolve's rel): a
// symlink inside the directory naming it is removed itself, as OpenCode
// removes the path it was given, not the file the link leads to.
func (s *scope) unlinkName(dir, p, rel string) (string, error) {
	clean := filepath.Clean(p)
	base := filepath.Base(clean)
	if base == "." || base == ".." || base == string(filepath.Separator) {
		return rel, nil
	}
	_, prel, err := resolve(dir, filepath.Dir(clean))
	if err != nil {
		return "", err
	}
	link := path.Join(prel, filepath.ToSlash(base))
	if link == rel {
		return rel, nil
	}
	if fi, err := s.root.Lstat(s.name(link)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return link, nil
	}
	return rel, nil
}

// applyChange writes one verified operation through the root.
func (s *scope) applyChange(ch patchChange) error {
	switch ch.kind {
	case "add", "update":
		return s.writeFile(ch.rel, ch.rel, []byte(joinBOM(ch.content, ch.bom)), ch.mode, true)
	case "move":
		if err := s.writeFile(ch.moveRel, ch.moveRel, []byte(joinBOM(ch.content, ch.bom)), ch.mode, true); err != nil {
			return err
		}
		if ch.moveRel == ch.rel {
			// Moved onto itself: OpenCode would write then remove it.
			return nil
		}
		return s.fail(ch.rel, s.root.Remove(s.name(ch.unlink)))
	default: // delete
		return s.fail(ch.rel, s.root.Remove(s.name(ch.unlink)))
	}
}

const bom = "\uFEFF"

// splitBOM is OpenCode's Bom.split.
func splitBOM(s string) (bool, string) {
	if t, ok := strings.CutPrefix(s, bom); ok {
		return true, t
	}
	return false, s
}

// joinBOM is OpenCode's Bom.join.
func joinBOM(s string, withBOM bool) string {
	_, s = splitBOM(s)
	if withBOM {
		return bom + s
	}
	return s
}

// patchHunk is one file operation of a parsed patch.
type patchHunk struct {
	kind     string // add, delete, update
	path     string
	movePath string       // update: where to move the file ("" none)
	contents string       // add: the file's lines, joined by "\n"
	chunks   []patchChunk // update
}

// patchChunk is one "@@" section of an update: the lines it replaces and
// their replacement, and the line the section follows ("@@ context").
type patchChunk struct {
	context  string
	oldLines []string
	newLines []string
}

// parsePatch is OpenCode's parsePatch: the text (trimmed, unwrapped from
// a heredoc) between the "*** Begin Patch" and "*** End Patch" lines, as
// file operations. Lines it does not understand are skipped, as
// OpenCode's parser skips them; "*** End of File" ends a section.
func parsePatch(text string) ([]patchHunk, error) {
	lines := strings.Split(stripHeredoc(jsTrim(text)), "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch jsTrim(l) {
		case "*** Begin Patch":
			if begin < 0 {
				begin = i
			}
		case "*** End Patch":
			if end < 0 {
				end = i
			}
		}
	}
	if begin < 0 || end < 0 || begin >= end {
		return nil, errors.New("Invalid patch format: missing Begin/End markers")
	}
	var hunks []patchHunk
	for i := begin + 1; i < end; {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "*** Add File:"):
			p := jsTrim(l[len("*** Add File:"):])
			if p == "" {
				i++
				continue
			}
			var b strings.Builder
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(lines[j], "***"); j++ {
				if s, ok := strings.CutPrefix(lines[j], "+"); ok {
					b.WriteString(s + "\n")
				}
			}
			hunks = append(hunks, patchHunk{kind: "add", path: p, contents: strings.TrimSuffix(b.String(), "\n")})
			i = j
		case strings.HasPrefix(l, "*** Delete File:"):
			p := jsTrim(l[len("*** Delete File:"):])
			if p != "" {
				hunks = append(hunks, patchHunk{kind: "delete", path: p})
			}
			i++
		case strings.HasPrefix(l, "*** Update File:"):
			p := jsTrim(l[len("*** Update File:"):])
			if p == "" {
				i++
				continue
			}
			j, move := i+1, ""
			if j < len(lines) && strings.HasPrefix(lines[j], "*** Move to:") {
				move = jsTrim(lines[j][len("*** Move to:"):])
				j++
			}
			var chunks []patchChunk
			for j < len(lines) && !strings.HasPrefix(lines[j], "***") {
				if !strings.HasPrefix(lines[j], "@@") {
					j++
					continue
				}
				ch := patchChunk{context: jsTrim(lines[j][2:])}
				for j++; j < len(lines) && !strings.HasPrefix(lines[j], "@@") && !strings.HasPrefix(lines[j], "***"); j++ {
					switch m := lines[j]; {
					case strings.HasPrefix(m, " "):
						ch.oldLines = append(ch.oldLines, m[1:])
						ch.newLines = append(ch.newLines, m[1:])
					case strings.HasPrefix(m, "-"):
						ch.oldLines = append(ch.oldLines, m[1:])
					case strings.HasPrefix(m, "+"):
						ch.newLines = append(ch.newLines, m[1:])
					}
				}
				chunks = append(chunks, ch)
			}
			hunks = append(hunks, patchHunk{kind: "update", path: p, movePath: move, chunks: chunks})
			i = j
		default:
			i++
		}
	}
	return hunks, nil
}

// stripHeredoc is OpenCode's stripHeredoc: s matching
// /^(?:cat\s+)?<<['"]?(\w+)['"]?\s*\n([\s\S]*?)\n\1\s*$/ becomes the
// heredoc's body.
func stripHeredoc(s string) string {
	i := 0
	if rest, ok := strings.CutPrefix(s, "cat"); ok {
		if t := strings.TrimLeftFunc(rest, jsSpace); len(t) < len(rest) {
			i = len(s) - len(t)
		}
	}
	if !strings.HasPrefix(s[i:], "<<") {
		return s
	}
	i += 2
	if i < len(s) && (s[i] == '\'' || s[i] == '"') {
		i++
	}
	j := i
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	if j == i {
		return s
	}
	tag := s[i:j]
	if j < len(s) && (s[j] == '\'' || s[j] == '"') {
		j++
	}
	// The body ends at the "\n" before the last tag, which only white
	// space may follow.
	w := len(jsTrimEnd(s))
	e := w - len(tag) - 1
	if e < j || s[e] != '\n' || s[e+1:w] != tag {
		return s
	}
	// The body starts after the last "\n" before e in the white space
	// after the tag (the greedy \s* gives back as little as it must).
	start := -1
	for k := j; k < e; {
		r, size := utf8.DecodeRuneInString(s[k:])
		if !jsSpace(r) {
			break
		}
		if r == '\n' {
			start = k + 1
		}
		k += size
	}
	if start < 0 {
		return s
	}
	return s[start:e]
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// derivePatched is OpenCode's deriveNewContentsFromChunks: the text
// (without its BOM) with the chunks applied, ending in a newline; bom
// reports a BOM the new text begins with. name is for the errors.
//
// Unlike OpenCode, which leaves the lines it writes with "\n" endings in
// a file of "\r\n" ones, a file with "\r\n" line endings is patched as if
// it had "\n" ones (the patch's lines taken without a trailing "\r") and
// keeps "\r\n" ones throughout.
func derivePatched(name string, chunks []patchChunk, text string) (string, bool, error) {
	_, text = splitBOM(text)
	crlf := strings.Contains(text, "\r\n")
	lines := strings.Split(text, "\n")
	if crlf {
		for i := range lines {
			lines[i] = strings.TrimSuffix(lines[i], "\r")
		}
		chunks = withoutCR(chunks)
	}
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	reps, err := computeReplacements(lines, name, chunks)
	if err != nil {
		return "", false, err
	}
	out := slices.Clone(lines)
	for i := len(reps) - 1; i >= 0; i-- {
		r := reps[i]
		start := min(r.start, len(out))
		n := min(r.n, len(out)-start)
		out = slices.Replace(out, start, start+n, r.lines...)
	}
	if len(out) == 0 || out[len(out)-1] != "" {
		out = append(out, "")
	}
	nbom, content := splitBOM(strings.Join(out, "\n"))
	if crlf {
		content = strings.ReplaceAll(content, "\n", "\r\n")
	}
	return content, nbom, nil
}

func withoutCR(chunks []patchChunk) []patchChunk {
	trim := func(ls []string) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = strings.TrimSuffix(l, "\r")
		}
		return out
	}
	out := make([]patchChunk, len(chunks))
	for i, c := range chunks {
		out[i] = patchChunk{context: strings.TrimSuffix(c.context, "\r"), oldLines: trim(c.oldLines), newLines: trim(c.newLines)}
	}
	return out
}

type replacement struct {
	start, n int
	lines    []string
}

// computeReplacements is OpenCode's computeReplacements: where each chunk
// applies, searching on from the previous one.
func computeReplacements(lines []string, name string, chunks []patchChunk) ([]replacement, error) {
	var reps []replacement
	m := newLineMatcher(lines)
	at := 0
	for _, ch := range chunks {
		if ch.context != "" {
			i := m.seek([]string{ch.context}, at)
			if i < 0 {
				return nil, fmt.Errorf("Failed to find context '%s' in %s", ch.context, name)
			}
			at = i + 1
		}
		if len(ch.oldLines) == 0 {
			// Pure addition: at the end of the file (before a last empty
			// line).
			i := len(lines)
			if i > 0 && lines[i-1] == "" {
				i--
			}
			reps = append(reps, replacement{i, 0, ch.newLines})
			continue
		}
		pattern, repl := ch.oldLines, ch.newLines
		i := m.seek(pattern, at)
		if i < 0 && pattern[len(pattern)-1] == "" {
			pattern = pattern[:len(pattern)-1]
			if len(repl) > 0 && repl[len(repl)-1] == "" {
				repl = repl[:len(repl)-1]
			}
			i = m.seek(pattern, at)
		}
		if i < 0 {
			return nil, fmt.Errorf("Failed to find expected lines in %s:\n%s", name, strings.Join(ch.oldLines, "\n"))
		}
		reps = append(reps, replacement{i, len(pattern), repl})
		at = i + len(pattern)
	}
	sort.SliceStable(reps, func(a, b int) bool { return reps[a].start < reps[b].start })
	return reps, nil
}

// lineMatcher finds a sequence of lines in a file as OpenCode's
// seekSequence does: compared exactly, then without trailing white
// space, then without white space at either end, then also with unicode
// punctuation (quotes, dashes, ellipsis, no-break space) made ASCII. The
// file's lines are transformed once per pass.
type lineMatcher struct {
	lines  []string
	passes [][]string // the lines under each pass but the first (lazily)
}

var lineNorms = []func(string) string{
	func(s string) string { return s },
	jsTrimEnd,
	jsTrim,
	func(s string) string { return punctuation.Replace(jsTrim(s)) },
}

var punctuation = strings.NewReplacer(
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", `"`, "\u201D", `"`, "\u201E", `"`, "\u201F", `"`,
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-",
	"\u2026", "...",
	"\u00A0", " ",
)

func newLineMatcher(lines []string) *lineMatcher {
	return &lineMatcher{lines: lines, passes: make([][]string, len(lineNorms))}
}

func (m *lineMatcher) pass(k int) []string {
	if k == 0 {
		return m.lines
	}
	if m.passes[k] == nil {
		out := make([]string, len(m.lines))
		for i, l := range m.lines {
			out[i] = lineNorms[k](l)
		}
		m.passes[k] = out
	}
	return m.passes[k]
}

// seek is the first index at or after start where pattern matches, or -1.
func (m *lineMatcher) seek(pattern []string, start int) int {
	if len(pattern) == 0 {
		return -1
	}
	for k, norm := range lineNorms {
		if start > len(m.lines)-len(pattern) {
			return -1
		}
		lines := m.pass(k)
		pat := make([]string, len(pattern))
		for i, p := range pattern {
			pat[i] = norm(p)
		}
	search:
		for i := start; i <= len(lines)-len(pat); i++ {
			for j, p := range pat {
				if lines[i+j] != p {
					continue search
				}
			}
			return i
		}
	}
	return -1
}
