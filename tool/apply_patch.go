package tool

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

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
