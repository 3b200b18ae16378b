package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The gold gauge: one point per category measure returns, measured at most
// once per interval.
func TestGoldObserver(t *testing.T) {
	t.Parallel()
	calls := 0
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &cached[[]GoldAccuracy]{fetch: func(context.Context) ([]GoldAccuracy, error) {
		calls++
		return []GoldAccuracy{{"news", 0.75}, {"facts", 1}}, nil
	}, every: time.Minute, timeout: time.Second, now: func() time.Time { return now }}
	if _, err := registerGold(mp.Meter("test"), c); err != nil {
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
				if g, ok := m.Data.(metricdata.Gauge[float64]); ok {
					for _, dp := range g.DataPoints {
						out[m.Name+"{"+attrString(dp.Attributes)+"}"] = dp.Value
					}
				}
			}
		}
		return out
	}
	want := map[string]float64{
		"taskd.gold.accuracy{taskd.task.category=news}":  0.75,
		"taskd.gold.accuracy{taskd.task.category=facts}": 1,
	}
	got := points()
	if len(got) != len(want) {
		t.Errorf("points %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	now = now.Add(30 * time.Second)
	points()
	if calls != 1 {
		t.Errorf("measured %d times within the interval, want once", calls)
	}
}

// ObserveGold refuses what it cannot work with.
func TestObserveGoldRefuses(t *testing.T) {
	t.Parallel()
	if _, err := ObserveGold(nil, func(context.Context) ([]GoldAccuracy, error) { return nil, nil }, 0); !errors.Is(err, errNilProviders) {
		t.Errorf("nil providers: %v", err)
	}
	if _, err := ObserveGold(&Providers{}, nil, 0); err == nil {
		t.Error("nil measure: no error")
	}
	if _, err := ObserveGold(&Providers{}, func(context.Context) ([]GoldAccuracy, error) { return nil, nil }, -time.Second); err == nil {
		t.Error("negative interval: no error")
	}
}
