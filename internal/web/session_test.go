package web_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/web"
	"github.com/taskd/taskd/tasks"
)

// me calls GET /app/v1/me with c's session and returns the status and the
// answer's Set-Cookie headers.
func me(t *testing.T, s *server, c *http.Client) (int, []*http.Cookie) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", s.base+"/app/v1/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Cookies()
}

// signedIn returns a client signed in at / with token.
func signedIn(t *testing.T, s *server, token string) *http.Client {
	t.Helper()
	c := browserClient(t)
	if res := s.signIn(c, token); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	return c
}

// cleared reports whether cookies clear the workspace's session cookie.
func cleared(cookies []*http.Cookie) bool {
	for _, c := range cookies {
		if c.Name == web.CookieName && c.MaxAge < 0 {
			return true
		}
	}
	return false
}

// homeShows returns what GET / shows c: "workspace" or "sign in".
func homeShows(t *testing.T, s *server, c *http.Client) string {
	t.Helper()
	res, err := c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	switch {
	case strings.Contains(string(b), `id="submit-form"`):
		return "workspace"
	case strings.Contains(string(b), `action="/signin"`):
		return "sign in"
	}
	return "neither: " + string(b)
}

// TestDisableEndsSessions: disabling an editor ends each of its sessions,
// and enabling it again brings none back; another editor's session is
// untouched. A new token ends the editor's sessions too.
func TestDisableEndsSessions(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	ada, adaToken := s.editor("ada", "news")
	bo, boToken := s.editor("bo", "news")
	adas := []*http.Client{signedIn(t, s, adaToken), signedIn(t, s, adaToken)}
	bos := signedIn(t, s, boToken)
	for _, c := range append(adas, bos) {
		if st, _ := me(t, s, c); st != http.StatusOK {
			t.Fatalf("me: %d, want 200", st)
		}
	}

	s.admin("POST", "/v1/editors/"+itoa(ada)+"/disable", nil, http.StatusOK, nil)
	s.admin("POST", "/v1/editors/"+itoa(ada)+"/enable", nil, http.StatusOK, nil)
	for i, c := range adas {
		if st, _ := me(t, s, c); st != http.StatusUnauthorized {
			t.Errorf("ada's session %d after disable and enable: me %d, want 401", i, st)
		}
		if got := homeShows(t, s, c); got != "sign in" {
			t.Errorf("ada's session %d after disable and enable: / shows %s", i, got)
		}
	}
	if st, _ := me(t, s, bos); st != http.StatusOK {
		t.Errorf("bo's session after ada's disable: me %d, want 200", st)
	}
	// Ada signs in again with her token, which enabling made good again.
	if st, _ := me(t, s, signedIn(t, s, adaToken)); st != http.StatusOK {
		t.Errorf("ada signed in again: me %d, want 200", st)
	}

	s.admin("POST", "/v1/editors/"+itoa(bo)+"/token", nil, http.StatusOK, nil)
	if got := homeShows(t, s, bos); got != "sign in" {
		t.Errorf("bo's session after a new token: / shows %s", got)
	}
}

// TestRefusedSessionEnds: a session whose editor no longer authenticates
// (its token replaced in the database, behind the API's back) is refused
// at its next call, which deletes it and clears its cookie: the page then
// shows the sign-in form, not the workspace.
func TestRefusedSessionEnds(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.HTTP.EditorCacheTTL = -1 // every call reads the editor from MySQL
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	id, token := s.editor("cy", "news")
	c := signedIn(t, s, token)
	if got := homeShows(t, s, c); got != "workspace" {
		t.Fatalf("/ shows %s, want the workspace", got)
	}
	_, hash := tasks.NewToken()
	if _, err := db.ExecContext(t.Context(), "UPDATE editors SET token_hash = ? WHERE id = ?", hash[:], id); err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	st, cookies := me(t, s, c)
	if st != http.StatusUnauthorized || !cleared(cookies) {
		t.Fatalf("me with a refused session: %d, cookies %v; want 401 clearing %s", st, cookies, web.CookieName)
	}
	if keys, err := rdb.Keys(t.Context(), s.prefix+"web:session:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("session keys %v, %v after the refusal: want none", keys, err)
	}
	if got := homeShows(t, s, c); got != "sign in" {
		t.Errorf("/ after the refusal shows %s", got)
	}
}

// TestSessionLifetimeEnds: a session used all the time still ends once
// http.session_lifetime has passed since sign in.
func TestSessionLifetimeEnds(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.HTTP.SessionIdle = time.Hour
	cfg.HTTP.SessionLifetime = 2 * time.Second
	s := startServer(t, cfg)
	_, token := s.editor("di", "news")
	c := signedIn(t, s, token)
	// Idle for an hour is never reached: a session that ends within the
	// wait ended by its lifetime.
	testenv.Eventually(t, 5*time.Minute, "the session to end", func() bool {
		st, _ := me(t, s, c) // a request every few milliseconds: never idle
		return st == http.StatusUnauthorized
	})
	if got := homeShows(t, s, c); got != "sign in" {
		t.Errorf("/ after the lifetime shows %s", got)
	}
}

// TestOpsSessionRecordOpensNothing: what Redis holds of a console session
// opens nothing alone: not the admin token's SHA-256, not the record copied
// under another cookie's key, not a record forged from the data in Redis.
func TestOpsSessionRecordOpensNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	c := browserClient(t)
	if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("ops sign in: %d", res.StatusCode)
	}
	cookie := cookieOf(t, s, c, "/ops", web.OpsCookieName)
	rdb := testenv.Redis(t)
	key := s.prefix + "web:ops-session:" + hexSHA256(cookie.Value)
	record, err := rdb.Get(t.Context(), key).Bytes()
	if err != nil {
		t.Fatalf("read the session: %v", err)
	}
	adminHash := sha256.Sum256([]byte(adminToken))
	hashJSON, _ := json.Marshal(adminHash)
	if bytes.Contains(record, hashJSON) || bytes.Contains(record, []byte(hex.EncodeToString(adminHash[:]))) {
		t.Fatalf("the session record holds the admin token's SHA-256: %s", record)
	}
	if st, _ := do(t, c, "GET", s.base+"/ops/v1/stats", "", ""); st != http.StatusOK {
		t.Fatalf("stats with the session: %d, want 200", st)
	}

	opsCall := func(value string) int {
		c := browserClient(t)
		c.Jar.SetCookies(mustURL(t, s.base+"/ops"), []*http.Cookie{{Name: web.OpsCookieName, Value: value, Path: "/ops"}})
		st, _ := do(t, c, "GET", s.base+"/ops/v1/stats", "", "")
		return st
	}
	// The record, copied under the key of a cookie the copier chose.
	copied := "copied-" + strings.Repeat("a", 40)
	if err := rdb.Set(t.Context(), s.prefix+"web:ops-session:"+hexSHA256(copied), record, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if st := opsCall(copied); st != http.StatusUnauthorized {
		t.Errorf("a copied session record: stats %d, want 401", st)
	}
	// A record forged with what Redis and the database hold: the admin
	// token's SHA-256 in the place of the MAC.
	var forged map[string]any
	if err := json.Unmarshal(record, &forged); err != nil {
		t.Fatal(err)
	}
	forged["mac"] = adminHash
	forged["token_hash"] = adminHash
	b, _ := json.Marshal(forged)
	const forgedID = "forged-cookie-value"
	if err := rdb.Set(t.Context(), s.prefix+"web:ops-session:"+hexSHA256(forgedID), b, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if st := opsCall(forgedID); st != http.StatusUnauthorized {
		t.Errorf("a forged session record: stats %d, want 401", st)
	}
	// The real session still works.
	if st := opsCall(cookie.Value); st != http.StatusOK {
		t.Errorf("the session itself: stats %d, want 200", st)
	}
}

func hexSHA256(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// logBuffer is a log destination safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// signInPage posts token to a door's sign-in and returns the status and
// the page.
func signInPage(t *testing.T, s *server, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.base+path, strings.NewReader("token="+token))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	res, err := browserClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestWrongDoor: the admin token typed at the workspace's door is sent to
// /ops, an editor's token typed at the console's is told it opens the
// workspace; the admin's sign-in is logged as the admin's, not as editor 0.
func TestWrongDoor(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	s := startServer(t, taskd.Config{}, taskd.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	_, token := s.editor("ed", "news")

	st, page := signInPage(t, s, "/signin", adminToken)
	if want := "That is the admin token: it opens the ops console at /ops, not the workspace."; st != http.StatusForbidden || !strings.Contains(page, want) {
		t.Errorf("the admin token at /: %d, want 403 saying %q: %.2000s", st, want, page)
	}
	st, page = signInPage(t, s, "/ops/signin", token)
	if want := "That is an editor&#39;s token: it opens the editor workspace at /, not the console."; st != http.StatusForbidden || !strings.Contains(page, want) {
		t.Errorf("an editor's token at /ops: %d, want 403 saying %q: %.2000s", st, want, page)
	}

	if st, _ := signInPage(t, s, "/ops/signin", adminToken); st != http.StatusSeeOther {
		t.Fatalf("the admin token at /ops: %d, want 303", st)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `msg="web: signed in"`) && strings.Contains(l, "door=/ops") {
			line = l
		}
	}
	if line == "" || strings.Contains(line, "editor_id") || !strings.Contains(line, "who=admin") {
		t.Errorf("the admin's sign-in is logged as %q, want who=admin and no editor_id", line)
	}
	if strings.Contains(logs.String(), adminToken) || strings.Contains(logs.String(), token) {
		t.Error("a token is in the log")
	}
}

// TestSignInRacingDisable: sign-ins in flight while the editor is disabled
// start no session that outlives the disable. Sixteen browsers sign in
// again and again; the editor is disabled meanwhile, then enabled: no
// session begun before the disable answers, and none claims a task.
func TestSignInRacingDisable(t *testing.T) {
	t.Parallel()
	s := startServer(t, taskd.Config{})
	raceSignInsWithDisable(t, s, s, 0)
}

// TestSignInRacingDisableAcrossReplicas: the same with the sign-ins at one
// process and the disable at another, whose cache of the editor lags: the
// sign-ins it lets through after the disable (their read of the editor is
// older) start no session that outlives the disable either, once the cache
// has caught up.
func TestSignInRacingDisableAcrossReplicas(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	cfg.HTTP.EditorCacheTTL = 300 * time.Millisecond
	db := storetest.NewDB(t)
	one := startServer(t, cfg, taskd.WithDB(db))
	two := startServer(t, cfg, taskd.WithDB(db))
	raceSignInsWithDisable(t, two, one, cfg.HTTP.EditorCacheTTL)
}

// raceSignInsWithDisable has 16 browsers sign in at in, again and again,
// while the editor is disabled at admin 700 ms in, then enabled; after the
// cache's time (lag), every session begun must be refused, and claim
// nothing.
func raceSignInsWithDisable(t *testing.T, in, admin *server, lag time.Duration) {
	t.Helper()
	id, token := admin.editor("ra", "news")
	for i := range 5 {
		admin.addTask("news", 1, "for a session that survived "+itoa(int64(i)), map[string]any{"text": "a"})
	}

	var (
		mu       sync.Mutex
		sessions []*http.Client
		attempts int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := browserClient(t)
				res := in.signIn(c, token)
				mu.Lock()
				attempts++
				if res.StatusCode == http.StatusSeeOther {
					sessions = append(sessions, c)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(700 * time.Millisecond)
	admin.admin("POST", "/v1/editors/"+itoa(id)+"/disable", nil, http.StatusOK, nil)
	if lag > 0 {
		time.Sleep(lag) // sign-ins go on while the other process has not seen the disable
	}
	close(stop) // sign-ins still in flight end now; later ones are refused
	wg.Wait()
	// The sessions the disable could not end: stored after it read the
	// editor's.
	left, err := testenv.Redis(t).Keys(t.Context(), in.prefix+"web:session:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	admin.admin("POST", "/v1/editors/"+itoa(id)+"/enable", nil, http.StatusOK, nil)
	time.Sleep(lag)

	if len(sessions) == 0 {
		t.Fatalf("no sign-in of %d before the disable started a session", attempts)
	}
	survived, claims := 0, 0
	for _, c := range sessions {
		if st, _ := me(t, in, c); st != http.StatusUnauthorized {
			survived++
		}
		csrf := workspaceCSRF(t, in, c)
		if csrf == "" {
			continue // the sign-in page: no session
		}
		if st, _ := do(t, c, "POST", in.base+"/app/v1/assignments/next", csrf, `{"wait_ms":0}`); st == http.StatusOK {
			claims++
		}
	}
	t.Logf("sign-ins %d, sessions begun %d, stored after the disable ended the others %d, survived the disable and enable %d, claims after the enable %d",
		attempts, len(sessions), len(left), survived, claims)
	if survived != 0 || claims != 0 {
		t.Errorf("%d of %d sessions begun before the disable survived it and the enable, %d claimed a task; want none",
			survived, len(sessions), claims)
	}
	// The editor itself signs in again.
	if st, _ := me(t, in, signedIn(t, in, token)); st != http.StatusOK {
		t.Errorf("a sign-in after the enable: me %d, want 200", st)
	}
}

// workspaceCSRF returns the CSRF token of the page / shows c, empty when it
// is the sign-in page.
func workspaceCSRF(t *testing.T, s *server, c *http.Client) string {
	t.Helper()
	res, err := c.Get(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	const marker = `<meta name="csrf-token" content="`
	i := strings.Index(string(b), marker)
	if i < 0 {
		return ""
	}
	rest := string(b[i+len(marker):])
	return rest[:strings.IndexByte(rest, '"')]
}

// TestDisabledAnswerEndsSession: a call answered 403 editor_disabled (here
// the editor was disabled behind the API's back, so that its session epoch
// did not move) ends the session and clears its cookie, as a 401 does: the
// answer carries the code the workspace's script keys on, and enabling the
// editor again brings the session back nowhere.
func TestDisabledAnswerEndsSession(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.HTTP.EditorCacheTTL = -1 // every call reads the editor from MySQL
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	id, token := s.editor("dis", "news")
	c := signedIn(t, s, token)
	if st, _ := me(t, s, c); st != http.StatusOK {
		t.Fatalf("me: %d, want 200", st)
	}
	ck := cookieOf(t, s, c, "/", web.CookieName)
	kept := &http.Cookie{Name: ck.Name, Value: ck.Value, Path: "/"}
	if _, err := db.ExecContext(t.Context(), "UPDATE editors SET disabled_at = NOW(3) WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", s.base+"/app/v1/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var answer struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &answer); err != nil || res.StatusCode != http.StatusForbidden || answer.Error.Code != "editor_disabled" {
		t.Fatalf("me of a disabled editor's session: %d %s (%v), want 403 with error.code editor_disabled", res.StatusCode, b, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if !cleared(res.Cookies()) {
		t.Errorf("the 403 editor_disabled clears no cookie: %v", res.Cookies())
	}
	if keys, err := testenv.Redis(t).Keys(t.Context(), s.prefix+"web:session:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("session keys %v, %v after editor_disabled: want none", keys, err)
	}
	if _, err := db.ExecContext(t.Context(), "UPDATE editors SET disabled_at = NULL WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	// The cookie, sent again as a browser that kept it would.
	old := browserClient(t)
	old.Jar.SetCookies(mustURL(t, s.base), []*http.Cookie{kept})
	if st, _ := me(t, s, old); st != http.StatusUnauthorized {
		t.Errorf("the ended session after the enable: me %d, want 401", st)
	}
	if st, _ := me(t, s, signedIn(t, s, token)); st != http.StatusOK {
		t.Errorf("a new session after the enable: me %d, want 200", st)
	}
}
