package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

const editMaxDiff = 8 * 1024

// Edit replaces exact strings in a file.
type Edit struct{}

type editInput struct {
	FilePath   string  `json:"filePath"`
	OldString  *string `json:"oldString"`
	NewString  *string `json:"newString"`
	ReplaceAll bool    `json:"replaceAll"`
}

func (Edit) Name() string { return "edit" }

func (Edit) Description() string {
	return `Performs exact string replacements in a file.

Usage:
- oldString must match the file's text exactly, including indentation and line breaks.
- The edit fails if oldString is not found, or is found more than once and replaceAll is not set; add surrounding lines to make it unique.
- replaceAll replaces every occurrence (useful for renames).
- An empty oldString creates the file (or replaces its whole content) with newString.`
}

func (Edit) Parameters() json.RawMessage {
	return schema([]string{"filePath", "oldString", "newString"},
		str("filePath", "The path to the file to modify"),
		str("oldString", "The text to replace"),
		str("newString", "The text to replace it with (must be different from oldString)"),
		boolean("replaceAll", "Replace all occurrences of oldString (default false)"),
	)
}

func (t Edit) input(c Call) (editInput, string, string, error) {
	var in editInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, "", "", err
	}
	if in.FilePath == "" {
		return in, "", "", errors.New("filePath is required")
	}
	if in.OldString == nil {
		return in, "", "", errors.New("oldString is required")
	}
	if in.NewString == nil {
		return in, "", "", errors.New("newString is required")
	}
	abs, rel, err := resolve(c.Dir, in.FilePath)
	return in, abs, rel, err
}

func (t Edit) Permission(c Call) (string, []string, error) {
	_, _, rel, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "edit", []string{rel}, nil
}

func (t Edit) Run(ctx context.Context, c Call) (Result, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	return t.run(ctx, c, in, abs, rel)
}

// editPlan is an edit worked out before it is written: the file's text
// before and after, and the strings as matched (CRLF files match with CRLF).
type editPlan struct {
	before, after string
	oldS, newS    string
	replaced      int
	exists        bool
	mode          fs.FileMode
}

// edited works out what the edit does to the file, writing nothing: run
// writes it, and the permission ask shows its diff.
func (t Edit) edited(s *scope, in editInput, rel string) (editPlan, error) {
	oldS, newS := *in.OldString, *in.NewString
	name := s.name(rel)
	exists, mode, err := fileState(s, in.FilePath, rel)
	if err != nil {
		return editPlan{}, err
	}

	var before, after string
	replaced := 1
	if oldS == "" {
		// OpenCode: an empty oldString writes newString as the whole file.
		if exists {
			b, err := s.root.ReadFile(name)
			if err != nil {
				return editPlan{}, s.fail(in.FilePath, err)
			}
			before = string(b)
		}
		after = newS
	} else {
		if !exists {
			return editPlan{}, fmt.Errorf("file not found: %s", rel)
		}
		b, err := s.root.ReadFile(name)
		if err != nil {
			return editPlan{}, s.fail(in.FilePath, err)
		}
		before = string(b)
		n := strings.Count(before, oldS)
		if n == 0 && strings.Contains(before, "\r\n") && !strings.Contains(oldS, "\r\n") {
			// The file uses CRLF line endings; match with them.
			oldS = strings.ReplaceAll(oldS, "\n", "\r\n")
			newS = strings.ReplaceAll(newS, "\n", "\r\n")
			n = strings.Count(before, oldS)
		}
		switch {
		case n == 0:
			return editPlan{}, fmt.Errorf("oldString not found in %s; it must match the file's text exactly, including whitespace and indentation", rel)
		case n > 1 && !in.ReplaceAll:
			return editPlan{}, fmt.Errorf("found %d matches for oldString in %s; provide more surrounding lines in oldString to identify the correct match, or set replaceAll", n, rel)
		}
		if in.ReplaceAll {
			after = strings.ReplaceAll(before, oldS, newS)
			replaced = n
		} else {
			after = strings.Replace(before, oldS, newS, 1)
		}
	}
	return editPlan{before: before, after: after, oldS: oldS, newS: newS, replaced: replaced, exists: exists, mode: mode}, nil
}

// AskDetails is what the permission ask of an edit carries, as OpenCode's:
// the file and the diff of the edit (the TUI's permission dialog shows it),
// and "*" to approve always.
func (t Edit) AskDetails(c Call) (map[string]any, []string, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return nil, nil, err
	}
	if *in.OldString == *in.NewString {
		return nil, nil, errors.New("oldString and newString must be different")
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	e, err := t.edited(s, in, rel)
	if err != nil {
		return nil, nil, err
	}
	diff, _ := twoFilesPatch(abs, e.before, e.after)
	return map[string]any{"filepath": abs, "diff": diff}, []string{"*"}, nil
}

// run edits the file resolve named (abs, rel) through a root on c.Dir.
func (t Edit) run(ctx context.Context, c Call, in editInput, abs, rel string) (Result, error) {
	oldS, newS := *in.OldString, *in.NewString
	if oldS == newS {
		return Result{}, errors.New("oldString and newString must be different")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	e, err := t.edited(s, in, rel)
	if err != nil {
		return Result{}, err
	}
	before, after, replaced, exists, mode := e.before, e.after, e.replaced, e.exists, e.mode
	oldS, newS = e.oldS, e.newS
	if err := s.writeFile(in.FilePath, rel, []byte(after), mode, !exists); err != nil {
		return Result{}, err
	}

	diff, adds, dels := editDiff(rel, before, oldS, newS, in.OldString != nil && *in.OldString == "", replaced)
	return Result{
		Title:  rel,
		Output: "Edit applied successfully.",
		Metadata: map[string]any{
			"filepath":     abs,
			"diff":         diff,
			"additions":    adds,
			"deletions":    dels,
			"replacements": replaced,
			"filediff": map[string]any{
				"file":      rel,
				"additions": adds,
				"deletions": dels,
			},
		},
	}, nil
}

// editDiff builds a small unified-style diff of the replacements: one hunk
// per occurrence of oldS in before (common leading and trailing lines of the
// two strings trimmed), capped at editMaxDiff bytes.
func editDiff(rel, before, oldS, newS string, whole bool, count int) (string, int, int) {
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", rel, rel)
	if whole {
		oldS = before
	}
	oldL, newL := splitLines(oldS), splitLines(newS)
	pre := 0
	for pre < len(oldL) && pre < len(newL) && oldL[pre] == newL[pre] {
		pre++
	}
	suf := 0
	for suf < len(oldL)-pre && suf < len(newL)-pre && oldL[len(oldL)-1-suf] == newL[len(newL)-1-suf] {
		suf++
	}
	delL, addL := oldL[pre:len(oldL)-suf], newL[pre:len(newL)-suf]
	adds, dels := len(addL)*count, len(delL)*count

	idx, shift, truncated := 0, 0, false
	for i := 0; i < count; i++ {
		start := 0
		if !whole {
			j := strings.Index(before[idx:], oldS)
			if j < 0 {
				break
			}
			start = idx + j
			idx = start + len(oldS)
		}
		line := strings.Count(before[:start], "\n") + 1 + pre
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", line, len(delL), line+shift, len(addL))
		for _, l := range delL {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range addL {
			b.WriteString("+" + l + "\n")
		}
		shift += len(addL) - len(delL)
		if b.Len() > editMaxDiff {
			truncated = true
			break
		}
	}
	s := b.String()
	if truncated || len(s) > editMaxDiff {
		s = truncateRunes(s, editMaxDiff, "\n... diff truncated\n")
	}
	return s, adds, dels
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}
