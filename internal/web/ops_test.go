package web_test

import (
	"encoding/json"
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

// opsSignIn posts the console's sign-in form with token and returns the
// answer.
func (s *server) opsSignIn(c *http.Client, token string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "POST", s.base+"/ops/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err := c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// opsCSRFOf returns the CSRF token the console page carries.
func opsCSRFOf(t *testing.T, s *server, c *http.Client) string {
	t.Helper()
	res, err := c.Get(s.base + "/ops")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(string(b), marker)
	if res.StatusCode != http.StatusOK || i < 0 {
		t.Fatalf("GET /ops: status %d, no CSRF token in the page: %.300s", res.StatusCode, b)
	}
	rest := string(b[i+len(marker):])
	return rest[:strings.IndexByte(rest, '"')]
}

// cookieOf returns the cookie name that c holds for s.
func cookieOf(t *testing.T, s *server, c *http.Client, path, name string) *http.Cookie {
	t.Helper()
	for _, ck := range c.Jar.Cookies(mustURL(t, s.base+path)) {
		if ck.Name == name {
			return ck
		}
	}
	t.Fatalf("no cookie %s for %s", name, path)
	return nil
}

// TestOpsSignIn: the console's sign-in takes the admin token only, its
// cookie has the session cookie's attributes and is scoped to /ops, and sign
// out needs the CSRF token and ends the session.
func TestOpsSignIn(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("ada", "news")
	c := browserClient(t)

	res, err := c.Get(s.base + "/ops")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `action="/ops/signin"`) ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /ops signed out: %d, CSP %q: %.300s", res.StatusCode, res.Header.Get("Content-Security-Policy"), b)
	}
	for _, c := range []struct {
		token  string
		status int
	}{{"", http.StatusUnprocessableEntity}, {"not-the-admin-token-at-all", http.StatusUnauthorized}, {token, http.StatusForbidden}} {
		if res := s.opsSignIn(browserClient(t), c.token); res.StatusCode != c.status || len(res.Cookies()) != 0 {
			t.Fatalf("sign in with %q: %d, cookies %v; want %d and none", c.token, res.StatusCode, res.Cookies(), c.status)
		}
	}
	// A cross-site form cannot sign in.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.base+"/ops/signin", strings.NewReader("token="+adminToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if res, err := browserClient(t).Do(req); err != nil || res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("cross-site sign in: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	res = s.opsSignIn(c, adminToken)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ops" {
		t.Fatalf("sign in: %d to %q, want 303 to /ops", res.StatusCode, res.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Name == web.OpsCookieName {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Secure || cookie.Path != "/ops" {
		t.Fatalf("ops cookie %+v: want HttpOnly, SameSite=Strict, Path=/ops, not Secure over plain HTTP", cookie)
	}
	if strings.Contains(cookie.Value, adminToken) {
		t.Fatal("the cookie carries the admin token")
	}
	csrf := opsCSRFOf(t, s, c)
	if st, body := do(t, c, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusOK || !strings.Contains(body, `"by_status"`) {
		t.Fatalf("GET /ops/v1/stats: %d %s", st, body)
	}

	// Sign out without the CSRF token is refused; with it, the session ends.
	if st, _ := do(t, c, "POST", s.base+"/ops/signout", "", ""); st != http.StatusForbidden {
		t.Fatalf("sign out without CSRF: %d, want 403", st)
	}
	req, _ = http.NewRequestWithContext(t.Context(), "POST", s.base+"/ops/signout", strings.NewReader("csrf="+csrf))
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
	replay := browserClient(t)
	replay.Jar.SetCookies(mustURL(t, s.base+"/ops"), []*http.Cookie{{Name: web.OpsCookieName, Value: cookie.Value, Path: "/ops"}})
	if st, _ := do(t, replay, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("the session after sign out: %d, want 401", st)
	}
}

// TestOpsSessionsApart: an editor's session is no session for the console,
// nor the admin's for the workspace, whichever cookie carries it; a bearer
// token is not taken under /ops; only the console's routes are reachable.
func TestOpsSessionsApart(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("bo", "news")
	ed, admin := browserClient(t), browserClient(t)
	if res := s.signIn(ed, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("editor sign in: %d", res.StatusCode)
	}
	if res := s.opsSignIn(admin, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin sign in: %d", res.StatusCode)
	}
	edCookie := cookieOf(t, s, ed, "/", web.CookieName)
	opsCookie := cookieOf(t, s, admin, "/ops", web.OpsCookieName)

	// The editor's browser, as it is: its cookie goes to /ops too.
	if st, _ := do(t, ed, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("editor session on /ops/v1/stats: %d, want 401", st)
	}
	res, err := ed.Get(s.base + "/ops")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), `action="/ops/signin"`) {
		t.Fatalf("the editor is shown the console: %.300s", b)
	}
	// Each session's id under the other's cookie.
	swapped := browserClient(t)
	swapped.Jar.SetCookies(mustURL(t, s.base+"/ops"), []*http.Cookie{{Name: web.OpsCookieName, Value: edCookie.Value, Path: "/ops"}})
	if st, _ := do(t, swapped, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("an editor session under the ops cookie: %d, want 401", st)
	}
	swapped = browserClient(t)
	swapped.Jar.SetCookies(mustURL(t, s.base), []*http.Cookie{{Name: web.CookieName, Value: opsCookie.Value, Path: "/"}})
	if st, _ := do(t, swapped, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("the admin session under the editor cookie: %d, want 401", st)
	}
	// The admin's browser gets nothing from the workspace's calls.
	if st, _ := do(t, admin, "GET", s.base+"/app/v1/me", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("admin session on /app/v1/me: %d, want 401", st)
	}
	// A bearer token is not taken under /ops.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.base+"/ops/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bearer under /ops: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}
	// Routes the console does not offer are not reachable under /ops.
	csrf := opsCSRFOf(t, s, admin)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/ops/v1/editors/1/token", `{}`},
		{"POST", "/ops/v1/admin/tasks/1/other", `{}`},
		{"POST", "/ops/v1/tasks/import", `[{"category":"news","title":"x"}]`},
		{"GET", "/ops/v1/results", ``},
	} {
		if st, body := do(t, admin, r.method, s.base+r.path, csrf, r.body); st < 400 {
			t.Errorf("%s %s: %d %s, want a refusal", r.method, r.path, st, body)
		}
	}
	var stats struct {
		ByStatus map[string]int `json:"by_status"`
	}
	s.admin("GET", "/v1/stats", nil, http.StatusOK, &stats)
	if stats.ByStatus["pending"] != 0 {
		t.Fatalf("a task was added through /ops: %v", stats.ByStatus)
	}
}

// TestOpsCSRF: every state-changing console call needs the session's CSRF
// token; refused, it changes nothing.
func TestOpsCSRF(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	edID, token := s.editor("cy", "news")
	id := s.addTask("news", 1, "held", map[string]any{"text": "x"})
	var a struct {
		Fence int64 `json:"fence"`
	}
	editorCall(t, s, token, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &a)
	c := browserClient(t)
	if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	csrf := opsCSRFOf(t, s, c)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/ops/v1/admin/tasks/" + itoa(id) + "/release", `{}`},
		{"POST", "/ops/v1/admin/categories/news/pause", `{}`},
		{"POST", "/ops/v1/editors/" + itoa(edID) + "/disable", `{}`},
		{"PATCH", "/ops/v1/editors/" + itoa(edID), `{"categories":["sport"]}`},
		{"POST", "/ops/v1/editors", `{"name":"forged","categories":["news"]}`},
		{"POST", "/ops/v1/tasks", `[{"category":"news","title":"forged"}]`},
	} {
		for _, bad := range []string{"", "wrong", csrf[:len(csrf)-1]} {
			if st, body := do(t, c, r.method, s.base+r.path, bad, r.body); st != http.StatusForbidden || !strings.Contains(body, `"csrf"`) {
				t.Fatalf("%s %s with CSRF %q: %d %s, want 403 csrf", r.method, r.path, bad, st, body)
			}
		}
	}
	// Nothing changed: no task or editor added, the claim is held, nothing
	// paused, the editor as it was.
	var stats struct {
		ByStatus map[string]int `json:"by_status"`
	}
	s.admin("GET", "/v1/stats", nil, http.StatusOK, &stats)
	if stats.ByStatus["pending"] != 0 {
		t.Fatalf("a task was added without the CSRF token: %v", stats.ByStatus)
	}
	var eds struct {
		Editors []struct{} `json:"editors"`
	}
	s.admin("GET", "/v1/editors", nil, http.StatusOK, &eds)
	if len(eds.Editors) != 1 {
		t.Fatalf("%d editors after refused calls, want 1", len(eds.Editors))
	}
	var task struct {
		Status string `json:"status"`
		Fence  int64  `json:"fence"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(id), nil, http.StatusOK, &task)
	if task.Status != "assigned" || task.Fence != a.Fence {
		t.Fatalf("task %+v after refused calls, want assigned at fence %d", task, a.Fence)
	}
	var editor struct {
		Disabled   bool     `json:"disabled"`
		Categories []string `json:"categories"`
	}
	s.admin("GET", "/v1/editors/"+itoa(edID), nil, http.StatusOK, &editor)
	if editor.Disabled || len(editor.Categories) != 1 || editor.Categories[0] != "news" {
		t.Fatalf("editor %+v after refused calls", editor)
	}
	var paused struct {
		Paused []any `json:"paused"`
	}
	s.admin("GET", "/v1/admin/categories/paused", nil, http.StatusOK, &paused)
	if len(paused.Paused) != 0 {
		t.Fatalf("paused after refused calls: %v", paused.Paused)
	}

	// With the token, each goes through.
	if st, body := do(t, c, "POST", s.base+"/ops/v1/admin/tasks/"+itoa(id)+"/release", csrf, `{}`); st != http.StatusNoContent {
		t.Fatalf("force release: %d %s", st, body)
	}
	if st, body := do(t, c, "POST", s.base+"/ops/v1/admin/categories/"+url.PathEscape("a/b <c>")+"/pause", csrf, `{}`); st != http.StatusOK || !strings.Contains(body, `"category":"a/b <c>"`) {
		t.Fatalf("pause a category with a slash: %d %s", st, body)
	}
	if st, body := do(t, c, "PATCH", s.base+"/ops/v1/editors/"+itoa(edID), csrf, `{"categories":["sport","news"]}`); st != http.StatusOK || !strings.Contains(body, `"sport"`) {
		t.Fatalf("edit categories: %d %s", st, body)
	}
	if st, body := do(t, c, "POST", s.base+"/ops/v1/editors/"+itoa(edID)+"/disable", csrf, `{}`); st != http.StatusOK || !strings.Contains(body, `"disabled":true`) {
		t.Fatalf("disable: %d %s", st, body)
	}
	s.admin("GET", "/v1/tasks/"+itoa(id), nil, http.StatusOK, &task)
	if task.Status != "pending" || task.Fence <= a.Fence {
		t.Fatalf("task %+v after the force release", task)
	}
}

// editorCall calls the API with an editor's token.
func editorCall(t *testing.T, s *server, token, method, path, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// TestOpsSessionEnds: an ops session ends after its idle time, and the
// moment the admin token changes: a replica started with a new admin token
// refuses it, and ends it.
func TestOpsSessionEnds(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.HTTP.SessionIdle = time.Minute
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	c := browserClient(t)
	if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	rdb := testenv.Redis(t)
	keys, err := rdb.Keys(t.Context(), s.prefix+"web:ops-session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("ops session keys %v, %v: want one", keys, err)
	}
	if ttl, err := rdb.TTL(t.Context(), keys[0]).Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("ops session TTL %v, %v: want (0, 1m]", ttl, err)
	}
	if n, err := rdb.Exists(t.Context(), strings.Replace(keys[0], "web:ops-session:", "web:session:", 1)).Result(); err != nil || n != 0 {
		t.Fatalf("the ops session is in the editors' key space too: %d, %v", n, err)
	}
	// Expiry is Redis's: end it as the idle time would.
	if err := rdb.PExpire(t.Context(), keys[0], time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "ops session key expired", func() bool {
		n, err := rdb.Exists(t.Context(), keys[0]).Result()
		return err == nil && n == 0
	})
	if st, _ := do(t, c, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("after the session expired: %d, want 401", st)
	}

	// The admin token changes: a replica over the same stores with the new
	// one refuses the session, and ends it for every replica.
	if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in again: %d", res.StatusCode)
	}
	cookie := cookieOf(t, s, c, "/ops", web.OpsCookieName)
	cfg.AdminToken = "a-new-admin-token-0123456789"
	rotated := startServer(t, cfg, taskd.WithDB(db))
	c2 := browserClient(t)
	c2.Jar.SetCookies(mustURL(t, rotated.base+"/ops"), []*http.Cookie{{Name: web.OpsCookieName, Value: cookie.Value, Path: "/ops"}})
	if st, body := do(t, c2, "GET", rotated.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized || !strings.Contains(body, "admin token has changed") {
		t.Fatalf("the session under a new admin token: %d %s, want 401", st, body)
	}
	if st, _ := do(t, c, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusUnauthorized {
		t.Fatalf("the refused session on the first replica: %d, want 401 (ended)", st)
	}
	if res := rotated.opsSignIn(browserClient(t), "a-new-admin-token-0123456789"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with the new admin token: %d", res.StatusCode)
	}
}

// TestOpsHistory: claims and submits made through the API show in the
// console's history once the engine has flushed them (every 5 s).
func TestOpsHistory(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	_, token := s.editor("di", "news")
	for i := range 3 {
		s.addTask("news", 1, "t"+itoa(int64(i)), map[string]any{"text": "x"})
	}
	var a struct {
		Task struct {
			ID int64 `json:"id"`
		} `json:"task"`
		Fence int64 `json:"fence"`
	}
	editorCall(t, s, token, "POST", "/v1/assignments/next", `{}`, http.StatusOK, &a)
	for range 3 {
		var out struct {
			Next *struct {
				Task struct {
					ID int64 `json:"id"`
				} `json:"task"`
				Fence int64 `json:"fence"`
			} `json:"next"`
		}
		editorCall(t, s, token, "POST", "/v1/assignments/"+itoa(a.Task.ID)+"/submit", `{"fence":`+itoa(a.Fence)+`,"result":{}}`, http.StatusOK, &out)
		if out.Next != nil {
			a.Task.ID, a.Fence = out.Next.Task.ID, out.Next.Fence
		}
	}
	c := browserClient(t)
	if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	var h struct {
		Minutes []json.RawMessage `json:"minutes"`
		Total   struct {
			Claims  int64    `json:"claims"`
			Submits int64    `json:"submits"`
			P99     *float64 `json:"next_p99_ms"`
		} `json:"total"`
	}
	testenv.Eventually(t, 20*time.Second, "3 claims and 3 submits in the history", func() bool {
		st, body := do(t, c, "GET", s.base+"/ops/v1/stats/history?minutes=5", "", "")
		if st != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil {
			t.Fatalf("history: %d %s", st, body)
		}
		return h.Total.Claims == 3 && h.Total.Submits == 3
	})
	if len(h.Minutes) != 5 || h.Total.P99 == nil {
		t.Fatalf("history: %d minutes, p99 %v", len(h.Minutes), h.Total.P99)
	}
}
