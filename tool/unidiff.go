package tool

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file ports the parts of jsdiff (the "diff" package, v8, which
// OpenCode bundles) that apply_patch's metadata depends on: diffLines (a
// Myers diff over lines), createTwoFilesPatch (structuredPatch with 4
// lines of context, then formatPatch), and OpenCode's trimDiff, so that
// the diffs and the addition/deletion counts the TUI shows come out as
// OpenCode's do.

// lineDiffMaxEdit bounds the edit distance lineDiff searches (jsdiff has
// no bound, and its time grows with the square of the distance): texts
// further apart are diffed as their common first and last lines around
// one removed and one added run.
const lineDiffMaxEdit = 2000

// diffPart is one run of jsdiff's diff result: count tokens common to both
// texts, added (only in the new text) or removed (only in the old).
type diffPart struct {
	added, removed bool
	lines          []string // the tokens: lines with their endings
}

// lineTokens splits s into lines as jsdiff's diffLines tokenizes: each
// line keeps its ending ("\n" or "\r\n"); a last line without one is a
// token too; "" has no tokens.
func lineTokens(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// myersComp and myersPath are jsdiff's path components: a linked list
// from the last run back to the first.
type myersComp struct {
	count          int
	added, removed bool
	prev           *myersComp
}

type myersPath struct {
	oldPos int
	last   *myersComp
	set    bool
}

// lineDiff is jsdiff's diffLines(old, new): the runs of lines common,
// removed and added, in order.
func lineDiff(oldS, newS string) []diffPart {
	oldT, newT := lineTokens(oldS), lineTokens(newS)
	// Lines compared by number: equal lines get the same one.
	ids := map[string]int32{}
	num := func(toks []string) []int32 {
		out := make([]int32, len(toks))
		for i, t := range toks {
			id, ok := ids[t]
			if !ok {
				id = int32(len(ids))
				ids[t] = id
			}
			out[i] = id
		}
		return out
	}
	if parts, ok := myers(oldT, newT, num(oldT), num(newT), lineDiffMaxEdit); ok {
		return parts
	}
	pre := 0
	for pre < len(oldT) && pre < len(newT) && oldT[pre] == newT[pre] {
		pre++
	}
	suf := 0
	for suf < len(oldT)-pre && suf < len(newT)-pre && oldT[len(oldT)-1-suf] == newT[len(newT)-1-suf] {
		suf++
	}
	var parts []diffPart
	for _, p := range []diffPart{
		{lines: oldT[:pre]},
		{removed: true, lines: oldT[pre : len(oldT)-suf]},
		{added: true, lines: newT[pre : len(newT)-suf]},
		{lines: oldT[len(oldT)-suf:]},
	} {
		if len(p.lines) > 0 {
			parts = append(parts, p)
		}
	}
	return parts
}

// myers is jsdiff's Diff.diffWithOptionsObj for tokens compared by
// equality (of their numbers oldN, newN), giving up (false) past maxEdit
// edits.
func myers(oldT, newT []string, oldN, newN []int32, maxEdit int) ([]diffPart, bool) {
	newLen, oldLen := len(newT), len(oldT)
	maxEditLength := min(newLen+oldLen, maxEdit)
	off := maxEditLength + 1
	best := make([]myersPath, 2*maxEditLength+3)

	extractCommon := func(base *myersPath, diagonal int) int {
		oldPos := base.oldPos
		newPos := oldPos - diagonal
		common := 0
		for newPos+1 < newLen && oldPos+1 < oldLen && oldN[oldPos+1] == newN[newPos+1] {
			newPos++
			oldPos++
			common++
		}
		if common > 0 {
			base.last = &myersComp{count: common, prev: base.last}
		}
		base.oldPos = oldPos
		return newPos
	}
	addToPath := func(p myersPath, added, removed bool, oldPosInc int) myersPath {
		last := p.last
		if last != nil && last.added == added && last.removed == removed {
			return myersPath{oldPos: p.oldPos + oldPosInc, set: true,
				last: &myersComp{count: last.count + 1, added: added, removed: removed, prev: last.prev}}
		}
		return myersPath{oldPos: p.oldPos + oldPosInc, set: true,
			last: &myersComp{count: 1, added: added, removed: removed, prev: last}}
	}
	build := func(last *myersComp) []diffPart {
		var comps []*myersComp
		for c := last; c != nil; c = c.prev {
			comps = append(comps, c)
		}
		parts := make([]diffPart, 0, len(comps))
		newPos, oldPos := 0, 0
		for i := len(comps) - 1; i >= 0; i-- {
			c := comps[i]
			p := diffPart{added: c.added, removed: c.removed}
			if !c.removed {
				p.lines = newT[newPos : newPos+c.count]
				newPos += c.count
				if !c.added {
					oldPos += c.count
				}
			} else {
				p.lines = oldT[oldPos : oldPos+c.count]
				oldPos += c.count
			}
			parts = append(parts, p)
		}
		return parts
	}

	best[off] = myersPath{oldPos: -1, set: true}
	newPos := extractCommon(&best[off], 0)
	if best[off].oldPos+1 >= oldLen && newPos+1 >= newLen {
		return build(best[off].last), true
	}
	const inf = int(^uint(0) >> 1)
	minDiag, maxDiag := -inf, inf
	for editLength := 1; editLength <= maxEditLength; editLength++ {
		for d := max(minDiag, -editLength); d <= min(maxDiag, editLength); d += 2 {
			removePath, addPath := best[off+d-1], best[off+d+1]
			if removePath.set {
				best[off+d-1] = myersPath{}
			}
			canAdd := false
			if addPath.set {
				np := addPath.oldPos - d
				canAdd = 0 <= np && np < newLen
			}
			canRemove := removePath.set && removePath.oldPos+1 < oldLen
			if !canAdd && !canRemove {
				best[off+d] = myersPath{}
				continue
			}
			var base myersPath
			if !canRemove || (canAdd && removePath.oldPos < addPath.oldPos) {
				base = addToPath(addPath, true, false, 0)
			} else {
				base = addToPath(removePath, false, true, 1)
			}
			newPos = extractCommon(&base, d)
			if base.oldPos+1 >= oldLen && newPos+1 >= newLen {
				return build(base.last), true
			}
			best[off+d] = base
			if base.oldPos+1 >= oldLen {
				maxDiag = min(maxDiag, d-1)
			}
			if newPos+1 >= newLen {
				minDiag = max(minDiag, d+1)
			}
		}
	}
	return nil, false
}

// diffCounts sums the added and removed lines of a diff.
func diffCounts(parts []diffPart) (adds, dels int) {
	for _, p := range parts {
		switch {
		case p.added:
			adds += len(p.lines)
		case p.removed:
			dels += len(p.lines)
		}
	}
	return adds, dels
}

type diffHunk struct {
	oldStart, oldLines, newStart, newLines int
	lines                                  []string
}

// structuredPatch is jsdiff's structuredPatch over a diffLines result,
// with context lines of context.
func structuredPatch(parts []diffPart, context int) []diffHunk {
	parts = append(parts[:len(parts):len(parts)], diffPart{}) // jsdiff's sentinel
	prefixed := func(sign string, lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = sign + l
		}
		return out
	}
	var hunks []diffHunk
	oldRangeStart, newRangeStart := 0, 0
	var cur []string
	oldLine, newLine := 1, 1
	for i, p := range parts {
		lines := p.lines
		if p.added || p.removed {
			if oldRangeStart == 0 {
				oldRangeStart, newRangeStart = oldLine, newLine
				if i > 0 {
					cur = nil
					if context > 0 {
						prev := parts[i-1].lines
						cur = prefixed(" ", prev[max(0, len(prev)-context):])
					}
					oldRangeStart -= len(cur)
					newRangeStart -= len(cur)
				}
			}
			sign := "-"
			if p.added {
				sign = "+"
			}
			cur = append(cur, prefixed(sign, lines)...)
			if p.added {
				newLine += len(lines)
			} else {
				oldLine += len(lines)
			}
			continue
		}
		if oldRangeStart != 0 {
			if len(lines) <= context*2 && i < len(parts)-2 {
				cur = append(cur, prefixed(" ", lines)...)
			} else {
				n := min(len(lines), context)
				cur = append(cur, prefixed(" ", lines[:n])...)
				hunks = append(hunks, diffHunk{oldStart: oldRangeStart, oldLines: oldLine - oldRangeStart + n,
					newStart: newRangeStart, newLines: newLine - newRangeStart + n, lines: cur})
				oldRangeStart, newRangeStart, cur = 0, 0, nil
			}
		}
		oldLine += len(lines)
		newLine += len(lines)
	}
	for h := range hunks {
		var out []string
		for _, l := range hunks[h].lines {
			if s, ok := strings.CutSuffix(l, "\n"); ok {
				out = append(out, s)
			} else {
				out = append(out, l, `\ No newline at end of file`)
			}
		}
		hunks[h].lines = out
	}
	return hunks
}

// formatPatch is jsdiff's formatPatch for one file without headers.
func formatPatch(oldName, newName string, hunks []diffHunk) string {
	var b strings.Builder
	if oldName == newName {
		b.WriteString("Index: " + oldName + "\n")
	}
	b.WriteString("===================================================================\n")
	b.WriteString("--- " + oldName + "\n")
	b.WriteString("+++ " + newName + "\n")
	for _, h := range hunks {
		o, ns := h.oldStart, h.newStart
		if h.oldLines == 0 {
			o--
		}
		if h.newLines == 0 {
			ns--
		}
		b.WriteString("@@ -" + strconv.Itoa(o) + "," + strconv.Itoa(h.oldLines) + " +" + strconv.Itoa(ns) + "," +
			strconv.Itoa(h.newLines) + " @@\n")
		for _, l := range h.lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// twoFilesPatch is jsdiff's createTwoFilesPatch(name, name, oldS, newS)
// passed through OpenCode's trimDiff, with diffLines' result for the
// counts.
func twoFilesPatch(name, oldS, newS string) (string, []diffPart) {
	parts := lineDiff(oldS, newS)
	return trimDiff(formatPatch(name, name, structuredPatch(parts, 4))), parts
}

// trimDiff is OpenCode's trimDiff: the indentation common to every
// non-blank change and context line is cut from all of them.
func trimDiff(d string) string {
	lines := strings.Split(d, "\n")
	isBody := func(l string) bool {
		return (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-") || strings.HasPrefix(l, " ")) &&
			!strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "+++")
	}
	indent, found := -1, false
	for _, l := range lines {
		if !isBody(l) {
			continue
		}
		found = true
		body := l[1:]
		if jsTrim(body) == "" {
			continue
		}
		n := 0
		for _, r := range body {
			if !jsSpace(r) {
				break
			}
			n++
		}
		if indent < 0 || n < indent {
			indent = n
		}
	}
	if !found || indent <= 0 {
		return d
	}
	for i, l := range lines {
		if !isBody(l) {
			continue
		}
		body := l[1:]
		// Cut indent characters (all whitespace on a line measured; a
		// blank line may have fewer).
		cut := 0
		for j := 0; j < indent && cut < len(body); j++ {
			_, size := utf8.DecodeRuneInString(body[cut:])
			cut += size
		}
		lines[i] = l[:1] + body[cut:]
	}
	return strings.Join(lines, "\n")
}

// jsSpace reports whether r is white space to JavaScript (String.trim,
// the regular expression \s).
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// jsTrim is JavaScript's String.prototype.trim.
func jsTrim(s string) string { return strings.TrimFunc(s, jsSpace) }

// jsTrimEnd is JavaScript's String.prototype.trimEnd.
func jsTrimEnd(s string) string { return strings.TrimRightFunc(s, jsSpace) }

// FilePatch is the unified diff of a file's text from oldS to newS, as
// the write tool's metadata has it (named name), with its added and
// deleted lines.
func FilePatch(name, oldS, newS string) (diff string, adds, dels int) {
	d, parts := twoFilesPatch(name, oldS, newS)
	adds, dels = diffCounts(parts)
	return d, adds, dels
}
