package telemetry

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/tasks"
)

// fakeStats hands out the statistics a test sets and counts the calls.
type fakeStats struct {
	calls int
	st    *tasks.PoolStats
	err   error
}

func (f *fakeStats) stats(ctx context.Context) (*tasks.PoolStats, error) {
	f.calls++
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("stats called without a deadline")
	}
	return f.st, f.err
}

func stats(live, expired, holders int64, counts ...tasks.CategoryCount) *tasks.PoolStats {
	return &tasks.PoolStats{ByCategory: counts, Live: live, Expired: expired, Holders: holders}
}

// poolSetup registers a poolObserver with a fake clock on a manual reader.
func poolSetup(t *testing.T, f *fakeStats, every time.Duration) (*sdkmetric.ManualReader, *time.Time) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := newPoolObserver(f.stats, every, func() time.Time { return now })
	if _, err := o.register(mp.Meter("test")); err != nil {
		t.Fatalf("register: %v", err)
	}
	return reader, &now
}

// collect returns the points of the pool gauges as "name{attrs}" → value.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm) // a failed callback is reported here too
	points := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			g, ok := m.Data.(metricdata.Gauge[int64])
			if !ok {
				t.Fatalf("%s is a %T, want an int64 gauge", m.Name, m.Data)
			}
			for _, dp := range g.DataPoints {
				points[m.Name+"{"+attrString(dp.Attributes)+"}"] = dp.Value
			}
		}
	}
	return points
}

func attrString(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func checkPoints(t *testing.T, got, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %d (present %v), want %d", k, g, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected point %s = %d", k, got[k])
		}
	}
}

func TestPoolObserverCaches(t *testing.T) {
	t.Parallel()
	f := &fakeStats{st: stats(2, 1, 2,
		tasks.CategoryCount{Category: "news", Status: tasks.StatusAssigned, Count: 3},
		tasks.CategoryCount{Category: "news", Status: tasks.StatusPending, Count: 5},
		tasks.CategoryCount{Category: "sport", Status: tasks.StatusPending, Count: 7},
	)}
	reader, now := poolSetup(t, f, 10*time.Second)

	want := map[string]int64{
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=assigned}": 3,
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=pending}":  5,
		"taskd.pool.tasks{taskd.task.category=sport,taskd.task.status=pending}": 7,
		"taskd.pool.claims{taskd.claim.state=live}":                             2,
		"taskd.pool.claims{taskd.claim.state=expired}":                          1,
		"taskd.pool.holders{}": 2,
	}
	checkPoints(t, collect(t, reader), want)
	if f.calls != 1 {
		t.Fatalf("stats called %d times on the first collection, want 1", f.calls)
	}

	// Within the interval, the cached statistics serve.
	f.st = stats(0, 0, 0)
	*now = now.Add(9 * time.Second)
	checkPoints(t, collect(t, reader), want)
	if f.calls != 1 {
		t.Fatalf("stats called %d times within the interval, want 1", f.calls)
	}

	// After it, they are read again; a pair that emptied reports 0.
	f.st = stats(1, 0, 1, tasks.CategoryCount{Category: "news", Status: tasks.StatusDone, Count: 8})
	*now = now.Add(time.Second)
	checkPoints(t, collect(t, reader), map[string]int64{
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=done}":     8,
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=assigned}": 0,
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=pending}":  0,
		"taskd.pool.tasks{taskd.task.category=sport,taskd.task.status=pending}": 0,
		"taskd.pool.claims{taskd.claim.state=live}":                             1,
		"taskd.pool.claims{taskd.claim.state=expired}":                          0,
		"taskd.pool.holders{}": 1,
	})
	if f.calls != 2 {
		t.Fatalf("stats called %d times after the interval, want 2", f.calls)
	}
}

func TestPoolObserverFailure(t *testing.T) {
	t.Parallel()
	f := &fakeStats{err: errors.New("mysql is down")}
	reader, now := poolSetup(t, f, 10*time.Second)

	// A failed read reports nothing, and is not retried within the interval.
	checkPoints(t, collect(t, reader), map[string]int64{})
	f.err, f.st = nil, stats(1, 0, 1, tasks.CategoryCount{Category: "news", Status: tasks.StatusAssigned, Count: 1})
	*now = now.Add(5 * time.Second)
	checkPoints(t, collect(t, reader), map[string]int64{})
	if f.calls != 1 {
		t.Fatalf("stats called %d times, want 1", f.calls)
	}

	// The next read after the interval recovers.
	*now = now.Add(5 * time.Second)
	checkPoints(t, collect(t, reader), map[string]int64{
		"taskd.pool.tasks{taskd.task.category=news,taskd.task.status=assigned}": 1,
		"taskd.pool.claims{taskd.claim.state=live}":                             1,
		"taskd.pool.claims{taskd.claim.state=expired}":                          0,
		"taskd.pool.holders{}":                                                  1,
	})
	if f.calls != 2 {
		t.Fatalf("stats called %d times, want 2", f.calls)
	}
}

func TestObservePoolArgs(t *testing.T) {
	t.Parallel()
	fn := func(context.Context) (*tasks.PoolStats, error) { return stats(0, 0, 0), nil }
	p := &Providers{MeterProvider: sdkmetric.NewMeterProvider()}
	if _, err := ObservePool(nil, fn, 0); err == nil {
		t.Error("ObservePool with nil providers succeeded")
	}
	if _, err := ObservePool(p, nil, 0); err == nil {
		t.Error("ObservePool with a nil stats function succeeded")
	}
	if _, err := ObservePool(p, fn, -time.Second); err == nil {
		t.Error("ObservePool with a negative interval succeeded")
	}
	stop, err := ObservePool(p, fn, 0)
	if err != nil {
		t.Fatalf("ObservePool: %v", err)
	}
	stop()
}

func TestStopUnregisters(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	f := &fakeStats{st: stats(1, 0, 1)}
	stop, err := ObservePool(&Providers{MeterProvider: mp}, f.stats, time.Nanosecond)
	if err != nil {
		t.Fatalf("ObservePool: %v", err)
	}
	if got := collect(t, reader); got["taskd.pool.holders{}"] != 1 {
		t.Fatalf("before stop: %v, want taskd.pool.holders 1", got)
	}
	stop()
	calls := f.calls
	if got := collect(t, reader); len(got) != 0 {
		t.Errorf("after stop: %v, want no points", got)
	}
	if f.calls != calls {
		t.Errorf("stats called after stop")
	}
}
