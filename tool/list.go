package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

const listLimit = 100

// listIgnore are directory names list never descends into.
var listIgnore = map[string]bool{
	".git": true, "node_modules": true, "__pycache__": true, ".venv": true, "venv": true,
	".idea": true, ".vscode": true, ".cache": true, ".zig-cache": true,
}

// List shows a directory tree.
type List struct{}

type listInput struct {
	Path   string   `json:"path"`
	Ignore []string `json:"ignore"`
}

func (List) Name() string { return "list" }

func (List) Description() string {
	return fmt.Sprintf(`Lists files and directories as a tree, breadth first, up to %d entries.

Usage:
- path is the directory to list, absolute (inside the session directory) or relative to it; it defaults to the session directory.
- ignore is a list of glob patterns to leave out. .git, node_modules and similar directories are always skipped.
- Prefer glob and grep when you know what you are looking for.`, listLimit)
}

func (List) Parameters() json.RawMessage {
	return schema(nil,
		str("path", "The directory to list (defaults to the session directory)"),
		strs("ignore", "List of glob patterns to ignore"),
	)
}

func (t List) input(c Call) (listInput, string, string, error) {
	var in listInput
	if err := decode(t.Name(), c.Input, &in); err != nil {
		return in, "", "", err
	}
	abs, rel, err := resolve(c.Dir, in.Path)
	return in, abs, rel, err
}

func (t List) Permission(c Call) (string, []string, error) {
	_, _, rel, err := t.input(c)
	if err != nil {
		return "", nil, err
	}
	return "list", []string{rel}, nil
}

type listEntry struct {
	name string
	dir  bool
}

func (t List) Run(ctx context.Context, c Call) (Result, error) {
	in, abs, rel, err := t.input(c)
	if err != nil {
		return Result{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return Result{}, err
	}
	if !fi.IsDir() {
		return Result{}, fmt.Errorf("%s is not a directory", rel)
	}
	var ignores []*matcher
	for _, p := range in.Ignore {
		m, err := compileGlob(p)
		if err != nil {
			return Result{}, err
		}
		ignores = append(ignores, m)
	}
	ignored := func(r string) bool {
		for _, m := range ignores {
			if m.match(r) {
				return true
			}
		}
		return false
	}

	children := map[string][]listEntry{} // by slash path relative to abs ("" = root)
	queue := []string{""}
	count, truncated := 0, false
walk:
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		d := queue[0]
		queue = queue[1:]
		ents, err := os.ReadDir(filepath.Join(abs, filepath.FromSlash(d)))
		if err != nil {
			continue // unreadable directory: skip
		}
		for _, e := range ents {
			r := path.Join(d, e.Name())
			isDir := e.IsDir()
			if isDir && listIgnore[e.Name()] {
				continue
			}
			if ignored(r) {
				continue
			}
			if count >= listLimit {
				truncated = true
				break walk
			}
			count++
			if e.Type()&fs.ModeSymlink != 0 {
				// Shown, never followed.
				if st, err := os.Stat(filepath.Join(abs, filepath.FromSlash(r))); err == nil && st.IsDir() {
					children[d] = append(children[d], listEntry{e.Name() + "@", false})
					continue
				}
			}
			children[d] = append(children[d], listEntry{e.Name(), isDir})
			if isDir {
				queue = append(queue, r)
			}
		}
	}

	var b strings.Builder
	b.WriteString(abs + "/\n")
	var render func(d string, depth int)
	render = func(d string, depth int) {
		ents := children[d]
		sort.SliceStable(ents, func(i, j int) bool {
			if ents[i].dir != ents[j].dir {
				return ents[i].dir
			}
			return ents[i].name < ents[j].name
		})
		indent := strings.Repeat("  ", depth)
		for _, e := range ents {
			if e.dir {
				b.WriteString(indent + e.name + "/\n")
				render(path.Join(d, e.name), depth+1)
			} else {
				b.WriteString(indent + e.name + "\n")
			}
		}
	}
	render("", 1)
	if truncated {
		fmt.Fprintf(&b, "\n(Results are truncated at %d entries. Use a more specific path or the glob tool.)\n", listLimit)
	}
	return Result{
		Title:  rel,
		Output: b.String(),
		Metadata: map[string]any{
			"count":     count,
			"truncated": truncated,
		},
	}, nil
}
