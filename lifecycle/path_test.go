package lifecycle_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/opencode-server/opencode-server/identifier"
	"github.com/opencode-server/opencode-server/internal/testserver"
	"github.com/opencode-server/opencode-server/opencode"
)

// TestSessionPath: a session's path is its directory relative to its git
// work tree ("" at the root), as OpenCode's; outside git, relative to the
// file system's root.
func TestSessionPath(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	defer srv.Stop()
	root := t.TempDir()
	sub := filepath.Join(root, "pkg", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", root, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	outside := t.TempDir()
	for _, tt := range []struct{ dir, want string }{
		{root, ""},
		{sub, "pkg/sub"},
		{outside, outside[1:]},
	} {
		s, _, err := srv.Manager.CreateSession(context.Background(), opencode.SessionOptions{ID: identifier.NewSession(), Directory: tt.dir})
		if err != nil {
			t.Fatal(err)
		}
		if s.Path != tt.want {
			t.Errorf("%s: path %q, want %q", tt.dir, s.Path, tt.want)
		}
	}
}
