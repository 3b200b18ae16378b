package telemetry_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
)

// spanNamesOf lists the names of spans.
func spanNamesOf[S sdktrace.ReadOnlySpan](spans []S) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name()
	}
	return names
}

// TestQuietSweeps: with the SDK's parent-based sampler and instrumented
// stores, sweeps that find nothing to do record no span at all; a sweep that
// recycles records a trace of its own, rooted at dispatcher.sweep, with a
// dispatcher.sweep.recycle child over the store and Redis calls that
// followed.
func TestQuietSweeps(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	p := &telemetry.Providers{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	pl := newPipeline(t, p)
	c := pl.editor(t, "news")
	ids := pl.add(t, "news", 2)
	pl.next(t, c, ids[0])
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: pl.store, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}

	before := len(rec.Started())
	for range 5 {
		res, err := sw.Sweep(t.Context())
		if err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if res != (sweeper.Result{}) {
			t.Fatalf("idle sweep = %+v, want nothing done", res)
		}
	}
	if started := rec.Started(); len(started) != before {
		t.Errorf("5 idle sweeps started spans %v, want none", spanNamesOf(started[before:]))
	}

	if _, err := pl.store.DB().ExecContext(t.Context(),
		"UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", ids[0]); err != nil {
		t.Fatal(err)
	}
	before = len(rec.Ended())
	res, err := sw.Sweep(t.Context())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if res.Recycled != 1 {
		t.Fatalf("sweep = %+v, want 1 recycled", res)
	}
	spans := rec.Ended()[before:]
	var root, recycle sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "dispatcher.sweep":
			root = s
		case "dispatcher.sweep.recycle":
			recycle = s
		}
	}
	if root == nil || recycle == nil {
		t.Fatalf("spans of a recycling sweep: %v, want dispatcher.sweep and dispatcher.sweep.recycle", spanNamesOf(spans))
	}
	if root.Parent().IsValid() {
		t.Errorf("dispatcher.sweep has parent %v, want a root span", root.Parent())
	}
	if recycle.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("dispatcher.sweep.recycle's parent = %v, want dispatcher.sweep", recycle.Parent().SpanID())
	}
	if recycle.StartTime().Before(root.StartTime()) || recycle.EndTime().After(root.EndTime()) {
		t.Errorf("dispatcher.sweep.recycle [%v, %v] outside dispatcher.sweep [%v, %v]",
			recycle.StartTime(), recycle.EndTime(), root.StartTime(), root.EndTime())
	}
	if !hasAttr(root.Attributes(), attribute.Int("taskd.sweep.recycled", 1)) {
		t.Errorf("dispatcher.sweep attributes %v, want taskd.sweep.recycled=1", root.Attributes())
	}
	var children int
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s of the sweep outside its trace", s.Name())
		}
		if s.Parent().SpanID() == recycle.SpanContext().SpanID() {
			children++
		}
	}
	if children == 0 {
		t.Errorf("dispatcher.sweep.recycle has no children among %v, want the lock release and the wake", spanNamesOf(spans))
	}
}

// hasAttr reports whether attrs holds want.
func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}
