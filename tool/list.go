package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
	return t.run(ctx, c, in, abs, rel)
}

// run lists the directory resolve named (abs, rel) through a root on c.Dir.
func (t List) run(ctx context.Context, c Call, in listInput, abs, rel string) (Result, error) {
	s, err := openScope(c.Dir)
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	fi, err := s.root.Stat(s.name(rel))
	if err != nil {
		return Result{}, s.fail(in.Path, err)
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
		ents, err := fs.ReadDir(s.fs(), path.Join(rel, d))
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
			if e.Type()&fs.ModeSymlink != 0 && s.dirLink(c.Dir, path.Join(rel, r)) {
				// Shown, never followed.
				children[d] = append(children[d], listEntry{e.Name() + "@", false})
				continue
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

// dirLink reports whether the symlink at rel (relative to the session
// directory dir, opened as s) is shown as a link list does not follow: one
// to a directory inside, or one leading outside (whose target is not looked
// at). A link to a file inside, or a dangling one, is shown as a file.
func (s *scope) dirLink(dir, rel string) bool {
	_, t, err := resolve(dir, filepath.Join(s.real, s.name(rel)))
	if err != nil {
		return errors.Is(err, ErrEscape)
	}
	fi, err := s.root.Stat(s.name(t))
	if err != nil {
		return rootEscaped(err)
	}
	return fi.IsDir()
}
