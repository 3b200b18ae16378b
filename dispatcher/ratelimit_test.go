package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// rateBound is the most claims a rate limit of perMinute lets through in a
// window of w, as Config.RateLimits promises: a burst of ceil(L/60), then
// one per 60s/L (rounded up to the microsecond).
func rateBound(perMinute int, w time.Duration) int {
	interval := time.Duration((time.Minute.Microseconds()+int64(perMinute)-1)/int64(perMinute)) * time.Microsecond
	return (perMinute+59)/60 + int(w/interval)
}

// redisNow is the Redis server's clock, which rate limits are counted by.
func redisNow(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("redis time: %v", err)
	}
	return now
}

// claimsOf counts the claims of category the store recorded.
func claimsOf(t *testing.T, b *bundle, category string) int {
	t.Helper()
	return b.RowCount(t, "SELECT COUNT(*) FROM ("+dispatchtest.ClaimsSQL+") c JOIN tasks t ON t.id = c.task_id WHERE t.category = ?", category)
}

// TestRateLimitAcrossDispatchers: two dispatchers (two replicas) share a
// Redis server; many editors hammer a category limited to 600 claims a
// minute, long-polling and submitting, on both, for a few seconds, while
// others work an unlimited category. The store's claims of the limited
// category stay within the promised bound over the run, measured by the
// Redis clock; the unlimited category gets more than that bound would let
// through; and the limit did refuse claims.
func TestRateLimitAcrossDispatchers(t *testing.T) {
	t.Parallel()
	const limit = 600
	rdb := testenv.Redis(t)
	cfg := dispatcher.Config{
		Workflows:  map[string]tasks.Workflow{"limited": {RateLimit: limit}},
		RateLimits: rdb,
	}
	b := setup(t, setupOpts{Dispatcher: cfg, Redis: rdb})
	ds := []*dispatcher.Dispatcher{b.D, replica(t, b.Bundle, cfg)}
	b.Add(t, "limited", 0, 3000)
	b.Add(t, "free", 0, 3000)
	type worker struct {
		ed dispatcher.Claimant
		d  *dispatcher.Dispatcher
	}
	var ws []worker
	for i := range 16 {
		ws = append(ws, worker{b.Editor(t, fmt.Sprintf("limited%d", i), "limited"), ds[i%2]})
	}
	for i := range 4 {
		ws = append(ws, worker{b.Editor(t, fmt.Sprintf("free%d", i), "free"), ds[i%2]})
		ws = append(ws, worker{b.Editor(t, fmt.Sprintf("both%d", i), "limited", "free"), ds[(i+1)%2]})
	}

	start := redisNow(t, rdb)
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second) // the run's length
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(ws))
	for _, w := range ws {
		wg.Go(func() {
			var c *tasks.Claim
			for ctx.Err() == nil {
				var err error
				if c == nil {
					c, err = w.d.Next(ctx, w.ed, time.Second)
					if errors.Is(err, dispatcher.ErrNoTask) || ctx.Err() != nil {
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("next: %w", err)
						return
					}
				}
				c, err = w.d.Submit(context.Background(), w.ed, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, json.RawMessage(`{}`))
				if err != nil {
					errs <- fmt.Errorf("submit: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	window := redisNow(t, rdb).Sub(start)

	bound := rateBound(limit, window)
	limited, free := claimsOf(t, b, "limited"), claimsOf(t, b, "free")
	t.Logf("over %v: %d claims of limited (bound %d), %d of free", window, limited, bound, free)
	if limited > bound {
		t.Errorf("%d claims of the limited category in %v, more than the bound of %d", limited, window, bound)
	}
	if first := (limit + 59) / 60; limited <= first {
		t.Errorf("%d claims of the limited category in %v: not past its first burst of %d", limited, window, first)
	}
	if free <= bound {
		t.Errorf("%d claims of the unlimited category in %v: no more than the limited one's bound %d", free, window, bound)
	}
	var refused int64
	for _, d := range ds {
		refused += d.Stats().RateLimited
	}
	if refused == 0 {
		t.Error("the rate limit refused no claim: the editors did not hammer it")
	}
}

// TestRateLimitLeavesOtherCategoriesOpen: an editor's best category is
// limited to one claim a minute; every claim it makes after the first goes
// to its other category, at once, and the limited one is not claimed again
// within the minute.
func TestRateLimitLeavesOtherCategoriesOpen(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: dispatcher.Config{
		Workflows:  map[string]tasks.Workflow{"slow": {RateLimit: 1}},
		RateLimits: rdb,
	}})
	b.Add(t, "slow", 9, 20)
	b.Add(t, "fast", 0, 20)
	ed := b.Editor(t, "ed", "slow", "fast")
	start := redisNow(t, rdb)
	got := cycle(t, []*dispatcher.Dispatcher{b.D}, ed, 20)
	window := redisNow(t, rdb).Sub(start)
	if len(got) != 20 {
		t.Fatalf("%d claims, want 20: the limited category held the other back", len(got))
	}
	if got[0].category != "slow" {
		t.Fatalf("first claim of %s, want slow (the best task)", got[0].category)
	}
	slow := 0
	for _, c := range got {
		if c.category == "slow" {
			slow++
		}
	}
	if bound := rateBound(1, window); slow > bound {
		t.Fatalf("%d claims of slow in %v, more than the bound of %d", slow, window, bound)
	}
	if n := claimsOf(t, b, "slow"); n != slow {
		t.Fatalf("the store has %d claims of slow, the cycle %d", n, slow)
	}
}

// TestRateLimitReopenWakesLongPoll: a caller long-polling only a category
// its rate limit closed (the poll interval an hour) is answered once the
// limit lets a claim through again.
func TestRateLimitReopenWakesLongPoll(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: dispatcher.Config{
		PollInterval: time.Hour, MaxWait: time.Hour,
		Workflows:  map[string]tasks.Workflow{"slow": {RateLimit: 6}}, // one claim in 10s
		RateLimits: rdb,
	}})
	b.Add(t, "slow", 0, 5)
	first := b.Editor(t, "first", "slow")
	ctx := context.Background()
	if _, err := b.D.Next(ctx, first, 0); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	waiter := b.Editor(t, "waiter", "slow")
	type result struct {
		claim *tasks.Claim
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, err := b.D.Next(ctx, waiter, 5*time.Minute)
		done <- result{c, err}
	}()
	// The waiter found the category closed, tasks and all, and waits.
	testenv.Eventually(t, 20*time.Second, "the waiter waiting", func() bool { return b.D.IdleWaiters("slow") == 1 })
	r := <-done
	if r.err != nil {
		t.Fatalf("long poll: %v (not woken when the category reopened)", r.err)
	}
	if r.claim.Task.Category != "slow" {
		t.Fatalf("claimed a task of %s", r.claim.Task.Category)
	}
	if n := claimsOf(t, b, "slow"); n != 2 {
		t.Fatalf("%d claims of slow, want 2", n)
	}
}

// TestRateLimitRedisDown: a claim of a limited category whose Redis cannot
// be reached fails as unavailable; it is not let through unlimited.
func TestRateLimitRedisDown(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1})
	t.Cleanup(func() { _ = down.Close() })
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: dispatcher.Config{
		Workflows:  map[string]tasks.Workflow{"slow": {RateLimit: 600}},
		RateLimits: down,
	}})
	b.Add(t, "slow", 0, 1)
	b.Add(t, "fast", 0, 1)
	_, err := b.D.Next(context.Background(), b.Editor(t, "ed", "slow"), 0)
	if !errors.Is(err, dispatcher.ErrUnavailable) {
		t.Fatalf("next with the rate limit's Redis down: %v, want ErrUnavailable", err)
	}
	if n := claimsOf(t, b, "slow"); n != 0 {
		t.Fatalf("%d claims of slow made without its rate limit", n)
	}
	// A category without a limit does not ask that Redis.
	if _, err := b.D.Next(context.Background(), b.Editor(t, "ed2", "fast"), 0); err != nil {
		t.Fatalf("next of an unlimited category: %v", err)
	}
}

// TestRateLimitWorkerBatch: a worker's batch of a limited category takes
// as many claims as the limit lets through, its first burst at once, and
// the next once the limit allows, within the bound; its long poll is woken
// when the category reopens.
func TestRateLimitWorkerBatch(t *testing.T) {
	t.Parallel()
	const limit = 600
	rdb := testenv.Redis(t)
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: dispatcher.Config{
		PollInterval: time.Hour, MaxWait: time.Hour,
		Workflows:  map[string]tasks.Workflow{"limited": {RateLimit: limit}},
		RateLimits: rdb,
	}})
	b.Add(t, "limited", 0, 100)
	holders := make([]string, 50)
	for i := range holders {
		holders[i] = fmt.Sprintf("worker-%d", i)
	}
	ctx := context.Background()
	start := redisNow(t, rdb)
	first, err := b.D.NextMany(ctx, holders, []string{"limited"}, 0)
	if err != nil {
		t.Fatalf("first batch: %v", err)
	}
	second, err := b.D.NextMany(ctx, holders[len(first):], []string{"limited"}, time.Minute)
	if err != nil {
		t.Fatalf("second batch: %v (its long poll not woken when the category reopened)", err)
	}
	window := redisNow(t, rdb).Sub(start)
	if len(first) < 2 {
		t.Fatalf("the first batch made %d claims; want its burst of several at once", len(first))
	}
	n := claimsOf(t, b, "limited")
	if n != len(first)+len(second) {
		t.Fatalf("the store has %d claims, the batches %d and %d", n, len(first), len(second))
	}
	if bound := rateBound(limit, window); n > bound {
		t.Fatalf("%d claims in %v, more than the bound of %d", n, window, bound)
	}
}

// TestRateLimitOnCluster: rate limits counted in a Redis Cluster, one key
// per category: the limit holds there as on a single server.
func TestRateLimitOnCluster(t *testing.T) {
	t.Parallel()
	cluster := testenv.Cluster(t)
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{
		Workflows:  map[string]tasks.Workflow{"slow": {RateLimit: 1}, "also-slow": {RateLimit: 1}},
		RateLimits: cluster,
	}})
	b.Add(t, "slow", 0, 5)
	b.Add(t, "also-slow", 0, 5)
	ctx := context.Background()
	start, err := cluster.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	claims := 0
	for i := range 6 {
		_, err := b.D.Next(ctx, b.Editor(t, fmt.Sprintf("ed%d", i), "slow", "also-slow"), 0)
		switch {
		case err == nil:
			claims++
		case !errors.Is(err, dispatcher.ErrNoTask):
			t.Fatalf("next: %v", err)
		}
	}
	end, err := cluster.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if bound := 2 * rateBound(1, end.Sub(start)); claims > bound || claims < 2 {
		t.Fatalf("%d claims of two categories limited to one a minute in %v; want 2..%d", claims, end.Sub(start), bound)
	}
	for _, cat := range []string{"slow", "also-slow"} {
		if n, err := cluster.Exists(ctx, b.Prefix+"rate:"+cat).Result(); err != nil || n != 1 {
			t.Fatalf("the Cluster's key of %s: %d, %v; want it there", cat, n, err)
		}
	}
}

// TestRateLimitCountsRefusals: a claim the limit refuses, because another
// process took its token, counts in Stats and in taskd.rate_limited, by
// category; the process that took the last token closed the category
// itself and asks Redis no more, so it counts none.
func TestRateLimitCountsRefusals(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	reader := sdkmetric.NewManualReader()
	cfg := dispatcher.Config{
		Workflows:     map[string]tasks.Workflow{"slow": {RateLimit: 1}},
		RateLimits:    rdb,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	}
	b := setup(t, setupOpts{Redis: rdb, Dispatcher: cfg})
	cfg.MeterProvider = nil
	other := replica(t, b.Bundle, cfg)
	b.Add(t, "slow", 0, 5)
	ctx := context.Background()
	start := redisNow(t, rdb)
	if _, err := other.Next(ctx, b.Editor(t, "first", "slow"), 0); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	_, err := b.D.Next(ctx, b.Editor(t, "second", "slow"), 0)
	_, err2 := b.D.Next(ctx, b.Editor(t, "third", "slow"), 0)
	if redisNow(t, rdb).Sub(start) >= time.Minute {
		t.Skip("a minute passed: the limit had a claim to give again")
	}
	if !errors.Is(err, dispatcher.ErrNoTask) || !errors.Is(err2, dispatcher.ErrNoTask) {
		t.Fatalf("claims past the limit: %v, %v; want ErrNoTask", err, err2)
	}
	if got := b.D.Stats().RateLimited; got != 1 {
		t.Errorf("Stats().RateLimited = %d, want 1 (the second asked Redis, the third found the category closed)", got)
	}
	if got := other.Stats().RateLimited; got != 0 {
		t.Errorf("the first process counts %d refusals, want 0", got)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var got int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "taskd.rate_limited" {
				for _, dp := range s.DataPoints {
					if v, _ := dp.Attributes.Value("taskd.task.category"); v.AsString() != "slow" {
						t.Errorf("taskd.rate_limited of category %q", v.AsString())
					}
					got += dp.Value
				}
			}
		}
	}
	if got != 1 {
		t.Errorf("taskd.rate_limited = %d, want 1", got)
	}
}
