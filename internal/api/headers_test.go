package api_test

import (
	"fmt"
	"net/http"
	"testing"
)

// TestAnswersAreNotCached: every JSON answer, the new-token answers and the
// errors included, carries nosniff and no-store.
func TestAnswersAreNotCached(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// wantJSON checks the headers of each answer it reads.
	ed := b.editor(t, "headers", "news")
	var tok editorInfo
	wantJSON(t, b.do(t, "POST", fmt.Sprintf("/v1/editors/%d/token", ed.ID), adminToken, ""), http.StatusOK, &tok)
	b.secret(tok.Token)
	wantJSON(t, b.do(t, "GET", "/v1/me", tok.Token, ""), http.StatusOK, nil)
	wantError(t, b.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/stats", "", ""), http.StatusUnauthorized, "unauthorized")
	wantError(t, b.do(t, "GET", "/v1/nowhere", adminToken, ""), http.StatusNotFound, "not_found")
	wantError(t, b.do(t, "DELETE", "/v1/stats", adminToken, ""), http.StatusMethodNotAllowed, "method_not_allowed")
	wantError(t, b.do(t, "POST", "/v1/tasks", adminToken, "{"), http.StatusBadRequest, "bad_request")
	res := b.do(t, "GET", "/v1/results", adminToken, "")
	wantStatus(t, res, http.StatusOK)
	wantNoStore(t, res)
	// The OpenAPI document is public and may be cached; it is not sniffed
	// either.
	res = b.do(t, "GET", "/v1/openapi.json", "", "")
	if res.header.Get("X-Content-Type-Options") != "nosniff" || res.header.Get("Cache-Control") != "public, max-age=300" {
		t.Errorf("GET /v1/openapi.json: headers %v", res.header)
	}
}
