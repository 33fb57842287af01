// Package lockorder checks that locksordering.txt names every mutex of the
// code: a lock nobody wrote down is a lock whose nestings nobody checked.
package lockorder

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// lock is one sync.Mutex or sync.RWMutex of the code: Type.field for a
// struct field (Type.Mutex when embedded), name for a package variable,
// Func.name for a function's local one.
type lock struct {
	pkg, name, pos string
}

// TestEveryLockListed fails on a mutex of the non-test code that
// locksordering.txt does not name under its package: in its "Every lock"
// section, a line with the lock's name whose package header (the nearest
// unindented line above it) or the line itself names the package.
func TestEveryLockListed(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "locksordering.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, every, ok := strings.Cut(string(doc), "\nEvery lock\n")
	if !ok {
		t.Fatal(`locksordering.txt has no "Every lock" section`)
	}
	locks := findLocks(t, root)
	if len(locks) < 40 {
		t.Fatalf("found only %d locks: the scan is broken", len(locks))
	}
	for _, l := range locks {
		if !listed(every, l) {
			t.Errorf("%s: %s %s is not in locksordering.txt (say what it guards and what is taken under it)", l.pos, l.pkg, l.name)
		}
	}
}

// listed reports whether the section names l under its package.
func listed(every string, l lock) bool {
	word := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(l.name) + `($|[^\w])`)
	header := ""
	for _, line := range strings.Split(every, "\n") {
		if line != "" && line[0] != ' ' {
			header = line
		}
		if word.MatchString(line) && (mentions(header, l.pkg) || mentions(line, l.pkg)) {
			return true
		}
	}
	return false
}

// mentions reports whether s names the package pkg (its import path below
// the module, or its last element as a word).
func mentions(s, pkg string) bool {
	base := pkg[strings.LastIndex(pkg, "/")+1:]
	return regexp.MustCompile(`(^|[^\w])`+regexp.QuoteMeta(pkg)+`($|[^\w])`).MatchString(s) ||
		regexp.MustCompile(`(^|[^\w/])`+regexp.QuoteMeta(base)+`($|[^\w])`).MatchString(s)
}

func findLocks(t *testing.T, root string) []lock {
	var locks []lock
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "e2e") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		add := func(name string, at token.Pos) {
			locks = append(locks, lock{pkg: pkg, name: name, pos: fset.Position(at).String()})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						structLocks(s.Name.Name, s.Type, add)
					case *ast.ValueSpec:
						valueLocks("", s, add)
					}
				}
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					switch s := n.(type) {
					case *ast.TypeSpec:
						structLocks(s.Name.Name, s.Type, add)
					case *ast.ValueSpec:
						valueLocks(d.Name.Name+".", s, add)
					}
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return locks
}

// valueLocks adds the mutexes a var declares, their names after prefix.
func valueLocks(prefix string, s *ast.ValueSpec, add func(string, token.Pos)) {
	if isMutex(s.Type) {
		for _, n := range s.Names {
			add(prefix+n.Name, n.Pos())
		}
	}
}

// structLocks adds the mutex fields of a struct type named typ.
func structLocks(typ string, expr ast.Expr, add func(string, token.Pos)) {
	st, ok := expr.(*ast.StructType)
	if !ok {
		return
	}
	for _, f := range st.Fields.List {
		if !isMutex(f.Type) {
			continue
		}
		if len(f.Names) == 0 {
			sel := f.Type.(*ast.SelectorExpr)
			add(typ+"."+sel.Sel.Name, f.Pos())
		}
		for _, n := range f.Names {
			add(typ+"."+n.Name, n.Pos())
		}
	}
}

func isMutex(e ast.Expr) bool {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "sync" && (sel.Sel.Name == "Mutex" || sel.Sel.Name == "RWMutex")
}
