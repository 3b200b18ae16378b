package telemetry

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/tasks"
)

// The queue gauges: per category, the oldest claimable task's age and the
// overdue tasks; a category gone reports 0; the statistics are read at most
// once per interval.
func TestQueueObserver(t *testing.T) {
	t.Parallel()
	calls := 0
	answer := []tasks.QueueStat{
		{Category: "news", OldestClaimable: 90 * time.Second, Overdue: 3},
		{Category: "sport"},
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := &queueObserver{
		stats: &cached[[]tasks.QueueStat]{fetch: func(context.Context) ([]tasks.QueueStat, error) {
			calls++
			return answer, nil
		}, every: 5 * time.Second, timeout: time.Second, now: func() time.Time { return now }},
		seen: map[string]bool{},
	}
	if _, err := o.register(mp.Meter("test")); err != nil {
		t.Fatal(err)
	}
	points := func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch g := m.Data.(type) {
				case metricdata.Gauge[float64]:
					for _, dp := range g.DataPoints {
						out[m.Name+"{"+attrString(dp.Attributes)+"}"] = dp.Value
					}
				case metricdata.Gauge[int64]:
					for _, dp := range g.DataPoints {
						out[m.Name+"{"+attrString(dp.Attributes)+"}"] = float64(dp.Value)
					}
				}
			}
		}
		return out
	}
	check := func(got, want map[string]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("points %v, want %v", got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
	}
	check(points(), map[string]float64{
		"taskd.oldest_claimable.age{taskd.task.category=news}":  90,
		"taskd.overdue.tasks{taskd.task.category=news}":         3,
		"taskd.oldest_claimable.age{taskd.task.category=sport}": 0,
		"taskd.overdue.tasks{taskd.task.category=sport}":        0,
	})
	// Within the interval: the cached answer.
	answer = nil
	now = now.Add(4 * time.Second)
	points()
	if calls != 1 {
		t.Errorf("%d reads within the interval, want 1", calls)
	}
	// Past it: news is gone, and reports 0.
	now = now.Add(time.Second)
	check(points(), map[string]float64{
		"taskd.oldest_claimable.age{taskd.task.category=news}":  0,
		"taskd.overdue.tasks{taskd.task.category=news}":         0,
		"taskd.oldest_claimable.age{taskd.task.category=sport}": 0,
		"taskd.overdue.tasks{taskd.task.category=sport}":        0,
	})
	if calls != 2 {
		t.Errorf("%d reads after the interval, want 2", calls)
	}
}
