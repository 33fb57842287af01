package apitest_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/opencode-server/opencode-server/internal/apitest"
	"github.com/opencode-server/opencode-server/routes"
)

// TestEveryRouteDocumented: the router and the document list the same
// operations, path parameter names included.
func TestEveryRouteDocumented(t *testing.T) {
	doc, err := apitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := routes.New(routes.Config{Directory: t.TempDir()})
	cr, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("routes.New returned %T, not a chi.Routes", h)
	}
	mounted := map[string]bool{}
	err = chi.Walk(cr, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/") // r.Route("/x", ...) + r.Get("/") serves /x
		}
		mounted[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for _, op := range sortedKeys(mounted) {
		if !documented[op] {
			t.Errorf("%s is mounted but not in api/openapi.yaml", op)
		}
	}
	for _, op := range sortedKeys(documented) {
		if !mounted[op] {
			t.Errorf("%s is in api/openapi.yaml but not mounted", op)
		}
	}
	t.Logf("%d operations mounted, %d documented", len(mounted), len(documented))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
