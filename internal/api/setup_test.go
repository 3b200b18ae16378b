package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/activity"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/apispec"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}

const (
	adminToken = "test-admin-token-0123456789"
	// payloadMarker is put in payloads and results; it must never reach the
	// logs.
	payloadMarker = "PAYLOAD-MARKER-7f3a"
)

// bundle is one test's server: its own database, its own Redis key prefix,
// its own dispatcher and API.
type bundle struct {
	url   string
	db    *sqlx.DB
	store *store.Store
	rdb   *redis.Client
	d     *dispatcher.Dispatcher
	hist  *activity.Recorder // with setupOpts.history
	api   *api.Handler
	logs  *syncBuffer

	mu      sync.Mutex
	secrets []string // tokens that must never be logged
	// specErrs are answers the OpenAPI document does not describe.
	specErrs []error
}

type setupOpts struct {
	dispatcher dispatcher.Config
	// api carries Checks, Metrics and MaxWait; the rest is filled in.
	api api.Config
	// redis, when set, replaces the shared Redis server under the locker.
	redis *redis.Client
	// storeCfg configures the test database's store.
	storeCfg store.Config
	// store, when set, replaces the test database's store in the API and the
	// dispatcher.
	store *store.Store
	// history starts an activity.Recorder for GET /v1/stats/history, flushed
	// only when a test says so.
	history bool
}

func setup(t *testing.T, opts ...setupOpts) *bundle {
	t.Helper()
	var o setupOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	b := &bundle{logs: &syncBuffer{}, secrets: []string{adminToken, payloadMarker}}
	// Registered first, so it runs last: after the server has stopped.
	t.Cleanup(func() { b.checkLogs(t) })
	logger := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	b.db = storetest.NewDB(t)
	store, err := store.New(b.db, o.storeCfg)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	b.store = store
	if o.store != nil {
		store = o.store
	}
	b.rdb = o.redis
	if b.rdb == nil {
		b.rdb = testenv.Redis(t)
	}
	dcfg := o.dispatcher
	dcfg.KeyPrefix = testenv.Prefix(t)
	dcfg.Logger = logger
	b.d, err = dispatcher.New(store, locker.New(b.rdb), dcfg)
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	acfg := o.api
	acfg.Dispatcher, acfg.Store, acfg.AdminToken, acfg.Logger = b.d, store, adminToken, logger
	if o.history {
		if b.hist, err = activity.New(b.d, activity.Config{Redis: b.rdb, FlushInterval: time.Hour}); err != nil {
			t.Fatalf("new history: %v", err)
		}
		if err := b.hist.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.hist.Stop(context.Background()) })
		acfg.History = b.hist
	}
	h, err := api.New(acfg)
	if err != nil {
		t.Fatalf("new api: %v", err)
	}
	b.api = h
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// checkLogs fails the test if a token or a payload reached the logs.
func (b *bundle) checkLogs(t *testing.T) {
	logs := b.logs.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.secrets {
		if strings.Contains(logs, s) {
			t.Errorf("the logs contain the secret %q:\n%s", s, logs)
		}
	}
	for _, err := range b.specErrs {
		t.Errorf("openapi.yaml: %v", err)
	}
}

// syncBuffer is a bytes.Buffer that handlers on many goroutines may log to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// response is a read HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with a bearer token (none when "") and a raw body
// (none when "").
func (b *bundle) do(t *testing.T, method, path, token, body string) response {
	t.Helper()
	res, err := b.doCtx(context.Background(), method, path, token, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

// doCtx is do with a context, returning errors.
func (b *bundle) doCtx(ctx context.Context, method, path, token, body string) (response, error) {
	auth := ""
	if token != "" {
		auth = "Bearer " + token
	}
	return b.doAuth(ctx, method, path, auth, body)
}

// doAuth sends a request with an Authorization header (none when "").
func (b *bundle) doAuth(ctx context.Context, method, path, auth, body string) (response, error) {
	var rd io.Reader = http.NoBody
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, rd)
	if err != nil {
		return response{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	b.checkSpec(req, []byte(body), res, data)
	return response{status: res.StatusCode, header: res.Header, body: data}, nil
}

// openapiSpec is the API's OpenAPI document, loaded once.
var openapiSpec = sync.OnceValues(func() (*apispec.Spec, error) { return apispec.Load(api.OpenAPI()) })

// checkSpec records an answer that the OpenAPI document does not describe,
// or a request taskd took (2xx) that the document does not allow; the test
// fails with it at cleanup. Requests to paths or methods the API does not
// have are not checked (their 404 and 405 are the mux's).
func (b *bundle) checkSpec(req *http.Request, reqBody []byte, res *http.Response, body []byte) {
	spec, err := openapiSpec()
	if err == nil {
		err = spec.CheckResponse(req, res.StatusCode, res.Header, body)
	}
	if err == nil && res.StatusCode < 300 {
		err = spec.CheckRequest(req, reqBody)
	}
	if err == nil || errors.Is(err, apispec.ErrNoRoute) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.specErrs = append(b.specErrs, err)
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(data)
}

// strictDecode decodes data into v, refusing unknown fields and trailing data.
func strictDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if dec.More() {
		t.Fatalf("trailing data after JSON: %s", data)
	}
}

// wantKeys checks that the JSON object data has exactly keys.
func wantKeys(t *testing.T, data []byte, keys ...string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode object %s: %v", data, err)
	}
	got := slices.Sorted(maps.Keys(m))
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Fatalf("keys = %v, want %v in %s", got, keys, data)
	}
}

// wantJSON checks status and Content-Type and decodes the body strictly.
func wantJSON(t *testing.T, res response, status int, v any) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status = %d, want %d; body %s", res.status, status, res.body)
	}
	if ct := res.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	wantNoStore(t, res)
	if v != nil {
		strictDecode(t, res.body, v)
	}
}

// wantNoStore checks the headers every API answer carries: no type sniffing,
// no caching.
func wantNoStore(t *testing.T, res response) {
	t.Helper()
	if got := res.header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Fatalf("X-Content-Type-Options = %q, want nosniff; status %d, body %s", got, res.status, res.body)
	}
	if got := res.header.Values("Cache-Control"); !slices.Equal(got, []string{"no-store"}) {
		t.Fatalf("Cache-Control = %q, want no-store; status %d, body %s", got, res.status, res.body)
	}
}

// errorJSON is the error body.
type errorJSON struct {
	Error struct {
		Code         string `json:"code"`
		Message      string `json:"message"`
		OldestCursor string `json:"oldest_cursor,omitempty"`
	} `json:"error"`
}

// wantError checks an error answer and returns its message.
func wantError(t *testing.T, res response, status int, code string) string {
	t.Helper()
	var e errorJSON
	wantJSON(t, res, status, &e)
	if e.Error.Code != code {
		t.Fatalf("error code = %q, want %q; body %s", e.Error.Code, code, res.body)
	}
	if e.Error.Message == "" {
		t.Fatalf("error without a message: %s", res.body)
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("401 without WWW-Authenticate: Bearer; headers %v", res.header)
	}
	return e.Error.Message
}

// wantStatus checks the status of an answer without a body.
func wantStatus(t *testing.T, res response, status int) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status = %d, want %d; body %s", res.status, status, res.body)
	}
	if status == http.StatusNoContent && len(res.body) != 0 {
		t.Fatalf("204 with a body: %s", res.body)
	}
}

// editorInfo is a created editor.
type editorInfo struct {
	ID         int64               `json:"id"`
	Name       string              `json:"name"`
	Categories []string            `json:"categories"`
	Capacity   int                 `json:"capacity"`
	Stages     map[string][]string `json:"stages"`
	Token      string              `json:"token"`
}

// editor creates an editor through the API.
func (b *bundle) editor(t *testing.T, name string, cats ...string) editorInfo {
	t.Helper()
	res := b.do(t, "POST", "/v1/editors", adminToken, mustJSON(t, map[string]any{"name": name, "categories": cats}))
	var e editorInfo
	wantJSON(t, res, http.StatusCreated, &e)
	b.secret(e.Token)
	return e
}

// secret adds s to what must never be logged.
func (b *bundle) secret(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.secrets = append(b.secrets, s)
}

// serve runs one request through h without a server.
func serve(h http.Handler, method, path string) response {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// newTask is a task as POST /v1/tasks takes it.
type newTask struct {
	Category string          `json:"category"`
	Priority int             `json:"priority"`
	Title    string          `json:"title"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Key      string          `json:"key,omitempty"`
	RunAfter string          `json:"run_after,omitempty"`
	DueAt    string          `json:"due_at,omitempty"`
}

// addResponse is the answer of POST /v1/tasks.
type addResponse struct {
	IDs   []int64 `json:"ids"`
	Tasks []struct {
		ID      int64   `json:"id"`
		Created bool    `json:"created"`
		Slots   []int64 `json:"slots"`
	} `json:"tasks"`
	Created  int `json:"created"`
	Existing int `json:"existing"`
}

// add inserts new tasks through the API and returns their ids.
func (b *bundle) add(t *testing.T, ts ...newTask) []int64 {
	t.Helper()
	res := b.do(t, "POST", "/v1/tasks", adminToken, mustJSON(t, ts))
	var out addResponse
	wantJSON(t, res, http.StatusCreated, &out)
	if len(out.IDs) != len(ts) || len(out.Tasks) != len(ts) || out.Created != len(ts) || out.Existing != 0 {
		t.Fatalf("adding %d tasks: %s", len(ts), res.body)
	}
	return out.IDs
}

// addN inserts n tasks of a category.
func (b *bundle) addN(t *testing.T, category string, n int) []int64 {
	t.Helper()
	ts := make([]newTask, n)
	for i := range ts {
		ts[i] = newTask{Category: category, Title: fmt.Sprintf("%s #%d", category, i)}
	}
	return b.add(t, ts...)
}

// assignment is the assignment JSON.
type assignment struct {
	Task struct {
		ID       int64           `json:"id"`
		Category string          `json:"category"`
		Priority int             `json:"priority"`
		Title    string          `json:"title"`
		Payload  json.RawMessage `json:"payload"`
	} `json:"task"`
	Fence          int64  `json:"fence"`
	AssignedAt     string `json:"assigned_at"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

// next asks for the editor's assignment and wants one.
func (b *bundle) next(t *testing.T, token string) assignment {
	t.Helper()
	var a assignment
	wantJSON(t, b.do(t, "POST", "/v1/assignments/next", token, ""), http.StatusOK, &a)
	return a
}

var timeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// parseTime parses an API time, which must be RFC 3339 in UTC to the
// millisecond.
func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	if !timeRE.MatchString(s) {
		t.Fatalf("time %q is not RFC 3339 UTC with milliseconds", s)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parse time %q: %v", s, err)
	}
	return tm
}

// task reads a task row.
func (b *bundle) task(t *testing.T, id int64) *tasks.Task {
	t.Helper()
	task, err := b.store.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("get task %d: %v", id, err)
	}
	return task
}

// snapshot is what must not change when a request is refused.
type snapshot struct {
	Counts map[string]int
	Tasks  []tasks.Task
}

// snapshot reads the row counts of every table and every task row.
func (b *bundle) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{Counts: map[string]int{}}
	for _, table := range []string{"tasks", "task_events", "task_results", "task_skips", "editors", "editor_categories"} {
		var n int
		if err := b.db.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+table); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		s.Counts[table] = n
	}
	var ids []int64
	if err := b.db.SelectContext(ctx, &ids, "SELECT id FROM tasks ORDER BY id"); err != nil {
		t.Fatalf("list tasks: %v", err)
	}
	for _, id := range ids {
		s.Tasks = append(s.Tasks, *b.task(t, id))
	}
	return s
}

// unchanged fails the test if the stores changed since before.
func (b *bundle) unchanged(t *testing.T, before snapshot) {
	t.Helper()
	after := b.snapshot(t)
	if !maps.Equal(before.Counts, after.Counts) {
		t.Fatalf("row counts changed: %v, then %v", before.Counts, after.Counts)
	}
	if len(before.Tasks) != len(after.Tasks) {
		t.Fatalf("%d tasks, then %d", len(before.Tasks), len(after.Tasks))
	}
	for i := range before.Tasks {
		x, y := mustJSON(t, before.Tasks[i]), mustJSON(t, after.Tasks[i])
		if x != y {
			t.Fatalf("task row changed:\n%s\n%s", x, y)
		}
	}
}

// history returns a task's events, oldest first.
func (b *bundle) history(t testing.TB, id int64) []tasks.Event {
	t.Helper()
	page, err := b.store.TaskEvents(context.Background(), tasks.TaskEventsParams{TaskID: id, Limit: tasks.EventsLimitMax})
	if err != nil {
		t.Fatalf("task history %d: %v", id, err)
	}
	if page.More {
		t.Fatalf("task %d has more than %d events", id, tasks.EventsLimitMax)
	}
	return page.Events
}
