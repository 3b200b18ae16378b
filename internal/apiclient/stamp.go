//go:build ignore

// stamp writes the SHA-256 of the OpenAPI document to openapi.yaml.sha256, so
// that TestGeneratedFromTheDocument can tell client.gen.go is stale. It is run
// by go generate, after oapi-codegen.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"log"
	"os"
)

func main() {
	doc, err := os.ReadFile("../../internal/api/openapi.yaml")
	if err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	if err := os.WriteFile("openapi.yaml.sha256", []byte(hex.EncodeToString(sum[:])+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
}
