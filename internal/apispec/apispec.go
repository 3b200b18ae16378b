// Package apispec holds taskd's HTTP API to its OpenAPI document in tests: it
// lists the operations the document describes, and checks a real answer
// against the document's schema for its route and status.
package apispec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Spec is a loaded and validated OpenAPI document.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
}

// Load parses an OpenAPI 3 document (JSON or YAML) and validates it.
func Load(data []byte) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("invalid openapi document: %w", err)
	}
	// Route by path alone, whatever host the server under test listens on.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi document: %w", err)
	}
	return &Spec{doc: doc, router: router}, nil
}

// Operations lists the document's operations as "METHOD /path" in the form
// of net/http patterns ("GET /v1/tasks/{id}"), sorted.
func (s *Spec) Operations() []string {
	var ops []string
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(ops)
	return ops
}

// ErrNoRoute is returned by CheckResponse for a request that matches no
// operation of the document.
var ErrNoRoute = fmt.Errorf("no operation in the document")

// CheckResponse checks an answer to req (status, header and body) against the
// document: the route must be documented, the status must be one of the
// operation's responses, and the body must match that response's schema. It
// returns ErrNoRoute, wrapped, when no operation matches req.
func (s *Spec) CheckResponse(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (%v)", req.Method, req.URL.Path, ErrNoRoute, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status,
		Header: header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, not as documented: %w\nbody: %.2000s", req.Method, req.URL.Path, status, err, body)
	}
	return nil
}
