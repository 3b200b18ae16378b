package telemetry

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The agreement gauge: one point per category and metric measure returns,
// measured at most once per interval.
func TestAgreementObserver(t *testing.T) {
	t.Parallel()
	calls := 0
	answer := []AgreementAlpha{{"labels", "nominal", 0.75}, {"scores", "nominal", 0.5}, {"scores", "interval", 0.9}}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &cached[[]AgreementAlpha]{fetch: func(context.Context) ([]AgreementAlpha, error) {
		calls++
		return answer, nil
	}, every: time.Minute, timeout: time.Second, now: func() time.Time { return now }}
	if _, err := registerAgreement(mp.Meter("test"), c); err != nil {
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
		"taskd.agreement.alpha{taskd.agreement.metric=nominal,taskd.task.category=labels}":  0.75,
		"taskd.agreement.alpha{taskd.agreement.metric=nominal,taskd.task.category=scores}":  0.5,
		"taskd.agreement.alpha{taskd.agreement.metric=interval,taskd.task.category=scores}": 0.9,
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
	now = now.Add(31 * time.Second)
	points()
	if calls != 2 {
		t.Errorf("measured %d times after the interval, want twice", calls)
	}
}
