package apitest_test

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/opencode-server/opencode-server/internal/apitest"
)

// notBuilt is the reason README gives an operation this server does not
// answer yet.
const notBuilt = "not built yet"

// TestWholeOpenCodeDocument walks every operation of OpenCode 1.18.33's
// document: each is in our api/openapi.yaml (mounted: TestEveryRouteDocumented;
// every test response is validated against it: the middleware) or on
// README's list with its reason. An operation on the list for a reason other
// than "not built yet" (it needs OpenCode's cloud or the internet) is served
// too, as `opencode serve` answers when that is unavailable, so it is in our
// document as well; one still listed as not built must not be.
func TestWholeOpenCodeDocument(t *testing.T) {
	raw, err := os.ReadFile("testdata/opencode-1.18.33-openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var oc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &oc); err != nil {
		t.Fatal(err)
	}
	doc, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ours[opKey(method, path)] = true
		}
	}
	listed, err := readmeOperations("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for path, item := range oc.Paths {
		for method := range item {
			switch method {
			case "get", "post", "put", "patch", "delete":
				all = append(all, opKey(method, path))
			}
		}
	}
	sort.Strings(all)
	inOC := map[string]bool{}
	var real, notYet, elsewhere int
	for _, op := range all {
		inOC[op] = true
		reason, isListed := listed[op]
		switch {
		case isListed && reason == "":
			t.Errorf("%s: README lists it without a reason", op)
		case isListed && strings.HasPrefix(reason, notBuilt):
			notYet++
			if ours[op] {
				t.Errorf("%s is served now: take it off README's list", op)
			}
		case isListed:
			elsewhere++
			if !ours[op] {
				t.Errorf("%s (%s) must still answer as opencode serve does without it, and be in api/openapi.yaml", op, reason)
			}
		case ours[op]:
			real++
		default:
			t.Errorf("%s is neither answered (api/openapi.yaml) nor on README's list of operations", op)
		}
	}
	for op := range listed {
		if !inOC[op] {
			t.Errorf("README lists %s, which OpenCode 1.18.33's document does not have", op)
		}
	}
	t.Logf("%d operations: %d answered for real, %d answered as without OpenCode's cloud, %d not built yet",
		len(all), real, elsewhere, notYet)
}

// opKey names an operation with its path parameters unnamed: the two
// documents may name them differently.
func opKey(method, path string) string {
	return strings.ToUpper(method) + " " + paramRE.ReplaceAllString(path, "{}")
}

var (
	paramRE = regexp.MustCompile(`\{[^}]+\}`)
	// rowRE is a row of README's operations table: | `METHOD /path` | reason |
	rowRE = regexp.MustCompile("^\\|\\s*`(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`\\s*\\|\\s*(.*?)\\s*\\|\\s*$")
)

// readmeOperations reads the table between README's operations markers.
func readmeOperations(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "<!-- operations:begin -->"):
			in = true
		case strings.Contains(line, "<!-- operations:end -->"):
			in = false
		case in:
			if m := rowRE.FindStringSubmatch(line); m != nil {
				out[opKey(m[1], m[2])] = m[3]
			}
		}
	}
	return out, sc.Err()
}
