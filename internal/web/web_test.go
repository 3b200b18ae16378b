package web_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/web"
)

// csrfOf returns the CSRF token the workspace page carries.
func csrfOf(t *testing.T, s *server, c *http.Client) string {
	t.Helper()
	res, err := c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(string(b), marker)
	if res.StatusCode != http.StatusOK || i < 0 {
		t.Fatalf("GET /: status %d, no CSRF token in the page: %.300s", res.StatusCode, b)
	}
	rest := string(b[i+len(marker):])
	return rest[:strings.IndexByte(rest, '"')]
}

func do(t *testing.T, c *http.Client, method, url, csrf, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if csrf != "" {
		req.Header.Set(web.CSRFHeader, csrf)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestHeadersAndSignIn checks the security headers, that a wrong token is
// refused, that the session cookie has its attributes, and that sign out
// ends the session.
func TestHeadersAndSignIn(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("ada", "news")
	c := browserClient(t)

	res, err := c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for name, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
		"Content-Type":            "text/html",
	} {
		if got := res.Header.Get(name); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", name, got, want)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q: want frame-ancestors 'none' and no unsafe-inline", csp)
	}

	// The static files: served with their type, never a listing.
	for path, want := range map[string]int{"/static/app.js": http.StatusOK, "/static/app.css": http.StatusOK, "/static/": http.StatusNotFound} {
		res, err := c.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, nosniff %q; want %d", path, res.StatusCode, res.Header.Get("X-Content-Type-Options"), want)
		}
		if want == http.StatusOK && !strings.Contains(res.Header.Get("Content-Type"), map[string]string{"/static/app.js": "javascript", "/static/app.css": "text/css"}[path]) {
			t.Errorf("GET %s: Content-Type %q", path, res.Header.Get("Content-Type"))
		}
	}

	if res := s.signIn(c, "not-a-token"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: status %d, want 401", res.StatusCode)
	}
	if res := s.signIn(c, adminToken); res.StatusCode != http.StatusForbidden {
		t.Fatalf("admin token: status %d, want 403", res.StatusCode)
	}
	res = s.signIn(c, token)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: status %d, want 303", res.StatusCode)
	}
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == web.CookieName {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP", cookie)
	}
	if strings.Contains(cookie.Value, token) {
		t.Fatal("the cookie carries the token")
	}
	// Signing in again ends the session the browser had.
	first := cookie.Value
	res = s.signIn(c, token)
	for _, ck := range res.Cookies() {
		if ck.Name == web.CookieName {
			cookie = ck
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie.Value == first {
		t.Fatalf("second sign in: %d, cookie unchanged %v", res.StatusCode, cookie.Value == first)
	}
	replay := browserClient(t)
	replay.Jar.SetCookies(mustURL(t, s.base), []*http.Cookie{{Name: web.CookieName, Value: first, Path: "/"}})
	if st, _ := do(t, replay, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("the first session after signing in again: %d, want 401", st)
	}
	if res, err := c.Get(s.base + "/signin"); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET /signin: %v %v, want a redirect", res, err)
	} else {
		res.Body.Close()
	}
	csrf := csrfOf(t, s, c)

	if st, body := do(t, c, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusOK || !strings.Contains(body, `"name":"ada"`) {
		t.Fatalf("GET /app/v1/me: %d %s", st, body)
	}

	// Sign out without the CSRF token is refused; with it, the session ends.
	if st, _ := do(t, c, "POST", s.base+"/signout", "", ""); st != http.StatusForbidden {
		t.Fatalf("sign out without CSRF: %d, want 403", st)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.base+"/signout", strings.NewReader("csrf="+csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d, want 303", res.StatusCode)
	}
	// The old cookie, replayed, names no session.
	old := browserClient(t)
	u := res.Request.URL
	old.Jar.SetCookies(u, []*http.Cookie{{Name: web.CookieName, Value: cookie.Value, Path: "/"}})
	if st, _ := do(t, old, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("after sign out: %d, want 401", st)
	}
}

// TestCSRF checks that the pages' state-changing calls need the session's
// CSRF token, that a cross-site sign-in is refused, and that the browser's
// own Authorization header cannot stand in for the session.
func TestCSRF(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("bo", "news")
	s.addTask("news", 1, "a task", map[string]any{"text": "hello"})
	c := browserClient(t)
	if res := s.signIn(c, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	csrf := csrfOf(t, s, c)
	for _, bad := range []string{"", "wrong", csrf[:len(csrf)-1]} {
		if st, body := do(t, c, "POST", s.base+"/app/v1/assignments/next", bad, `{}`); st != http.StatusForbidden || !strings.Contains(body, `"csrf"`) {
			t.Fatalf("next with CSRF %q: %d %s, want 403 csrf", bad, st, body)
		}
	}
	// Nothing was claimed by the refused calls.
	if st, body := do(t, c, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusOK || !strings.Contains(body, `"assignment":null`) {
		t.Fatalf("me after refused calls: %d %s", st, body)
	}
	if st, body := do(t, c, "POST", s.base+"/app/v1/assignments/next", csrf, `{}`); st != http.StatusOK || !strings.Contains(body, `"a task"`) {
		t.Fatalf("next with CSRF: %d %s", st, body)
	}
	// A route the pages do not offer is not reachable under /app.
	if st, _ := do(t, c, "POST", s.base+"/app/v1/assignments/1/other", csrf, `{}`); st != http.StatusNotFound {
		t.Fatalf("unknown op: %d, want 404", st)
	}

	// A cross-site form cannot sign anyone in.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.base+"/signin", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	res, err := browserClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("cross-site sign in: %d, cookies %v; want 403 and none", res.StatusCode, res.Cookies())
	}

	// Without a session, a bearer token is not taken under /app.
	req, _ = http.NewRequestWithContext(t.Context(), "GET", s.base+"/app/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bearer under /app: %d, want 401", res.StatusCode)
	}
}

// TestSessionExpires checks that a session ends after the idle time, and
// that a new token for the editor ends its sessions at once.
func TestSessionExpires(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.HTTP.SessionIdle = time.Minute
	s := startServer(t, cfg)
	id, token := s.editor("cy", "news")
	c := browserClient(t)
	if res := s.signIn(c, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	// The session's key lives for the idle time, no longer.
	rdb := testenv.Redis(t)
	keys, err := rdb.Keys(t.Context(), s.prefix+"web:session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys %v, %v: want one", keys, err)
	}
	ttl, err := rdb.TTL(t.Context(), keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("session TTL %v, %v: want (0, 1m]", ttl, err)
	}
	// Expiry is Redis's: end it as the idle time would.
	if err := rdb.PExpire(t.Context(), keys[0], time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "session key expired", func() bool {
		n, err := rdb.Exists(t.Context(), keys[0]).Result()
		return err == nil && n == 0
	})
	if st, _ := do(t, c, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("me after the session expired: %d, want 401", st)
	}

	// A new token for the editor ends the sessions its old one opened.
	if res := s.signIn(c, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in again: %d", res.StatusCode)
	}
	if st, _ := do(t, c, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusOK {
		t.Fatalf("me: %d", st)
	}
	s.admin("POST", "/v1/editors/"+itoa(id)+"/token", nil, http.StatusOK, nil)
	if st, _ := do(t, c, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("me after a new token: %d, want 401", st)
	}
}

// TestOwnClaimOnly checks that one editor's session never sees or touches
// another editor's claim.
func TestOwnClaimOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, tokenA := s.editor("a", "news")
	_, tokenB := s.editor("b", "news")
	idA := s.addTask("news", 9, "for whoever asks first", map[string]any{"text": "1"})
	s.addTask("news", 1, "the other one", map[string]any{"text": "2"})
	a, b := browserClient(t), browserClient(t)
	for _, c := range []struct {
		c     *http.Client
		token string
	}{{a, tokenA}, {b, tokenB}} {
		if res := s.signIn(c.c, c.token); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", res.StatusCode)
		}
	}
	csrfA, csrfB := csrfOf(t, s, a), csrfOf(t, s, b)
	if st, body := do(t, a, "POST", s.base+"/app/v1/assignments/next", csrfA, `{}`); st != http.StatusOK || !strings.Contains(body, "for whoever asks first") {
		t.Fatalf("a's next: %d %s", st, body)
	}
	if st, body := do(t, b, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusOK || !strings.Contains(body, `"assignment":null`) {
		t.Fatalf("b sees a claim: %d %s", st, body)
	}
	if st, body := do(t, b, "POST", s.base+"/app/v1/assignments/next", csrfB, `{}`); st != http.StatusOK || !strings.Contains(body, "the other one") {
		t.Fatalf("b's next: %d %s", st, body)
	}
	// b cannot act on a's claim, even with a's CSRF token.
	for _, csrf := range []string{csrfB, csrfA} {
		st, _ := do(t, b, "POST", s.base+"/app/v1/assignments/"+itoa(idA)+"/submit", csrf, `{"fence":1,"result":{}}`)
		if st != http.StatusForbidden {
			t.Fatalf("b submits a's claim with CSRF %q: %d, want 403", csrf[:4], st)
		}
	}
	if st, body := do(t, a, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusOK || !strings.Contains(body, "for whoever asks first") {
		t.Fatalf("a lost its claim: %d %s", st, body)
	}
}

// TestSessionAcrossReplicas checks that a session started on one process
// works on another over the same stores, and that signing out on the second
// ends it on the first.
func TestSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	db := storetest.NewDB(t)
	one := startServer(t, cfg, taskd.WithDB(db))
	two := startServer(t, cfg, taskd.WithDB(db))
	_, token := one.editor("rep", "news")
	c := browserClient(t)
	if res := one.signIn(c, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in on one: %d", res.StatusCode)
	}
	var cookie *http.Cookie
	for _, ck := range c.Jar.Cookies(mustURL(t, one.base)) {
		if ck.Name == web.CookieName {
			cookie = ck
		}
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	// The same cookie, sent to the other process (another host:port, so a
	// jar of its own).
	c2 := browserClient(t)
	c2.Jar.SetCookies(mustURL(t, two.base), []*http.Cookie{{Name: web.CookieName, Value: cookie.Value, Path: "/"}})
	if st, body := do(t, c2, "GET", two.base+"/app/v1/me", "", ""); st != http.StatusOK || !strings.Contains(body, `"name":"rep"`) {
		t.Fatalf("me on two: %d %s", st, body)
	}
	csrf := csrfOf(t, two, c2)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", two.base+"/signout", strings.NewReader("csrf="+csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := c2.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out on two: %d", res.StatusCode)
	}
	if st, _ := do(t, c, "GET", one.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("me on one after signing out on two: %d, want 401", st)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
