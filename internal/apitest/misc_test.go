package apitest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestToolsSkillsLog: the tool listings name what a model is offered
// (apply_patch for a GPT model, edit and write for others), /skill and
// /api/skill list the project's skills with their content, POST /log takes
// OpenCode's levels only; every answer is validated against the document.
func TestToolsSkillsLog(t *testing.T) {
	dir := t.TempDir()
	skill := filepath.Join(dir, ".opencode", "skills", "demo")
	if err := os.MkdirAll(skill, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(skill, "SKILL.md"), []byte("---\nname: demo\ndescription: A demo skill\n---\n\nDo the demo.\n"), 0o644)
	srv := testserver.Start(t, testserver.Options{Directory: dir})
	c := newClient(t, srv.URL)

	var ids []string
	json.Unmarshal(c.do("GET", "/experimental/tool/ids", "", 200), &ids)
	for _, want := range []string{"bash", "read", "edit", "write", "apply_patch", "task", "skill"} {
		if !slices.Contains(ids, want) {
			t.Errorf("tool ids %v lack %s", ids, want)
		}
	}
	names := func(model string) []string {
		var tools []struct{ ID string }
		json.Unmarshal(c.do("GET", "/experimental/tool?provider=openai&model="+model, "", 200), &tools)
		var out []string
		for _, tl := range tools {
			out = append(out, tl.ID)
		}
		return out
	}
	if gpt := names("gpt-5"); !slices.Contains(gpt, "apply_patch") || slices.Contains(gpt, "edit") {
		t.Errorf("gpt-5 is offered %v, want apply_patch and no edit", gpt)
	}
	if claude := names("claude-sonnet-4-5"); slices.Contains(claude, "apply_patch") || !slices.Contains(claude, "edit") {
		t.Errorf("claude is offered %v, want edit and no apply_patch", claude)
	}
	c.do("GET", "/experimental/tool?provider=openai", "", 400)

	var skills []struct{ Name, Description, Location, Content string }
	json.Unmarshal(c.do("GET", "/skill?directory="+dir, "", 200), &skills)
	if len(skills) != 1 || skills[0].Name != "demo" || skills[0].Description != "A demo skill" ||
		!strings.Contains(skills[0].Content, "Do the demo.") || !strings.HasSuffix(skills[0].Location, "SKILL.md") {
		t.Errorf("/skill = %+v", skills)
	}
	var v2 struct {
		Data []struct{ Name string } `json:"data"`
	}
	json.Unmarshal(c.do("GET", "/api/skill?location[directory]="+dir, "", 200), &v2)
	if len(v2.Data) != 1 || v2.Data[0].Name != "demo" {
		t.Errorf("/api/skill = %+v", v2)
	}

	c.do("POST", "/log", `{"service":"ide","level":"info","message":"hello","extra":{"a":1}}`, 200)
	c.do("POST", "/log", `{"service":"ide","level":"loud","message":"hello"}`, 400)
	c.do("POST", "/log", `{"service":"ide","level":"info"}`, 400)
}
