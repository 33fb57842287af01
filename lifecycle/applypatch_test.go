package lifecycle_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/config"
	"github.com/opencode-server/opencode-server/internal/stubmodel"
	"github.com/opencode-server/opencode-server/internal/testserver"
)

// modelConfig is stubConfig serving the stub under the model ID id.
func modelConfig(baseURL, id string) *config.File {
	return &config.File{Model: "stub/" + id, Provider: map[string]config.ProviderConfig{
		"stub": {NPM: "@ai-sdk/openai-compatible", Name: "Stub", Options: config.ProviderOptions{BaseURL: baseURL, APIKey: "k"},
			Models: map[string]config.ModelConfig{id: {Name: "Stub Model"}}},
	}}
}

// rawParts is every part of the session's messages, as JSON.
func rawParts(t *testing.T, c *client, sid string) []json.RawMessage {
	t.Helper()
	var msgs []struct{ Parts []json.RawMessage }
	c.must("GET", "/session/"+sid+"/message", nil, 200).json(t, &msgs)
	var out []json.RawMessage
	for _, m := range msgs {
		out = append(out, m.Parts...)
	}
	return out
}

// offered is the tool names a model request offered.
func offered(t *testing.T, req json.RawMessage) []string {
	t.Helper()
	var body struct {
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(req, &body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Function.Name)
	}
	return names
}

// TestToolTurnApplyPatch: a GPT model (gpt-5) is offered apply_patch
// instead of edit and write, as OpenCode offers them; its patch changes
// the files, the model reads OpenCode's answer, and the step is recorded
// and revertible like one that ran edit.
func TestToolTurnApplyPatch(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("one\nold\nthree\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "gone.txt"), []byte("bye\n"), 0o644))
	srv := testserver.Start(t, testserver.Options{Config: modelConfig(stub.URL(), "gpt-5-stub"), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()

	patch := "*** Begin Patch\n*** Update File: keep.txt\n@@ one\n-old\n+NEW\n*** Add File: sub/new.txt\n+hello\n" +
		"*** Delete File: gone.txt\n*** End Patch"
	args, _ := json.Marshal(map[string]string{"patchText": patch})
	first := newID()
	c.must("POST", "/session/"+sid+"/message", v1Body(first, "call:apply_patch "+string(args)+" then: patched", ""), 200)

	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			return "<missing>"
		}
		return string(b)
	}
	if read("keep.txt") != "one\nNEW\nthree\n" || read("sub/new.txt") != "hello\n" || read("gone.txt") != "<missing>" {
		t.Fatalf("the patch did not apply: keep=%q new=%q gone=%q", read("keep.txt"), read("sub/new.txt"), read("gone.txt"))
	}

	reqs := stub.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	names := offered(t, reqs[0])
	if !slices.Contains(names, "apply_patch") || slices.Contains(names, "edit") || slices.Contains(names, "write") {
		t.Errorf("gpt-5 was offered %v, want apply_patch and neither edit nor write", names)
	}
	// The model gets OpenCode's answer as the tool result.
	const want = "Success. Updated the following files:\nM keep.txt\nA sub/new.txt\nD gone.txt"
	var second struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	must(json.Unmarshal(reqs[1], &second))
	if n := len(second.Messages); n == 0 || second.Messages[n-1].Role != "tool" || second.Messages[n-1].Content != want {
		t.Errorf("tool result sent to the model = %+v, want %q", second.Messages[len(second.Messages)-1], want)
	}

	// The tool part, and the patch part of the step that changed files.
	var tool, patched bool
	for _, b := range rawParts(t, c, sid) {
		var part struct {
			Type, Tool string
			Files      []string
			State      struct {
				Status, Output, Title string
				Metadata              struct {
					Diff  string
					Files []struct {
						FilePath, RelativePath, Type string
						Additions, Deletions         int
					}
				}
			}
		}
		json.Unmarshal(b, &part)
		switch part.Type {
		case "tool":
			tool = true
			st := part.State
			if part.Tool != "apply_patch" || st.Status != "completed" || st.Output != want || st.Title != want {
				t.Errorf("tool part = %s", b)
			}
			if !strings.Contains(st.Metadata.Diff, "Index: ") || len(st.Metadata.Files) != 3 ||
				st.Metadata.Files[0].RelativePath != "keep.txt" || st.Metadata.Files[0].Type != "update" ||
				st.Metadata.Files[0].Additions != 1 || st.Metadata.Files[0].Deletions != 1 ||
				st.Metadata.Files[1].Type != "add" || st.Metadata.Files[2].Type != "delete" {
				t.Errorf("tool metadata = %+v", st.Metadata)
			}
		case "patch":
			patched = true
			slices.Sort(part.Files)
			if len(part.Files) != 3 || !strings.HasSuffix(part.Files[0], "gone.txt") || !strings.HasSuffix(part.Files[1], "keep.txt") ||
				!strings.HasSuffix(part.Files[2], filepath.Join("sub", "new.txt")) {
				t.Errorf("patch part files = %v", part.Files)
			}
		}
	}
	if !tool || !patched {
		t.Errorf("tool part %v, patch part %v", tool, patched)
	}

	// Revert puts the files back as they were before the message.
	c.must("POST", "/session/"+sid+"/revert", map[string]any{"messageID": first}, 200)
	if read("keep.txt") != "one\nold\nthree\n" || read("sub/new.txt") != "<missing>" || read("gone.txt") != "bye\n" {
		t.Errorf("after revert: keep=%q new=%q gone=%q", read("keep.txt"), read("sub/new.txt"), read("gone.txt"))
	}
	c.must("POST", "/session/"+sid+"/unrevert", nil, 200)
	if read("keep.txt") != "one\nNEW\nthree\n" || read("sub/new.txt") != "hello\n" || read("gone.txt") != "<missing>" {
		t.Errorf("after unrevert: keep=%q new=%q gone=%q", read("keep.txt"), read("sub/new.txt"), read("gone.txt"))
	}
}

// TestToolTurnApplyPatchFails: a hunk that does not apply is a tool error
// with OpenCode's text, and changes nothing.
func TestToolTurnApplyPatchFails(t *testing.T) {
	stub := stubmodel.NewServer(t, stubmodel.Directives)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{Config: modelConfig(stub.URL(), "gpt-5.1-codex"), Directory: dir})
	c := newClient(t, srv)
	sid := c.newSession()
	args, _ := json.Marshal(map[string]string{"patchText": "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: keep.txt\n@@\n-two\n+2\n*** End Patch"})
	c.must("POST", "/session/"+sid+"/message", v1Body("", "call:apply_patch "+string(args)+" then: tried", ""), 200)
	real, _ := filepath.EvalSymlinks(dir)
	want := "apply_patch verification failed: Error: Failed to find expected lines in " + filepath.Join(real, "keep.txt") + ":\ntwo"
	found := false
	for _, b := range rawParts(t, c, sid) {
		var part struct {
			Type  string
			State struct{ Status, Error string }
		}
		json.Unmarshal(b, &part)
		if part.Type == "tool" {
			found = true
			if part.State.Status != "error" || part.State.Error != want {
				t.Errorf("tool state = %+v, want the error %q", part.State, want)
			}
		}
	}
	if !found {
		t.Error("no tool part")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("a failing patch created new.txt")
	}
}

// TestToolTurnEditToolsByModel: OpenCode's rule for which edit tools a
// model is offered.
func TestToolTurnEditToolsByModel(t *testing.T) {
	for _, tc := range []struct {
		model string
		patch bool
	}{
		{"gpt-5", true},
		{"gpt-5.1-codex-mini", true},
		{"gpt-4o", false},
		{"gpt-4.1", false},
		{"gpt-oss-120b", false},
		{"stub-model", false},
	} {
		t.Run(tc.model, func(t *testing.T) {
			stub := stubmodel.NewServer(t, stubmodel.Directives)
			srv := testserver.Start(t, testserver.Options{Config: modelConfig(stub.URL(), tc.model)})
			c := newClient(t, srv)
			sid := c.newSession()
			c.must("POST", "/session/"+sid+"/message", v1Body("", "hello", ""), 200)
			reqs := stub.Requests()
			if len(reqs) == 0 {
				t.Fatal("no model call")
			}
			names := offered(t, reqs[0])
			hasPatch := slices.Contains(names, "apply_patch")
			hasEdit := slices.Contains(names, "edit") && slices.Contains(names, "write")
			if hasPatch != tc.patch || hasEdit == tc.patch || slices.Contains(names, "edit") != slices.Contains(names, "write") {
				t.Errorf("%s was offered %v", tc.model, names)
			}
		})
	}
}
