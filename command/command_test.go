package command

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/config"
)

func TestExpand(t *testing.T) {
	tests := []struct{ template, args, want string }{
		{"Say hello to $ARGUMENTS", "Bob", "Say hello to Bob"},
		{"Say hello to $ARGUMENTS", "", "Say hello to"},
		{"mv $1 $2", "a b c", "mv a b c"},
		{"first $1, all: $ARGUMENTS", "x y", "first x y, all: x y"}, // the last numbered placeholder takes the rest
		{"$2 then $1", "a", "then a"},
		{"no placeholders", "extra words", "no placeholders\n\nextra words"},
	}
	for _, tt := range tests {
		if got := Expand(tt.template, tt.args); got != tt.want {
			t.Errorf("Expand(%q, %q) = %q, want %q", tt.template, tt.args, got, tt.want)
		}
	}
}

func TestList(t *testing.T) {
	dir, global := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".opencode", "command", "git"), 0o755)
	os.WriteFile(filepath.Join(dir, ".opencode", "command", "hello.md"), []byte("---\ndescription: Say hello\nagent: plan\n---\nSay hello to $ARGUMENTS\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".opencode", "command", "git", "commit.md"), []byte("Commit with message $1"), 0o644)
	os.MkdirAll(filepath.Join(global, "command"), 0o755)
	os.WriteFile(filepath.Join(global, "command", "hello.md"), []byte("global hello"), 0o644)
	cfg := map[string]config.CommandConfig{"deploy": {Template: "Deploy $1 to $2", Description: "ship it"}}
	var names []string
	byName := map[string]Command{}
	for _, c := range List(dir, cfg, global) {
		names = append(names, c.Name)
		byName[c.Name] = c
	}
	if want := []string{"init", "review", "deploy", "git/commit", "hello"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %q, want %q", names, want)
	}
	if h := byName["hello"]; h.Template != "Say hello to $ARGUMENTS" || h.Description != "Say hello" || h.Agent != "plan" ||
		!reflect.DeepEqual(h.Hints, []string{"$ARGUMENTS"}) {
		t.Errorf("hello = %+v (the project file wins over the global one)", h)
	}
	if d := byName["deploy"]; !reflect.DeepEqual(d.Hints, []string{"$1", "$2"}) {
		t.Errorf("deploy hints = %q", d.Hints)
	}
	if !byName["review"].Subtask || byName["init"].Source != "command" {
		t.Errorf("built-ins = %+v %+v", byName["init"], byName["review"])
	}
	if _, ok := Find(dir, cfg, global, "nope"); ok {
		t.Error("found a command that does not exist")
	}
}
