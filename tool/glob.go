package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

const globLimit = 100

// Glob finds files by name pattern.
type Glob struct{}

type globInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (Glob) Name() string { return "glob" }

func (Glob) Description() string {
	return fmt.Sprintf(`Fast file pattern matching.

Usage:
- Supports glob patterns like "**/*.js" or "src/**/*.{ts,tsx}"; "**" matches any number of directories. A pattern without "/" matches file names at any depth.
- path is the directory to search in (defaults to the session directory); the pattern is relative to it.
- Returns the absolute paths of matching files, most recently modified first, at most %d.`, globLimit)
}

func (Glob) Parameters() json.RawMessage {
	return schema([]string{"pattern"},
		str("pattern", "The glob pattern to match files against"),
		str("path", "The directory to search in. Defaults to the session directory."),
	)
}

func (t Glob) input(c Call) (globInput, string, string, error) {
	var in globInput
	abs, rel, err := searchInput(t.Name(), c, &in, &in.Pattern, &in.Path)
	return in, abs, rel, err
}

// searchInput decodes the input of a search tool (glob, grep) into in,
// requires its pattern, and resolves its optional path inside the session
// directory.
func searchInput(tool string, c Call, in any, pattern, path *string) (abs, rel string, err error) {
	if err := decode(tool, c.Input, in); err != nil {
		return "", "", err
	}
	if *pattern == "" {
		return "", "", errors.New("pattern is required")
	}
	return resolve(c.Dir, *path)
}

func (t Glob) Permission(c Call) (string, []string, error) {
	in, _, _, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "glob", []string{in.Pattern}, nil
}

func (t Glob) Run(ctx context.Context, c Call) (Result, error) {
	in, root, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	return t.run(ctx, c, in, root, rel)
}

// run searches the directory resolve named (abs, rel) through a root on
// c.Dir.
func (t Glob) run(ctx context.Context, c Call, in globInput, abs, rel string) (Result, error) {
	pattern := in.Pattern
	if filepath.IsAbs(pattern) {
		// An absolute pattern must point inside the search directory.
		r, err := filepath.Rel(abs, pattern)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			r2, err2 := filepath.Rel(filepath.Clean(c.Dir), pattern)
			if err2 != nil || r2 == ".." || strings.HasPrefix(r2, "../") {
				return Result{}, fmt.Errorf("%s: %w", pattern, ErrEscape)
			}
			r = r2
		}
		pattern = filepath.ToSlash(r)
	}
	m, err := compileGlob(pattern)
	if err != nil {
		return Result{}, err
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if fi, err := s.root.Stat(s.name(rel)); err != nil {
		return Result{}, s.fail(in.Path, err)
	} else if !fi.IsDir() {
		return Result{}, fmt.Errorf("%s is not a directory", rel)
	}

	type hit struct {
		rel   string
		mtime time.Time
	}
	var hits []hit
	err = walkFiles(ctx, s, c.Dir, rel, func(_, relRoot, relDir string, info fs.FileInfo) error {
		if m.match(relRoot) {
			hits = append(hits, hit{relDir, info.ModTime()})
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if !hits[i].mtime.Equal(hits[j].mtime) {
			return hits[i].mtime.After(hits[j].mtime)
		}
		return hits[i].rel < hits[j].rel
	})
	truncated := len(hits) > globLimit
	if truncated {
		hits = hits[:globLimit]
	}
	var b strings.Builder
	if len(hits) == 0 {
		b.WriteString("No files found")
	}
	for i, h := range hits {
		if i > 0 {
			b.WriteByte('\n')
		}
		// Absolute paths, as OpenCode's glob answers: the model can pass
		// them straight to read and edit.
		b.WriteString(filepath.Join(filepath.Clean(c.Dir), h.rel))
	}
	if truncated {
		b.WriteString("\n\n(Results are truncated. Consider using a more specific path or pattern.)")
	}
	return Result{
		Title:  rel,
		Output: b.String(),
		Metadata: map[string]any{
			"count":     len(hits),
			"truncated": truncated,
		},
	}, nil
}
