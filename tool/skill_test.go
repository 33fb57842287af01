package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkillTool(t *testing.T) {
	proj := t.TempDir()
	dir := filepath.Join(proj, ".opencode", "skill", "review")
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: review\ndescription: Review code.\n---\n\nRead every line.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "scripts", "lint.sh"), []byte("echo lint\n"), 0o644)
	sk := Skill{Home: t.TempDir()}
	res, err := sk.Run(context.Background(), Call{Dir: proj, Input: json.RawMessage(`{"name":"review"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `<skill_content name="review">` + "\n# Skill: review\n\nRead every line.\n\nBase directory for this skill: " + dir + "\n"
	if res.Title != "Loaded skill: review" || !strings.HasPrefix(res.Output, want) ||
		!strings.Contains(res.Output, "<skill_files>\n<file>"+filepath.Join(dir, "scripts", "lint.sh")+"</file>\n</skill_files>\n</skill_content>") {
		t.Errorf("title %q output:\n%s", res.Title, res.Output)
	}
	perm, pats, err := sk.Permission(Call{Dir: proj, Input: json.RawMessage(`{"name":"review"}`)})
	if err != nil || perm != "skill" || len(pats) != 1 || pats[0] != "review" {
		t.Errorf("permission %s %v %v", perm, pats, err)
	}
	if _, err := sk.Run(context.Background(), Call{Dir: proj, Input: json.RawMessage(`{"name":"nope"}`)}); err == nil ||
		!strings.Contains(err.Error(), "available skills: review") {
		t.Errorf("unknown skill: %v", err)
	}
}
