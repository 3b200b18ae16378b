package api

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/taskd/taskd/internal/apispec"
)

// Every route the API registers is in the OpenAPI document, and every
// operation of the document is a route.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	spec, err := apispec.Load(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, r := range (&api{}).routeTable(http.NotFoundHandler()) {
		routes = append(routes, r.pattern)
	}
	slices.Sort(routes)
	ops := spec.Operations()
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %q is not in openapi.yaml", r)
		}
	}
	for _, op := range ops {
		if !slices.Contains(routes, op) {
			t.Errorf("openapi.yaml describes %q, which is not a route", op)
		}
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
}

// The document is served as it is embedded, and it describes its own route.
func TestOpenAPIServed(t *testing.T) {
	a := &api{}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/v1/openapi.json", nil)
	if err := a.openapi(w, r); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	spec, err := apispec.Load(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.CheckResponse(r, w.Code, w.Header(), w.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
}
