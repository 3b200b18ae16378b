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

// countingStore counts the token look-ups that reach MySQL.
type countingStore struct {
	*store.Store
	lookups atomic.Int64
}

func (s *countingStore) EditorByTokenHash(ctx context.Context, hash [32]byte) (*tasks.Editor, error) {
	s.lookups.Add(1)
	return s.Store.EditorByTokenHash(ctx, hash)
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
// throttling, keeping its counters under prefix in b's Redis.
func newInstance(t *testing.T, b *bundle, prefix string, cfg api.Config) *instance {
	t.Helper()
	in := &instance{store: &countingStore{Store: b.store}, metrics: sdkmetric.NewManualReader(), prefix: prefix}
	cfg.Dispatcher, cfg.Store, cfg.AdminToken = b.d, in.store, adminToken
	cfg.Redis, cfg.KeyPrefix = b.rdb, prefix
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
// address, the address is answered 429 with Retry-After, a right token too,
// without a look-up; a second instance sharing the Redis counters refuses the
// address from its first wrong token on.
func TestWrongTokensAreThrottled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ed := b.editor(t, "throttled", "news")
	prefix := testenv.Prefix(t)
	const window = time.Minute
	cfg := api.Config{AuthFailures: 3, AuthFailureWindow: window}
	one, two := newInstance(t, b, prefix, cfg), newInstance(t, b, prefix, cfg)
	wrong := "wrong-token-0123456789abcdefghijklmnopqrstuvwx"
	b.secret(wrong)

	for i := range 3 {
		wantError(t, one.do(t, "GET", "/v1/me", wrong+strconv.Itoa(i), ""), http.StatusUnauthorized, "unauthorized")
	}
	wantThrottled(t, one.do(t, "GET", "/v1/stats", wrong, ""), window)
	lookups := one.store.lookups.Load()
	// Blocked: the right tokens are refused too, without a look-up.
	wantThrottled(t, one.do(t, "GET", "/v1/me", ed.Token, ""), window)
	wantThrottled(t, one.do(t, "GET", "/v1/stats", adminToken, ""), window)
	wantThrottled(t, one.do(t, "POST", "/v1/assignments/next", ed.Token, `{"wait_ms":0}`), window)
	if n := one.store.lookups.Load(); n != lookups {
		t.Errorf("a blocked address cost %d token look-ups", n-lookups)
	}
	// No token at all is not a guess, but the address is blocked all the same.
	wantThrottled(t, one.do(t, "GET", "/v1/me", "", ""), window)

	// The second instance has seen no failure: the right token passes there,
	// and the address's first wrong token there is refused 429, not 401.
	wantJSON(t, two.do(t, "GET", "/v1/me", ed.Token, ""), http.StatusOK, nil)
	wantThrottled(t, two.do(t, "GET", "/v1/me", wrong, ""), window)
	wantThrottled(t, two.do(t, "GET", "/v1/me", ed.Token, ""), window)

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
