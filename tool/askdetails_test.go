package tool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestAskDetails: an edit's and a write's permission ask carry OpenCode's
// metadata, the file and the jsdiff patch of what the call would do (read,
// not written), and "*" to approve always; a call that cannot be made
// fails before the ask.
func TestAskDetails(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(file, []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	call := func(in any) Call { b, _ := json.Marshal(in); return Call{Dir: dir, Input: b} }
	for _, tt := range []struct {
		name string
		d    AskDetailer
		in   any
		diff string
		err  bool
	}{
		{"edit", Edit{}, map[string]any{"filePath": file, "oldString": "two", "newString": "three"},
			"Index: " + file + "\n===================================================================\n--- " + file + "\n+++ " + file +
				"\n@@ -1,2 +1,2 @@\n one\n-two\n+three\n", false},
		{"write over", Write{}, map[string]any{"filePath": file, "content": "one\n"},
			"Index: " + file + "\n===================================================================\n--- " + file + "\n+++ " + file +
				"\n@@ -1,2 +1,1 @@\n one\n-two\n", false},
		{"write new", Write{}, map[string]any{"filePath": filepath.Join(dir, "b.txt"), "content": "x\n"},
			"Index: " + filepath.Join(dir, "b.txt") + "\n===================================================================\n--- " + filepath.Join(dir, "b.txt") +
				"\n+++ " + filepath.Join(dir, "b.txt") + "\n@@ -0,0 +1,1 @@\n+x\n", false},
		{"edit not found", Edit{}, map[string]any{"filePath": file, "oldString": "nine", "newString": "ten"}, "", true},
		{"edit outside", Edit{}, map[string]any{"filePath": "/etc/passwd", "oldString": "a", "newString": "b"}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			md, always, err := tt.d.AskDetails(call(tt.in))
			if tt.err {
				if err == nil {
					t.Fatalf("no error, metadata %v", md)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if md["diff"] != tt.diff || md["filepath"] == "" || !slices.Equal(always, []string{"*"}) {
				t.Errorf("metadata %q always %v, want diff %q", md, always, tt.diff)
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "one\ntwo\n" {
		t.Errorf("the file was written: %q", b)
	}
}
