package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// collect reads every metric of the reader by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// intPoint is the value of the int series of ms[name] with attributes attrs
// (all of them), and whether there is one.
func intPoint(ms map[string]metricdata.Aggregation, name string, attrs ...attribute.KeyValue) (int64, bool) {
	var dps []metricdata.DataPoint[int64]
	switch d := ms[name].(type) {
	case metricdata.Sum[int64]:
		dps = d.DataPoints
	case metricdata.Gauge[int64]:
		dps = d.DataPoints
	}
	for _, dp := range dps {
		if dp.Attributes.Equals(ptr(attribute.NewSet(attrs...))) {
			return dp.Value, true
		}
	}
	return 0, false
}

func ptr[T any](v T) *T { return &v }

// The worker's metrics: runs by category and outcome (done, retried, dead,
// lease_lost, cancelled by an operator, released by the shutdown), the handlers' run time, the claim batches, and
// the slots, running handlers and backlog of the process.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	b := setup(t, dispatchtest.Options{Dispatcher: dispatcher.Config{MeterProvider: mp, PollInterval: 50 * time.Millisecond}})
	ids, err := dispatchtest.IDsOf(b.D.AddTasks(context.Background(), []tasks.NewTask{
		{Category: "ok", Title: "done"},
		{Category: "retry", Title: "retried", MaxAttempts: 3},
		{Category: "dead", Title: "dead"},
		{Category: "lost", Title: "lease lost"},
		{Category: "stuck", Title: "stopped by shutdown"},
		{Category: "cancel", Title: "cancelled by an operator"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	lostID := ids[3]

	release := make(chan struct{})
	lostStarted := make(chan struct{}, 1)
	stuck := newBlockingWorkerHandler(func(_ int, cause error) error { return cause })
	mux := worker.NewMux()
	mux.HandleFunc("ok", func(context.Context, *tasks.Task) (any, error) { return "ran", nil })
	mux.HandleFunc("retry", func(context.Context, *tasks.Task) (any, error) { return nil, errors.New("again") })
	mux.HandleFunc("dead", func(context.Context, *tasks.Task) (any, error) {
		return nil, errors.Join(errors.New("never"), worker.SkipRetry)
	})
	mux.HandleFunc("lost", func(context.Context, *tasks.Task) (any, error) {
		trySend(lostStarted, struct{}{})
		<-release
		return "too late", nil
	})
	mux.Handle("stuck", stuck)
	cancelStarted := make(chan struct{}, 1)
	mux.HandleFunc("cancel", func(ctx context.Context, _ *tasks.Task) (any, error) {
		trySend(cancelStarted, struct{}{})
		<-ctx.Done()
		return "too late", nil
	})
	w := startWorker(t, b, worker.Config{
		Handler: mux, Concurrency: 8, ShutdownTimeout: 100 * time.Millisecond,
		// The retried task runs once in this test.
		RetryBackoff: func(int) time.Duration { return time.Hour },
	})
	awaitValue(t, lostStarted, "the lost task's handler start")
	awaitValue(t, stuck.started, "the stuck task's handler start")
	awaitValue(t, cancelStarted, "the cancelled task's handler start")
	testenv.Eventually(t, 10*time.Second, "done, retried and dead written", func() bool {
		st := w.Totals()
		return st.Processed == 1 && st.Failed == 2
	})

	// Two handlers run, in two of the eight slots; nothing waits to be
	// written.
	ms := collect(t, reader)
	for _, want := range []struct {
		name  string
		attrs []attribute.KeyValue
		n     int64
	}{
		{"taskd.worker.running", nil, 3},
		{"taskd.worker.slots.free", nil, 5},
		{"taskd.worker.backlog", nil, 0},
	} {
		if n, ok := intPoint(ms, want.name, want.attrs...); !ok || n != want.n {
			t.Errorf("%s%v = %d (reported %v), want %d", want.name, want.attrs, n, ok, want.n)
		}
	}

	// The lost task's claim is revoked while it runs: its outcome is
	// refused. Not claimed again during the test (run_after in an hour).
	if _, err := b.DB.ExecContext(context.Background(), "UPDATE tasks SET run_after = NOW(3) + INTERVAL 1 HOUR WHERE id = ?", lostID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.ForceRelease(context.Background(), lostID); err != nil {
		t.Fatalf("force release: %v", err)
	}
	close(release)
	testenv.Eventually(t, 10*time.Second, "lease loss counted", func() bool { return w.Totals().LeaseLost == 1 })
	// The cancelled one: an operator's cancel ends it while it runs.
	if err := b.D.Cancel(context.Background(), tasks.ChangeParams{TaskID: ids[5], By: "admin"}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the cancel counted", func() bool { return w.Totals().Cancelled == 1 })
	// The stuck one is cancelled by the shutdown and given back.
	shutdownWorker(t, w)

	ms = collect(t, reader)
	cat, outcome := attribute.Key("taskd.task.category"), attribute.Key("taskd.outcome")
	for c, o := range map[string]string{"ok": "done", "retry": "retried", "dead": "dead", "lost": "lease_lost", "stuck": "released", "cancel": "cancelled"} {
		if n, ok := intPoint(ms, "taskd.worker.runs", cat.String(c), outcome.String(o)); n != 1 {
			t.Errorf("taskd.worker.runs{%s, %s} = %d (reported %v), want 1", c, o, n, ok)
		}
	}
	if d, ok := ms["taskd.worker.runs"].(metricdata.Sum[int64]); !ok || len(d.DataPoints) != 6 {
		t.Errorf("taskd.worker.runs = %+v, want the six series above", ms["taskd.worker.runs"])
	}
	runTime, _ := ms["taskd.worker.run.duration"].(metricdata.Histogram[float64])
	var runs uint64
	for _, dp := range runTime.DataPoints {
		runs += dp.Count
	}
	if runs != 6 || len(runTime.DataPoints) != 6 {
		t.Errorf("taskd.worker.run.duration: %d runs in %d series, want 6 in 6 (one per category)", runs, len(runTime.DataPoints))
	}
	batch, _ := ms["taskd.worker.claim.batch"].(metricdata.Histogram[int64])
	var claimed int64
	for _, dp := range batch.DataPoints {
		claimed += dp.Sum
	}
	if claimed != 6 {
		t.Errorf("taskd.worker.claim.batch: %d tasks claimed in all, want 6 (%+v)", claimed, batch)
	}
	// A stopped worker reports no gauges.
	if _, ok := intPoint(collect(t, reader), "taskd.worker.running"); ok {
		t.Error("taskd.worker.running still reported after Stop")
	}
}
