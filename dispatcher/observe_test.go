package dispatcher_test

import (
	"context"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/dispatcher"
)

// sumOf reads the total of an Int64 counter from reader.
func sumOf(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range s.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// TestOneCountFeedsStatsMetricsAndObservers: each claim and each submit is
// one ClaimEvent, and Stats, the OpenTelemetry counter and an observer all see
// the same number; an observer that stopped sees no more.
func TestOneCountFeedsStatsMetricsAndObservers(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	b := setup(t, setupOpts{Dispatcher: dispatcher.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}})
	var mu sync.Mutex
	seen := map[dispatcher.Op]int64{}
	stop := b.D.Observe(func(_ context.Context, ev dispatcher.ClaimEvent) {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.Op]++
		if ev.Category != "news" {
			t.Errorf("event of category %q", ev.Category)
		}
	})
	ed := b.Editor(t, "ada", "news")
	const n = 5
	b.Add(t, "news", 0, n)
	ctx := t.Context()
	claim, err := b.D.Next(ctx, ed, 0)
	for range n {
		if err != nil || claim == nil {
			t.Fatalf("claim %v, %v", claim, err)
		}
		claim, err = b.D.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, []byte(`{}`))
	}
	st := b.D.Stats()
	mu.Lock()
	claims, submits := seen[dispatcher.OpClaim], seen[dispatcher.OpSubmit]
	mu.Unlock()
	if st.Assignments != n || st.Submits != n || claims != n || submits != n {
		t.Fatalf("stats %+v, observed %d claims and %d submits; want %d each", st, claims, submits, n)
	}
	if got := sumOf(t, reader, "taskd.assignments"); got != n {
		t.Errorf("taskd.assignments = %d, want %d", got, n)
	}

	stop()
	b.Add(t, "news", 0, 1)
	if _, err := b.D.Next(ctx, ed, 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[dispatcher.OpClaim] != n {
		t.Errorf("a stopped observer saw %d claims, want %d", seen[dispatcher.OpClaim], n)
	}
	if st := b.D.Stats(); st.Assignments != n+1 {
		t.Errorf("stats count %d claims, want %d", st.Assignments, n+1)
	}
}
