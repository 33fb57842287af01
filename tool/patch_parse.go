package tool

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// The patch format of apply_patch (OpenCode's parsePatch): files added,
// deleted, updated and moved, each update a list of chunks of context, old
// and new lines.

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
