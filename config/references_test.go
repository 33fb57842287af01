package config

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestReferences: references are read in the order written, a later file
// replaces a name in place, a file's deprecated "reference" counts only
// when it has no "references", and each entry resolves (or is left out)
// as OpenCode 1.18.33 resolves it (testdata/reference/integration has the
// real server's answers for the same entries).
func TestReferences(t *testing.T) {
	global, err := Parse([]byte(`{"references":{"docs":"./docs","gh":"anomalyco/opencode","z":"./z"},"reference":{"old":"./old"}}`), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	project, err := Parse([]byte(`{"reference":{"docs":"./pdocs","old":"./old"}}`), "/proj")
	if err != nil {
		t.Fatal(err)
	}
	f := &File{}
	f.merge(global)
	f.merge(project)
	var got []string
	for _, r := range f.References {
		got = append(got, r.Name+"@"+r.Dir)
	}
	if want := []string{"docs@/proj", "gh@/cfg", "z@/cfg", "old@/proj"}; !slices.Equal(got, want) {
		t.Errorf("merged references %v, want %v", got, want)
	}

	cases := []struct {
		value, path, typ string // path "": left out
	}{
		{`"./docs"`, "/cfg/docs", "local"},
		{`"../up/x"`, "/up/x", "local"},
		{`"~/notes"`, "/home/u/notes", "local"},
		{`"/abs//dir"`, "/abs//dir", "local"}, // absolute: as written
		{`{"path":"p","description":"d","hidden":true}`, "/cfg/p", "local"},
		{`"anomalyco/opencode"`, "/repos/github.com/anomalyco/opencode", "git"},
		{`"github:owner/repo"`, "/repos/github.com/owner/repo", "git"},
		{`"git+https://github.com/o/r.git#main"`, "/repos/github.com/o/r", "git"},
		{`{"repository":"https://gitlab.com/group/sub/proj.git","branch":"dev/x"}`, "/repos/gitlab.com/group/sub/proj@dev%2Fx", "git"},
		{`"git@example.com:team/repo.git"`, "/repos/example.com/team/repo", "git"},
		{`"https://git.example.com:8443/a/b"`, "/repos/git.example.com/8443/a/b", "git"},
		{`"https://Example.com:443/a/b/"`, "/repos/example.com/a/b", "git"},
		{`"codeberg.org/x/y"`, "/repos/codeberg.org/x/y", "git"},
		{`{"repository":"a/b","branch":"-x"}`, "", ""},
		{`{"repository":"a/b","branch":"a..b"}`, "", ""},
		{`{"repository":"a/b","branch":"a b"}`, "", ""},
		{`"file:///tmp/repo"`, "", ""},
		{`"justone"`, "", ""},
		{`"a/b/c"`, "", ""},
		{`"owner/.."`, "", ""},
		{`{"description":"neither"}`, "", ""},
		{`5`, "", ""},
	}
	for _, c := range cases {
		info, ok := Reference{Name: "r", Value: json.RawMessage(c.value), Dir: "/cfg"}.Resolve("/home/u", "/repos")
		switch {
		case c.path == "" && ok:
			t.Errorf("%s: listed as %+v, want it left out", c.value, info)
		case c.path != "" && !ok:
			t.Errorf("%s: left out, want %s", c.value, c.path)
		case ok && (info.Path != c.path || info.Source.Type != c.typ):
			t.Errorf("%s: %s %s, want %s %s", c.value, info.Source.Type, info.Path, c.typ, c.path)
		}
	}
	for _, name := range []string{"", "a b", "a/b", "a,b", "a`b", "a\tb"} {
		if _, ok := (Reference{Name: name, Value: json.RawMessage(`"./x"`), Dir: "/cfg"}).Resolve("/h", "/r"); ok {
			t.Errorf("name %q: listed, want it left out", name)
		}
	}
	if _, err := Parse([]byte(`{"references":["./x"]}`), "/cfg"); err == nil {
		t.Error("references as an array: no error")
	}
}
