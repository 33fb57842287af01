package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	exists, mode, err := fileState(abs, rel)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(abs, []byte(*in.Content), mode); err != nil {
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

// fileState reports whether abs exists as a regular file and the mode to
// write it with; a directory or special file is an error.
func fileState(abs, rel string) (bool, fs.FileMode, error) {
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, 0o644, nil
	case err != nil:
		return false, 0, err
	case fi.IsDir():
		return false, 0, fmt.Errorf("%s is a directory", rel)
	case !fi.Mode().IsRegular():
		return false, 0, fmt.Errorf("%s is not a regular file", rel)
	}
	return true, fi.Mode().Perm(), nil
}
