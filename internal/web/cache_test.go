package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd"
)

// TestNothingPersonalIsStored: the sign-ins' and sign-outs' 303s (which set
// or clear a session cookie), the redirects of /ops/, /signin and /signout,
// and static 404s are answered Cache-Control: no-store; a static file is
// cached for long.
func TestNothingPersonalIsStored(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("ada", "news")
	c := browserClient(t)
	want := func(what string, res *http.Response, status int, cache string) {
		t.Helper()
		if res.StatusCode != status || res.Header.Get("Cache-Control") != cache {
			t.Errorf("%s: %d, Cache-Control %q; want %d, %q", what, res.StatusCode, res.Header.Get("Cache-Control"), status, cache)
		}
	}
	get := func(path string) *http.Response {
		t.Helper()
		res, err := c.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	post := func(path, form string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.base+path, strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.base)
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}

	want("sign in", s.signIn(c, token), http.StatusSeeOther, "no-store")
	want("sign out", post("/signout", "csrf="+csrfOf(t, s, c)), http.StatusSeeOther, "no-store")
	want("sign out without a session", post("/signout", ""), http.StatusSeeOther, "no-store")
	want("ops sign in", post("/ops/signin", "token="+adminToken), http.StatusSeeOther, "no-store")
	want("GET /ops/", get("/ops/"), http.StatusSeeOther, "no-store")
	want("GET /signin", get("/signin"), http.StatusSeeOther, "no-store")
	want("GET /ops/signout", get("/ops/signout"), http.StatusSeeOther, "no-store")
	want("a static file", get("/static/app.js"), http.StatusOK, "public, max-age=604800, immutable")
	want("a static file that is not there", get("/static/nothing-here.js"), http.StatusNotFound, "no-store")
	want("a static directory", get("/static/"), http.StatusNotFound, "no-store")
	want("a static path outside the files", get("/static/../../etc/passwd"), http.StatusNotFound, "no-store")
}
