package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// Write creates or overwrites a file.
type Write struct{}

type writeInput struct {
	FilePath string  `json:"filePath"`
	Content  *string `json:"content"`
}

func (Write) Name() string { return "write" }

func (Write) Description() string {
	return `Writes a file in the session directory, creating missing parent directories.

Usage:
- filePath may be absolute (inside the session directory) or relative to it.
- An existing file is overwritten with content; read it first and prefer the edit tool for changes to existing files.`
}

func (Write) Parameters() json.RawMessage {
	return schema([]string{"content", "filePath"},
		str("content", "The content to write to the file"),
		str("filePath", "The path to the file to write"),
	)
}

func (t Write) input(c Call) (writeInput, string, string, error) {
	var in writeInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, "", "", err
	}
	if in.FilePath == "" {
		return in, "", "", errors.New("filePath is required")
	}
	if in.Content == nil {
		return in, "", "", errors.New("content is required")
	}
	abs, rel, err := resolve(c.Dir, in.FilePath)
	return in, abs, rel, err
}

func (t Write) Permission(c Call) (string, []string, error) {
	_, _, rel, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "edit", []string{rel}, nil
}

func (t Write) Run(ctx context.Context, c Call) (Result, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	return t.run(ctx, c, in, abs, rel)
}

// run writes the file resolve named (abs, rel) through a root on c.Dir.
func (t Write) run(ctx context.Context, c Call, in writeInput, abs, rel string) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	exists, mode, err := fileState(s, in.FilePath, rel)
	if err != nil {
		return Result{}, err
	}
	if err := s.writeFile(in.FilePath, rel, []byte(*in.Content), mode, true); err != nil {
		return Result{}, err
	}
	return Result{
		Title:  rel,
		Output: "Wrote file successfully.",
		Metadata: map[string]any{
			"filepath": abs,
			"exists":   exists,
		},
	}, nil
}

// fileState reports whether rel exists as a regular file and the mode to
// write it with; a directory or special file is an error. p is the path as
// given, for an escape's error.
func fileState(s *scope, p, rel string) (bool, fs.FileMode, error) {
	fi, err := s.root.Stat(s.name(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, 0o644, nil
	case err != nil:
		return false, 0, s.fail(p, err)
	case fi.IsDir():
		return false, 0, fmt.Errorf("%s is a directory", rel)
	case !fi.Mode().IsRegular():
		return false, 0, fmt.Errorf("%s is not a regular file", rel)
	}
	return true, fi.Mode().Perm(), nil
}

// writeFile writes data to rel through the root (creating it with mode, or
// truncating it), first creating its missing parent directories (0755) if
// mkdir is set. p is the path as given, for an escape's error.
func (s *scope) writeFile(p, rel string, data []byte, mode fs.FileMode, mkdir bool) error {
	name := s.name(rel)
	if dir := filepath.Dir(name); mkdir && dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return s.fail(p, err)
		}
	}
	return s.fail(p, s.root.WriteFile(name, data, mode))
}

// AskDetails is what the permission ask of a write carries, as OpenCode's:
// the file and the diff from its text now (none for a new file) to the
// content, and "*" to approve always.
func (t Write) AskDetails(c Call) (map[string]any, []string, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return nil, nil, err
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	exists, _, err := fileState(s, in.FilePath, rel)
	if err != nil {
		return nil, nil, err
	}
	before := ""
	if exists {
		b, err := s.root.ReadFile(s.name(rel))
		if err != nil {
			return nil, nil, s.fail(in.FilePath, err)
		}
		before = string(b)
	}
	diff, _ := twoFilesPatch(abs, before, *in.Content)
	return map[string]any{"filepath": abs, "diff": diff}, []string{"*"}, nil
}
