package web_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/taskd/taskd"
)

// postToken posts a sign-in form with token to path and returns the status,
// the Retry-After header and the page.
func (s *server) postToken(c *http.Client, path, token string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "POST", s.base+path, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Retry-After"), html.UnescapeString(string(b))
}

// TestSignInIsThrottled: wrong tokens at either sign-in count against the
// browser's address with the API's; past the limit both doors and the API
// answer 429, a right token too, until the window ends.
func TestSignInIsThrottled(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{HTTP: taskd.HTTPConfig{AuthFailures: 3}})
	_, editorToken := s.editor("throttled", "news")
	c := browserClient(t)
	for i, door := range []string{"/signin", "/ops/signin", "/signin"} {
		if status, _, _ := s.postToken(c, door, "wrong-token-"+strconv.Itoa(i)); status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d at %s: %d, want 401", i+1, door, status)
		}
	}
	status, after, page := s.postToken(c, "/ops/signin", "wrong-token-3")
	secs, err := strconv.Atoi(after)
	if status != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 60 ||
		!strings.Contains(page, "Too many wrong tokens from your address. Try again in "+after+" seconds.") {
		t.Fatalf("the fourth wrong token: %d, Retry-After %q, page:\n%s", status, after, page)
	}
	// Blocked: the right tokens are refused too, at both doors and the API.
	if status, after, _ := s.postToken(c, "/signin", editorToken); status != http.StatusTooManyRequests || after == "" {
		t.Errorf("the editor's token while blocked: %d, Retry-After %q; want 429", status, after)
	}
	if status, _, _ := s.postToken(c, "/ops/signin", adminToken); status != http.StatusTooManyRequests {
		t.Errorf("the admin token while blocked: %d, want 429", status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("GET /v1/stats while blocked: %d, Retry-After %q; want 429", res.StatusCode, res.Header.Get("Retry-After"))
	}
}
