// Package apitest checks the server against its contract, api/openapi.yaml:
// Middleware validates every response a test server sends with kin-openapi,
// so any test that drives the server also tests the document.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/opencode-server/opencode-server/api"
)

// Load parses and resolves api/openapi.yaml.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	return doc, nil
}

// A raw diff (GET /vcs/diff/raw) is text, as OpenCode sends it.
func init() { openapi3filter.RegisterBodyDecoder("text/x-diff", openapi3filter.PlainBodyDecoder) }

// validator is the parsed document and its router, built once per test
// binary: every test server shares them.
type validator struct {
	doc    *openapi3.T
	router routers.Router
	// builtin is doc marked as OpenAPI 3.0, so that kin-openapi validates
	// with its built-in validator. On a 3.1 document kin-openapi compiles
	// the response schema with a JSON Schema 2020-12 validator on every
	// call (100+ ms for a history page), then for any schema without
	// 2020-only keywords falls back to the built-in validator anyway; the
	// built-in one already knows the 3.1 forms the document uses (type
	// null, type arrays). Only operations whose response schemas use
	// 2020-only keywords (needs2020) are validated as 3.1.
	builtin   *openapi3.T
	needs2020 map[*openapi3.Operation]bool
}

var shared = sync.OnceValues(func() (*validator, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml is invalid: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	builtin := *doc
	builtin.OpenAPI = "3.0.3"
	return &validator{doc: doc, router: router, builtin: &builtin, needs2020: needs2020(doc)}, nil
})

// needs2020 lists the operations with a response schema that uses a JSON
// Schema 2020-12 keyword kin-openapi's built-in validator does not apply.
func needs2020(doc *openapi3.T) map[*openapi3.Operation]bool {
	out := map[*openapi3.Operation]bool{}
	found := errors.New("found")
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for _, mt := range resp.Value.Content {
					if mt.Schema == nil {
						continue
					}
					err := mt.Schema.WalkSubtree(func(_ string, ref *openapi3.SchemaRef) error {
						if s := ref.Value; s != nil && (s.Const != nil || len(s.PrefixItems) > 0 || s.Contains != nil ||
							len(s.PatternProperties) > 0 || len(s.DependentSchemas) > 0 || s.PropertyNames != nil ||
							s.If != nil || len(s.DependentRequired) > 0 || s.ContentSchema != nil ||
							s.UnevaluatedProperties.Has != nil || s.UnevaluatedProperties.Schema != nil ||
							s.UnevaluatedItems.Has != nil || s.UnevaluatedItems.Schema != nil) {
							return found
						}
						return nil
					})
					if errors.Is(err, found) {
						out[op] = true
					}
				}
			}
		}
	}
	return out
}

// Middleware validates every response of next against api/openapi.yaml and
// reports each mismatch with t.Errorf: an undocumented route or status, a
// body or header that does not match the documented schema. Requests are not
// validated (tests send invalid ones on purpose). An unmatched path may only
// answer 404 (405 for a known path with another method, 401 without auth, 403
// to a Host that is not the server's)
// with the error shape of its family, or 204 to a CORS preflight. For text/event-stream responses only
// the status and Content-Type are checked; the stream passes through
// unbuffered.
func Middleware(t testing.TB, next http.Handler) http.Handler {
	t.Helper()
	v, err := shared()
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if err := v.check(r, rec); err != nil {
			t.Errorf("apitest: %s %s answered %d: %v", r.Method, r.URL.RequestURI(), rec.status, err)
		}
	})
}

// check validates one recorded response.
func (v *validator) check(r *http.Request, rec *recorder) error {
	if !rec.wroteHeader {
		if r.Context().Err() != nil {
			return nil // the client went away before an answer; nobody reads one
		}
		rec.status = http.StatusOK // what net/http sends for a handler that writes nothing
		rec.header = rec.Header().Clone()
	}
	if r.Method == http.MethodHead {
		return nil
	}
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		return v.checkUnmatched(r, rec, err)
	}
	if !v.needs2020[route.Operation] {
		rt := *route
		rt.Spec = v.builtin
		route = &rt
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  rec.status,
		Header:  rec.header,
		Body:    io.NopCloser(bytes.NewReader(rec.body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.Options.WithCustomSchemaErrorFunc(schemaError)
	if rec.stream {
		in.Options.ExcludeResponseBody = true
		if err := streamContentType(route, rec); err != nil {
			return err
		}
	}
	if err := openapi3filter.ValidateResponse(r.Context(), in); err != nil {
		return fmt.Errorf("%s\nbody: %s", clip([]byte(err.Error())), clip(rec.body.Bytes()))
	}
	return nil
}

// streamContentType checks that a streamed response's status documents its
// Content-Type (ValidateResponse skips that check with the body excluded).
func streamContentType(route *routers.Route, rec *recorder) error {
	resp := route.Operation.Responses.Status(rec.status)
	if resp == nil || resp.Value == nil {
		return nil // ValidateResponse reports the undocumented status
	}
	if resp.Value.Content.Get(rec.header.Get("Content-Type")) == nil {
		return fmt.Errorf("Content-Type %q is not documented for status %d", rec.header.Get("Content-Type"), rec.status)
	}
	return nil
}

// checkUnmatched allows a request the document has no operation for only to
// fail with the generic error of its family.
func (v *validator) checkUnmatched(r *http.Request, rec *recorder, routeErr error) error {
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" &&
		rec.status == http.StatusNoContent && rec.header.Get("Access-Control-Allow-Origin") != "" {
		return nil // a CORS preflight, answered on every path
	}
	fam := "V1"
	switch {
	case strings.HasPrefix(r.URL.Path, "/api/"):
		fam = "V2"
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		fam = "OpenAI" // the OpenAI door refuses in its own shape
	}
	var name string
	switch {
	case rec.status == http.StatusUnauthorized:
		name = fam + "Unauthorized"
	case rec.status == http.StatusForbidden:
		name = fam + "Forbidden" // a Host that is not this server's, refused on every path
	case rec.status == http.StatusNotFound && errors.Is(routeErr, routers.ErrPathNotFound):
		name = fam + "UnknownRoute"
	case rec.status == http.StatusMethodNotAllowed && errors.Is(routeErr, routers.ErrMethodNotAllowed):
		name = fam + "MethodNotAllowed"
	default:
		return fmt.Errorf("undocumented route (%v)\nbody: %s", routeErr, clip(rec.body.Bytes()))
	}
	resp := v.doc.Components.Responses[name]
	if resp == nil || resp.Value == nil {
		return fmt.Errorf("components.responses.%s is missing", name)
	}
	mt := resp.Value.Content.Get("application/json")
	if ct, _, _ := mime.ParseMediaType(rec.header.Get("Content-Type")); ct != "application/json" || mt == nil {
		return fmt.Errorf("unmatched route: Content-Type %q, want application/json", rec.header.Get("Content-Type"))
	}
	body, err := decodeJSON(rec.body.Bytes())
	if err != nil {
		return fmt.Errorf("unmatched route: %v\nbody: %s", err, clip(rec.body.Bytes()))
	}
	if err := mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.MultiErrors(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaError)); err != nil {
		return fmt.Errorf("unmatched route: body does not match components.responses.%s: %w\nbody: %s", name, err, clip(rec.body.Bytes()))
	}
	return nil
}

// schemaError is one line per schema error, without the schema and value
// dumps (the body is printed once).
func schemaError(err *openapi3.SchemaError) string {
	where := "at /" + strings.Join(err.JSONPointer(), "/") + ": "
	if err.Origin != nil {
		return where + err.Origin.Error()
	}
	if cause := errors.Unwrap(err); cause != nil {
		return cause.Error() // the JSON Schema 2020-12 validator's message names the path
	}
	if err.Reason == "" {
		return where + "doesn't match schema " + err.SchemaField
	}
	return where + err.Reason
}

func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
