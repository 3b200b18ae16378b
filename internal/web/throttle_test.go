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
	return s.postTokenVia(c, path, token, "")
}

// postTokenVia is postToken through a proxy that names xff as the browser
// (X-Forwarded-For), when it is not empty.
func (s *server) postTokenVia(c *http.Client, path, token, xff string) (int, string, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "POST", s.base+path, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
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
// answer its wrong tokens 429 until the window ends, and its right tokens
// sign in.
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
	// Blocked: wrong tokens are refused at both doors and the API.
	if status, after, _ := s.postToken(c, "/signin", "wrong-token-4"); status != http.StatusTooManyRequests || after == "" {
		t.Errorf("a wrong token at / while blocked: %d, Retry-After %q; want 429", status, after)
	}
	if status, _, _ := s.postToken(c, "/ops/signin", "wrong-token-5"); status != http.StatusTooManyRequests {
		t.Errorf("a wrong token at /ops while blocked: %d, want 429", status)
	}
	if status, after := s.getStats("wrong-token-6", ""); status != http.StatusTooManyRequests || after == "" {
		t.Errorf("GET /v1/stats with a wrong token while blocked: %d, Retry-After %q; want 429", status, after)
	}
	// Right tokens are served: both doors sign in (303), the API answers.
	if status, _, _ := s.postToken(c, "/signin", editorToken); status != http.StatusSeeOther {
		t.Errorf("the editor's token while blocked: %d, want 303", status)
	}
	if status, _, _ := s.postToken(c, "/ops/signin", adminToken); status != http.StatusSeeOther {
		t.Errorf("the admin token while blocked: %d, want 303", status)
	}
	if status, _ := s.getStats(adminToken, ""); status != http.StatusOK {
		t.Errorf("GET /v1/stats with the admin token while blocked: %d, want 200", status)
	}
}

// TestSignInBehindAProxy: with the loopback as a trusted proxy, wrong tokens
// at a sign-in count against the browser the proxy names in
// X-Forwarded-For, not against the proxy: another browser behind it is not
// blocked.
func TestSignInBehindAProxy(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{HTTP: taskd.HTTPConfig{AuthFailures: 2, TrustedProxies: []string{"127.0.0.0/8"}}})
	c := browserClient(t)
	for i := range 2 {
		if status, _, _ := s.postTokenVia(c, "/signin", "wrong-token-"+strconv.Itoa(i), "203.0.113.5"); status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, status)
		}
	}
	if status, _, _ := s.postTokenVia(c, "/signin", "wrong-token-2", "203.0.113.5"); status != http.StatusTooManyRequests {
		t.Errorf("the third wrong token from 203.0.113.5: %d, want 429", status)
	}
	if status, _, _ := s.postTokenVia(c, "/signin", "wrong-token-3", "203.0.113.6"); status != http.StatusUnauthorized {
		t.Errorf("a wrong token from 203.0.113.6 behind the same proxy: %d, want 401", status)
	}
	// The API's own requests count against the same client.
	if status, _ := s.getStats("wrong-token-4", "203.0.113.5"); status != http.StatusTooManyRequests {
		t.Errorf("GET /v1/stats with a wrong token from 203.0.113.5: %d, want 429", status)
	}
}

// getStats sends GET /v1/stats with token, through a proxy naming xff when
// it is not empty, and returns the status and Retry-After.
func (s *server) getStats(token, xff string) (int, string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "GET", s.base+"/v1/stats", nil)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After")
}
