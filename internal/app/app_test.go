package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/catalog"
	"github.com/opencode-server/opencode-server/store/memory"
	"github.com/opencode-server/opencode-server/vcs"
)

// A project registry that cannot be read stops the server from starting,
// with the file named, instead of starting over empty.
func TestNewCorruptProjectRegistry(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, vcs.ProjectsFile)
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(context.Background(), Options{Store: memory.New(), Directory: t.TempDir(), DataDir: data,
		Models: &catalog.Source{NoFetch: true}, Auth: &catalog.AuthStore{Path: filepath.Join(t.TempDir(), "auth.json")},
		Getenv: func(string) string { return "" }})
	if err == nil {
		a.Close()
		t.Fatal("started over a corrupt project registry")
	}
	if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("error %q does not say which file is corrupt", err)
	}
}
