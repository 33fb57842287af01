package apitest_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/opencode-server/opencode-server/internal/testserver"
)

// TestCloudAnswers: the operations that need OpenCode's cloud or the
// internet answer exactly as opencode serve 1.18.33 answered without them
// (testdata/reference/cloud: status and body), and the middleware checks
// each answer against our document.
func TestCloudAnswers(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/reference/cloud/answers.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Method, Path string
		Body         *string
		Status       int
		Response     any
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL)
	for _, tc := range cases {
		body := ""
		if tc.Body != nil {
			body = *tc.Body
		}
		got := c.do(tc.Method, tc.Path, body, tc.Status)
		var v any
		if err := json.Unmarshal(got, &v); err != nil {
			t.Errorf("%s %s: %s", tc.Method, tc.Path, got)
			continue
		}
		if !reflect.DeepEqual(v, tc.Response) {
			t.Errorf("%s %s %s:\n got %s\nwant %v", tc.Method, tc.Path, body, got, tc.Response)
		}
	}
}
