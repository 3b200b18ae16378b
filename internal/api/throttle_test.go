package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// countingStore counts the calls that reach the store (and so MySQL) through
// the API's Store interface, token look-ups on their own.
type countingStore struct {
	*store.Store
	lookups atomic.Int64
	calls   atomic.Int64 // every call of the interface, look-ups included
}

var _ api.Store = (*countingStore)(nil)

func (s *countingStore) EditorByTokenHash(ctx context.Context, hash [32]byte) (*tasks.Editor, error) {
	s.lookups.Add(1)
	s.calls.Add(1)
	return s.Store.EditorByTokenHash(ctx, hash)
}

func (s *countingStore) CreateEditor(ctx context.Context, p tasks.CreateEditorParams) (*tasks.Editor, error) {
	s.calls.Add(1)
	return s.Store.CreateEditor(ctx, p)
}

func (s *countingStore) GetTask(ctx context.Context, id int64) (*tasks.Task, error) {
	s.calls.Add(1)
	return s.Store.GetTask(ctx, id)
}

func (s *countingStore) ListTasks(ctx context.Context, p tasks.ListParams) (*tasks.TaskPage, error) {
	s.calls.Add(1)
	return s.Store.ListTasks(ctx, p)
}

func (s *countingStore) TaskEvents(ctx context.Context, p tasks.TaskEventsParams) (*tasks.EventPage, error) {
	s.calls.Add(1)
	return s.Store.TaskEvents(ctx, p)
}

func (s *countingStore) AcceptedResult(ctx context.Context, taskID int64) (*tasks.AcceptedResult, error) {
	s.calls.Add(1)
	return s.Store.AcceptedResult(ctx, taskID)
}

func (s *countingStore) ClaimHolder(ctx context.Context, taskID, fence int64) (string, error) {
	s.calls.Add(1)
	return s.Store.ClaimHolder(ctx, taskID, fence)
}

func (s *countingStore) PoolStats(ctx context.Context, within time.Duration) (*tasks.PoolStats, error) {
	s.calls.Add(1)
	return s.Store.PoolStats(ctx, within)
}

func (s *countingStore) PausedCategories(ctx context.Context) ([]tasks.PausedCategory, error) {
	s.calls.Add(1)
	return s.Store.PausedCategories(ctx)
}

func (s *countingStore) ListEditors(ctx context.Context, p tasks.ListEditorsParams) (*tasks.EditorPage, error) {
	s.calls.Add(1)
	return s.Store.ListEditors(ctx, p)
}

func (s *countingStore) GetEditorSummary(ctx context.Context, id int64) (*tasks.EditorSummary, error) {
	s.calls.Add(1)
	return s.Store.GetEditorSummary(ctx, id)
}

func (s *countingStore) GetEditorStats(ctx context.Context, id int64) (*tasks.EditorStats, error) {
	s.calls.Add(1)
	return s.Store.GetEditorStats(ctx, id)
}

func (s *countingStore) UpdateEditor(ctx context.Context, p tasks.UpdateEditorParams) (*tasks.Editor, error) {
	s.calls.Add(1)
	return s.Store.UpdateEditor(ctx, p)
}

func (s *countingStore) EnableEditor(ctx context.Context, id int64) error {
	s.calls.Add(1)
	return s.Store.EnableEditor(ctx, id)
}

func (s *countingStore) SetEditorToken(ctx context.Context, id int64, hash [32]byte) error {
	s.calls.Add(1)
	return s.Store.SetEditorToken(ctx, id, hash)
}

func (s *countingStore) HeldByEditor(ctx context.Context, editorID int64) (*tasks.Claim, error) {
	s.calls.Add(1)
	return s.Store.HeldByEditor(ctx, editorID)
}

func (s *countingStore) EditorClaims(ctx context.Context, editorID int64) (*tasks.EditorClaims, error) {
	s.calls.Add(1)
	return s.Store.EditorClaims(ctx, editorID)
}

func (s *countingStore) EditorLoads(ctx context.Context, ids []int64) (map[int64]*tasks.EditorLoad, error) {
	s.calls.Add(1)
	return s.Store.EditorLoads(ctx, ids)
}

func (s *countingStore) TaskResults(ctx context.Context, p tasks.TaskResultsParams) (*tasks.TaskResultPage, error) {
	s.calls.Add(1)
	return s.Store.TaskResults(ctx, p)
}

func (s *countingStore) GroupDecisions(ctx context.Context, groupID int64) (map[int64]string, error) {
	s.calls.Add(1)
	return s.Store.GroupDecisions(ctx, groupID)
}

func (s *countingStore) GroupTasks(ctx context.Context, groupID int64) ([]tasks.Task, error) {
	s.calls.Add(1)
	return s.Store.GroupTasks(ctx, groupID)
}

func (s *countingStore) Results(ctx context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error) {
	s.calls.Add(1)
	return s.Store.Results(ctx, p, fn)
}

// instance is one more API process over a bundle's stores: its own caches,
// its own metrics, the Redis counters of every instance with the same
// prefix.
type instance struct {
	*bundle // requests go to this instance's server
	store   *countingStore
	metrics *sdkmetric.ManualReader
	prefix  string // of its Redis keys
}

// newInstance starts an API over b's dispatcher and database with cfg's
// throttling, keeping its counters under prefix in b's Redis (or in
// cfg.Redis, when set).
func newInstance(t *testing.T, b *bundle, prefix string, cfg api.Config) *instance {
	t.Helper()
	in := &instance{store: &countingStore{Store: b.store}, metrics: sdkmetric.NewManualReader(), prefix: prefix}
	cfg.Dispatcher, cfg.Store, cfg.AdminToken = b.d, in.store, adminToken
	if cfg.Redis == nil {
		cfg.Redis = b.rdb
	}
	cfg.KeyPrefix = prefix
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(in.metrics))
	cfg.Logger = slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := api.New(cfg)
	if err != nil {
		t.Fatalf("new api: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// A bundle of its own for do, sharing b's logs and secrets check.
	in.bundle = &bundle{url: srv.URL, db: b.db, store: b.store, rdb: b.rdb, d: b.d, api: h, logs: b.logs}
	t.Cleanup(func() { in.bundle.checkLogs(t) })
	return in
}

// counter returns the sum of a counter's points whose attributes include
// attrs ("route=GET /v1/me").
func (in *instance) counter(t *testing.T, name string, attrs ...string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := in.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != name || !ok {
				continue
			}
		points:
			for _, p := range sum.DataPoints {
				for _, kv := range attrs {
					k, v, _ := strings.Cut(kv, "=")
					if got, ok := p.Attributes.Value(attributeKey(k)); !ok || got.AsString() != v {
						continue points
					}
				}
				n += p.Value
			}
		}
	}
	return n
}

// wantThrottled checks a 429 answer and its Retry-After, at most window.
func wantThrottled(t *testing.T, res response, window time.Duration) {
	t.Helper()
	wantError(t, res, http.StatusTooManyRequests, "throttled")
	secs, err := strconv.Atoi(res.header.Get("Retry-After"))
	if err != nil || secs < 1 || time.Duration(secs)*time.Second > window {
		t.Fatalf("Retry-After = %q, want 1..%v seconds", res.header.Get("Retry-After"), window)
	}
}

// TestWrongTokensAreThrottled: past AuthFailures wrong tokens from one
// address, the address's wrong tokens (and requests without one) are answered
// 429 with Retry-After, without a store call; its right tokens are served. A
// second instance sharing the Redis counters refuses the address's wrong
// tokens from its first on, and serves a right token it never saw, by the
// token's mark in Redis.
func TestWrongTokensAreThrottled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prefix := testenv.Prefix(t)
	const window = time.Minute
	cfg := api.Config{AuthFailures: 3, AuthFailureWindow: window}
	one, two := newInstance(t, b, prefix, cfg), newInstance(t, b, prefix, cfg)
	ed := one.editor(t, "throttled", "news")
	wrong := "wrong-token-0123456789abcdefghijklmnopqrstuvwx"
	b.secret(wrong)

	for i := range 3 {
		wantError(t, one.do(t, "GET", "/v1/me", wrong+strconv.Itoa(i), ""), http.StatusUnauthorized, "unauthorized")
	}
	wantThrottled(t, one.do(t, "GET", "/v1/stats", wrong, ""), window)
	calls := one.store.calls.Load()
	// Blocked: wrong tokens, and no token at all, are refused without a
	// store call.
	wantThrottled(t, one.do(t, "GET", "/v1/me", wrong+"x", ""), window)
	wantThrottled(t, one.do(t, "POST", "/v1/assignments/next", wrong+"y", `{"wait_ms":0}`), window)
	wantThrottled(t, one.do(t, "GET", "/v1/stats", wrong+"z", ""), window)
	wantThrottled(t, one.do(t, "GET", "/v1/me", "", ""), window)
	if n := one.store.calls.Load(); n != calls {
		t.Errorf("wrong tokens from a blocked address cost %d store calls", n-calls)
	}
	// Right tokens are served all the same.
	wantJSON(t, one.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusOK, nil)
	wantJSON(t, one.do(t, "GET", "/v1/stats", adminToken, ""), http.StatusOK, nil)
	if res := one.do(t, "POST", "/v1/assignments/next", ed.Token, `{"wait_ms":0}`); res.status != http.StatusNoContent {
		t.Errorf("POST /v1/assignments/next with the right token from a blocked address: %d %s, want 204", res.status, res.body)
	}

	// The second instance has seen no failure and not the editor: the right
	// token passes there, and the address's first wrong token there is
	// refused 429, not 401; the right token still passes.
	wantJSON(t, two.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusOK, nil)
	wantThrottled(t, two.do(t, "GET", "/v1/me", wrong, ""), window)
	wantJSON(t, two.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusOK, nil)

	if n := one.counter(t, "taskd.auth.failures", "route=GET /v1/me", "reason=unknown_token"); n != 3 {
		t.Errorf("taskd.auth.failures{route=GET /v1/me} = %d, want 3", n)
	}
	if n := one.counter(t, "taskd.auth.failures", "route=GET /v1/stats"); n != 1 {
		t.Errorf("taskd.auth.failures{route=GET /v1/stats} = %d, want 1", n)
	}
	if n := one.counter(t, "taskd.auth.throttled"); n != 5 {
		t.Errorf("taskd.auth.throttled = %d, want 5", n)
	}
	logs := b.logs.String()
	for _, want := range []string{
		`msg="authentication failed" route="GET /v1/me" remote_addr=127.0.0.1 reason=unknown_token`,
		`msg="authentication failed; client blocked" route="GET /v1/stats" remote_addr=127.0.0.1 reason=unknown_token blocked_for=`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %q:\n%s", want, logs)
		}
	}
	// The counter is the address's: its key names it.
	if n, err := b.rdb.Exists(context.Background(), prefix+"auth:fail:127.0.0.1").Result(); err != nil || n != 1 {
		t.Errorf("the failure counter of 127.0.0.1: exists %d, %v", n, err)
	}
}

// TestWrongTokensEndWithTheWindow: a block lasts as long as the counter's
// window, then the address is let through again.
func TestWrongTokensEndWithTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.editor(t, "window", "news")
	const window = 1500 * time.Millisecond
	in := newInstance(t, b, testenv.Prefix(t), api.Config{AuthFailures: 1, AuthFailureWindow: window})
	wantError(t, in.do(t, "GET", "/v1/me", "wrong-token-a", ""), http.StatusUnauthorized, "unauthorized")
	wantThrottled(t, in.do(t, "GET", "/v1/me", "wrong-token-b", ""), 2*time.Second)
	// The block ends when the window does; until then every answer is the
	// block's.
	testenv.Eventually(t, time.Minute, "the block to end with its window", func() bool {
		res := in.do(t, "GET", "/v1/me", ed.Token, "")
		if res.status == http.StatusOK {
			return true
		}
		wantThrottled(t, res, 2*time.Second)
		return false
	})
}

// TestUnknownTokensCostOneLookup: a wrong token sent again is refused from
// memory, without a MySQL look-up; a token made by this instance is never
// refused from that memory.
func TestUnknownTokensCostOneLookup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := newInstance(t, b, testenv.Prefix(t), api.Config{AuthFailures: -1})
	wrong := "wrong-token-repeated-0123456789"
	for range 5 {
		wantError(t, in.do(t, "GET", "/v1/me", wrong, ""), http.StatusUnauthorized, "unauthorized")
	}
	if n := in.store.lookups.Load(); n != 1 {
		t.Errorf("5 requests with one wrong token cost %d look-ups, want 1", n)
	}
	// Throttling is off: no counter was written.
	if keys, err := b.rdb.Keys(context.Background(), in.prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("throttling off wrote %v, %v", keys, err)
	}
	var ed editorInfo
	wantJSON(t, in.do(t, "POST", "/v1/editors", adminToken, `{"name":"fresh","categories":["news"]}`), http.StatusCreated, &ed)
	b.secret(ed.Token)
	wantJSON(t, in.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusOK, nil)
	var rotated editorInfo
	wantJSON(t, in.do(t, "POST", "/v1/editors/"+strconv.FormatInt(ed.ID, 10)+"/token", adminToken, ""), http.StatusOK, &rotated)
	b.secret(rotated.Token)
	wantJSON(t, in.do(t, "GET", "/v1/me", rotated.Token, ""), http.StatusOK, nil)
	wantError(t, in.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusUnauthorized, "unauthorized")
}

func attributeKey(k string) attribute.Key { return attribute.Key(k) }
