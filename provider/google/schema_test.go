package google

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSchemaReference checks the schema rewrite against outputs recorded
// from the reference JavaScript: OpenCode 1.18.33's ProviderTransform.schema
// Gemini branch (copied from the bundle) and @ai-sdk/google 3.0.73's
// convertJSONSchemaToOpenAPISchema, over the built-in tools' schemas and
// edge cases (out null: no parameters sent).
func TestSchemaReference(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		In       json.RawMessage `json:"in"`
		Sanitize bool            `json:"sanitize"`
		Out      *string         `json:"out"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, c := range cases {
		got, ok := toolParameters(c.In, c.Sanitize)
		switch {
		case c.Out == nil && ok:
			t.Errorf("case %d (sanitize %v) %s: got %s, want no parameters", i, c.Sanitize, c.In, got)
		case c.Out != nil && (!ok || string(got) != *c.Out):
			t.Errorf("case %d (sanitize %v) %s:\n got %s\nwant %s", i, c.Sanitize, c.In, got, *c.Out)
		}
	}
}

func TestSchemaOddities(t *testing.T) {
	cases := []struct{ in, want string }{
		// A repeated key keeps its first place and its last value.
		{`{"type":"object","properties":{"a":{"type":"string"},"a":{"type":"number"}},"description":"d"}`,
			`{"description":"d","type":"object","properties":{"a":{"type":"number"}}}`},
		// The enum rule sees only a type that came before the enum.
		{`{"type":"object","properties":{"a":{"enum":[1,2],"type":"integer"}}}`,
			`{"type":"object","properties":{"a":{"type":"integer","enum":["1","2"]}}}`},
		{`{"type":"object","properties":{"a":{"type":"integer","enum":[1,2]}}}`,
			`{"type":"object","properties":{"a":{"type":"string","enum":["1","2"]}}}`},
	}
	for _, c := range cases {
		if got, ok := toolParameters([]byte(c.in), true); !ok || string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{``, `not json`, `{"a":1} x`, `null`} {
		if got, ok := toolParameters([]byte(bad), true); ok {
			t.Errorf("%q: parameters %s", bad, got)
		}
	}
}
