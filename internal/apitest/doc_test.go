package apitest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.uber.org/goleak"

	"github.com/opencode-server/opencode-server/internal/apitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDocumentValid: api/openapi.yaml parses, resolves every $ref and is a
// valid OpenAPI 3.1 document.
func TestDocumentValid(t *testing.T) {
	doc, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q: want 3.1", doc.OpenAPI)
	}
}

// taggedOnV1 are the errors OpenCode 1.18.33 answers in the tagged shape
// {_tag, message, ...} on v1 routes too (the real server's answers).
var taggedOnV1 = map[string]bool{"#/components/schemas/SessionBusyError": true, "#/components/schemas/ProjectNotFoundError": true,
	"#/components/schemas/McpServerNotFoundError": true, "#/components/schemas/PtyNotFoundError": true,
	"#/components/schemas/PtyForbiddenError": true,
	// A permission or question request that is not pending (testdata/reference/edits).
	"#/components/schemas/PermissionNotFoundError": true, "#/components/schemas/QuestionNotFoundError": true,
	// The project copy routes' bad payloads (testdata/reference/workspace).
	"#/components/schemas/InvalidRequestError": true}

// otherShapes are the 4xx answers of v1 routes that OpenCode 1.18.33 gives
// in neither family (recorded in testdata/reference/cloud/), the AG-UI
// front door's own (AG-UI defines no error shape) and the OpenAI door's
// (OpenAI's).
var otherShapes = map[string]bool{"#/components/schemas/ConsoleSwitchRefused": true,
	"#/components/schemas/UpgradeFailed": true, "#/components/schemas/McpUnsupportedOAuthError": true,
	"#/components/schemas/SyncStealRefused": true, "#/components/schemas/AGUIError": true,
	"#/components/schemas/OpenAIError": true}

// TestEveryOperationDocumentsErrors: every operation documents 401 and 500,
// and each error response is in its route family's shape: {name, data} on
// v1 paths, {_tag, message} on /api paths.
func TestEveryOperationDocumentsErrors(t *testing.T) {
	doc, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		v2 := strings.HasPrefix(path, "/api/")
		for method, op := range item.Operations() {
			for _, code := range []string{"401", "500"} {
				if op.Responses.Value(code) == nil {
					t.Errorf("%s %s does not document %s", method, path, code)
				}
			}
			for code, resp := range op.Responses.Map() {
				if code < "400" {
					continue
				}
				mt := resp.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil {
					t.Errorf("%s %s %s: no application/json schema", method, path, code)
					continue
				}
				branches := openapi3.SchemaRefs{mt.Schema}
				if len(mt.Schema.Value.AnyOf) > 0 {
					branches = mt.Schema.Value.AnyOf
				}
				for _, b := range branches {
					props := b.Value.Properties
					if otherShapes[b.Ref] {
						continue
					}
					ok := props["name"] != nil && props["data"] != nil && props["_tag"] == nil
					if taggedOnV1[b.Ref] {
						ok = props["_tag"] != nil && props["message"] != nil
					}
					if v2 {
						ok = props["_tag"] != nil && props["message"] != nil && props["name"] == nil
					}
					if !ok {
						t.Errorf("%s %s %s: %s is not in the %s error family", method, path, code, b.Ref, map[bool]string{false: "v1", true: "v2"}[v2])
					}
				}
			}
		}
	}
}
