package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/opencode"
)

func TestTodoWrite(t *testing.T) {
	tw := TodoWrite{}
	in := `{"todos":[{"content":"Write tests","status":"in_progress","priority":"high"},{"content":"Ship","status":"completed","priority":"low"}]}`
	res, err := tw.Run(context.Background(), Call{Input: json.RawMessage(in)})
	if err != nil {
		t.Fatal(err)
	}
	want := "[\n  {\n    \"content\": \"Write tests\",\n    \"status\": \"in_progress\",\n    \"priority\": \"high\"\n  },\n  {\n    \"content\": \"Ship\",\n    \"status\": \"completed\",\n    \"priority\": \"low\"\n  }\n]"
	if res.Title != "1 todos" || res.Output != want {
		t.Errorf("title %q output\n%s", res.Title, res.Output)
	}
	if todos, _ := res.Metadata["todos"].([]opencode.Todo); len(todos) != 2 {
		t.Errorf("metadata %v", res.Metadata)
	}
	perm, pats, err := tw.Permission(Call{Input: json.RawMessage(in)})
	if err != nil || perm != "todowrite" || len(pats) != 1 || pats[0] != "*" {
		t.Errorf("permission %s %v %v", perm, pats, err)
	}
	for _, bad := range []string{`{}`, `{"todos":[{"content":"x"}]}`, `{"todos":"x"}`} {
		if _, err := tw.Run(context.Background(), Call{Input: json.RawMessage(bad)}); err == nil || !strings.Contains(err.Error(), "todowrite") {
			t.Errorf("input %s: err %v", bad, err)
		}
	}
	if res, err := tw.Run(context.Background(), Call{Input: json.RawMessage(`{"todos":[]}`)}); err != nil || res.Output != "[]" || res.Title != "0 todos" {
		t.Errorf("empty list: %+v %v", res, err)
	}
}
