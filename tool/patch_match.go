package tool

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Applying an update's chunks to a file's text: each chunk's old lines found
// from the previous one on, exactly or, failing that, with looser matches
// (OpenCode's seekSequence).

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
