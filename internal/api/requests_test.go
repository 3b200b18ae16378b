package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// bodyOfSize returns a POST /v1/tasks body of exactly n bytes that is valid
// apart from its size.
func bodyOfSize(t *testing.T, n int) string {
	t.Helper()
	head, tail := `[{"category":"news","title":"big","payload":{"pad":"`, `"}}]`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("size %d is too small", n)
	}
	return head + strings.Repeat("x", pad) + tail
}

func TestMalformedRequestsAreBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	ids := b.addN(t, "news", 2)
	a := b.next(t, e.Token)
	hb := fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID)
	submit := fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID)
	release := fmt.Sprintf("/v1/assignments/%d/release", a.Task.ID)
	other := b.editor(t, "bob", "news") // holds nothing: a bad next must not claim

	before := b.snapshot(t)
	for _, c := range []struct {
		name, method, path, token, body string
	}{
		{"tasks malformed", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x"`},
		{"tasks not JSON", "POST", "/v1/tasks", adminToken, `category=news`},
		{"tasks unknown field", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x","colour":"red"}]`},
		{"tasks wrong type", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x","priority":"high"}]`},
		{"tasks fraction", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x","priority":1.5}]`},
		{"tasks object, not array", "POST", "/v1/tasks", adminToken, `{"category":"news","title":"x"}`},
		{"tasks trailing data", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x"}] [{"category":"news","title":"y"}]`},
		{"tasks empty body", "POST", "/v1/tasks", adminToken, ``},
		{"tasks over 1 MiB", "POST", "/v1/tasks", adminToken, bodyOfSize(t, api.MaxBodyBytes+1)},
		{"editor unknown field", "POST", "/v1/editors", adminToken, `{"name":"x","categories":["news"],"admin":true}`},
		{"editor wrong type", "POST", "/v1/editors", adminToken, `{"name":"x","categories":"news"}`},
		{"next wrong type", "POST", "/v1/assignments/next", other.Token, `{"wait_ms":"100"}`},
		{"next malformed", "POST", "/v1/assignments/next", other.Token, `{"wait_ms":`},
		{"next unknown field", "POST", "/v1/assignments/next", other.Token, `{"wait":100}`},
		{"heartbeat string fence", "POST", hb, e.Token, `{"fence":"1"}`},
		{"heartbeat unknown field", "POST", hb, e.Token, `{"fence":1,"lease_ms":100000}`},
		{"heartbeat trailing data", "POST", hb, e.Token, `{"fence":1}{"fence":1}`},
		{"heartbeat array", "POST", hb, e.Token, `[1]`},
		{"heartbeat over 1 MiB", "POST", hb, e.Token, `{"fence":1,"x":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`},
		{"submit malformed result", "POST", submit, e.Token, `{"fence":1,"result":{"a":}}`},
		{"submit empty body", "POST", submit, e.Token, ``},
		{"release wrong type", "POST", release, e.Token, `{"fence":1,"skip":"yes"}`},
		{"path id not a number", "POST", "/v1/assignments/abc/heartbeat", e.Token, `{"fence":1}`},
		{"path id zero", "POST", "/v1/assignments/0/submit", e.Token, `{"fence":1,"result":1}`},
		{"path id negative", "POST", "/v1/assignments/-1/release", e.Token, `{"fence":1}`},
		{"path id with plus", "POST", "/v1/assignments/+" + strconv.FormatInt(a.Task.ID, 10) + "/release", e.Token, `{"fence":1}`},
		{"path id overflow", "GET", "/v1/tasks/99999999999999999999", adminToken, ``},
		{"force release bad id", "POST", "/v1/admin/tasks/x/release", adminToken, ``},
		{"force release with a body", "POST", fmt.Sprintf("/v1/admin/tasks/%d/release", a.Task.ID), adminToken, `{"fence":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := wantError(t, b.do(t, c.method, c.path, c.token, c.body), http.StatusBadRequest, "bad_request")
			if strings.Contains(c.name, "1 MiB") && !strings.Contains(msg, "larger than") {
				t.Errorf("message %q does not say the body is too large", msg)
			}
		})
	}
	b.unchanged(t, before)
	if row := b.task(t, ids[1]); row.Status != tasks.StatusPending {
		t.Fatalf("the free task is %s, want pending", row.Status)
	}

	// Exactly 1 MiB is accepted.
	res := b.do(t, "POST", "/v1/tasks", adminToken, bodyOfSize(t, api.MaxBodyBytes))
	wantJSON(t, res, http.StatusCreated, nil)
}

func TestInvalidRequestsAreUnprocessable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 1)
	a := b.next(t, e.Token)
	path := func(action string) string { return fmt.Sprintf("/v1/assignments/%d/%s", a.Task.ID, action) }

	tooMany := make([]newTask, api.MaxTasksPerRequest+1)
	for i := range tooMany {
		tooMany[i] = newTask{Category: "news", Title: "t"}
	}
	before := b.snapshot(t)
	for _, c := range []struct {
		name, method, path, token, body, inMessage string
	}{
		{"empty category", "POST", "/v1/tasks", adminToken,
			`[{"category":"news","title":"ok"},{"category":"","title":"no category"}]`, "task 1"},
		{"no title", "POST", "/v1/tasks", adminToken, `[{"category":"news"}]`, "title"},
		{"payload not an object", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"t","payload":[1]}]`, "payload"},
		{"priority over 32 bits", "POST", "/v1/tasks", adminToken, `[{"category":"news","title":"t","priority":4294967296}]`, "priority"},
		{"no tasks", "POST", "/v1/tasks", adminToken, `[]`, "1.."},
		{"too many tasks", "POST", "/v1/tasks", adminToken, mustJSON(t, tooMany), "1.."},
		{"editor without categories", "POST", "/v1/editors", adminToken, `{"name":"bob","categories":[]}`, "categories"},
		{"editor without name", "POST", "/v1/editors", adminToken, `{"categories":["news"]}`, "name"},
		{"negative wait", "POST", "/v1/assignments/next", e.Token, `{"wait_ms":-1}`, "wait_ms"},
		{"heartbeat without fence", "POST", path("heartbeat"), e.Token, `{}`, "fence"},
		{"heartbeat fence zero", "POST", path("heartbeat"), e.Token, `{"fence":0}`, "fence"},
		{"submit without result", "POST", path("submit"), e.Token, `{"fence":1}`, "result"},
		{"submit null result", "POST", path("submit"), e.Token, `{"fence":1,"result":null}`, "result"},
		{"release reason too long", "POST", path("release"), e.Token,
			`{"fence":1,"reason":"` + strings.Repeat("é", api.MaxReasonLen+1) + `"}`, "reason"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := wantError(t, b.do(t, c.method, c.path, c.token, c.body), http.StatusUnprocessableEntity, "invalid")
			if !strings.Contains(msg, c.inMessage) {
				t.Errorf("message %q does not mention %q", msg, c.inMessage)
			}
		})
	}
	b.unchanged(t, before)

	// A reason of exactly the limit is fine.
	wantStatus(t, b.do(t, "POST", path("release"), e.Token,
		`{"fence":1,"reason":"`+strings.Repeat("é", api.MaxReasonLen)+`"}`), http.StatusNoContent)
}

func TestCreateEditor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(t, "POST", "/v1/editors", adminToken, `{"name":"ada","categories":["sports","news","news"]}`)
	var e editorInfo
	wantJSON(t, res, http.StatusCreated, &e)
	wantKeys(t, res.body, "id", "name", "categories", "capacity", "token")
	b.secret(e.Token)
	if e.ID < 1 || e.Name != "ada" || strings.Join(e.Categories, ",") != "news,sports" || len(e.Token) < 40 {
		t.Fatalf("created %s", res.body)
	}
	// The store has the token's hash, not the token.
	var stored []byte
	if err := b.db.GetContext(t.Context(), &stored, "SELECT token_hash FROM editors WHERE id = ?", e.ID); err != nil {
		t.Fatal(err)
	}
	if h := tasks.HashToken(e.Token); string(stored) != string(h[:]) {
		t.Fatalf("stored token hash %x, want %x", stored, h)
	}
	// The token works.
	wantStatus(t, b.do(t, "POST", "/v1/assignments/next", e.Token, ""), http.StatusNoContent)

	before := b.snapshot(t)
	wantError(t, b.do(t, "POST", "/v1/editors", adminToken, `{"name":"ada","categories":["news"]}`), http.StatusConflict, "duplicate")
	b.unchanged(t, before)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	task := `[{"category":"news","title":"x"}]`

	type req struct{ method, path, body string }
	adminRoutes := []req{
		{"POST", "/v1/editors", `{"name":"eve","categories":["news"]}`},
		{"POST", "/v1/tasks", task},
		{"GET", fmt.Sprintf("/v1/tasks/%d", id), ""},
		{"POST", fmt.Sprintf("/v1/admin/tasks/%d/release", id), ""},
		{"GET", "/v1/stats", ""},
	}
	editorRoutes := []req{
		{"POST", "/v1/assignments/next", ""},
		{"POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), `{"fence":1}`},
		{"POST", fmt.Sprintf("/v1/assignments/%d/submit", id), `{"fence":1,"result":1}`},
		{"POST", fmt.Sprintf("/v1/assignments/%d/release", id), `{"fence":1}`},
	}
	before := b.snapshot(t)
	send := func(r req, auth string) response {
		t.Helper()
		res, err := b.doAuth(t.Context(), r.method, r.path, auth, r.body)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		return res
	}
	for _, r := range append(append([]req{}, adminRoutes...), editorRoutes...) {
		for _, header := range []string{"", "Bearer", "Bearer ", "Bearer wrong-token", "Basic " + adminToken,
			adminToken, "Bearer " + strings.Repeat("x", 4096), "Bearer " + e.Token[:len(e.Token)-1]} {
			wantError(t, send(r, header), http.StatusUnauthorized, "unauthorized")
		}
	}
	for _, r := range adminRoutes {
		wantError(t, send(r, "Bearer "+e.Token), http.StatusForbidden, "forbidden")
	}
	for _, r := range editorRoutes {
		wantError(t, send(r, "Bearer "+adminToken), http.StatusForbidden, "forbidden")
	}
	b.unchanged(t, before)

	// The scheme is case-insensitive.
	wantJSON(t, send(req{"GET", "/v1/stats", ""}, "bearer "+adminToken), http.StatusOK, nil)
}

func TestWaitIsCappedByMaxWait(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{api: api.Config{MaxWait: 300 * time.Millisecond}})
	e := b.editor(t, "ada", "news")

	start := time.Now()
	res := b.do(t, "POST", "/v1/assignments/next", e.Token, `{"wait_ms":600000}`)
	took := time.Since(start)
	wantStatus(t, res, http.StatusNoContent)
	// The request asked for ten minutes: an answer within the test's time
	// is the cap's.
	if took < 300*time.Millisecond {
		t.Fatalf("answered after %v, want the 300ms cap", took)
	}
}

func TestLongPollEndsWhenClientLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{dispatcher: dispatcher.Config{PollInterval: time.Minute}})
	e := b.editor(t, "ada", "news")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.doCtx(ctx, "POST", "/v1/assignments/next", e.Token, `{"wait_ms":20000}`)
		done <- err
	}()
	testenv.Eventually(t, 5*time.Second, "the editor waits", func() bool { return b.d.Stats().Waiting > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("request error = %v, want context.Canceled", err)
	}
	testenv.Eventually(t, 5*time.Second, "the server stops waiting", func() bool { return b.d.Stats().Waiting == 0 })

	// A task added now stays in the pool: nobody claimed it for the gone client.
	id := b.addN(t, "news", 1)[0]
	if row := b.task(t, id); row.Status != tasks.StatusPending {
		t.Fatalf("task is %s, want pending", row.Status)
	}
}

func TestRedisDownIsUnavailable(t *testing.T) {
	t.Parallel()
	down := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = down.Close() })
	b := setup(t, setupOpts{redis: down})
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]

	before := b.snapshot(t)
	res := b.do(t, "POST", "/v1/assignments/next", e.Token, "")
	wantError(t, res, http.StatusServiceUnavailable, "unavailable")
	if ra, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q, want a number of seconds", res.header.Get("Retry-After"))
	}
	b.unchanged(t, before)
	if row := b.task(t, id); row.Status != tasks.StatusPending || row.Fence != 0 {
		t.Fatalf("task is %s with fence %d, want pending with 0", row.Status, row.Fence)
	}
}

func TestMySQLDownIsUnavailable(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("mysql", "taskd:taskd@tcp(127.0.0.1:1)/taskd?timeout=200ms&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	down, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, setupOpts{store: down})
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/v1/stats", adminToken, ""},
		{"GET", "/v1/tasks/1", adminToken, ""},
		{"POST", "/v1/tasks", adminToken, `[{"category":"news","title":"x"}]`},
		{"POST", "/v1/editors", adminToken, `{"name":"ada","categories":["news"]}`},
		{"POST", "/v1/assignments/next", "some-editor-token", ""},
	} {
		res := b.do(t, c.method, c.path, c.token, c.body)
		wantError(t, res, http.StatusServiceUnavailable, "unavailable")
		if res.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: 503 without Retry-After", c.method, c.path)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) error { return nil }
	b := setup(t, setupOpts{api: api.Config{
		Checks: []api.Check{{Name: "mysql", Check: ok}, {Name: "redis", Check: ok}},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("taskd_up 1\n"))
		}),
	}})
	var h struct {
		Status string `json:"status"`
	}
	wantJSON(t, b.do(t, "GET", "/healthz", "", ""), http.StatusOK, &h)
	if h.Status != "ok" {
		t.Fatalf("healthz status = %q", h.Status)
	}

	var ready readiness
	wantJSON(t, b.do(t, "GET", "/readyz", "", ""), http.StatusOK, &ready)
	if ready.Status != "ok" || len(ready.Checks) != 2 || ready.Checks["mysql"] != "ok" || ready.Checks["redis"] != "ok" {
		t.Fatalf("readyz = %+v", ready)
	}

	res := b.do(t, "GET", "/metrics", "", "")
	if res.status != http.StatusOK || string(res.body) != "taskd_up 1\n" {
		t.Fatalf("metrics: %d %q", res.status, res.body)
	}
}

type readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func TestReadinessFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rdb := testenv.Redis(t)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	checks := []api.Check{
		{Name: "mysql", Check: func(ctx context.Context) error { return b.db.PingContext(ctx) }},
		{Name: "redis", Check: func(ctx context.Context) error { return errors.New("dial tcp: connection refused") }},
		{Name: "redis-real", Check: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		// A check that ignores its context must not hold readyz up.
		{Name: "stuck", Check: func(context.Context) error { <-stuck; return nil }},
	}
	h, err := api.New(api.Config{Dispatcher: b.d, Store: b.store, AdminToken: adminToken, Checks: checks})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rec := serve(h, "GET", "/readyz")
	// The stuck check never returns while the test runs: an answer at all
	// shows it did not hold readyz up.
	if took := time.Since(start); took < api.CheckTimeout {
		t.Fatalf("readyz took %v, want at least the check timeout %v", took, api.CheckTimeout)
	}
	var ready readiness
	wantJSON(t, rec, http.StatusServiceUnavailable, &ready)
	if rec.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if ready.Status != "unavailable" || ready.Checks["mysql"] != "ok" || ready.Checks["redis-real"] != "ok" ||
		ready.Checks["redis"] != "dial tcp: connection refused" || !strings.Contains(ready.Checks["stuck"], "timed out") {
		t.Fatalf("readyz = %+v", ready)
	}
}

func TestRoutingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wantError(t, b.do(t, "GET", "/nope", "", ""), http.StatusNotFound, "not_found")
	wantError(t, b.do(t, "GET", "/metrics", "", ""), http.StatusNotFound, "not_found") // no Metrics configured
	res := b.do(t, "GET", "/v1/assignments/next", adminToken, "")
	wantError(t, res, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := res.header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Fatalf("Allow = %q, want POST", allow)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	d := &dispatcher.Dispatcher{}
	var store api.Store = (*store.Store)(nil)
	noop := func(context.Context) error { return nil }
	for _, c := range []struct {
		name string
		cfg  api.Config
	}{
		{"no dispatcher", api.Config{Store: store, AdminToken: adminToken}},
		{"no store", api.Config{Dispatcher: d, AdminToken: adminToken}},
		{"no admin token", api.Config{Dispatcher: d, Store: store}},
		{"short admin token", api.Config{Dispatcher: d, Store: store, AdminToken: "0123456789abcde"}},
		{"negative max wait", api.Config{Dispatcher: d, Store: store, AdminToken: adminToken, MaxWait: -time.Second}},
		{"unnamed check", api.Config{Dispatcher: d, Store: store, AdminToken: adminToken, Checks: []api.Check{{Check: noop}}}},
		{"check without function", api.Config{Dispatcher: d, Store: store, AdminToken: adminToken, Checks: []api.Check{{Name: "x"}}}},
		{"duplicate check", api.Config{Dispatcher: d, Store: store, AdminToken: adminToken,
			Checks: []api.Check{{Name: "x", Check: noop}, {Name: "x", Check: noop}}}},
	} {
		if _, err := api.New(c.cfg); err == nil {
			t.Errorf("%s: New accepted the config", c.name)
		}
	}
	if _, err := api.New(api.Config{Dispatcher: d, Store: store, AdminToken: "0123456789abcdef"}); err != nil {
		t.Fatalf("New refused a valid config: %v", err)
	}
}

// An editor's token is looked up in MySQL once and then remembered for
// EditorCacheTTL; with the cache off, every request reads MySQL, so a token
// removed there stops working at once.
func TestEditorTokensAreRemembered(t *testing.T) {
	t.Parallel()
	for name, ttl := range map[string]time.Duration{"cached": time.Minute, "off": -1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{api: api.Config{EditorCacheTTL: ttl}})
			ed := b.editor(t, "ann", "news")
			if res := b.do(t, "POST", "/v1/assignments/next", ed.Token, `{}`); res.status != http.StatusNoContent {
				t.Fatalf("first next: status %d, want 204", res.status)
			}
			if _, err := b.db.Exec(`UPDATE editors SET token_hash = UNHEX(SHA2('replaced', 256)) WHERE id = ?`, ed.ID); err != nil {
				t.Fatal(err)
			}
			res := b.do(t, "POST", "/v1/assignments/next", ed.Token, `{}`)
			want := http.StatusNoContent
			if ttl < 0 {
				want = http.StatusUnauthorized
			}
			if res.status != want {
				t.Errorf("next after the token changed in MySQL: status %d, want %d", res.status, want)
			}
		})
	}
}

// TestHungMySQLIsUnavailable: a MySQL server that stops answering (here a
// proxy that stops moving bytes, as a SIGSTOPped server would) makes requests
// 503 once Config.RequestTimeout passes, long polls included, instead of
// holding them; when it answers again, so does the API.
func TestHungMySQLIsUnavailable(t *testing.T) {
	t.Parallel()
	direct := storetest.NewDatabase(t)
	cfg, err := mysql.ParseDSN(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	ctx := context.Background()
	db, err := store.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	hung, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 500 * time.Millisecond
	// No editor cache: every request, a long poll's too, looks its token up.
	b := setup(t, setupOpts{store: hung, api: api.Config{RequestTimeout: timeout, EditorCacheTTL: -1}})
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 3)
	a := b.next(t, e.Token)

	proxy.Freeze()
	for _, c := range []struct{ method, path, token, body string }{
		{"POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", a.Task.ID), e.Token, fmt.Sprintf(`{"fence":%d}`, a.Fence)},
		{"POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), e.Token, fmt.Sprintf(`{"fence":%d,"result":{}}`, a.Fence)},
		{"POST", "/v1/assignments/next", e.Token, `{"wait_ms":300}`},
		{"GET", "/v1/stats", adminToken, ""},
		{"POST", "/v1/editors", adminToken, `{"name":"bob","categories":["news"]}`},
	} {
		start := time.Now()
		res := b.do(t, c.method, c.path, c.token, c.body)
		took := time.Since(start)
		wantError(t, res, http.StatusServiceUnavailable, "unavailable")
		if res.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", c.method, c.path)
		}
		// Bounded: the proxy stays frozen, so a hung request would take
		// forever; a minute is far beyond the request's time (plus a long
		// poll's wait) even on a loaded machine.
		if took > time.Minute {
			t.Errorf("%s %s: answered after %v, want about %v", c.method, c.path, took, timeout)
		}
	}

	// The frozen submit may still reach the server when it answers again (as
	// a stopped server reads what waited in its socket): a 503 says nothing
	// about whether a write happened. Either way the editor gets an assignment.
	proxy.Thaw()
	testenv.Eventually(t, 10*time.Second, "the API answers again", func() bool {
		return b.do(t, "POST", "/v1/assignments/next", e.Token, `{}`).status == http.StatusOK
	})
}
