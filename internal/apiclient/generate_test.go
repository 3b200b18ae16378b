package apiclient_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// client.gen.go was generated from the OpenAPI document as it is now:
// `go generate` stamps the document's SHA-256 in openapi.yaml.sha256.
func TestGeneratedFromTheDocument(t *testing.T) {
	doc, err := os.ReadFile("../../internal/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := os.ReadFile("openapi.yaml.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	if got, want := strings.TrimSpace(string(stamp)), hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("client.gen.go was generated from another openapi.yaml (SHA-256 %s, the document's is %s): run `go generate` in internal/apiclient", got, want)
	}
}
