package tool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
)

const (
	grepLimit      = 100
	grepMaxLineLen = 2000
	grepScanLine   = 1 << 20 // bytes of a line searched
	grepMaxOutput  = 50 * 1024
)

// Grep searches file contents with a regular expression.
type Grep struct{}

type grepInput struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Include string `json:"include"`
}

func (Grep) Name() string { return "grep" }

func (Grep) Description() string {
	return fmt.Sprintf(`Fast content search with regular expressions (Go RE2 syntax, e.g. "log.*Error", "func\s+\w+").

Usage:
- path is the directory (or file) to search, defaulting to the session directory.
- include filters files by glob, e.g. "*.js" or "*.{ts,tsx}".
- Binary files and .git are skipped.
- Output lines are "path:line: text", paths relative to the session directory, at most %d matches.`, grepLimit)
}

func (Grep) Parameters() json.RawMessage {
	return schema([]string{"pattern"},
		str("pattern", "The regex pattern to search for in file contents"),
		str("path", "The directory to search in. Defaults to the session directory."),
		str("include", `File pattern to include in the search (e.g. "*.js", "*.{ts,tsx}")`),
	)
}

func (t Grep) input(c Call) (grepInput, string, string, error) {
	var in grepInput
	abs, rel, err := searchInput(t.Name(), c, &in, &in.Pattern, &in.Path)
	return in, abs, rel, err
}

func (t Grep) Permission(c Call) (string, []string, error) {
	in, _, _, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "grep", []string{in.Pattern}, nil
}

func (t Grep) Run(ctx context.Context, c Call) (Result, error) {
	in, _, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	return t.run(ctx, c, in, rel)
}

// run searches the directory or file resolve named (rel) through a root on
// c.Dir.
func (t Grep) run(ctx context.Context, c Call, in grepInput, rel string) (Result, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return Result{}, fmt.Errorf("invalid regular expression: %w", err)
	}
	var inc *matcher
	if in.Include != "" {
		if inc, err = compileGlob(in.Include); err != nil {
			return Result{}, err
		}
	}
	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	if _, err := s.root.Stat(s.name(rel)); err != nil {
		return Result{}, s.fail(in.Path, err)
	}

	var b strings.Builder
	matches, truncated := 0, false
	errStop := errors.New("stop")
	err = walkFiles(ctx, s, c.Dir, rel, func(name, relRoot, relDir string, _ fs.FileInfo) error {
		if inc != nil && !inc.match(relRoot) {
			return nil
		}
		f, err := s.root.Open(s.name(name))
		if err != nil {
			return nil
		}
		defer f.Close()
		if bin, err := isBinaryFile(name, f); err != nil || bin {
			return nil
		}
		br := bufio.NewReaderSize(f, 64*1024)
		for n := 1; ; n++ {
			if n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			line, eof, err := readLine(br, grepScanLine)
			if err != nil || line == nil {
				return nil
			}
			if re.Match(line) {
				if matches >= grepLimit || b.Len() > grepMaxOutput {
					truncated = true
					return errStop
				}
				text := strings.TrimSuffix(string(line), "\r")
				text = truncateRunes(text, grepMaxLineLen, "...")
				fmt.Fprintf(&b, "%s:%d: %s\n", relDir, n, text)
				matches++
			}
			if eof {
				return nil
			}
		}
	})
	if err != nil && !errors.Is(err, errStop) {
		return Result{}, err
	}
	out := b.String()
	if matches == 0 {
		out = "No files found"
	} else {
		out = fmt.Sprintf("Found %d matches\n%s", matches, out)
		if truncated {
			out += "\n(Results are truncated. Consider using a more specific path or pattern.)"
		}
	}
	return Result{
		Title:  in.Pattern,
		Output: strings.TrimRight(out, "\n"),
		Metadata: map[string]any{
			"matches":   matches,
			"truncated": truncated,
			"path":      rel,
		},
	}, nil
}
