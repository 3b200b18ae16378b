package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed openapi.yaml
var openapiYAML []byte

// OpenAPI returns the OpenAPI 3 document of the API, as JSON: every route
// New registers, with its parameters, request bodies, answers and their
// schemas. GET /v1/openapi.json serves the same bytes.
func OpenAPI() []byte {
	b, err := openapiJSON()
	if err != nil {
		// The document is embedded and tested; it cannot fail at run time.
		panic(err)
	}
	return b
}

var openapiJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		return nil, fmt.Errorf("api: parse openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.yaml as JSON: %w", err)
	}
	return b, nil
})

// openapi serves the OpenAPI document.
func (a *api) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(OpenAPI())
	return nil
}
