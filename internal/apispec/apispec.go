// Package apispec holds taskd's HTTP API to its OpenAPI document in tests: it
// lists the operations the document describes, and checks a real answer
// against the document's schema for its route and status, read strictly as
// JSON Schema 2020-12 (the document is OpenAPI 3.1).
package apispec

import (
	"bytes"
	"context"
	"encoding/json"
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

// Load parses an OpenAPI 3.1 document (JSON or YAML) and validates it. It
// refuses any other version: only a 3.1 document's schemas are read as JSON
// Schema 2020-12, by a validator that gives null no special leave (kin-openapi
// reads a 3.0 document's nullable leniently, even where the OpenAPI 3.0.3
// specification says it has no effect, as beside an allOf).
func Load(data []byte) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load openapi document: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		return nil, fmt.Errorf("load openapi document: version %q, want 3.1.x", doc.OpenAPI)
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

// NDJSON is the media type of newline-delimited JSON. The schema of an
// NDJSON answer describes one line: CheckResponse checks each line against it.
const NDJSON = "application/x-ndjson"

// CheckResponse checks an answer to req (status, header and body) against the
// document: the route must be documented, the status must be one of the
// operation's responses, and the body must match that response's schema (for
// an NDJSON answer, every line must). It returns ErrNoRoute, wrapped, when no
// operation matches req.
func (s *Spec) CheckResponse(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (%v)", req.Method, req.URL.Path, ErrNoRoute, err)
	}
	lines := mime(header) == NDJSON
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
			ExcludeResponseBody:   lines, // checked line by line below
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, not as documented: %w\nbody: %.2000s", req.Method, req.URL.Path, status, err, body)
	}
	if lines {
		if err := checkLines(route.Operation, status, body); err != nil {
			return fmt.Errorf("%s %s answered %d, not as documented: %w", req.Method, req.URL.Path, status, err)
		}
	}
	return nil
}

// checkLines checks each line of an NDJSON body against the schema of the
// operation's answer with status.
func checkLines(op *openapi3.Operation, status int, body []byte) error {
	res := op.Responses.Status(status)
	if res == nil || res.Value == nil || res.Value.Content.Get(NDJSON) == nil || res.Value.Content.Get(NDJSON).Schema == nil {
		return fmt.Errorf("no %s schema for status %d", NDJSON, status)
	}
	schema := res.Value.Content.Get(NDJSON).Schema.Value
	if len(body) > 0 && body[len(body)-1] != '\n' {
		return fmt.Errorf("the last line has no newline: %.200s", body[bytes.LastIndexByte(body, '\n')+1:])
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("line %d is not JSON: %w: %.200s", i+1, err, line)
		}
		if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(), openapi3.VisitAsResponse()); err != nil {
			return fmt.Errorf("line %d does not match its schema: %w\nline: %.2000s", i+1, err, line)
		}
	}
	return nil
}

// CheckRequest checks a request's parameters and body against the
// document, as a client generated from it would have to write them. It
// returns ErrNoRoute, wrapped, when no operation matches req.
func (s *Spec) CheckRequest(req *http.Request, body []byte) error {
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (%v)", req.Method, req.URL.Path, ErrNoRoute, err)
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s: the request is not as documented: %w\nbody: %.2000s", req.Method, req.URL.Path, err, body)
	}
	return nil
}

// mime is the media type of header's Content-Type, without parameters.
func mime(header http.Header) string {
	mt, _, _ := strings.Cut(header.Get("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}
